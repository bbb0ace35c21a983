"""Model roles: the models an algorithm declares and the trainer builds (docs/ARCHITECTURE.md, section 4).

An algorithm lists its roles (``Algorithm.declared_roles(config)``, from its config alone): for each one, where its weights come from, whether it
trains, and which rollout engine, if any, serves it. The trainer builds exactly what is declared, the same
way for every algorithm, and lends the result through ``AlgoContext``:

- ``policy`` (every algorithm has it): the model being trained, from ``--model`` or the embedded recipe. It
  is the module the trainer's deepspeed model wraps and hands to ``make_experience`` / ``loss``; its engine,
  when it declares one, is ``ctx.rollout`` (``ctx.engines["policy"]``), synced every ``sync_every`` steps. A
  policy without an engine (SFT) still gets one for evaluation, synced before each evaluation only.
- a frozen role (``trains`` False): a copy of the policy's initial weights (``INITIAL_POLICY``, e.g. the KL
  reference) or another checkpoint (``CHECKPOINT``, e.g. Prefix-RL's target from ``--target_model``, or an
  embedded tiny recipe by default). With an engine it is served by that engine (``ctx.engines[name]``, built
  through ``engines.build.build_engine``, never synced: its weights never change); without one
  its module is ``ctx.models[name]``, on the device, in eval mode, without gradients.
- a refreshed snapshot (``refresh_every`` N > 0, e.g. DuPO's dual solver): a frozen copy of the initial policy
  served by its engine, into which the trainer copies the policy's current weights at the start of steps
  1, N+1, 2N+1, ...; its weights are saved in every checkpoint and restored on resume.

- a second trained role (``trains`` True, e.g. PPO's critic): a copy of the initial policy or another
  checkpoint, with its own deepspeed model and optimizer (learning rate ``ModelRole.lr``, else the run's),
  checkpointed and resumed with the policy; ``ctx.models[name]`` is its plain module. The trainer calls
  ``Algorithm.role_loss(name, ...)`` on every micro-batch after the policy's loss and steps it the same way.
  ``head="value"`` builds it as a ``posttrain.models.value.ValueModel`` (the LM's backbone and a scalar head).
A checkpoint role exchanges token ids with the policy, so it must use the policy's tokenizer
(``check_same_tokenizer``, at start-up), unless it declares ``shares_tokenizer=False`` (it only exchanges text,
and its engine gets its own tokenizer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from posttrain.config import ConfigError
from posttrain.engines.spec import EngineSpec, parse_engine_spec

POLICY = "policy"
"""The trained role's name (and its source: the run's model)."""
REFERENCE = "reference"
"""The frozen KL reference's name, by convention: a copy of the initial policy."""
INITIAL_POLICY = "initial-policy"
"""Source of a frozen copy of the policy's initial weights (before any LoRA adapter)."""
CHECKPOINT = "checkpoint"
"""Source of another checkpoint: ``ModelRole.checkpoint``, or the tiny ``ModelRole.recipe`` when unset."""
SOURCES = (POLICY, INITIAL_POLICY, CHECKPOINT)
HEADS = ("lm", "value")
"""What a role's module ends in: the causal LM's vocabulary head, or a scalar value head (a critic)."""


@dataclass(frozen=True)
class ModelRole:
    """One model an algorithm needs."""

    name: str
    """The key of the role in ``AlgoContext.models`` / ``AlgoContext.engines`` (e.g. policy, reference, target)."""
    source: str
    """Where its weights come from: ``POLICY``, ``INITIAL_POLICY`` or ``CHECKPOINT``."""
    trains: bool = False
    """Whether the trainer optimises it (only the policy does)."""
    engine: EngineSpec | str | None = None
    """The engine that serves it: an engine spec, or its string form (``engines.spec``, e.g. hf or vllm; read
    by ``parse_engine_spec`` at construction); None = no engine."""
    checkpoint: str | None = None
    """``CHECKPOINT`` roles: a path, hub id or packaged alias (``smollm2-135m``); None = ``recipe``."""
    recipe: str | None = None
    """``CHECKPOINT`` roles without ``checkpoint``: the embedded tiny recipe to build and load."""
    config_field: str | None = None
    """The config field that sets ``checkpoint`` (named by start-up errors about this role)."""
    head: str = "lm"
    """``"lm"`` (the causal LM as loaded) or ``"value"`` (``ValueModel``: backbone + scalar head, a critic)."""
    lr: float | None = None
    """Trained roles other than the policy: their AdamW peak learning rate; None = the run's ``lr``."""
    refresh_every: int = 0
    """Frozen ``INITIAL_POLICY`` roles with an engine: copy the policy's weights into it at the start of steps 1,
    N+1, 2N+1, ... (a snapshot, checkpointed with the run); 0 = never (the role keeps its weights)."""
    shares_tokenizer: bool = True
    """Whether the role exchanges token ids with the policy (so must use its tokenizer, checked at start-up);
    False for a model that only reads and writes text (Text2Grad's span reward model), served with its own."""

    def __post_init__(self) -> None:
        if isinstance(self.engine, str):
            object.__setattr__(self, "engine", parse_engine_spec(self.engine))
        if self.source not in SOURCES:
            raise ValueError(f"model role {self.name!r}: source {self.source!r} not in {SOURCES}")
        if self.head not in HEADS:
            raise ValueError(f"model role {self.name!r}: head {self.head!r} not in {HEADS}")
        if self.head == "value" and self.engine is not None:
            raise ValueError(f"model role {self.name!r}: a value model generates nothing, so no engine serves it")
        if self.refresh_every < 0:
            raise ValueError(f"model role {self.name!r}: refresh_every {self.refresh_every} must be >= 0")
        if self.refresh_every and (self.trains or self.engine is None or self.source != INITIAL_POLICY):
            raise ValueError(f"model role {self.name!r}: only a frozen copy of the initial policy served by an engine "
                             "can be refreshed from the policy")
        if self.source == CHECKPOINT and not (self.checkpoint or self.recipe):
            raise ValueError(f"model role {self.name!r}: a checkpoint role needs a checkpoint or a tiny recipe")


def policy_role(engine: EngineSpec | str | None) -> ModelRole:
    """The trained policy, served by ``engine`` (the run's ``--rollout``), or by none (SFT)."""
    return ModelRole(POLICY, POLICY, trains=True, engine=engine)


def reference_role() -> ModelRole:
    """The frozen KL reference: a copy of the initial policy, scored in process (no engine)."""
    return ModelRole(REFERENCE, INITIAL_POLICY)


def check_roles(roles: Sequence[ModelRole]) -> dict[str, ModelRole]:
    """The roles by name, after checking that names are unique, that there is one policy, that only the
    policy's source is the run's model, and that no other trained role has an engine (only the policy is
    synced); raises ValueError naming the role otherwise."""
    by_name: dict[str, ModelRole] = {}
    for role in roles:
        if role.name in by_name:
            raise ValueError(f"model role {role.name!r} is declared twice")
        by_name[role.name] = role
    policy = by_name.get(POLICY)
    if policy is None or policy.source != POLICY or not policy.trains:
        raise ValueError(f"the roles {sorted(by_name)} need a trained '{POLICY}' role whose source is the run's "
                         "model (posttrain.algos.roles.policy_role)")
    for role in by_name.values():
        if role.name == POLICY:
            continue
        if role.source == POLICY:
            raise ValueError(f"model role {role.name!r}: only the policy's source is the run's model; another "
                             f"role's is {INITIAL_POLICY!r} or {CHECKPOINT!r}")
        if role.trains and role.engine is not None:
            raise ValueError(f"model role {role.name!r}: a trained role other than the policy cannot have an engine "
                             "(the trainer syncs the policy's engine only)")
    return by_name


def tokenizer_signature(tokenizer: Any) -> dict[str, Any]:
    """What two tokenizers must share for token ids to mean the same to both: the vocabulary and the
    special-token ids."""
    return {"vocab": tokenizer.get_vocab(),
            **{name: getattr(tokenizer, name, None) for name in ("bos_token_id", "eos_token_id", "pad_token_id",
                                                                  "unk_token_id")}}


def check_same_tokenizer(role: ModelRole, policy_tokenizer: Any, role_tokenizer: Any) -> None:
    """Raise ``ConfigError`` naming ``role.config_field`` when the role's tokenizer is not the policy's."""
    mine, theirs = tokenizer_signature(policy_tokenizer), tokenizer_signature(role_tokenizer)
    if mine == theirs:
        return
    if mine["vocab"] != theirs["vocab"]:
        difference = (f"vocabularies differ ({len(mine['vocab'])} vs {len(theirs['vocab'])} tokens, "
                      f"{len(set(mine['vocab'].items()) ^ set(theirs['vocab'].items()))} entries apart)")
    else:
        difference = ", ".join(f"{k} {mine[k]} vs {theirs[k]}" for k in mine if k != "vocab" and mine[k] != theirs[k])
    raise ConfigError(role.config_field or role.name, role.checkpoint or role.recipe,
                      f"the {role.name} model's tokenizer is not the policy's ({difference}); the models exchange "
                      "token ids, never text, so they must share one tokenizer (the same model family)")
