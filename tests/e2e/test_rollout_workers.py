"""Remote rollout workers for real: two `posttrain rollout-worker` vLLM servers on loopback, started once for
the module and always torn down, driven by ``RemoteVLLMEngine`` and by `posttrain/train.py --rollout
vllm-remote`: the workers' greedy log-probs equal the HF model's scores of the same tokens (greedy tokens
under a JSON schema equal the HF engine's), both workers are synced after a training step, a sync resets their
prefix caches, two ZeRO-3 ranks leave them on the trainer's weights, a worker on another weight version, a
silent worker and a killed worker each give an error naming it. Weights are compared through log-probs, not
greedy tokens, which two kernels may decide differently on a near-tie.

The model is ``causal-arithmetic-vllm``, the registered twin of the embedded arithmetic policy that vLLM's
CPU attention serves (3 heads of 32; the embedded recipe's head size 24 it does not).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch

from posttrain.weight_sync import trainer_weights
from tests.e2e.conftest import deepspeed_launcher, run_entry
from tests.e2e.sync_harness import assert_engine_holds, assert_synced, completion_logprobs, run_sync_check

pytest.importorskip("vllm")

PROMPTS = ["12+7=", "3-1=", "45+45=", "9-3=", "1+1=", "20-5="]
STARTUP_TIMEOUT_S = 420.0
REQUEST_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def vllm_tiny() -> Path:
    from posttrain.models.tiny import build_tiny

    return build_tiny("causal-arithmetic-vllm")


@pytest.fixture(scope="module")
def workers(vllm_tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[str, subprocess.Popen]]]:
    from posttrain.engines.weight_transfer import free_port
    from posttrain.engines.worker import spawn_rollout_worker, stop_rollout_worker, wait_until_ready

    logs = tmp_path_factory.mktemp("worker-logs")
    started = []
    try:
        for i in range(2):  # both start at once: a start is most of this module's time
            port = free_port()
            # on CUDA (scripts/gpu_checks.sh) both workers share one GPU: a quarter of its memory each
            gpu_share = ["--", "--gpu-memory-utilization", "0.25"] if torch.cuda.is_available() else []
            process = spawn_rollout_worker(str(vllm_tiny), port, logs / f"w{i}.log",
                                           extra_args=["--max-model-len", "256", "--dtype", "float32", *gpu_share],
                                           env={"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
            started.append((f"http://127.0.0.1:{port}", process, logs / f"w{i}.log"))
        for url, process, log in started:
            wait_until_ready(url, process, STARTUP_TIMEOUT_S, log)
        yield [(url, process) for url, process, _ in started]
    finally:
        for _, process, _ in started:
            stop_rollout_worker(process)


def _hf(model_path: Path) -> tuple[torch.nn.Module, object, list[list[int]]]:
    from posttrain.models.loading import load_causal_lm, load_tokenizer

    tokenizer = load_tokenizer(str(model_path))
    return load_causal_lm(str(model_path)), tokenizer, [tokenizer.encode(p) for p in PROMPTS]


def _greedy(engine: object, prompts: list[list[int]]) -> list[list[int]]:
    from posttrain.engines.base import SamplingParams

    return engine.generate(prompts, SamplingParams(max_new_tokens=8, temperature=0.0)).completion_ids


def _assert_holds(engine: object, model: torch.nn.Module, prompts: list[list[int]],
                  other: torch.nn.Module | None = None) -> None:
    """The engine decodes ``prompts`` greedily with ``model``'s weights: its log-probs of its own tokens are
    the model's (and, with ``other``, not that model's); greedy tokens alone could differ on a near-tie."""
    from posttrain.engines.base import SamplingParams

    rollouts = engine.generate(prompts, SamplingParams(max_new_tokens=8, temperature=0.0))
    pad_id = engine.tokenizer.pad_token_id
    assert_engine_holds(rollouts.logprobs, completion_logprobs(model, rollouts, pad_id),
                        None if other is None else completion_logprobs(other, rollouts, pad_id))


def test_remote_greedy_equals_hf_and_both_workers_sync_after_a_step(workers, vllm_tiny: Path) -> None:
    from posttrain.engines.base import SamplingParams
    from posttrain.engines.hf import HFRolloutEngine
    from posttrain.engines.remote import RemoteVLLMEngine

    model, tokenizer, prompts = _hf(vllm_tiny)
    hf = HFRolloutEngine(model=model, tokenizer=tokenizer, device=torch.device("cpu"))
    urls = [url for url, _ in workers]
    engine = RemoteVLLMEngine(urls, tokenizer, model, timeout_s=REQUEST_TIMEOUT_S)
    _assert_holds(engine, model, prompts)
    # a JSON schema travels as response_format; the workers decode under the HF engine's grammar
    constrained = SamplingParams(max_new_tokens=8, temperature=0.0, json_schema='{"type": "integer", "maximum": 999}')
    remote = engine.generate(prompts, constrained)
    assert remote.completion_ids == hf.generate(prompts, constrained).completion_ids
    assert all(isinstance(json.loads(text), int) for text in remote.texts)
    # one optimizer step on a real loss, then the push every worker must take
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    batch = torch.tensor([prompts[0] + prompts[1]])
    model(input_ids=batch, labels=batch).loss.backward()
    optimizer.step()
    engine.sync_from(trainer_weights(model, 0), version=1)
    for url in urls:  # prompts 0-2 went to worker 0, 3-5 to worker 1: both hold the stepped weights
        assert httpx.get(f"{url}/weight_info", timeout=5).json()["weight_version"] == "1"
    _assert_holds(engine, model, prompts)
    assert engine.generate(prompts, SamplingParams(max_new_tokens=8, temperature=0.0)).weight_version == 1
    # sampled: in input order, seeded per prompt (not per worker), with the sampling log-probs
    params = SamplingParams(max_new_tokens=6, temperature=1.0, seed=11)
    spread = engine.generate(prompts, params)
    alone = RemoteVLLMEngine(urls[:1], tokenizer, model, timeout_s=REQUEST_TIMEOUT_S)  # same weights, one worker
    assert alone.generate(prompts, params).completion_ids == spread.completion_ids
    assert all(len(lp) == len(ids) and all(v <= 0 for v in lp) for lp, ids in zip(spread.logprobs, spread.completion_ids))


def test_a_seed_gives_the_same_samples_colocated_and_remote(workers, vllm_tiny: Path) -> None:
    """One seed derivation and one set of stop ids on both placements: the same seeded requests on the same fp32
    weights sample the same tokens, with the same log-probs and finish reasons, from a colocated engine and from
    the workers (remote hashed the seed twice before; sampled tokens of one fp32 seed are no near-tie)."""
    import gc

    from posttrain.engines.base import SamplingParams
    from posttrain.engines.remote import RemoteVLLMEngine
    from posttrain.engines.vllm import VLLMRolloutEngine

    model, tokenizer, prompts = _hf(vllm_tiny)
    remote = RemoteVLLMEngine([url for url, _ in workers], tokenizer, model, timeout_s=REQUEST_TIMEOUT_S)
    colocated = VLLMRolloutEngine.from_pretrained(str(vllm_tiny), tokenizer, dtype="float32", max_model_len=256)
    try:
        group = [p for p in prompts[:3] for _ in range(4)]  # G = 4 copies of three prompts, over both workers
        params = SamplingParams(max_new_tokens=8, temperature=1.0, seed=23)
        here, there = colocated.generate(group, params), remote.generate(group, params)
        assert len({tuple(ids) for ids in here.completion_ids}) > 3  # the copies differ: the seeds decide
        assert there.completion_ids == here.completion_ids
        assert there.finish_reasons == here.finish_reasons
        for near, far in zip(here.logprobs, there.logprobs):
            assert far == pytest.approx(near, abs=1e-4)
        # a stop id (besides the eos both add) ends the same completions at the same token on both placements
        stop = dataclasses.replace(params, stop_token_ids=(here.completion_ids[0][1],))
        assert remote.generate(group, stop).completion_ids == colocated.generate(group, stop).completion_ids
    finally:
        remote.close()
        del colocated
        gc.collect()


def test_group_requests_give_the_samples_of_one_request_per_sample(workers, vllm_tiny: Path) -> None:
    """A worker's share goes as one request per group of copies (n > 1); each sample (tokens, log-probs, seed)
    is the one a request of its own with that sample's seed gives. The worker reports the dtype it serves."""
    from posttrain.engines.base import SamplingParams, sample_seeds
    from posttrain.engines.remote import RemoteVLLMEngine, request_runs

    model, tokenizer, prompts = _hf(vllm_tiny)
    engine = RemoteVLLMEngine([workers[0][0]], tokenizer, model, timeout_s=REQUEST_TIMEOUT_S)
    assert engine._control[0].served_dtype() == "float32"  # the fixture's --dtype, through /collective_rpc
    group = [prompts[0]] * 4 + [prompts[1]] * 4
    params = SamplingParams(max_new_tokens=6, temperature=1.0, seed=5)
    seeds = sample_seeds(5, group)
    assert request_runs(group, seeds, slice(0, len(group))) == [(0, 4), (4, 4)]  # two requests, n = 4 each
    batched = engine.generate(group, params)
    single = [engine._clients[0].complete(p, params, n=1, seed=seed)[0] for p, seed in zip(group, seeds)]
    assert batched.completion_ids == [ids for ids, *_ in single]
    for got, alone in zip(batched.logprobs, (lp for _, _, lp, _ in single)):
        assert got == pytest.approx(alone, abs=1e-4)
    assert len({tuple(ids) for ids in batched.completion_ids[:4]}) > 1  # the copies of a group differ


def test_worker_on_another_version_is_named(workers, vllm_tiny: Path) -> None:
    from posttrain.engines.remote import RemoteVLLMEngine, WorkerError

    model, tokenizer, prompts = _hf(vllm_tiny)
    urls = [url for url, _ in workers]
    engine = RemoteVLLMEngine(urls, tokenizer, model, timeout_s=REQUEST_TIMEOUT_S)
    httpx.post(f"{urls[1]}/update_weight_version", json={"new_version": "999"}, timeout=5).raise_for_status()
    with pytest.raises(WorkerError, match=rf"{urls[1]}.*'999'.*version 0"):
        _greedy(engine, prompts)
    engine.update_weights(model.named_parameters(), version=3)  # a sync puts it back in line
    assert len(_greedy(engine, prompts)) == len(prompts)


def test_async_grpo_through_train_py_with_remote_workers(workers, vllm_tiny: Path, tmp_path: Path) -> None:
    urls = ",".join(url for url, _ in workers)
    out = tmp_path / "run"
    result = run_entry(["--algo", "grpo", "--model", str(vllm_tiny), "--rollout", "vllm-remote",
                        "--rollout_workers", urls, "--async_rollouts", "true", "--max_staleness", "1",
                        "--steps", "3", "--prompts_per_step", "2", "--group_size", "4", "--micro_batch_size", "8",
                        "--max_new_tokens", "6", "--eval_every", "0", "--save_every", "0", "--progress", "false",
                        "--report_to", "jsonl", "--output_dir", str(out), "--num_threads", "1"])
    assert result.returncode == 0, result.stderr[-4000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert [r["async/staleness"] for r in rows] == [0.0, 1.0, 1.0]
    for url, _ in workers:  # every worker ends on the trainer's last step
        assert httpx.get(f"{url}/weight_info", timeout=5).json()["weight_version"] == "3"


def test_a_sync_resets_the_workers_prefix_cache(workers, vllm_tiny: Path) -> None:
    """A prompt longer than a KV block (128 tokens on CPU) leaves cached keys and values computed by the old
    weights; after a sync the workers must decode it with the new ones."""
    from posttrain.engines.remote import RemoteVLLMEngine
    from posttrain.models.tiny import RECIPES, build_model

    model, tokenizer, _ = _hf(vllm_tiny)
    long = [tokenizer.encode(" ".join(PROMPTS * 8))[:200]]
    engine = RemoteVLLMEngine([url for url, _ in workers], tokenizer, model, timeout_s=REQUEST_TIMEOUT_S)
    before = _greedy(engine, long)  # the workers now hold this prompt's blocks, computed by the old weights
    assert len(before) == 1 and before[0]  # (vLLM-vs-HF agreement on the trained model: the tests above)
    other = build_model(dataclasses.replace(RECIPES.get("causal-arithmetic-vllm"), seed=1), tokenizer).eval()
    engine.update_weights(other.named_parameters())
    _assert_holds(engine, other, long, model)


@pytest.mark.distributed
def test_two_zero3_ranks_leave_the_workers_on_the_trainers_weights(workers, vllm_tiny: Path, tmp_path: Path) -> None:
    """2 ZeRO-3 ranks, 2 steps through the real trainer, then the workers' greedy tokens equal the trainer's
    model's. The system prompt gives every prompt a shared prefix longer than a KV block, which step 2's
    rollouts leave in the workers' prefix caches, computed by step 1's weights."""
    urls = [url for url, _ in workers]
    checks = run_sync_check(vllm_tiny, tmp_path, deepspeed_launcher(2),
                            ["--rollout", "vllm-remote", "--rollout_workers", ",".join(urls), "--zero_stage", "3",
                             "--num_threads", "1", "--system_prompt", "Answer with the number only. " * 5])
    assert_synced(checks, vllm_tiny, tmp_path, 2)
    for url in urls:
        assert httpx.get(f"{url}/weight_info", timeout=5).json()["weight_version"] == "2"


def test_silent_then_killed_worker_is_named_within_the_timeout(workers, vllm_tiny: Path) -> None:
    from posttrain.engines.remote import RemoteVLLMEngine, WorkerError

    model, tokenizer, prompts = _hf(vllm_tiny)
    (good, _), (bad, process) = workers
    engine = RemoteVLLMEngine([good, bad], tokenizer, model, timeout_s=3.0, retries=0)
    os.killpg(process.pid, signal.SIGSTOP)  # alive but silent
    try:
        start = time.monotonic()
        with pytest.raises(WorkerError, match=bad):
            _greedy(engine, prompts)
        assert time.monotonic() - start < 30
        start = time.monotonic()
        with pytest.raises(WorkerError, match=bad):
            engine.update_weights(model.named_parameters())
        assert time.monotonic() - start < 30
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # now dead (the last test of the module)
        os.killpg(process.pid, signal.SIGCONT)
    process.wait(timeout=30)
    engine = RemoteVLLMEngine([good, bad], tokenizer, timeout_s=3.0, retries=0)  # no initial push
    start = time.monotonic()
    with pytest.raises(WorkerError, match=bad):
        _greedy(engine, prompts)
    with pytest.raises(WorkerError, match=bad):
        engine.update_weights(model.named_parameters())
    assert time.monotonic() - start < 30
