"""``--algo prefix-rl`` (``posttrain.algos.prefix_rl``) on tiny random models: the adapter writes exactly k
tokens, the target continues from the very same token ids, and only the k prefix tokens carry the loss (the
target's tokens cannot leak into it). That the trainer never changes the target's weights is checked end to end
(``tests/e2e/test_prefix_rl.py``)."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from posttrain.algos.base import AlgoContext
from posttrain.algos.ppo.algo import CRITIC
from posttrain.algos.prefix_rl.algo import TARGET, PrefixRL, PrefixRLConfig
from posttrain.algos.prefix_rl.generation import PrefixThenTarget, adapter_prefixes
from posttrain.algos.prefix_rl.ppo import PrefixRLPPO
from posttrain.algos.roles import CHECKPOINT, POLICY, REFERENCE, check_roles
from posttrain.dist import DistInfo
from posttrain.engines.base import Rollouts, SamplingParams
from posttrain.engines.hf import HFRolloutEngine
from posttrain.engines.spec import HFSpec
from posttrain.evaluation import evaluate
from posttrain.metrics import PhaseTimer
from posttrain.models.tiny import RECIPES, build_model, build_tokenizer
from posttrain.models.value import ValueModel
from posttrain.tasks import TASKS

K = 5


class Recording:
    """An engine wrapper that keeps every call's prompt ids and sampling settings."""

    def __init__(self, engine) -> None:
        self.engine, self.tokenizer = engine, engine.tokenizer
        self.calls: list[tuple[list[list[int]], SamplingParams]] = []

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        self.calls.append(([list(p) for p in prompt_ids], params))
        return self.engine.generate(prompt_ids, params)


def _model(recipe: str, seed: int) -> torch.nn.Module:
    return build_model(dataclasses.replace(RECIPES.get(recipe), seed=seed), build_tokenizer()).eval()


def _first_k_chars_reward(prompts, completions, **columns):
    """Reads the first K characters of the answer (the prefix, on the character tokenizer, when no prefix token
    is a special token that decodes to nothing)."""
    _first_k_chars_reward.seen = list(completions)
    return [float(sum(map(ord, c[:K])) % 3) for c in completions]


def _first_char_reward(prompts, completions, **columns):
    """Reads only the answer's first character, which the prefix writes for any draw (unlike its first K
    characters: a sampled special token decodes to nothing, and then the K-th character is the target's)."""
    _first_char_reward.seen = list(completions)
    return [float(ord(c[:1] or " ") % 3) for c in completions]


def _algo(target_seed: int = 1, reward=None, cls: type = PrefixRL, **overrides) -> tuple[PrefixRL, torch.nn.Module]:
    tokenizer, task = build_tokenizer(), TASKS.get("answer-format")()
    adapter = _model("causal-answer-format-adapter", seed=0)
    config = cls.config_class(prefix_tokens=K, group_size=4, prompts_per_step=2, micro_batch_size=8, kl_coef=0.1,
                              max_new_tokens=K + 12, temperature=1.0, **overrides)
    models = {CRITIC: ValueModel(copy.deepcopy(adapter))} if cls is PrefixRLPPO else {}
    ctx = AlgoContext(tokenizer=tokenizer, reward_fn=reward or task.reward, is_correct=task.is_correct,
                      timer=PhaseTimer(), device=torch.device("cpu"),
                      rollout=Recording(HFRolloutEngine(copy.deepcopy(adapter), tokenizer)),
                      reference=copy.deepcopy(adapter).requires_grad_(False), models=models,
                      engines={TARGET: Recording(HFRolloutEngine(_model("causal-answer-format", target_seed),
                                                                 tokenizer))})
    algo = cls(config, ctx)
    return algo, adapter


EXAMPLES = TASKS.get("answer-format")().split("train")[:2]


def test_roles_are_adapter_target_and_reference() -> None:
    algo, _ = _algo()
    roles = check_roles(algo.roles())
    assert set(roles) == {POLICY, REFERENCE, TARGET}
    target = roles[TARGET]
    assert (target.source, target.trains, target.engine, target.config_field) == (CHECKPOINT, False, HFSpec(),
                                                                                   "target_model")
    assert target.recipe == "causal-answer-format" and target.checkpoint is None  # the embedded target
    assert PrefixRLConfig(model="m").target_role().checkpoint == "m"  # self-prefix by default
    assert PrefixRLConfig(model="m", target_model="t").target_role().checkpoint == "t"
    assert PrefixRLConfig().prefix_length() == 8 and PrefixRLConfig(model="m").prefix_length() == 32


def test_prefix_is_exactly_k_tokens_and_the_target_gets_the_same_ids() -> None:
    algo, adapter = _algo()
    experience, metrics = algo.make_experience(EXAMPLES, adapter, step=1)
    (prompts, adapter_params), = algo.ctx.rollout.calls
    assert adapter_params.max_new_tokens == K and adapter_params.stop_token_ids == ()  # early stop only at EOS
    prefix = algo.ctx.rollout.engine.generate(prompts, adapter_params)  # the same seeded draw, replayed
    eos = algo.ctx.tokenizer.eos_token_id
    for ids, reason in zip(prefix.completion_ids, prefix.finish_reasons):
        assert len(ids) == K or (reason == "stop" and ids[-1] == eos and len(ids) < K)
    (target_prompts, target_params), = algo.ctx.engines[TARGET].calls
    open_rows = [i for i, r in enumerate(prefix.finish_reasons) if r != "stop"]
    assert target_prompts == [prompts[i] + prefix.completion_ids[i] for i in open_rows]  # ids, never re-tokenised
    assert target_params.max_new_tokens == 12 and target_params.temperature == pytest.approx(0.7)
    mask = experience["completion_mask"]
    assert mask.shape[1] == max(len(ids) for ids in prefix.completion_ids) <= K
    assert mask.sum(1).tolist() == [float(len(ids)) for ids in prefix.completion_ids]
    width = experience["input_ids"].shape[1] - mask.shape[1]
    for row, ids in enumerate(prefix.completion_ids):
        assert experience["input_ids"][row, width : width + len(ids)].tolist() == ids
    assert metrics["prefix_rl/answer_length_mean"] > K  # the target did write the rest


def test_prefix_rl_ppo_is_ppo_with_the_prefix_generation() -> None:
    """``prefix-rl-ppo`` (PPO with ``PrefixAnswering``): PPO's roles plus the target, the
    adapter's k-token sampling, prefix-then-target answers, and PPO's experience on the k prefix tokens only."""
    algo, adapter = _algo(cls=PrefixRLPPO, reward=_first_k_chars_reward)
    assert set(check_roles(algo.roles())) == {POLICY, CRITIC, REFERENCE, TARGET}
    assert algo.sampling_params(1).max_new_tokens == K and algo.sampling_params(1).stop_token_ids == ()
    assert isinstance(algo.evaluation_engine(), PrefixThenTarget) and not algo.supports_async_rollouts
    experience, metrics = algo.make_experience(EXAMPLES, adapter, step=1)
    assert "ppo/kl_coef" in metrics and "prefix_rl/answer_length_mean" in metrics
    assert experience["completion_mask"].shape[1] <= K and "old_values" in experience.tensors
    assert algo.ctx.engines[TARGET].calls  # the target continued the prefixes


def test_target_tokens_never_reach_the_loss() -> None:
    """Two different targets write different continuations; with a reward that reads only the prefix, the
    experience and the loss must be bitwise the same. Packing any target token would change both."""
    losses, tensors = [], []
    for target_seed in (1, 2):
        algo, adapter = _algo(target_seed=target_seed, reward=_first_char_reward)
        experience, _ = algo.make_experience(EXAMPLES, adapter, step=1)
        assert any(len(text) > K + 2 for text in _first_char_reward.seen)  # whole answers were scored
        assert experience["advantages"].abs().sum() > 0  # the rewards, hence the loss, depend on the prefix
        tensors.append(experience.tensors)
        losses.append(algo.loss(adapter, experience, iteration=0).loss)
    assert tensors[0].keys() == tensors[1].keys()
    for key in tensors[0]:
        assert torch.equal(tensors[0][key], tensors[1][key]), key
    assert torch.equal(losses[0], losses[1])


@pytest.mark.parametrize("padding_free", [False, True])
def test_only_prefix_positions_get_gradient(padding_free: bool) -> None:
    """Padded: logits at every column, gradient only where a prefix token is scored. Padding-free: logits only
    at the scored prefix positions (one packed row), every one of them with gradient."""
    algo, adapter = _algo(reward=_first_k_chars_reward, padding_free=padding_free)  # advantages != 0 in a group
    adapter.train()
    experience, _ = algo.make_experience(EXAMPLES, adapter, step=1)
    captured = {}

    def keep_logits(module, args, output):
        output.logits.retain_grad()
        captured["logits"] = output.logits

    handle = adapter.register_forward_hook(keep_logits)
    loss = algo.loss(adapter, experience, iteration=0).loss
    handle.remove()
    loss.backward()
    grad = captured["logits"].grad.abs().sum(-1)  # [B, C + 1]: column j predicts completion token j
    mask = experience["completion_mask"]
    if padding_free:
        assert grad.shape == (1, int(mask.sum()))
        assert torch.all(grad > 0)
        return
    assert grad.shape[1] == mask.shape[1] + 1
    assert torch.all(grad[:, :-1][mask == 0] == 0) and torch.all(grad[:, -1] == 0)
    assert torch.all(grad[:, :-1][mask == 1] > 0)


def test_evaluation_answers_prefix_then_target_greedily() -> None:
    algo, _ = _algo()
    engine = algo.evaluation_engine()
    assert isinstance(engine, PrefixThenTarget)
    prompts = [[1, 6, 20, 21, 7]]
    answers = engine.generate(prompts, SamplingParams(max_new_tokens=99, temperature=0.0))
    (_, adapter_params), = algo.ctx.rollout.calls
    (target_prompts, target_params), = algo.ctx.engines[TARGET].calls
    assert adapter_params.max_new_tokens == K and target_params.temperature == 0.0
    prefix = target_prompts[0][len(prompts[0]):]
    assert len(prefix) == K and answers.completion_ids[0][:K] == prefix
    assert answers.texts == algo.ctx.tokenizer.batch_decode(answers.completion_ids, skip_special_tokens=True)


def test_held_out_evaluation_scores_prefix_then_continuation() -> None:
    """``posttrain.evaluation.evaluate`` on Prefix-RL's evaluation engine: each answer the task judges is the
    adapter's k greedy tokens then the target's greedy continuation of those very ids, decoded together, within the
    answer's budget (``max_new_tokens``, prefix included)."""
    algo, _ = _algo()
    judged: list[str] = []

    class Judged:
        def is_correct(self, text: str, example) -> bool:
            judged.append(text)
            return text.startswith("Answer")

    examples = TASKS.get("answer-format")().split("test")[:3]
    metrics = evaluate(algo.evaluation_engine(), algo.ctx.tokenizer, Judged(), examples, algo.config,
                       DistInfo(rank=0, world_size=1, local_rank=0, device=torch.device("cpu")), step=0)
    (prompts, _), = algo.ctx.rollout.calls
    (target_prompts, target_params), = algo.ctx.engines[TARGET].calls
    assert target_params.temperature == 0.0 and target_params.max_new_tokens == algo.config.max_new_tokens - K
    continuations = algo.ctx.engines[TARGET].engine.generate(target_prompts, target_params).completion_ids
    answers = [target[len(prompt):] + continuation
               for prompt, target, continuation in zip(prompts, target_prompts, continuations)]
    assert all(len(answer) > K for answer in answers)  # the target wrote after the prefix
    assert judged == algo.ctx.tokenizer.batch_decode(answers, skip_special_tokens=True)
    assert metrics["eval/completion_length"] == pytest.approx(sum(map(len, answers)) / len(answers))
    right = [text.startswith("Answer") for text in judged]
    assert metrics["eval/accuracy"] == pytest.approx(sum(right) / len(right))


def test_bad_settings_name_their_field() -> None:
    from posttrain.config import ConfigError

    for overrides, name in [({"prefix_tokens": 0}, "prefix_tokens"),
                            ({"prefix_tokens": 8, "max_new_tokens": 8}, "max_new_tokens.*prefix length k = 8"),
                            ({"target_temperature": 0.0}, "target_temperature")]:
        with pytest.raises(ConfigError, match=name):
            PrefixRLConfig(algo="prefix-rl", **overrides).validate()


def test_adapter_prefixes_keep_k_tokens_and_the_whole_answers_text() -> None:
    """The hook's pure part: completions and log-probs cut to k, texts and finish reasons the whole answer's."""
    answers = Rollouts(prompt_ids=[[1], [2]], completion_ids=[[5, 6, 7, 8], [5, 9]], texts=["whole a", "whole b"],
                       logprobs=[[-1.0, -2.0, -3.0, -4.0], [-1.0, -0.5]], finish_reasons=["length", "stop"],
                       weight_version=3)
    prefix = adapter_prefixes(answers, 3)
    assert prefix.completion_ids == [[5, 6, 7], [5, 9]] and prefix.logprobs == [[-1.0, -2.0, -3.0], [-1.0, -0.5]]
    assert prefix.texts == answers.texts and prefix.finish_reasons == answers.finish_reasons
    assert prefix.prompt_ids == answers.prompt_ids and prefix.weight_version == 3
