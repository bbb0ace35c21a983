"""Test-side harness of ``vllm_sync_check.py``: launch it (plain python or ``deepspeed`` on N ranks) for a
few GRPO steps and assert that every rank's rollout engine ends on the trainer's weights.

Weights are compared through log-probs, never through greedy tokens: two kernels (vLLM's and torch's, or one
CPU's and another's) can break a near-tie of the same weights differently, so the same weights may decode
different greedy tokens. The engine's log-probs of its own tokens must equal the trainer's model's teacher-forced
log-probs of those tokens within ``LOGPROB_ATOL``, and differ from the untrained model's by more than that."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from posttrain.algos.sequences import pack_sequences
from posttrain.engines.base import Rollouts
from posttrain.models.likelihood import causal_token_logprobs
from tests.e2e.conftest import REPO

LOGPROB_ATOL = 1e-3
"""fp32 tiny models: vLLM's CPU kernels and torch's agree to ~1e-5 on the same weights; a training step moves
the log-probs by orders of magnitude more."""

SYNC_CHECK = REPO / "tests" / "e2e" / "vllm_sync_check.py"
SHORT = ["--algo", "grpo", "--reward", "tests.e2e.rewards:digit_fraction", "--prompts_per_step", "4", "--group_size",
         "4", "--micro_batch_size", "8", "--max_new_tokens", "8", "--progress", "false", "--report_to", "jsonl"]
"""A short GRPO run (add ``--rollout``, ``--model`` and ``--output_dir``)."""


def run_sync_check(model: Path, out: Path, launcher: list[str], extra: list[str]) -> list[dict]:
    """Train 2 steps through ``vllm_sync_check.py`` (the real Trainer) and return each rank's comparison."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    cmd = [*launcher, str(SYNC_CHECK), *SHORT, "--model", str(model), "--output_dir", str(out), "--steps", "2",
           "--eval_every", "0", "--lr", "3e-3", *extra]
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [json.loads(p.read_text()) for p in sorted(out.glob("sync_check_rank*.json"))]


def completion_logprobs(model: torch.nn.Module, rollouts: Rollouts, pad_id: int) -> list[list[float]]:
    """``model``'s teacher-forced log-prob of every completion token of ``rollouts`` (temperature 1)."""
    tensors = pack_sequences(rollouts.prompt_ids, rollouts.completion_ids, pad_id)
    with torch.no_grad():
        scored, _ = causal_token_logprobs(model, tensors["input_ids"], tensors["attention_mask"],
                                          last=tensors["completion_mask"].shape[1])
    return [scored[row, : len(ids)].tolist() for row, ids in enumerate(rollouts.completion_ids)]


def logprob_gap(first: list[list[float]], second: list[list[float]]) -> float:
    """The largest absolute difference between two rollouts' per-token log-probs (same tokens)."""
    assert [len(row) for row in first] == [len(row) for row in second]
    return max(abs(a - b) for row_a, row_b in zip(first, second) for a, b in zip(row_a, row_b))


def assert_engine_holds(engine_logprobs: list[list[float]], model_logprobs: list[list[float]],
                        other_logprobs: list[list[float]] | None = None) -> None:
    """The engine's greedy log-probs are the model's (within ``LOGPROB_ATOL``) and, when ``other_logprobs``
    (another model's scores of the same tokens) is given, not that model's: the check can tell them apart."""
    assert sum(map(len, engine_logprobs)) > 0  # a real comparison, not eos against eos
    assert logprob_gap(engine_logprobs, model_logprobs) < LOGPROB_ATOL
    if other_logprobs is not None:
        assert logprob_gap(other_logprobs, model_logprobs) > 10 * LOGPROB_ATOL


def assert_synced(checks: list[dict], model: Path, out: Path, ranks: int, step: int = 2) -> None:
    """Every rank's engine holds the weights of the run's last step ``step`` and scores its greedy tokens as the
    trainer's module does, which trained (its log-probs of those tokens moved away from the starting model's)."""
    assert len(checks) == ranks
    for check in checks:
        assert check["weight_version"] == check["rollout_version"] == step  # the trainer step it holds
        assert_engine_holds(check["engine_logprobs"], check["trainer_logprobs"], check["initial_logprobs"])
    before = load_file(model / "model.safetensors")
    after = load_file(out / "checkpoints" / f"step_{step}" / "hf" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after)  # it did train


def greedy_scores(model: torch.nn.Module, rollouts: Rollouts, grammar: Any = None, stop_ids: Sequence[int] = ()
                  ) -> tuple[list[list[float]], list[list[float]]]:
    """Teacher-forced through ``model``: for every completion token of ``rollouts``, its log-prob and the largest
    log-prob at that position; with ``grammar`` (a compiled JSON schema, ``SchemaCompiler.compile``; the decode
    stopped at ``stop_ids``) over the tokens the grammar allows there, as constrained decoding masks them."""
    scores, best = [], []
    for prompt, completion in zip(rollouts.prompt_ids, rollouts.completion_ids):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + completion])).logits[0, len(prompt) - 1:-1].float()
        rows = grammar.rows(1, list(stop_ids)) if grammar is not None else None
        row_scores, row_best = [], []
        for position, token in enumerate(completion):
            step = logits[position:position + 1].clone()
            if rows is not None:
                rows.mask_(step, [True])
                rows.accept([token], [True])
            logprobs = torch.log_softmax(step[0], -1)
            row_scores.append(float(logprobs[token]))
            row_best.append(float(logprobs.max()))
        scores.append(row_scores)
        best.append(row_best)
    return scores, best


def assert_greedy_of(model: torch.nn.Module, rollouts: Rollouts, grammar: Any = None, stop_ids: Sequence[int] = ()
                     ) -> None:
    """``rollouts`` are greedy decodes of ``model`` (served by any engine): the engine's log-prob of each token is
    the model's within ``LOGPROB_ATOL``, and each token is the model's argmax there up to a near-tie of
    ``LOGPROB_ATOL`` (two kernels may break a tie differently: a different greedy sequence, the same weights)."""
    scores, best = greedy_scores(model, rollouts, grammar, stop_ids)
    assert_engine_holds(rollouts.logprobs, scores)
    assert max(b - s for row_b, row_s in zip(best, scores) for b, s in zip(row_b, row_s)) < LOGPROB_ATOL
