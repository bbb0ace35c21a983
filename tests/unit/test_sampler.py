"""The resumable epoch sampler."""

from __future__ import annotations

from posttrain.sampler import EpochSampler


def test_each_epoch_is_a_permutation_and_epochs_differ() -> None:
    sampler = EpochSampler(list(range(6)), batch_size=3, seed=1)
    first = sampler.next_batch() + sampler.next_batch()
    second = sampler.next_batch() + sampler.next_batch()
    assert sorted(first) == sorted(second) == list(range(6))
    assert first != second and sampler.epoch == 2


def test_batches_cross_epoch_boundaries() -> None:
    sampler = EpochSampler(list(range(5)), batch_size=3, seed=0)
    seen = [sampler.next_batch() for _ in range(5)]
    flat = [x for batch in seen for x in batch]
    assert sorted(flat[:5]) == sorted(flat[5:10]) == sorted(flat[10:15]) == list(range(5))


def test_resume_from_state_continues_identically() -> None:
    straight = EpochSampler(list(range(7)), batch_size=2, seed=3)
    reference = [straight.next_batch() for _ in range(9)]
    first = EpochSampler(list(range(7)), batch_size=2, seed=3)
    head = [first.next_batch() for _ in range(4)]
    resumed = EpochSampler(list(range(7)), batch_size=2, seed=3)
    resumed.load_state_dict(first.state_dict())
    assert head + [resumed.next_batch() for _ in range(5)] == reference


def test_without_shuffle_every_epoch_keeps_the_file_order() -> None:
    sampler = EpochSampler(list("abcde"), batch_size=3, seed=7, shuffle=False)
    assert [sampler.next_batch() for _ in range(4)] == [list("abc"), list("dea"), list("bcd"), list("eab")]
    resumed = EpochSampler(list("abcde"), batch_size=3, seed=7, shuffle=False)
    resumed.load_state_dict({"consumed": 6})
    assert resumed.next_batch() == list("bcd")
