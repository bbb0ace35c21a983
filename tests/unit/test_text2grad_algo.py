"""``--algo text2grad`` (``posttrain.algos.ppo.text2grad``): span feedback becomes per-token rewards on exactly
the located tokens (a poor step -1, good steps +1, a cut-short answer -1 on its EOS), unparsable feedback loses
its span reward but keeps its KL, punctuation leaves PPO's mask, and the verdict baseline puts one scalar on the
last token. The span reward model here is an engine that writes the
step-arithmetic program's own feedback (the oracle the tiny reward model is trained to imitate), so the test
checks the plumbing from feedback to advantages, not a model's accuracy."""

from __future__ import annotations

import copy
import dataclasses
import re

import pytest
import torch

from posttrain.algos.base import AlgoContext
from posttrain.algos.ppo.algo import CRITIC
from posttrain.algos.ppo.text2grad import SPAN_RM, Text2Grad, Text2GradConfig
from posttrain.algos.roles import REFERENCE
from posttrain.engines.base import Rollouts, SamplingParams
from posttrain.engines.hf import HFRolloutEngine
from posttrain.metrics import PhaseTimer
from posttrain.models.tiny import RECIPES, build_model, build_tokenizer
from posttrain.models.value import ValueModel
from posttrain.tasks import TASKS
from posttrain.tasks.base import Example
from posttrain.tasks.span_templates import feedback_json
from posttrain.tasks.step_arithmetic import program_feedback

PROMPT = "6-3-6+7="
RIGHT = "6-3=3,3-6=-3,-3+7=4"
WRONG_SECOND = "6-3=3,3-6=-2,-2+7=5"  # the second step is wrong; the third is right from the wrong value
REQUEST = re.compile(r"T2G\|spans\|(.*?)\|(.*?)\|")


class ProgramFeedback:
    """A span reward model engine that answers every compact request with the program's feedback JSON, or with
    ``garbage`` for responses listed in ``unparsable``."""

    def __init__(self, tokenizer, unparsable: tuple[str, ...] = ()) -> None:
        self.tokenizer, self.unparsable = tokenizer, unparsable

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        texts = []
        for ids in prompt_ids:
            problem, response = REQUEST.search(self.tokenizer.decode(ids, skip_special_tokens=True)).groups()
            texts.append("garbage" if response in self.unparsable
                         else feedback_json(program_feedback(problem, response), compact=True))
        return Rollouts(prompt_ids=prompt_ids, completion_ids=[[] for _ in texts], texts=texts,
                        logprobs=[[] for _ in texts])


def _policy(seed: int = 0) -> torch.nn.Module:
    return build_model(dataclasses.replace(RECIPES.get("causal-step-arithmetic"), seed=seed), build_tokenizer()).eval()


def _algo(unparsable: tuple[str, ...] = (), **overrides) -> Text2Grad:
    tokenizer = build_tokenizer()
    policy = _policy()
    config = Text2GradConfig(**{"group_size": 1, "kl_coef": 0.0, "span_oracle": False, **overrides})
    models = {CRITIC: ValueModel(copy.deepcopy(policy))}
    if config.uses_kl:  # a reference that differs from the policy, so every token has a KL
        models[REFERENCE] = _policy(seed=1).requires_grad_(False)
    task = TASKS.get("step-arithmetic")()
    ctx = AlgoContext(tokenizer=tokenizer, reward_fn=task.reward, is_correct=task.is_correct,
                      timer=PhaseTimer(), device=torch.device("cpu"),
                      rollout=HFRolloutEngine(copy.deepcopy(policy), tokenizer), models=models,
                      engines={SPAN_RM: ProgramFeedback(tokenizer, unparsable)})
    algo = Text2Grad(config, ctx)
    algo.policy = policy
    return algo


def _rollouts(tokenizer, responses: list[str]) -> Rollouts:
    ids = [tokenizer(r, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for r in responses]
    return Rollouts(prompt_ids=[[1]] * len(ids), completion_ids=ids, texts=responses,
                    logprobs=[[0.0] * len(i) for i in ids], finish_reasons=["stop"] * len(ids))


def _terms(algo: Text2Grad, responses: list[str]):
    rollouts = _rollouts(algo.ctx.tokenizer, responses)
    group = [Example(prompt=PROMPT, answer="4")] * len(responses)
    length = max(len(c) for c in rollouts.completion_ids)
    reward = torch.zeros(len(responses))
    return algo.rewards.reward_terms(group, rollouts, length, reward, torch.ones(len(responses), dtype=torch.bool))


def _experience(algo: Text2Grad, responses: list[str]):
    rollouts = _rollouts(algo.ctx.tokenizer, responses)
    group = [Example(prompt=PROMPT, answer="4")] * len(responses)
    return algo.experience_from_rollouts(group, rollouts, algo.policy, 1)


def test_spans_become_rewards_on_exactly_their_tokens() -> None:
    dense, terminal, valid, metrics = _terms(_algo(), [WRONG_SECOND, RIGHT])
    assert terminal is None and valid.tolist() == [True, True]  # Text2Grad: no terminal scalar
    wrong = dense[0, : len(WRONG_SECOND)].tolist()  # the character tokenizer: one token per character
    first, second, _ = WRONG_SECOND.split(",")
    assert wrong[: len(first)] == [1.0] * len(first)
    start = len(first) + 1
    assert wrong[start : start + len(second)] == [-1.0] * len(second)  # the poor span, token for token
    assert wrong[len(first)] == 0.0  # the comma between spans is unmarked
    assert dense[0, len(WRONG_SECOND)] == 0.0  # EOS
    assert dense[1, : len(RIGHT)].min() >= 0.0 and dense[1].max() == 1.0
    assert metrics["span_rm/unparsable_fraction"] == 0.0 and metrics["span_rm/spans_matched"] == 6.0
    assert metrics["span_rm/verdict_mean"] == 0.0  # one -1 (a poor step), one +1: logged for span rewards too
    assert metrics["span_rm/token_reward_mean"] == pytest.approx(float(dense.sum()) / (2 * (len(RIGHT) + 1)))


def test_unparsable_feedback_loses_its_span_reward_but_keeps_its_kl() -> None:
    dense, _, rewarded, metrics = _terms(_algo(unparsable=(RIGHT,)), [WRONG_SECOND, RIGHT])
    assert rewarded.tolist() == [True, False]
    assert torch.count_nonzero(dense[1]) == 0
    assert metrics["span_rm/unparsable_fraction"] == 0.5
    algo = _algo(unparsable=(RIGHT,), kl_coef=0.1, kl_estimator="full", lam=1.0, whiten_advantages=False,
                 mask_punctuation=False)
    experience, metrics = _experience(algo, [WRONG_SECOND, RIGHT])
    assert metrics["ppo/unrewarded_fraction"] == 0.5 and experience["valid"].tolist() == [1.0, 1.0]
    mask = experience["completion_mask"][1].bool()
    assert mask.sum() == len(RIGHT) + 1  # still trained on, EOS included
    # no span reward, only the KL: with lambda 1 the return of each token is -beta x the KL still to come
    assert (experience["returns"][1][mask] < 0).all()


def test_punctuation_leaves_the_ppo_mask_and_cuts_the_gae() -> None:
    algo = _algo(lam=1.0, whiten_advantages=False)  # the critic's fresh head is 0: advantages are the returns
    experience, metrics = _experience(algo, [WRONG_SECOND])
    commas = [i for i, ch in enumerate(WRONG_SECOND) if ch == ","]
    mask = experience["completion_mask"][0]
    assert [i for i in range(len(WRONG_SECOND) + 1) if mask[i] == 0] == commas  # EOS stays, as the paper's code
    first, second, third = WRONG_SECOND.split(",")
    advantages = experience["advantages"][0]
    # each step sums its own span rewards only: the wrong step's first token gets -6, not -6 + 6 (the next step)
    assert advantages[0] == len(first) and advantages[commas[0] + 1] == -len(second)
    assert advantages[commas[1] + 1] == len(third) and advantages[commas].abs().sum() == 0
    assert metrics["ppo/trained_token_fraction"] == pytest.approx((len(WRONG_SECOND) + 1 - 2) / (len(WRONG_SECOND) + 1))
    kept = _experience(_algo(lam=1.0, whiten_advantages=False, mask_punctuation=False), [WRONG_SECOND])[0]
    assert kept["completion_mask"][0].sum() == len(WRONG_SECOND) + 1 and kept["advantages"][0][commas[0] + 1] == 0
    verdict = _experience(_algo(span_reward="verdict"), [WRONG_SECOND])[0]
    assert verdict["completion_mask"][0].sum() == len(WRONG_SECOND) + 1  # the verdict baseline keeps punctuation


def test_a_cut_short_answer_is_penalised_at_its_end() -> None:
    short = "6-3=3"
    dense, _, _, _ = _terms(_algo(), [short, ""])
    assert dense[0, len(short)] == -1.0 and dense[1, 0] == -1.0  # the EOS of each
    _, terminal, _, _ = _terms(_algo(span_reward="verdict"), [short, "", RIGHT])
    assert terminal.tolist() == [-1.0, -1.0, 1.0]


def test_verdict_baseline_is_one_scalar_on_the_last_token() -> None:
    dense, terminal, valid, _ = _terms(_algo(span_reward="verdict"), [WRONG_SECOND, RIGHT])
    assert torch.count_nonzero(dense) == 0 and terminal.tolist() == [-1.0, 1.0] and valid.all()


def test_a_reward_server_replaces_the_local_span_model(monkeypatch) -> None:
    from posttrain.algos.roles import check_roles
    from posttrain.algos.span_reward.remote import RemoteSpanRewardModel
    from posttrain.tasks.span_feedback import parse_feedback

    algo = _algo(span_url="http://127.0.0.1:9")
    assert SPAN_RM not in check_roles(algo.roles())  # nothing loaded here
    asked = []

    def feedback(self, prompts, responses):
        asked.append(list(responses))
        return [parse_feedback(feedback_json(program_feedback(p, r), compact=True), "spans")
                for p, r in zip(prompts, responses)]

    monkeypatch.setattr(RemoteSpanRewardModel, "feedback", feedback)
    dense, _, valid, _ = _terms(algo, [WRONG_SECOND])
    assert isinstance(algo.rewards.scorer(), RemoteSpanRewardModel) and asked == [[WRONG_SECOND]]
    assert valid.all() and dense.min() == -1.0


def test_the_oracle_writes_the_same_token_rewards_as_a_model_copying_it() -> None:
    from posttrain.algos.roles import check_roles
    from posttrain.algos.span_reward.scorer import ProgramSpanScorer

    oracle = _algo(span_oracle=True)
    assert SPAN_RM not in check_roles(oracle.roles())  # no reward model is loaded
    dense_oracle, _, valid, _ = _terms(oracle, [WRONG_SECOND, RIGHT])
    dense_model, _, _, _ = _terms(_algo(), [WRONG_SECOND, RIGHT])
    assert isinstance(oracle.rewards.scorer(), ProgramSpanScorer) and valid.all()
    assert torch.equal(dense_oracle, dense_model) and dense_oracle.min() == -1.0


def test_the_program_writes_the_spans_by_default_on_its_task_only() -> None:
    assert Text2GradConfig().uses_oracle  # the embedded default: step-arithmetic's program
    assert not Text2GradConfig(span_oracle=False).uses_oracle
    assert not Text2GradConfig(span_model="some/rm").uses_oracle and not Text2GradConfig(span_url="http://x").uses_oracle
    assert not Text2GradConfig(task="dataset").uses_oracle


def test_the_oracle_needs_the_task_with_a_program() -> None:
    bad = Text2GradConfig(span_oracle=True, task="arithmetic").incompatibilities()
    assert any(name == "span_oracle" and "step-arithmetic" in why for name, _, why in bad)


def test_span_recipe_picks_the_embedded_reward_model() -> None:
    from posttrain.algos.roles import check_roles

    def span_role(**overrides):
        return check_roles(_algo(**overrides).roles())[SPAN_RM]

    assert span_role().recipe == "reward-text2grad"
    assert span_role(span_recipe="reward-text2grad-nocritique").recipe == "reward-text2grad-nocritique"
    chosen = span_role(span_model="some/rm", span_recipe="reward-text2grad-nocritique")
    assert (chosen.checkpoint, chosen.recipe) == ("some/rm", None)  # a named model wins over the recipe


def _stub_eval(directory, beats: bool) -> None:
    import json

    from posttrain.algos.span_reward.stored_eval import EVAL_FILE

    verdict = {"beats_chance": beats, "margin": 0.05, "precision": 0.251, "recall": 0.047,
               "random_precision": 0.204, "random_recall": 0.237}
    (directory / EVAL_FILE).write_text(json.dumps({"verdict": verdict}))


def test_a_critic_at_chance_warns_loudly_with_its_numbers(tmp_path, caplog) -> None:
    _stub_eval(tmp_path, beats=False)
    with caplog.at_level("WARNING", logger="posttrain.algos.ppo.text2grad"):
        _algo(span_model=str(tmp_path))
    assert "does NOT beat chance" in caplog.text and "0.251 / 0.047" in caplog.text and "0.204 / 0.237" in caplog.text
    with pytest.raises(ValueError, match=r"span_refuse_at_chance.*0\.251 / 0\.047"):
        _algo(span_model=str(tmp_path), span_refuse_at_chance=True)


def test_a_critic_that_beats_chance_or_the_oracle_is_quiet_and_a_missing_evaluation_warns(tmp_path, caplog) -> None:
    _stub_eval(tmp_path, beats=True)
    with caplog.at_level("WARNING", logger="posttrain.algos.ppo.text2grad"):
        _algo(span_model=str(tmp_path), span_refuse_at_chance=True)
        _algo(span_oracle=True, span_refuse_at_chance=True)  # the program's spans: nothing to check
    assert "chance" not in caplog.text and "evaluation" not in caplog.text
    unmeasured = tmp_path / "unmeasured"
    unmeasured.mkdir()
    with caplog.at_level("WARNING", logger="posttrain.algos.ppo.text2grad"):
        _algo(span_model=str(unmeasured))
    assert "no stored evaluation" in caplog.text and "text2grad-eval --store" in caplog.text
