"""DuPO's unknown-component selection as the paper runs it: once per problem, before training on it, with a
pool of candidate answers from a fixed auxiliary model (She et al. 2025, arXiv 2508.14460, section 3 and
Appendix B).

For one primal problem the auxiliary model samples ``pool`` candidate answers; every distinct final answer
is put into each of the problem's dual questions, the same model answers them, and a dual question is kept
only if it is answerable and unique over the pool (``selection.select_unknown``). The kept questions are
the ones the problem's dual reward uses for the whole run, whatever the policy later answers.

Here the auxiliary model is a frozen copy of the initial policy (the role ``selector``), and the selection
of a problem runs when the problem is first rewarded rather than in a pass over the dataset before step 1:
the verdict is the same, because the model is frozen and a problem's pool is sampled with a seed drawn from
its text (and the run's seed), so it depends neither on the step nor on the batch the problem came in. A
resumed run recomputes the verdicts it needs and gets the same ones. The paper's pools were 32 (then 8)
candidates from Qwen2.5-7B-Instruct (then Qwen3-4B); ours is the initial policy's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from posttrain.algos.dupo.dual_solve import DualJob, backward_accuracy, dual_distances
from posttrain.algos.dupo.reward import DualSettings
from posttrain.algos.dupo.selection import select_unknown
from posttrain.algos.roles import INITIAL_POLICY, ModelRole
from posttrain.common.seeds import derive_seed
from posttrain.engines.base import GenerationEngine, SamplingParams
from posttrain.tasks.base import Example
from posttrain.tasks.prompts import encode_prompts

SELECTOR = "selector"
"""The offline selection's auxiliary model: the role name (``ctx.engines["selector"]``)."""


def selector_role() -> ModelRole:
    """A frozen copy of the initial policy on an HF engine, never refreshed."""
    return ModelRole(SELECTOR, INITIAL_POLICY, engine="hf", config_field="dual_selection")


def problem_seed(prompt: str, run_seed: int) -> int:
    """The seed of ``prompt``'s candidate pool: ``derive_seed`` of the run's seed and the problem text."""
    return derive_seed(run_seed, prompt)


class OfflineSelection:
    """Per-problem verdicts of the offline selection, computed on a problem's first use and kept for the run."""

    def __init__(self, engine: GenerationEngine, settings: DualSettings, pool: int, primal: SamplingParams,
                 run_seed: int) -> None:
        if pool < 1:
            raise ValueError(f"the offline selection's pool must be >= 1 candidate answers, got {pool}")
        self.engine, self.settings, self.pool, self.primal, self.run_seed = engine, settings, pool, primal, run_seed
        self.verdicts: dict[str, tuple[int, ...]] = {}

    def kept(self, prompts: Sequence[str]) -> dict[str, tuple[int, ...]]:
        """For each of ``prompts``: the indices (into ``settings.masker(prompt, max_questions)``) of the dual
        questions the selection kept."""
        for prompt in dict.fromkeys(prompts):
            if prompt not in self.verdicts:
                self.verdicts[prompt] = self._select(prompt)
        return {prompt: self.verdicts[prompt] for prompt in prompts}

    def _select(self, prompt: str) -> tuple[int, ...]:
        masked = self.settings.masker(prompt, self.settings.max_questions)
        if not masked:
            return ()
        seed = problem_seed(prompt, self.run_seed)
        ids = encode_prompts(self.engine.tokenizer, [Example(prompt, "")], self.settings.system_prompt,
                             self.settings.max_prompt_tokens)[0]
        texts = self.engine.generate([ids] * self.pool, dataclasses.replace(self.primal, seed=seed)).texts
        distinct = sorted({a for a in map(self.settings.stated_answer, texts) if a is not None})
        if not distinct:
            return ()
        dual_params = dataclasses.replace(self.settings.params, seed=derive_seed(seed, "dual"))
        distances = dual_distances(self.engine, [DualJob(m, a) for m in masked for a in distinct],
                                   self.settings.samples, dual_params, self.settings.system_prompt,
                                   self.settings.max_prompt_tokens)
        kept = []
        for q in range(len(masked)):
            rows = distances[q * len(distinct):(q + 1) * len(distinct)]
            if select_unknown({a: backward_accuracy(r) for a, r in zip(distinct, rows)}).kept:
                kept.append(q)
        return tuple(kept)
