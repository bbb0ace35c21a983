"""``--algo dupo``: GRPO on DuPO's label-free dual reward (She et al. 2025, "DuPO: Enabling Reliable LLM
Self-Verification via Dual Preference Optimization", arXiv 2508.14460).

Per step and problem, G completions are sampled as in GRPO; each distinct final answer is put into the
problem's dual questions (one number hidden behind a fresh variable, "... Given that the answer is {answer},
what is {variable}?"), the dual solver answers them, and the reward is exp(-lambda * d(x_u, recovered)) with
d = variable equality, averaged over the dual questions kept by unknown-component selection
(``posttrain.algos.dupo.reward``). With ``dual_task translation`` (the paper's translation setting) the dual
is back-translation instead: the solver translates each completion back and d = 1 - BLEU / 100
(``posttrain.algos.dupo.back_translation``; embedded task ``word-translation``). Advantages, the clipped surrogate, the KL option and the loss are GRPO's
(``posttrain.algos.pg``), unchanged: DuPO only swaps the reward function the GRPO step calls.

DuPO never reads the dataset's answers: its reward function is given the prompts and completions and nothing
else. The answers are read only by the trainer's held-out evaluation and by the logged ``train/accuracy``
(GRPO's verifier metric, for monitoring), never by the reward or the loss.

Embedded default: ``--task word-arithmetic`` on the ``causal-word-arithmetic`` tiny model, warm-started on
noisy primal and clean dual questions (``posttrain.tasks.word_arithmetic``, task ``word-arithmetic-sft``).

Deviations from the paper: the dual solver defaults to a frozen snapshot refreshed every 5 steps rather than
the live policy (``posttrain.algos.dupo.solver`` says why); selection defaults to running online over each
group's answers (``dual_selection online``) rather than the paper's offline per-problem selection over an
auxiliary model's pool (``dual_selection offline``, with the frozen initial policy as that model,
``posttrain.algos.dupo.offline_selection``): online is the default because it is what the committed
benchmark measured (benchmarks/dupo.md) and costs no extra primal samples, while offline samples a pool of
``dual_selection_pool`` answers for every new problem; the dual is answered greedily once
(``dual_samples`` 1, ``dual_temperature`` 0), which the paper does not specify for training.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from posttrain.algos.base import ALGORITHMS
from posttrain.algos.dupo.back_translation import group_back_translation_rewards
from posttrain.algos.dupo.dual import final_answer
from posttrain.algos.dupo.offline_selection import SELECTOR, OfflineSelection, selector_role
from posttrain.algos.dupo.reward import SELECTIONS, DualSettings, DualStats, group_dual_rewards
from posttrain.algos.dupo.solver import DUAL_SOLVERS, SOLVER, snapshot_step, solver_role
from posttrain.algos.pg import GRPO, GRPOConfig
from posttrain.algos.roles import ModelRole
from posttrain.algos.scoring import ScoredGroups, score_groups
from posttrain.common.seeds import derive_seed
from posttrain.config import defaults, opt
from posttrain.engines.base import GenerationEngine, Rollouts, SamplingParams
from posttrain.tasks.base import TASKS, Example
from posttrain.tasks.dual_questions import masked_problems

DUAL_TASKS = ("math", "translation")
"""The duals ``--algo dupo`` trains with (``DuPOConfig.dual_task``)."""


@dataclass
@defaults(steps=120, prompts_per_step=8, micro_batch_size=64, max_new_tokens=6)
class DuPOConfig(GRPOConfig):
    """DuPO: GRPO whose reward is the dual task's recovery of a hidden number; no labels are used.

    The defaults are the configuration ``benchmarks/bench_dupo.py`` measures over seeds on the embedded default
    (word-arithmetic, whose answers are numbers): 120 steps of 8 prompts x G=8, answers of at most 6 tokens,
    dual answers of at most 4, the snapshot judge refreshed every 5 steps. The earlier defaults (200 steps of 16
    prompts, 16-token answers and dual answers, a refresh every 10 steps) were measured on one seed only and ended
    near their start. On the embedded warm start (data version 2, whose dual solver separates right answers
    from wrong ones) these defaults end clearly above their start over 3 seeds (benchmarks/dupo.md). Other tasks need their own budgets (word-translation: ``--max_new_tokens 14
    --dual_max_new_tokens 18``)."""

    task: str = opt("word-arithmetic", "Built-in task or 'dataset' (--dataset); DuPO's default is word-arithmetic.")
    dual_solver: str = opt("snapshot", "Who answers the dual questions: a frozen snapshot of the policy refreshed "
                                       "every dual_refresh_every steps, or the live policy.", DUAL_SOLVERS)
    dual_refresh_every: int = opt(5, "Steps between snapshot refreshes (dual_solver snapshot); 0 = never: the "
                                      "warm start answers every dual question.")
    dual_questions: int = opt(3, "Most dual questions per problem (one per hidden number, the first in the text).")
    dual_samples: int = opt(1, "Dual answers per (dual question, candidate answer), K.")
    dual_temperature: float = opt(0.0, "Sampling temperature of the dual answers; 0 = greedy.")
    dual_max_new_tokens: int = opt(4, "Maximum length of a dual answer in tokens.")
    dual_lambda: float = opt(1.0, "lambda of the reward exp(-lambda * d); for a binary d GRPO's advantages do not "
                                  "depend on it.")
    dual_task: str = opt("math", "The dual: math hides a number of the problem and asks for it given the answer "
                                 "(variable equality); translation asks for the translation back (BLEU), on "
                                 "prompts 'Translate A to B: text' (e.g. --task word-translation).", DUAL_TASKS)
    dual_selection: str = opt("online", "Unknown-component selection (math dual): keep a dual question only if exactly "
                                        "one distinct candidate answer lets the solver recover the number; the "
                                        "candidates are each group's answers (online), or a pool the initial policy "
                                        "samples once per problem before its first reward (offline, the paper's); "
                                        "none = keep all.", SELECTIONS)
    dual_selection_pool: int = opt(16, "Candidate answers per problem of the offline selection (the paper: 32, then 8).")

    def incompatibilities(self) -> list[tuple[str, Any, str]]:
        bad = super().incompatibilities()
        for name in ("dual_questions", "dual_samples", "dual_max_new_tokens", "dual_selection_pool"):
            if getattr(self, name) < 1:
                bad.append((name, getattr(self, name), "must be >= 1"))
        if self.dual_refresh_every < 0:
            bad.append(("dual_refresh_every", self.dual_refresh_every, "must be >= 0 (0 = never refreshed)"))
        if self.dual_temperature < 0:
            bad.append(("dual_temperature", self.dual_temperature, "must be >= 0 (0 = greedy)"))
        if self.dual_samples > 1 and self.dual_temperature == 0:
            bad.append(("dual_samples", self.dual_samples, ("greedy dual answers (dual_temperature 0) are all the same: "
                                                           "use 1, or a dual_temperature > 0")))
        if self.dual_task == "translation" and self.dual_selection != "none":
            bad.append(("dual_selection", self.dual_selection, ("the translation dual hides the whole sentence, "
                                                                "there is nothing to select: use none")))
        if self.dual_lambda <= 0:
            bad.append(("dual_lambda", self.dual_lambda, "must be > 0"))
        if self.dual_solver == "snapshot" and self.rollout.kind != "hf":
            bad.append(("dual_solver", self.dual_solver, (f"the snapshot is served by an HF engine like the policy's; "
                                                         f"with --rollout {self.rollout} use dual_solver policy")))
        return bad


@ALGORITHMS.register("dupo")
class DuPO(GRPO):
    config_class = DuPOConfig
    config: DuPOConfig

    @classmethod
    def declared_roles(cls, config: DuPOConfig) -> tuple[ModelRole, ...]:
        """GRPO's, plus the snapshot dual solver (``dual_solver snapshot``) and the offline selection's frozen
        initial policy (``dual_selection offline``)."""
        snapshot = config.dual_solver == "snapshot"
        offline = config.dual_selection == "offline"
        return (super().declared_roles(config) + ((solver_role(config.dual_refresh_every),) if snapshot else ())
                + ((selector_role(),) if offline else ()))

    supports_async_rollouts = False
    """The dual reward may generate with the policy's engine (``dual_solver policy``), which the asynchronous
    driver's background generation holds meanwhile."""

    def dual_settings(self, step: int) -> DualSettings:
        """The dual reward's settings at ``step`` (the dual answers' seed follows the step and rank)."""
        cfg = self.config
        params = SamplingParams(max_new_tokens=cfg.dual_max_new_tokens, temperature=cfg.dual_temperature,
                                seed=derive_seed(self.sampling_seed(step), "dual"))
        task_class = TASKS.get(cfg.task) if cfg.task != "dataset" else None
        return DualSettings(max_questions=cfg.dual_questions, samples=cfg.dual_samples, lam=cfg.dual_lambda,
                            selection=cfg.dual_selection, params=params, system_prompt=cfg.system_prompt,
                            max_prompt_tokens=cfg.max_prompt_tokens,
                            masker=getattr(task_class, "masked_problems", masked_problems),
                            stated_answer=getattr(task_class, "stated_answer", final_answer))

    def dual_solver(self) -> GenerationEngine:
        """The engine that answers the dual questions: the snapshot role's, or the live policy's."""
        return self.ctx.engines[SOLVER] if self.declares(SOLVER) else self.ctx.rollout

    @cached_property
    def offline_selection(self) -> OfflineSelection:
        """The offline selection's verdicts, kept for the run (the selector role's engine samples the pools with
        the rollout's sampling settings)."""
        cfg = self.config
        return OfflineSelection(self.ctx.engines[SELECTOR], self.dual_settings(1), cfg.dual_selection_pool,
                                self.sampling_params(1), cfg.seed)

    def dual_rewards(self, prompts: list[str], completions: list[str], step: int
                     ) -> tuple[list[float | None], DualStats]:
        """The configured dual's rewards of one step's completions, and its counts."""
        cfg, engine, settings = self.config, self.dual_solver(), self.dual_settings(step)
        if cfg.dual_task == "translation":
            return group_back_translation_rewards(prompts, completions, cfg.group_size, engine, settings)
        kept = self.offline_selection.kept(prompts) if cfg.dual_selection == "offline" else None
        return group_dual_rewards(prompts, completions, cfg.group_size, engine, settings, kept)

    def score(self, examples: list[Example], rollouts: Rollouts, step: int) -> ScoredGroups:
        """Dual rewards from the prompts and completions alone (the columns, which hold the dataset's answers,
        are deliberately ignored), with group advantages and the dual reward's counts as metrics; the verifier's
        verdicts (``train/accuracy``'s) only split the dual's recovery into right and wrong answers for the log
        (``DualStats.answer_split``)."""
        stats = []

        def dual_reward(prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]:
            rewards, counts = self.dual_rewards(prompts, completions, step)
            stats.append(counts)
            return rewards

        cfg = self.config
        scored = score_groups(self.ctx, examples, rollouts, cfg.group_size, cfg.advantage, dual_reward)
        snapshot = snapshot_step(step, cfg.dual_refresh_every) if self.declares(SOLVER) else 0
        return dataclasses.replace(scored, metrics={**scored.metrics, **stats[0].metrics(),
                                                    **stats[0].answer_split(scored.correct),
                                                    "dupo/snapshot_step": float(snapshot)})
