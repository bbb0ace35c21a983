"""Prefix Clustering (``posttrain.algos.prefix_rl.cluster`` and ``cluster_cli``): the maths by hand, and the
whole probe on a hand-made set of prefixes, where it must pick the cluster known to be best."""

from __future__ import annotations

import re

import pytest
import torch

from posttrain.algos.prefix_rl.cluster import (
    KMeansFit,
    best_cluster,
    elbow,
    kmeans,
    pair_bucket,
    prefix_features,
    representatives,
)
from posttrain.algos.prefix_rl.cluster_cli import build_parser, prefixed_accuracy, run
from posttrain.engines.base import Rollouts, SamplingParams
from posttrain.models.tiny import build_tokenizer
from posttrain.tasks import TASKS


def test_prefix_features_are_exact_positional_one_hots_when_they_fit() -> None:
    exact = prefix_features([[1, 2], [2], []], length=2, vocab_size=3)
    assert exact.tolist() == [[0, 1, 0, 0, 0, 1], [0, 0, 1, 0, 0, 0], [0] * 6]  # index position * 3 + token
    assert prefix_features([[1, 2, 0]], length=2, vocab_size=3).tolist() == [[0, 1, 0, 0, 0, 1]]  # 3rd ignored
    with pytest.raises(ValueError, match="prefix 0: token id 3"):
        prefix_features([[3]], length=1, vocab_size=3)


# printf '0:10' | b2sum -l 64 etc. (coreutils), by hand: the last three hex digits are the value mod 4096
B2SUM_64 = {(0, 10): "a6779e1cbbd3f830", (1, 20): "44956ec2976c8b02", (2, 30): "dc7ca678593d1ed6",
            (0, 30): "65d4a2e038f9198d", (1, 10): "ffbb8a7a3a5c75c9", (2, 20): "c0e4e3b8325fc37b"}


def test_hashed_prefix_features_keep_the_position_when_the_vocabulary_is_a_multiple_of_dims() -> None:
    vocab, dims = 12 * 4096, 4096  # SmolLM2's 49,152 tokens: (position * vocab + token) mod dims drops the position
    assert {pair: pair_bucket(*pair, dims) for pair in B2SUM_64} == {
        (0, 10): 0x830, (1, 20): 0xB02, (2, 30): 0xED6, (0, 30): 0x98D, (1, 10): 0x5C9, (2, 20): 0x37B}
    assert all(pair_bucket(*pair, 2**64) == int(digest, 16) for pair, digest in B2SUM_64.items())
    features = prefix_features([[10, 20, 30], [30, 10, 20]], length=3, vocab_size=vocab, dims=dims)
    assert features.shape == (2, dims)
    assert features[0].nonzero().flatten().tolist() == [0x830, 0xB02, 0xED6]  # 2096, 2818, 3798
    assert features[1].nonzero().flatten().tolist() == [0x37B, 0x5C9, 0x98D]  # 891, 1481, 2445
    assert float((features[0] - features[1]).pow(2).sum()) == 6.0  # no position agrees: as far apart as can be
    same_first = prefix_features([[10, 20, 30], [10, 10, 20]], length=3, vocab_size=vocab, dims=dims)
    assert float((same_first[0] - same_first[1]).pow(2).sum()) == 4.0  # position 0 agrees


def test_kmeans_finds_the_two_groups_and_their_inertia() -> None:
    points = torch.tensor([[0.0], [0.2], [10.0], [10.4]])
    fit = kmeans(points, 2, seed=0)
    assert sorted(fit.centroids.flatten().tolist()) == pytest.approx([0.1, 10.2])
    assert fit.labels[0] == fit.labels[1] != fit.labels[2] == fit.labels[3]
    assert fit.inertia == pytest.approx(0.01 + 0.01 + 0.04 + 0.04, rel=1e-5)
    assert kmeans(points, 1, seed=0).inertia == pytest.approx(sum((x - 5.15) ** 2 for x in (0, 0.2, 10, 10.4)), rel=1e-5)
    assert torch.equal(kmeans(points, 2, seed=3).labels.unique(return_counts=True)[1], torch.tensor([2, 2]))
    with pytest.raises(ValueError, match="clusters must be in"):
        kmeans(points, 5, seed=0)


def test_elbow_by_hand() -> None:
    # scaled: y = (I - 5) / 95 = 1, 0.158, 0.053, 0 against the chord 1, 0.667, 0.333, 0: gaps 0, 0.509, 0.281, 0
    assert elbow([100.0, 20.0, 10.0, 5.0]) == 2
    # a straight line has no elbow below it: every gap is 0, the first count stays
    assert elbow([30.0, 20.0, 10.0, 0.0]) == 1
    # y = I / 9 = 1, 0.889, 0.111, 0.056, 0 against the chord 1, 0.75, 0.5, 0.25, 0: gaps 0, -0.14, 0.39, 0.19, 0
    assert elbow([9.0, 8.0, 1.0, 0.5, 0.0]) == 3
    assert elbow([0.0, 0.0]) == 1 and elbow([5.0, 3.0]) == 2 and elbow([4.0]) == 1


def test_representatives_and_best_cluster() -> None:
    points = torch.tensor([[0.0], [0.3], [1.0], [10.0]])
    fit = KMeansFit(centroids=torch.tensor([[0.4], [10.0], [50.0]]), labels=torch.tensor([0, 0, 0, 1]), inertia=0.0)
    assert representatives(points, fit) == [1, 3, -1]  # |0.3 - 0.4| is the smallest; cluster 2 is empty
    assert best_cluster([0.2, 0.5, 0.5]) == 1


OPENINGS = ["Answer: ", "Answer:\n", "By steps", "By stepz", "So it is", "So it iz"]
"""Hand-made 8-token openings: three families of two, alike but for their last token; after 'By steps' the
target is always right, after anything else always wrong."""


class HandMadeTarget:
    """A stand-in target engine: its k-token samples are ``OPENINGS`` in turn; it continues a prompt ending in
    'By steps' with the right worked answer, and anything else with a wrong number."""

    def __init__(self) -> None:
        self.tokenizer = build_tokenizer()
        self.calls: list[list[list[int]]] = []
        self.params: list[SamplingParams] = []

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        self.calls.append([list(p) for p in prompt_ids])
        self.params.append(params)
        tok = self.tokenizer
        if len(self.calls) == 1:
            texts = [OPENINGS[i % len(OPENINGS)] for i in range(len(prompt_ids))]
        else:
            texts = []
            for ids in prompt_ids:
                number, tail = re.fullmatch(r".*?(\d+)\+1=<\|assistant\|>(.*)", tok.decode(ids)).groups()
                texts.append(f" {number}+1 so {int(number) + 1}" if tail == "By steps" else f"{number}")
        ids = [tok(t, add_special_tokens=False)["input_ids"][: params.max_new_tokens] for t in texts]
        return Rollouts(prompt_ids=[list(p) for p in prompt_ids], completion_ids=ids,
                        texts=tok.batch_decode(ids), logprobs=[[0.0] * len(i) for i in ids],
                        finish_reasons=["length"] * len(ids))


def test_clustering_hand_made_prefixes_picks_the_known_best_cluster() -> None:
    engine = HandMadeTarget()
    args = build_parser().parse_args(["--train_examples", "36", "--eval_examples", "8", "--max_clusters", "5",
                                      "--no_progress"])
    summary = run(args, engine)
    assert summary["settings"]["prefix_tokens"] == 8
    # inertias by hand (36 prefixes, 12 per family, families 16 apart, members 2 apart): about 210, 114, 18, 12,
    # 6; scaled against the chord the gap is largest at 3 clusters, one per family
    assert summary["clusters_chosen"] == 3 and len(summary["inertias"]) == 5
    assert summary["inertias"][2] == pytest.approx(18.0, rel=1e-5)
    best = summary["clusters"][summary["best_cluster"]]
    assert best["size"] == 12 and set(best["members"]) == {"By steps", "By stepz"}
    assert best["representative"] == "By steps" and best["train"]["accuracy"] == 1.0  # the first, on the tie
    assert summary["chosen_prefix"] == "By steps"
    assert sorted(c["train"]["accuracy"] for c in summary["clusters"]) == [0.0, 0.0, 1.0]
    heldout = summary["heldout"]
    assert heldout["target_alone"]["accuracy"] == 0.0 and heldout["with_chosen_prefix"]["accuracy"] == 1.0
    # the prefix reaches the target as the same token ids, after the prompt's
    prefix_ids = summary["chosen_prefix_ids"]
    assert engine.calls[-1][0][-len(prefix_ids):] == prefix_ids


def test_prefixed_accuracy_is_per_kind() -> None:
    engine, task = HandMadeTarget(), TASKS.get("answer-format")()
    engine.calls.append([])  # past the sampling call
    examples = task.split("test")[:4]
    from posttrain.tasks.prompts import encode_prompts

    ids = encode_prompts(engine.tokenizer, examples, None, 256)
    prefix = engine.tokenizer("By steps", add_special_tokens=False)["input_ids"]
    result = prefixed_accuracy(engine, task, examples, ids, prefix, SamplingParams(max_new_tokens=40))
    assert result == {"accuracy": 1.0, "by_kind": {"long": 1.0, "short": 1.0}}


def test_the_target_alone_and_the_prefixed_target_get_the_same_total_answer_budget() -> None:
    engine = HandMadeTarget()
    args = build_parser().parse_args(["--train_examples", "36", "--eval_examples", "8", "--max_clusters", "3",
                                      "--no_progress"])
    summary = run(args, engine)
    assert args.max_new_tokens == 40
    prompt_lengths = [len(ids) for ids in engine.calls[-2]]  # the target alone on the held-out prompts
    assert engine.params[0].max_new_tokens == 8  # the sampled prefixes: k tokens
    clusters = summary["clusters"]
    assert len(engine.params) == 1 + len(clusters) + 2  # sampling, each cluster's train score, the held-out arms
    alone_params, prefixed_calls, prefixed_params = engine.params[-2], engine.calls[-1], engine.params[-1]
    prefix = summary["chosen_prefix_ids"]
    assert len(prefix) == 8 and [len(ids) for ids in prefixed_calls] == [n + 8 for n in prompt_lengths]
    assert alone_params.max_new_tokens == 40 == len(prefix) + prefixed_params.max_new_tokens
    for cluster, params in zip(clusters, engine.params[1 : 1 + len(clusters)], strict=True):
        assert len(cluster["representative_ids"]) + params.max_new_tokens == 40
    with pytest.raises(ValueError, match="leaves nothing of the 8-token answer budget"):
        prefixed_accuracy(engine, TASKS.get("answer-format")(), [], [], prefix, SamplingParams(max_new_tokens=8))


def test_the_default_answer_budget_holds_every_answer_of_the_embedded_task() -> None:
    from posttrain.tasks.answer_format import direct_answer, worked_answer

    tokenizer, task = build_tokenizer(), TASKS.get("answer-format")()
    longest = max(len(tokenizer(text, add_special_tokens=False)["input_ids"])
                  for split in ("train", "test") for ex in task.split(split)
                  for text in (direct_answer(int(ex.answer)), worked_answer(ex.columns["number"], int(ex.answer))))
    assert longest == 33  # "Answer by steps: 12345+1 so 12346"
    assert build_parser().parse_args([]).max_new_tokens >= longest + 1  # + EOS
