"""The Algorithm contract (docs/ARCHITECTURE.md): the trainer owns the loop, an algorithm owns the maths.

An algorithm turns a batch of examples into an ``Experience`` (rollouts, rewards, advantages, masks,
old/reference log-likelihoods) and an ``Experience`` micro-batch into a loss. It never touches the
DeepSpeed engine, the optimizer, checkpoints or logging sinks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from posttrain.algos.roles import POLICY, REFERENCE, ModelRole, policy_role
from posttrain.async_rollouts import GenerationRequest
from posttrain.engines.base import SamplingParams
from posttrain.registry import Registry

if TYPE_CHECKING:
    from posttrain.config import TrainConfig
    from posttrain.engines.base import GenerationEngine, RolloutEngine, Rollouts
    from posttrain.metrics import PhaseTimer
    from posttrain.tasks.base import Example, RewardFn


@dataclass
class Experience:
    """A batch of training samples: every tensor shares the leading batch dimension."""

    tensors: dict[str, torch.Tensor]

    def __len__(self) -> int:
        return next(iter(self.tensors.values())).shape[0]

    def __getitem__(self, key: str) -> torch.Tensor:
        return self.tensors[key]

    def split(self, micro_batch_size: int) -> list[Experience]:
        n = len(self)
        return [
            Experience({k: v[i : i + micro_batch_size] for k, v in self.tensors.items()})
            for i in range(0, n, micro_batch_size)
        ]

    def to(self, device: torch.device | str) -> Experience:
        return Experience({k: v.to(device) for k, v in self.tensors.items()})


class AlgoContext:
    """What the trainer lends an algorithm to build experience. Nothing here is owned by the algorithm.

    ``models`` and ``engines`` hold the algorithm's declared roles (``Algorithm.roles``,
    ``posttrain.algos.roles``), keyed by role name: ``engines["policy"]`` is the policy's rollout engine (also
    ``rollout``), synced by the trainer; every other entry is frozen. ``rollout=`` and ``reference=`` are
    shorthands for ``engines={"policy": ...}`` and ``models={"reference": ...}`` (tests build contexts by hand).
    """

    def __init__(self, tokenizer: Any, reward_fn: RewardFn, is_correct: Callable[[str, Example], bool],
                 timer: PhaseTimer, device: torch.device, rank: int = 0, world_size: int = 1, *,
                 models: dict[str, torch.nn.Module] | None = None, engines: dict[str, GenerationEngine] | None = None,
                 rollout: RolloutEngine | None = None, reference: torch.nn.Module | None = None) -> None:
        self.tokenizer, self.reward_fn, self.is_correct = tokenizer, reward_fn, is_correct
        self.timer, self.device, self.rank, self.world_size = timer, device, rank, world_size
        self.models: dict[str, torch.nn.Module] = dict(models or {})
        self.engines: dict[str, GenerationEngine] = dict(engines or {})
        if rollout is not None:
            self.engines[POLICY] = rollout
        if reference is not None:
            self.models[REFERENCE] = reference

    @property
    def rollout(self) -> RolloutEngine | None:
        """The policy's rollout engine (``engines["policy"]``), or None when the trainer built none."""
        return self.engines.get(POLICY)  # type: ignore[return-value]


class Algorithm(ABC):
    """Base class of every ``--algo``. Subclasses set ``config_class`` and register themselves."""

    config_class: ClassVar[type[TrainConfig]]

    def __init__(self, config: TrainConfig, ctx: AlgoContext) -> None:
        self.config = config
        self.ctx = ctx
        self.step = 0  # set by the trainer before each make_experience
        # Algorithm-owned randomness (e.g. diffusion masks); checkpointed with the run.
        self.generator = torch.Generator().manual_seed(config.seed * 1_000_003 + 17 * ctx.rank)

    def sampling_seed(self) -> int:
        """Rollout seed for the current step on this rank: a pure function of (seed, step, rank)."""
        return (self.config.seed * 1_000_003 + self.step * 7_919 + self.ctx.rank * 104_729) % 2**63

    def sampling_params(self) -> SamplingParams:
        """The rollout sampling settings of the config, seeded for the current step on this rank."""
        cfg = self.config
        return SamplingParams(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p,
                              top_k=cfg.top_k, seed=self.sampling_seed())

    def state_dict(self) -> dict[str, Any]:
        """Anything besides the generator that the algorithm carries between steps (JSON-serialisable)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""

    def roles(self) -> tuple[ModelRole, ...]:
        """The models this run needs (``posttrain.algos.roles``); the trainer builds exactly these. The default
        is the policy alone, served by the run's ``--rollout`` engine; an algorithm adds e.g. a frozen
        reference (``reference_role()``) or another checkpoint."""
        return (policy_role(self.config.rollout),)

    def declares(self, name: str) -> bool:
        """Whether ``roles()`` includes the role called ``name``."""
        return any(role.name == name for role in self.roles())

    def evaluation_engine(self) -> GenerationEngine:
        """What held-out evaluation generates with: the policy's engine, unless the algorithm answers through
        several roles (Prefix-RL: the adapter's prefix, then the frozen target's continuation)."""
        return self.ctx.rollout

    @abstractmethod
    def make_experience(self, examples: list[Example], policy: torch.nn.Module) -> tuple[Experience, dict[str, float]]:
        """Roll out, score and prepare one step's samples (this rank's share); returns metrics too."""

    # -- asynchronous rollouts (``--async_rollouts``): the step split in two ---------------------
    # An algorithm whose rollouts are one generation call overrides both methods below; the trainer then
    # asks for step t+1's request while step t trains and hands back the finished rollouts (see
    # ``posttrain.async_rollouts``). ``self.step`` is set to the step concerned before each call.
    def generation_request(self, examples: list[Example]) -> GenerationRequest:
        """The one generation this step's experience needs (this rank's share of ``examples``)."""
        raise NotImplementedError(f"{type(self).__name__} generates inside make_experience")

    def experience_from_rollouts(self, examples: list[Example], rollouts: Rollouts, policy: torch.nn.Module,
                                 staleness: int) -> tuple[Experience, dict[str, float]]:
        """``make_experience`` after generation: ``rollouts`` answer ``generation_request(examples)``, sampled
        by weights ``staleness`` versions older than ``policy``'s (0 = the same weights)."""
        raise NotImplementedError(f"{type(self).__name__} generates inside make_experience")

    @property
    def supports_async_rollouts(self) -> bool:
        """Whether the algorithm implements the split above (required by ``--async_rollouts``): one class
        defines ``make_experience`` and both halves, so a subclass that overrides only ``make_experience``
        (e.g. GPO and DuPO over GRPO) is not run through its parent's halves."""
        owners = {next(k for k in type(self).__mro__ if name in vars(k))
                  for name in ("make_experience", "generation_request", "experience_from_rollouts")}
        return len(owners) == 1 and Algorithm not in owners

    @abstractmethod
    def loss(self, policy: torch.nn.Module, batch: Experience) -> tuple[torch.Tensor, dict[str, float]]:
        """Loss of one micro-batch (already on the policy's device) and its metrics."""

    def role_loss(self, name: str, model: torch.nn.Module, batch: Experience) -> tuple[torch.Tensor, dict[str, float]]:
        """Loss of trained role ``name`` (a role besides the policy with ``trains`` set, e.g. PPO's critic) on
        the micro-batch the policy's ``loss`` just used; metrics keys carry their own prefix."""
        raise NotImplementedError(f"{type(self).__name__} declares the trained role {name!r} but no role_loss for it")


ALGORITHMS: Registry[type[Algorithm]] = Registry("algorithm")
