"""Pure logic of remote workers and asynchronous rollouts: the balanced spread, worker-URL parsing, the
staleness bound, the launch schedule, and launched generations surviving a checkpoint round trip."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from posttrain.algos.base import GenerationRequest
from posttrain.async_rollouts import AsyncRollouts, check_staleness, launch_ahead
from posttrain.config import ConfigError, TrainConfig, build_config
from posttrain.engines.base import Rollouts, SamplingParams
from posttrain.engines.remote import balanced_slices
from posttrain.engines.spec import parse_worker_urls

CPU = torch.device("cpu")


def test_balanced_slices_cover_in_order_with_sizes_within_one() -> None:
    assert balanced_slices(5, 2) == [slice(0, 3), slice(3, 5)]
    assert balanced_slices(7, 3) == [slice(0, 3), slice(3, 5), slice(5, 7)]
    assert balanced_slices(2, 3) == [slice(0, 1), slice(1, 2), slice(2, 2)]
    assert balanced_slices(0, 2) == [slice(0, 0), slice(0, 0)]
    with pytest.raises(ValueError, match="at least one part"):
        balanced_slices(3, 0)


def test_parse_worker_urls_names_the_bad_entry() -> None:
    assert parse_worker_urls(" http://h1:8100/, http://h2:8100") == ["http://h1:8100", "http://h2:8100"]
    with pytest.raises(ValueError, match="no worker URL"):
        parse_worker_urls(" , ")
    with pytest.raises(ValueError, match="'h1:8100' must look like"):
        parse_worker_urls("h1:8100")
    with pytest.raises(ValueError, match="more than once"):
        parse_worker_urls("http://h:1,http://h:1")


def test_config_checks_for_workers_and_staleness() -> None:
    with pytest.raises(ConfigError, match="'rollout.urls'.*no worker URL"):
        TrainConfig(rollout="vllm-remote")
    with pytest.raises(ConfigError, match="'rollout.urls'.*the hf engine has no such option"):
        build_config(TrainConfig, ["--rollout_workers", "http://h:1"])
    with pytest.raises(ConfigError, match="max_staleness"):
        TrainConfig(async_rollouts=True, max_staleness=0).validate()
    with pytest.raises(ConfigError, match="'rollout.sync_timeout_s'.*must be > 0"):
        build_config(TrainConfig, ["--rollout", "vllm-remote", "--rollout_workers", "http://h:1",
                                   "--worker_timeout_s", "0"])
    with pytest.raises(ConfigError, match="'rollout.generation_timeout_s'.*must be > 0"):
        build_config(TrainConfig, ["--rollout", "vllm-remote:http://h:1", "--rollout.generation_timeout_s", "0"])
    remote = build_config(TrainConfig, ["--rollout", "vllm-remote:http://h:1,http://h:2", "--worker_timeout_s", "5",
                                        "--rollout.generation_timeout_s", "7"])
    assert remote.rollout.urls == ("http://h:1", "http://h:2")
    assert (remote.rollout.sync_timeout_s, remote.rollout.generation_timeout_s) == (5.0, 7.0)
    with pytest.raises(ConfigError, match="dist_timeout_s"):
        TrainConfig(dist_timeout_s=0).validate()


def test_staleness_bound() -> None:
    assert check_staleness(step=5, policy_version=4, rollout_version=3, max_staleness=1) == 1
    assert check_staleness(step=1, policy_version=0, rollout_version=0, max_staleness=1) == 0
    with pytest.raises(RuntimeError, match="step 5: .*version 2 .* version 4 \\(staleness 2; allowed 0..1\\)"):
        check_staleness(step=5, policy_version=4, rollout_version=2, max_staleness=1)
    with pytest.raises(RuntimeError, match="staleness -1"):
        check_staleness(step=5, policy_version=4, rollout_version=5, max_staleness=1)


def test_launch_ahead_keeps_depth_steps_beyond_the_current_one() -> None:
    launched: list[int] = []
    launch_ahead(launched.append, next_step=1, last_step=10, launched=launched, depth=2)
    assert launched == [1, 2, 3]
    launched.pop(0)  # step 1 taken
    launch_ahead(launched.append, next_step=2, last_step=10, launched=launched, depth=2)
    assert launched == [2, 3, 4]
    tail = [9, 10]
    launch_ahead(tail.append, next_step=9, last_step=10, launched=tail, depth=2)
    assert tail == [9, 10]  # nothing past the last step


class _CountingEngine:
    """A deterministic engine: the completion of a prompt is its ids reversed; counts its calls."""

    tokenizer = None

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        self.calls += 1
        return Rollouts(prompt_ids=prompt_ids, completion_ids=[p[::-1] for p in prompt_ids],
                        texts=["" for _ in prompt_ids], logprobs=[[-0.5] * len(p) for p in prompt_ids],
                        finish_reasons=["length" for _ in prompt_ids], weight_version=self.calls)

    def update_weights(self, named_tensors: object) -> None:
        raise AssertionError("not used")


def test_launched_generations_survive_a_checkpoint_round_trip() -> None:
    engine = _CountingEngine()
    pipeline = AsyncRollouts(engine, depth=1, device=CPU)
    params = SamplingParams(max_new_tokens=3, seed=7, stop_token_ids=(2,))
    pipeline.launch(4, data_position=12, weight_version=3, request=GenerationRequest([[1, 2, 3]], params))
    with pytest.raises(RuntimeError, match="step 3 was not launched"):
        pipeline.take(3, policy_version=3)
    state = json.loads(json.dumps(pipeline.state_dict()))  # what trainer_state.json holds
    restored = AsyncRollouts(_CountingEngine(), depth=1, device=CPU)
    restored.load_state_dict(state)
    pending, rollouts = restored.take(4, policy_version=4)
    assert (pending.step, pending.data_position, pending.weight_version) == (4, 12, 3)
    assert pending.request.params == params and rollouts.completion_ids == [[3, 2, 1]]
    assert rollouts.logprobs == [[-0.5, -0.5, -0.5]]
    _, original = pipeline.take(4, policy_version=4)
    assert original == rollouts
    pipeline.launch(5, data_position=13, weight_version=3, request=GenerationRequest([[4]], params))
    with pytest.raises(RuntimeError, match="staleness 2"):
        pipeline.take(5, policy_version=5)
    pipeline.close()
    restored.close()


def test_only_algorithms_with_their_own_split_run_async() -> None:
    from posttrain.algos import algorithm_names, get_algorithm

    supported = {name for name in algorithm_names() if get_algorithm(name).supports_async_rollouts}
    # GPO builds its experience in its own make_experience; Prefix-RL answers through two engines; DuPO's dual
    # reward may generate with the policy's engine, which the background generation holds
    assert supported == {"grpo", "rloo"}


class _SyncedMidwayEngine(_CountingEngine):
    """An engine whose weights change while it generates (what a sync racing a generation does)."""

    weight_version = 3

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        self.weight_version += 1
        rollouts = super().generate(prompt_ids, params)
        rollouts.weight_version = self.weight_version
        return rollouts


def test_a_rollout_from_weights_changed_mid_generation_is_refused() -> None:
    pipeline = AsyncRollouts(_SyncedMidwayEngine(), depth=1, device=CPU)
    pipeline.launch(4, data_position=0, weight_version=3, request=GenerationRequest([[1]], SamplingParams()))
    with pytest.raises(RuntimeError, match="step 4: rollouts launched on the engine's weight version 3 came back "
                                           "from version 4"):
        pipeline.take(4, policy_version=3)
    pipeline.close()


def test_the_generation_thread_binds_the_ranks_cuda_device_before_generating(monkeypatch) -> None:
    """Rank 1's in-process engine must generate on cuda:1: the background thread sets the current device before
    its first generation (a new thread starts on cuda:0). Checked on the CPU by recording the call."""
    calls: list[tuple[str, object]] = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append((threading.current_thread().name,
                                                                               device)))

    class RecordingEngine(_CountingEngine):
        def generate(self, prompt_ids, params):
            calls.append((threading.current_thread().name, "generate"))
            return super().generate(prompt_ids, params)

    pipeline = AsyncRollouts(RecordingEngine(), depth=1, device=torch.device("cuda", 1))
    pipeline.launch(1, 0, 0, GenerationRequest([[1, 2]], SamplingParams(max_new_tokens=2)))
    pipeline.wait()
    pipeline.close()
    (thread, device), (same_thread, what) = calls
    assert device == torch.device("cuda", 1) and what == "generate"
    assert thread == same_thread and thread.startswith("async-rollouts")
    calls.clear()
    cpu = AsyncRollouts(RecordingEngine(), depth=1, device=CPU)
    cpu.launch(1, 0, 0, GenerationRequest([[1, 2]], SamplingParams(max_new_tokens=2)))
    cpu.wait()
    cpu.close()
    assert [what for _, what in calls] == ["generate"]  # nothing to bind on the CPU
