"""``--algo text2grad``: Text2Grad (Wang et al., "Text2Grad: Reinforcement Learning from Natural Language
Feedback", arXiv 2505.22338): PPO whose rewards are span-level natural-language feedback turned into tokens.

Per step the policy samples completions; a generative span reward model (a frozen model role, ``span_rm``,
served by its own engine) writes a critique with good and poor spans of each completion; the spans are located
in the completion and mapped onto its tokens (``posttrain.algos.span_reward``: fuzzy matching, the tokenizer's own
character offsets, the per-task rules) as delta_t in {-1, 0, +1}; PPO (``posttrain.algos.ppo.algo``) then
trains on r_t = delta_t - beta * KL_t with **no terminal scalar**, the full-vocabulary KL and the adaptive
controller, GAE(1, 0.95), 4 epochs, clip 0.2, value clip 0.2, vf_coef 0.1, as the paper's code. As its
trainer (``TEXT2GRADTrainer.batched_forward_pass``) does, the tokens that decode to ``, . ? !`` are left out of
PPO's mask (``--mask_punctuation``, on by default): they carry no reward, no KL, no loss, stay out of the
whitening, and each one ends the GAE recursion, so with lambda 0.95 a token's advantage sums the span rewards
up to the next punctuation mark (on step-arithmetic: its own step), not every later step's.

``--lam`` is the paper's code's 0.95 by default. ``--lam 0`` is not the paper's NL-gradient
sum_t delta_t grad log pi: it is TD(0), each token's advantage its own reward plus the learned critic's one-step
error V_{t+1} - V_t, whitened over the batch (the ``text2grad-td0`` arms of ``benchmarks/text2grad.md``).

A completion whose feedback cannot be parsed gets no span reward and is counted
(``span_rm/unparsable_fraction``); it keeps its KL term and its place in both losses, so the KL still holds the
policy back from output the reward model cannot read (the paper's code dropped such samples entirely).
``--span_reward verdict`` is the paper's "PPO with the reward model's scalar verdict" baseline: the same
feedback reduced to +1 (no poor span located, not incomplete) or -1 on the last token, no dense part; its PPO
mask keeps punctuation (the baseline is TRL's plain trainer; a mask cut at every comma would stop the last
token's reward from reaching the earlier steps).

The embedded default is the ``step-arithmetic`` task, whose program writes the span feedback (``--span_oracle``,
on by default there: the role the paper's GPT-4o annotations play, asked at training time); the task's verifier
(the final answer) is only logged (``train/accuracy``), never trained on. ``--span_oracle false`` uses the
embedded learned span reward model (recipe ``reward-text2grad``, trained on that program's feedback), and
``--span_recipe reward-text2grad-nocritique`` the same model trained without the critique (the paper's "spans
without critique" ablation). The learned models are not the default because they miss most wrong steps and PPO
on them falls below its start (``benchmarks/text2grad.md``, ``benchmarks/BENCHMARKS.md``). Before training on a
local learned critic, its stored evaluation (``posttrain text2grad-eval --store``, beside its build:
``posttrain.algos.span_reward.stored_eval``) is read: when it is missing or says the critic does not beat a
random flagger, a loud warning names the numbers (``--span_refuse_at_chance``: refuse instead).

Defaults differ from the paper's scripts where the tiny default run needs it (``benchmarks/text2grad.md``): 64
prompts a step and the critic at 1e-3 (the benchmark's), lr 1e-5 (at the benchmark's 3e-5 the span oracle
rises for 20 steps, then slides below its start), and a KL controller that can act within
the run: ``--kl_horizon 0``, a horizon of a tenth of the run's samples (TRL's form of Ziegler et al. 2019's
proportional controller, beta *= 1 + clip(KL / target - 1, +-0.2) x samples / horizon), lets beta move by up to
e^2 = 7.4x in a run where TRL's 10,000 samples let it move by at most 21% in 150 steps of 64; and never below its
initial 0.05 (``--kl_floor``). The bound is deliberate: a controller acting every step without one (horizon = one
step's samples, target 1) can run beta away while the KL rises and held-out accuracy collapses
(``benchmarks/text2grad.md``, arm ``text2grad-oracle-kl1``): with the KL folded into whitened rewards, once beta
dominates the span rewards a larger beta only adds noise.

Deviations from the paper's code: the reward model is a separate engine, not an HF ``pipeline`` inside the
loop; the punctuation mask leaves out the punctuation tokens themselves, where the code's check reads token i
of the input ids but clears mask position i of TRL's shifted layout (``masks[:, :-1] = attention_mask[:, 1:]``,
the log-prob of token i + 1), so what it leaves out is the token after each mark (and its end-of-answer cut
keeps the position after the end-of-turn token); unparsable samples stay in the batch with their KL term and no span reward (the code dropped them, so
batch sizes varied and nothing restrained the drift into unparsable output); the adaptive KL controller's
horizon (above).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from posttrain.algos.base import ALGORITHMS
from posttrain.algos.ppo.algo import PPO, PPOConfig
from posttrain.algos.roles import CHECKPOINT, ModelRole
from posttrain.algos.span_reward import SPAN_RM_RECIPES
from posttrain.algos.span_reward.alignment import resolve_rule
from posttrain.algos.span_reward.remote import RemoteSpanRewardModel
from posttrain.algos.span_reward.scorer import ProgramSpanScorer, SpanRewardModel
from posttrain.algos.span_reward.stored_eval import critic_problem
from posttrain.config import opt
from posttrain.engines.base import Rollouts, SamplingParams
from posttrain.models.tiny import RECIPES, recipe_dir
from posttrain.tasks.base import Example
from posttrain.tasks.step_arithmetic import program_feedback

logger = logging.getLogger(__name__)

SPAN_RM = "span_rm"
"""The span reward model's role name (``ctx.engines["span_rm"]``)."""
SPAN_REWARDS = ("dense", "verdict")
ORACLE_TASK = "step-arithmetic"
"""The built-in task whose program writes span feedback (``span_oracle``)."""
SPAN_FORMS = ("spans", "code", "words")


PUNCTUATION = frozenset(",.?!")
"""The tokens the paper's trainer leaves out of PPO's mask: those whose decoded text, stripped, is one of these."""


def punctuation_free(completion_ids: list[list[int]], tokenizer: Any, completion_len: int) -> torch.Tensor:
    """``[B, completion_len]``: 0 where a completion token decodes (stripped) to one of ``PUNCTUATION``, else 1
    (padding included: the caller multiplies by the completion mask)."""
    keep = torch.ones(len(completion_ids), completion_len)
    texts: dict[int, str] = {}
    for i, ids in enumerate(completion_ids):
        for t, token in enumerate(ids[:completion_len]):
            token = int(token)
            if token not in texts:
                texts[token] = tokenizer.decode([token], skip_special_tokens=True).strip()
            if texts[token] in PUNCTUATION:
                keep[i, t] = 0.0
    return keep


@dataclass
class Text2GradConfig(PPOConfig):
    """Text2Grad: PPO on span rewards from a generative reward model's critique (see the module docstring)."""

    task: str = opt("step-arithmetic", "Built-in task or 'dataset'; text2grad's default is step-arithmetic, whose "
                                       "embedded reward model marks the wrong steps.")
    span_model: str | None = opt(None, "The span reward model: path, hub id or alias; unset = the embedded tiny "
                                       "one (--span_recipe). It may use its own tokenizer (it reads and writes "
                                       "text).")
    span_recipe: str = opt(SPAN_RM_RECIPES[0], "The embedded span reward model when --span_model is unset: "
                                               "reward-text2grad writes a critique, then the spans (the paper's); "
                                               "reward-text2grad-nocritique writes the spans only (the paper's "
                                               "'spans without critique' ablation).", SPAN_RM_RECIPES)
    span_url: str | None = opt(None, "Ask a reward server instead (`posttrain serve --model SPAN_RM`, its "
                                     "/v1/span_feedback route, posttrain.algos.span_reward.remote): its URL; then no "
                                     "span reward model is loaded here and --span_model is ignored.")
    span_oracle: bool | None = opt(None, "Take the spans from the task's program (step-arithmetic's "
                                         "program_feedback) instead of a reward model; no span reward model is "
                                         "loaded. Unset = on for --task step-arithmetic without --span_model or "
                                         "--span_url (the embedded default), else off; false = the embedded "
                                         "learned reward model (--span_recipe).")
    span_rollout: str = opt("hf", "Engine that serves the span reward model (frozen: never synced).", ["hf", "vllm"])
    span_form: str = opt("spans", "The reward model's output form: spans (critique + good/poor spans), code "
                                  "(wrong/improvable snippets) or words (word score list).", SPAN_FORMS)
    span_rule: str | None = opt(None, "Span -> token rule (posttrain.algos.span_reward.alignment): unset = the form's "
                                      "(spans: good +1 / poor -1 / rest 0, 0.1 when nothing matches; code: +1 "
                                      "default, wrong -1, improvable 0; words: scores x length decay).")
    span_style: str = opt("auto", "Request template: full (the paper's instructions) or compact (what the embedded "
                                  "tiny model reads); auto = compact without --span_model, else full.",
                          ["auto", "full", "compact"])
    span_reward: str = opt("dense", "dense = Text2Grad (span rewards on the tokens, no terminal scalar); verdict = "
                                    "the baseline PPO on the same feedback's scalar verdict (+1 / -1).", SPAN_REWARDS)
    span_max_new_tokens: int = opt(192, "Longest feedback the reward model writes (greedy; the paper's 500-768).")
    span_max_prompt_tokens: int = opt(1024, "Longest reward-model request; a longer one fails naming the sample.")
    span_refuse_at_chance: bool = opt(False, "Refuse to train on a learned span critic whose stored evaluation "
                                             "(posttrain text2grad-eval --store, beside its build) is missing or "
                                             "says it does not beat chance; default: a loud warning naming the "
                                             "numbers.")
    kl_estimator: str = opt("full", "Per-token KL(pi || ref): full (Text2Grad's exact full-vocabulary KL) or the "
                                    "k1/k2/k3 estimators.", ("full", "k1", "k2", "k3"))
    max_new_tokens: int = opt(32, "Maximum completion length in tokens.")
    lam: float = opt(0.95, "GAE lambda: the paper's code's 0.95 (with --mask_punctuation a token's advantage sums the "
                           "span rewards up to the next punctuation mark); 0 = TD(0): each token's own reward plus "
                           "the learned critic's one-step error, whitened (not the paper's form).")
    mask_punctuation: bool = opt(True, "Leave the tokens that decode to , . ? ! out of PPO's mask (reward, KL, GAE, "
                                       "whitening, losses), as the paper's trainer does; span rewards only (the "
                                       "verdict baseline keeps them).")
    lr: float = opt(1e-5, "Peak learning rate (AdamW); text2grad's default: on the embedded task larger rates ended "
                          "below their start (benchmarks/text2grad.md).")
    prompts_per_step: int = opt(64, "Prompts per optimizer step across all ranks (text2grad: the benchmark's 64).")
    micro_batch_size: int = opt(64, "Samples per forward/backward on one rank.")
    critic_lr: float | None = opt(1e-3, "Peak learning rate of the critic's AdamW; unset = --lr (text2grad: 1e-3, "
                                        "at which the fresh value head catches up with the returns).")
    kl_horizon: float = opt(0.0, "Adaptive KL controller's horizon, in sequences; 0 (text2grad's default) = a tenth "
                                 "of the run's samples: beta can move by up to e^2 = 7.4x within the run (TRL's "
                                 "10,000 moved it by at most 21% in 150 steps of 64).")
    kl_floor: float = opt(0.05, "Smallest beta the adaptive controller may reach (text2grad: the initial 0.05, so "
                                "beta is not spent while the KL is small); 0 = none.")

    def incompatibilities(self) -> list[tuple[str, Any, str]]:
        bad = super().incompatibilities()
        for name in ("span_max_new_tokens", "span_max_prompt_tokens"):
            if getattr(self, name) < 1:
                bad.append((name, getattr(self, name), "must be >= 1"))
        if self.span_oracle and self.task != ORACLE_TASK:
            bad.append(("span_oracle", True, f"needs --task {ORACLE_TASK} (the task with a span-writing program)"))
        if self.span_oracle and self.span_url:
            bad.append(("span_oracle", True, "takes no --span_url (the program writes the spans here)"))
        if self.span_rule is not None:
            try:
                resolve_rule(self.span_rule)
            except ValueError as err:
                bad.append(("span_rule", self.span_rule, str(err)))
        return bad

    @property
    def uses_oracle(self) -> bool:
        """Whether the task's program writes the spans (``span_oracle``, or its default when unset)."""
        if self.span_oracle is not None:
            return self.span_oracle
        return self.task == ORACLE_TASK and not self.span_model and not self.span_url

    def style(self) -> str | None:
        """The request template in force (see ``span_style``); for ``span_url`` with auto, None (the server's
        default, which follows the model it serves)."""
        if self.span_style != "auto":
            return self.span_style
        if self.span_url:
            return None
        return "full" if self.span_model else "compact"


class SpanRewards:
    """Text2Grad's rewards (PPO's ``rewards`` component, in place of ``TaskRewards``): span rewards from a
    critique, on the tokens they name, punctuation left out of the trained tokens."""

    def __init__(self, config: Text2GradConfig, ctx: Any) -> None:
        self.config, self.ctx = config, ctx
        self._scorer = None  # built on first use: the span reward model's engine exists once the trainer built it
        self.check_critic()

    def critic_dir(self) -> Path | None:
        """Where the learned span critic lives (``span_model``'s folder, else the ``span_recipe``'s build), or
        None when no local critic is used (the program's spans, a reward server, a hub id)."""
        cfg = self.config
        if cfg.uses_oracle or cfg.span_url:
            return None
        if cfg.span_model:
            return Path(cfg.span_model) if Path(cfg.span_model).is_dir() else None
        return recipe_dir(RECIPES.get(cfg.span_recipe))

    def check_critic(self) -> None:
        """Warn loudly (or, with ``span_refuse_at_chance``, refuse) when the critic's stored evaluation is missing
        or says it does not beat chance: PPO on a critic at chance collapses (``benchmarks/text2grad.md``)."""
        directory = self.critic_dir()
        if directory is None:
            return
        problem = critic_problem(directory, self.config.span_model or self.config.span_recipe)
        if problem is None:
            return
        if self.config.span_refuse_at_chance:
            raise ValueError(f"--span_refuse_at_chance: {problem}")
        logger.warning("!" * 100 + "\nWARNING: %s\n" + "!" * 100, problem)

    @staticmethod
    def roles(config: Text2GradConfig) -> tuple[ModelRole, ...]:
        """The frozen span reward model with its engine (its own tokenizer allowed), unless a reward server
        (``span_url``) or the task's program (``span_oracle``) answers instead."""
        cfg = config
        if cfg.span_url or cfg.uses_oracle:
            return ()
        return (ModelRole(SPAN_RM, CHECKPOINT, engine=cfg.span_rollout, checkpoint=cfg.span_model,
                          recipe=None if cfg.span_model else cfg.span_recipe, config_field="span_model",
                          shares_tokenizer=False),)

    def scorer(self) -> Any:
        """The span reward model (``SpanRewardModel``) over its engine, the remote one, or the program's."""
        cfg = self.config
        if self._scorer is None and cfg.uses_oracle:
            self._scorer = ProgramSpanScorer(program_feedback, cfg.span_form, cfg.span_rule)
        if self._scorer is None and cfg.span_url:
            self._scorer = RemoteSpanRewardModel(cfg.span_url, cfg.span_form, cfg.span_rule, style=cfg.style(),
                                                 max_tokens=cfg.span_max_new_tokens, temperature=0.0)
        if self._scorer is None:
            self._scorer = SpanRewardModel(self.ctx.engines[SPAN_RM], cfg.span_form, cfg.span_rule,
                                           SamplingParams(max_new_tokens=cfg.span_max_new_tokens, temperature=0.0),
                                           style=cfg.style(), max_prompt_tokens=cfg.span_max_prompt_tokens)
        return self._scorer

    def trained_tokens(self, rollouts: Rollouts, completion_mask: torch.Tensor) -> torch.Tensor:
        """The completion mask without punctuation tokens (``--mask_punctuation`` with span rewards)."""
        if not self.config.mask_punctuation or self.config.span_reward != "dense":
            return completion_mask
        return completion_mask * punctuation_free(rollouts.completion_ids, self.ctx.tokenizer, completion_mask.shape[1])

    def reward_terms(self, group: list[Example], rollouts: Rollouts, completion_len: int, reward: torch.Tensor,
                     valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, dict[str, float]]:
        """Span rewards on the tokens (dense) or the feedback's verdict on the last token; the task's reward is
        never used. A sample with unparsable feedback has no reward (``rewarded`` False: it keeps its KL term)."""
        spans = self.scorer().token_rewards([ex.prompt for ex in group], rollouts.completion_ids, self.ctx.tokenizer)
        parsed = torch.tensor([r is not None for r in spans.rewards])
        dense = torch.zeros(len(rollouts), completion_len)
        metrics = spans.metrics()
        terminal = torch.tensor([v if v is not None else 0.0 for v in spans.verdicts])
        # logged in both modes: the critic's verdict is its judgement of the batch, trained on or not
        metrics["span_rm/verdict_mean"] = float(terminal[parsed].mean()) if parsed.any() else 0.0
        if self.config.span_reward == "verdict":
            return dense, terminal, parsed, metrics
        for i, row in enumerate(spans.rewards):
            if row is not None:
                dense[i, : len(row)] = torch.tensor(row[:completion_len], dtype=torch.float32)
        scored = [row for row in spans.rewards if row is not None]
        metrics["span_rm/token_reward_mean"] = sum(map(sum, scored)) / max(1, sum(map(len, scored)))
        return dense, None, parsed, metrics


@ALGORITHMS.register("text2grad")
class Text2Grad(PPO):
    """PPO with ``SpanRewards``: the class is the composition, PPO's config and steps with Text2Grad's rewards."""

    config_class = Text2GradConfig
    config: Text2GradConfig
    rewards_class = SpanRewards
