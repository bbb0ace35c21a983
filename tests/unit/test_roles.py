"""Model roles (``posttrain.algos.roles``): what every algorithm declares, the checks the trainer runs on the
declaration, and the start-up tokenizer check of a checkpoint role."""

from __future__ import annotations

import pytest

from posttrain.algos import algorithm_names, get_algorithm
from posttrain.algos.base import AlgoContext
from posttrain.algos.dupo.solver import solver_role
from posttrain.algos.roles import (
    CHECKPOINT,
    INITIAL_POLICY,
    POLICY,
    REFERENCE,
    ModelRole,
    check_roles,
    check_same_tokenizer,
    policy_role,
    reference_role,
)
from posttrain.config import ConfigError
from posttrain.engines.spec import DiffusionSpec
from posttrain.metrics import PhaseTimer
from posttrain.models.tiny import build_tokenizer


def _roles(algo: str, **overrides) -> dict[str, ModelRole]:
    cls = get_algorithm(algo)
    ctx = AlgoContext(tokenizer=None, reward_fn=None, is_correct=None, timer=PhaseTimer(), device="cpu")
    return check_roles(cls(cls.config_class(algo=algo, **overrides), ctx).roles())


def test_each_algorithm_declares_what_it_used_to_need() -> None:
    assert _roles("grpo") == {POLICY: policy_role("hf")}
    assert _roles("grpo", kl_coef=0.1) == {POLICY: policy_role("hf"), REFERENCE: reference_role()}
    assert set(_roles("rloo", kl_coef=0.1)) == {POLICY, REFERENCE}
    assert _roles("espo")[POLICY].engine == DiffusionSpec() and REFERENCE in _roles("espo")  # kl_coef 1e-2
    assert REFERENCE not in _roles("espo", kl_coef=0.0)
    assert _roles("gpo") == {POLICY: policy_role("hf")}
    assert _roles("sft") == {POLICY: policy_role(None)}  # no rollout engine: SFT samples nothing
    assert _roles("dupo") == {POLICY: policy_role("hf"), "solver": solver_role(5)}  # the snapshot dual solver
    assert _roles("dupo", dual_solver="policy") == {POLICY: policy_role("hf")}


def test_check_roles_refuses_bad_declarations() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        check_roles([policy_role("hf"), reference_role(), reference_role()])
    with pytest.raises(ValueError, match="need a trained 'policy'"):
        check_roles([reference_role()])
    critic = ModelRole("critic", INITIAL_POLICY, trains=True, head="value")
    assert check_roles([policy_role("hf"), critic])["critic"] is critic  # a second trained role is allowed
    with pytest.raises(ValueError, match="cannot have an engine"):
        check_roles([policy_role("hf"), ModelRole("critic", INITIAL_POLICY, trains=True, engine="hf")])
    with pytest.raises(ValueError, match="no engine serves it"):
        ModelRole("critic", INITIAL_POLICY, trains=True, head="value", engine="hf")
    with pytest.raises(ValueError, match="only the policy's source"):
        check_roles([policy_role("hf"), ModelRole("copy", POLICY)])
    with pytest.raises(ValueError, match="head"):
        ModelRole("critic", INITIAL_POLICY, head="q-values")
    with pytest.raises(ValueError, match="only a frozen copy of the initial policy served by an engine"):
        ModelRole("snapshot", INITIAL_POLICY, refresh_every=2)  # no engine to refresh
    with pytest.raises(ValueError, match="must be >= 0"):
        ModelRole("snapshot", INITIAL_POLICY, engine="hf", refresh_every=-1)
    with pytest.raises(ValueError, match="needs a checkpoint or a tiny recipe"):
        ModelRole("target", CHECKPOINT)
    with pytest.raises(ValueError, match="source"):
        ModelRole("target", "somewhere")


def test_context_shorthands_fill_the_role_dicts() -> None:
    engine, reference = object(), object()
    ctx = AlgoContext(tokenizer=None, reward_fn=None, is_correct=None, rollout=engine, reference=reference,
                      timer=PhaseTimer(), device="cpu")
    assert ctx.rollout is engine and ctx.engines == {POLICY: engine} and ctx.models == {REFERENCE: reference}


def test_tokenizer_check_names_the_field() -> None:
    role = ModelRole("target", CHECKPOINT, checkpoint="other-model", config_field="target_model")
    check_same_tokenizer(role, build_tokenizer(), build_tokenizer())
    other = build_tokenizer()
    other.add_tokens(["<extra>"])
    with pytest.raises(ConfigError, match="target_model.*other-model.*vocabularies differ") as err:
        check_same_tokenizer(role, build_tokenizer(), other)
    assert err.value.field_name == "target_model"
    shifted = build_tokenizer()
    shifted.eos_token = "<unk>"
    with pytest.raises(ConfigError, match="eos_token_id"):
        check_same_tokenizer(role, build_tokenizer(), shifted)


def test_every_algorithm_declares_its_roles_from_its_config_alone() -> None:
    """The trainer builds the roles before the algorithm (``trainer_parts.build_parts``): no instance is needed."""
    for name in algorithm_names():
        cls = get_algorithm(name)
        roles = check_roles(cls.declared_roles(cls.config_class(algo=name)))
        assert POLICY in roles, name
