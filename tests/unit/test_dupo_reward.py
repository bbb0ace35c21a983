"""DuPO's unknown-component selection, group dual rewards (hand-computed), dual solver and config checks."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import pytest
import torch

from posttrain.algos.base import AlgoContext
from posttrain.algos.dupo.algo import DuPO, DuPOConfig
from posttrain.algos.dupo.offline_selection import SELECTOR, OfflineSelection, problem_seed
from posttrain.algos.dupo.reward import DualSettings, group_dual_rewards
from posttrain.algos.dupo.selection import select_unknown
from posttrain.algos.dupo.solver import SOLVER, snapshot_step
from posttrain.algos.roles import INITIAL_POLICY, POLICY, check_roles
from posttrain.config import ConfigError
from posttrain.engines.base import Rollouts, SamplingParams
from posttrain.engines.spec import HFSpec
from posttrain.metrics import PhaseTimer
from posttrain.models.tiny import build_tokenizer

_DUAL = re.compile(r"^(?P<problem>.*) Given that the answer is (?P<answer>\S+), what is (?P<var>V[a-z]+)\?$")


class ScriptedEngine:
    """A generation engine (protocol only): dual answers come from ``solve(problem, answer, variable)``, primal
    solutions from ``primal`` (one per call, in order)."""

    def __init__(self, solve: Callable[[str, str, str], str], primal: list[str] | None = None) -> None:
        self.tokenizer = build_tokenizer()
        self.solve = solve
        self.primal = iter(primal or [])
        self.prompts: list[str] = []

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        texts = []
        for ids in prompt_ids:
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            self.prompts.append(text)
            match = _DUAL.match(text)
            texts.append(self.solve(match["problem"], match["answer"], match["var"]) if match else next(self.primal))
        ids = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        return Rollouts(prompt_ids=prompt_ids, completion_ids=ids, texts=texts, logprobs=[[0.0] * len(i) for i in ids],
                        finish_reasons=["stop"] * len(ids))


def inverse_of_addition(problem: str, answer: str, variable: str) -> str:
    """A perfect dual solver for "Ann has A pens, gets B. How many?" problems."""
    numbers = [int(n) for n in re.findall(r"\d+", problem)]
    return str(int(answer) - numbers[0])


def settings(selection: str = "online", lam: float = 1.0) -> DualSettings:
    return DualSettings(max_questions=3, samples=1, lam=lam, selection=selection,
                        params=SamplingParams(max_new_tokens=4, temperature=0.0), system_prompt=None,
                        max_prompt_tokens=256)


PROBLEM = "Ann has 3 pens, gets 4. How many?"


def test_selection_keeps_answerable_and_unique_questions() -> None:
    assert select_unknown({"7": 1.0, "8": 0.0}).kept
    assert not select_unknown({"7": 1.0, "8": 1.0}).unique
    assert not select_unknown({"7": 0.0, "8": 0.0}).answerable
    assert not select_unknown({}).kept
    assert select_unknown({"7": 0.5, "8": 0.25}).kept  # with K = 4: half of the dual samples solve it
    with pytest.raises(ValueError, match="'7'"):
        select_unknown({"7": 1.5})


def test_correct_answers_earn_the_dual_reward() -> None:
    engine = ScriptedEngine(inverse_of_addition)
    rewards, stats = group_dual_rewards([PROBLEM] * 4, ["7", "7", "8", "no idea"], 4, engine, settings())
    # 7 recovers both hidden numbers (7-4=3, 7-3=4); 8 recovers neither; no answer = a failed recovery.
    assert rewards == pytest.approx([1.0, 1.0, math.exp(-1), math.exp(-1)])
    assert len(engine.prompts) == 4  # 2 dual questions x 2 distinct answers
    assert stats.questions == 2 and stats.kept == 2 and stats.no_answer == 1
    metrics = stats.metrics()
    assert metrics["dupo/selection_pass_rate"] == 1.0 and metrics["dupo/filtered_fraction"] == 0.0
    assert metrics["dupo/dual_accuracy"] == 0.5 and metrics["dupo/no_answer_fraction"] == 0.25


def test_selection_drops_non_unique_and_unanswerable_questions() -> None:
    always_three = ScriptedEngine(lambda problem, answer, variable: "3")
    rewards, stats = group_dual_rewards([PROBLEM] * 2, ["7", "8"], 2, always_three, settings())
    # hiding 3: both answers "recover" it (not unique); hiding 4: none does (not answerable): group filtered.
    assert rewards == [None, None]
    assert stats.kept == 0 and stats.filtered == 1 and stats.metrics()["dupo/filtered_fraction"] == 1.0
    unfiltered, _ = group_dual_rewards([PROBLEM] * 2, ["7", "8"], 2, always_three, settings("none"))
    assert unfiltered == pytest.approx([(1 + math.exp(-1)) / 2] * 2)


def test_lambda_sets_the_failed_reward() -> None:
    rewards, _ = group_dual_rewards([PROBLEM] * 2, ["7", "8"], 2, ScriptedEngine(inverse_of_addition),
                                    settings(lam=2.0))
    assert rewards == pytest.approx([1.0, math.exp(-2)])


def test_a_problem_without_a_number_is_counted_not_dropped() -> None:
    engine = ScriptedEngine(inverse_of_addition)
    rewards, stats = group_dual_rewards(["How many pens?"] * 2 + [PROBLEM] * 2, ["1", "2", "7", "8"], 2, engine,
                                        settings())
    assert rewards[:2] == [None, None] and rewards[2:] == pytest.approx([1.0, math.exp(-1)])
    assert stats.no_number == 1 and stats.metrics()["dupo/no_number_fraction"] == 0.5


def test_recovery_is_split_by_the_verifiers_verdict_for_the_log() -> None:
    def fooled_by_eight(problem: str, answer: str, variable: str) -> str:
        return inverse_of_addition(problem, answer, variable) if answer == "7" else "4"

    completions = ["1", "2", "7", "8", "8", "no idea"]
    _, stats = group_dual_rewards(["How many pens?"] * 2 + [PROBLEM] * 4, completions, 2, ScriptedEngine(
        fooled_by_eight), settings("none"))
    # 7 recovers both hidden numbers (3 and 4); 8 only the 4 (the solver answers 4 whatever is hidden): 1/2
    assert stats.recovery == [None, None, 1.0, 0.5, 0.5, None]
    split = stats.answer_split([False, False, True, False, False, False])
    assert split == {"dupo/dual_accuracy_right_answers": 1.0, "dupo/dual_accuracy_wrong_answers": 0.5}
    assert stats.answer_split([False] * 6)["dupo/dual_accuracy_right_answers"] == 0.0  # none right: 0, not NaN
    with pytest.raises(ValueError, match="5 verdicts for 6"):
        stats.answer_split([True] * 5)


def test_groups_must_be_copies_of_one_prompt() -> None:
    with pytest.raises(ValueError, match="one group"):
        group_dual_rewards([PROBLEM, "Bob has 1 cup, gets 2. How many?"], ["7", "3"], 2,
                           ScriptedEngine(inverse_of_addition), settings())


def test_snapshot_solver_is_a_refreshed_model_role() -> None:
    ctx = AlgoContext(tokenizer=None, reward_fn=None, is_correct=None, timer=PhaseTimer(), device=torch.device("cpu"),
                      engines={POLICY: ScriptedEngine(inverse_of_addition), SOLVER: ScriptedEngine(inverse_of_addition)})
    snapshot = DuPO(DuPOConfig(algo="dupo", dual_refresh_every=3), ctx)
    role = check_roles(snapshot.roles())[SOLVER]
    assert (role.source, role.trains, role.engine, role.refresh_every) == (INITIAL_POLICY, False, HFSpec(), 3)
    assert snapshot.dual_solver() is ctx.engines[SOLVER]
    live = DuPO(DuPOConfig(algo="dupo", dual_solver="policy"), ctx)
    assert SOLVER not in check_roles(live.roles()) and live.dual_solver() is ctx.engines[POLICY]
    offline = check_roles(DuPO(DuPOConfig(algo="dupo", dual_selection="offline"), ctx).roles())[SELECTOR]
    assert (offline.source, offline.trains, offline.refresh_every) == (INITIAL_POLICY, False, 0)  # frozen, never refreshed


def test_snapshot_step_is_the_last_refresh() -> None:
    assert [snapshot_step(step, 3) for step in range(1, 8)] == [1, 1, 1, 4, 4, 4, 7]
    assert [snapshot_step(step, 1) for step in range(1, 4)] == [1, 2, 3]
    assert [snapshot_step(step, 0) for step in (1, 2, 50)] == [1, 1, 1]  # never refreshed: the initial policy
    with pytest.raises(ValueError, match="step 0"):
        snapshot_step(0, 3)


def test_offline_selection_keeps_per_problem_what_the_pool_decided() -> None:
    """The pool (the initial policy's answers 7, 7, 9) decides once per problem: hiding 3 is recovered only from
    7 (7 - 4), hiding 4 only from 7 (7 - 3), so both are kept; the group's answers later do not matter."""
    selector = ScriptedEngine(inverse_of_addition, primal=["7", "7", "9"])
    offline = OfflineSelection(selector, settings("offline"), pool=3,
                               primal=SamplingParams(max_new_tokens=4, temperature=1.0), run_seed=0)
    assert offline.kept([PROBLEM, PROBLEM]) == {PROBLEM: (0, 1)}
    assert offline.kept([PROBLEM]) == {PROBLEM: (0, 1)} and len(selector.prompts) == 3 + 2 * 2  # computed once
    always_three = ScriptedEngine(lambda problem, answer, variable: "3")
    # online, both questions would be dropped (hiding 3: not unique; hiding 4: not answerable); offline keeps them
    rewards, stats = group_dual_rewards([PROBLEM] * 2, ["7", "8"], 2, always_three, settings("offline"),
                                        offline.kept([PROBLEM]))
    assert rewards == pytest.approx([(1 + math.exp(-1)) / 2] * 2) and stats.kept == 2 and stats.filtered == 0
    none_kept, stats = group_dual_rewards([PROBLEM] * 2, ["7", "8"], 2, always_three, settings("offline"),
                                          {PROBLEM: ()})
    assert none_kept == [None, None] and stats.filtered == 1 and stats.questions == 2
    with pytest.raises(ValueError, match="kept_offline"):
        group_dual_rewards([PROBLEM] * 2, ["7", "8"], 2, always_three, settings("offline"))


def test_offline_selection_drops_what_several_pool_answers_recover() -> None:
    always_three = ScriptedEngine(lambda problem, answer, variable: "3", primal=["7", "8"])
    offline = OfflineSelection(always_three, settings("offline"), pool=2,
                               primal=SamplingParams(max_new_tokens=4, temperature=1.0), run_seed=0)
    assert offline.kept([PROBLEM]) == {PROBLEM: ()}
    assert problem_seed(PROBLEM, 0) == problem_seed(PROBLEM, 0) != problem_seed(PROBLEM, 1)


@pytest.mark.parametrize("overrides,field", [
    ({"dual_samples": 4, "dual_temperature": 0.0}, "dual_samples"),
    ({"dual_lambda": 0.0}, "dual_lambda"),
    ({"dual_questions": 0}, "dual_questions"),
    ({"rollout": "vllm"}, "dual_solver"),
    ({"dual_temperature": -1.0}, "dual_temperature"),
    ({"dual_refresh_every": -1}, "dual_refresh_every"),
    ({"dual_task": "translation"}, "dual_selection"),  # nothing to select when the whole sentence is hidden
    ({"dual_selection": "offline", "dual_selection_pool": 0}, "dual_selection_pool"),
])
def test_bad_dupo_config_names_the_field(overrides: dict, field: str) -> None:
    assert field in [name for name, _, _ in DuPOConfig(algo="dupo", **overrides).incompatibilities()]


def test_bad_dupo_config_fails_validation() -> None:
    with pytest.raises(ConfigError, match="dual_lambda"):
        DuPOConfig(algo="dupo", dual_lambda=0.0).validate()


def test_default_dupo_config_is_valid_and_label_free_options_combine() -> None:
    DuPOConfig(algo="dupo").validate()
    DuPOConfig(algo="dupo", save_every=15).validate()  # the snapshot is checkpointed: any save step resumes exactly
    DuPOConfig(algo="dupo", dual_solver="policy", save_every=7).validate()
    DuPOConfig(algo="dupo", dual_samples=4, dual_temperature=1.0).validate()
    DuPOConfig(algo="dupo", dual_refresh_every=0).validate()
    DuPOConfig(algo="dupo", dual_task="translation", dual_selection="none", task="word-translation").validate()
