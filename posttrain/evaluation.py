"""Held-out evaluation: greedy accuracy and pass@k through the rollout engine.

Each rank scores a slice of the evaluation examples and the counts are summed over ranks, so the
numbers do not depend on the world size. Sampling for pass@k uses a fixed seed per evaluation step,
which keeps evaluation repeatable and a resumed run identical to an uninterrupted one.
"""

from __future__ import annotations

from typing import Any

from posttrain.algos.core import pass_at_k
from posttrain.common.seeds import derive_seed
from posttrain.config import TrainConfig
from posttrain.dist import DistInfo, all_reduce_sum
from posttrain.engines.base import RolloutEngine, SamplingParams
from posttrain.tasks.base import Example, Task
from posttrain.tasks.prompts import encode_prompts


def evaluate(
    rollout: RolloutEngine,
    tokenizer: Any,
    task: Task,
    examples: list[Example],
    config: TrainConfig,
    info: DistInfo,
    step: int,
) -> dict[str, float]:
    local = examples[info.rank :: info.world_size]
    prompt_ids = encode_prompts(tokenizer, local, config.system_prompt, config.max_prompt_tokens)
    greedy = rollout.generate(prompt_ids, SamplingParams(max_new_tokens=config.max_new_tokens, temperature=0.0))
    correct = sum(task.is_correct(text, ex) for text, ex in zip(greedy.texts, local))
    lengths = sum(len(c) for c in greedy.completion_ids)
    pass_sum = 0.0
    k = config.pass_k
    if k > 1:
        sampled = rollout.generate(
            [p for p in prompt_ids for _ in range(k)],
            SamplingParams(max_new_tokens=config.max_new_tokens, temperature=config.temperature,
                           top_p=config.top_p, top_k=config.top_k, seed=derive_seed(config.seed, "eval", step, info.rank)),
        )
        for i, ex in enumerate(local):
            hits = sum(task.is_correct(sampled.texts[i * k + j], ex) for j in range(k))
            pass_sum += pass_at_k(k, hits, k)
    total, correct, lengths, pass_sum = all_reduce_sum([len(local), correct, lengths, pass_sum], info.world_size)
    metrics = {"eval/accuracy": correct / total, "eval/completion_length": lengths / total}
    if k > 1:
        metrics[f"eval/pass@{k}"] = pass_sum / total
    return metrics
