"""The Algorithm contract (docs/ARCHITECTURE.md): the trainer owns the loop, an algorithm owns the maths.

An algorithm turns a batch of examples into an ``Experience`` (rollouts, rewards, advantages, masks,
old/reference log-likelihoods) and an ``Experience`` micro-batch into a ``LossOutput``. Everything it needs
comes in as an argument (the step, the inner iteration, the models) and everything the trainer needs goes
back as a return value (metrics, the skip flag): the trainer sets no attribute on it, and it never holds
DeepSpeed objects, the optimizer, checkpoints or logging sinks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from posttrain.algos.roles import POLICY, REFERENCE, ModelRole, policy_role
from posttrain.common.registry import Registry
from posttrain.common.seeds import derive_seed
from posttrain.engines.base import SamplingParams

if TYPE_CHECKING:
    from posttrain.config import TrainConfig
    from posttrain.engines.base import GenerationEngine, RolloutEngine, Rollouts
    from posttrain.metrics import PhaseTimer
    from posttrain.tasks.base import Example, RewardFn


@dataclass
class GenerationRequest:
    """What one step asks the rollout engine for: token-id prompts and how to sample them."""

    prompt_ids: list[list[int]]
    params: SamplingParams


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


@dataclass(frozen=True)
class LossOutput:
    """What ``Algorithm.loss`` / ``Algorithm.role_loss`` return to the trainer for one micro-batch."""

    loss: torch.Tensor
    metrics: dict[str, float]
    skip: bool = False
    """``loss`` only: drop this micro-batch (e.g. PPO's ratio threshold). The trainer then zeroes the policy's
    and every trained role's loss on it, still stepping each model so DeepSpeed's accumulation stays aligned."""


class TrainedModel(torch.nn.Module):
    """A trained model as ``loss`` / ``role_loss`` see it: calling it runs ``forward`` (the trainer's, which
    goes through DeepSpeed so that its backward hooks scale and reduce the gradients), and ``module`` is the
    plain torch module (its config, e.g. a diffusion model's mask id). It holds no DeepSpeed object."""

    def __init__(self, module: torch.nn.Module, forward: Callable[..., Any]) -> None:
        super().__init__()
        self.module = module
        self._forward = forward

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._forward(*args, **kwargs)


class AlgoContext:
    """What the trainer lends an algorithm to build experience. Nothing here is owned by the algorithm.

    ``models`` and ``engines`` hold the algorithm's declared roles (``Algorithm.roles``,
    ``posttrain.algos.roles``), keyed by role name: ``engines["policy"]`` is the policy's rollout engine (also
    ``rollout``), synced by the trainer; ``models`` are plain torch modules (a trained role's is its current
    weights, for scoring without gradients); every other entry is frozen, or refreshed by the trainer when
    its role says so (``ModelRole.refresh_every``). ``rollout=`` and ``reference=`` are
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


def config_sampling_params(config: TrainConfig, seed: int) -> SamplingParams:
    """The rollout sampling settings of ``config`` (length, temperature, top-p, top-k), seeded ``seed``."""
    return SamplingParams(max_new_tokens=config.max_new_tokens, temperature=config.temperature, top_p=config.top_p,
                          top_k=config.top_k, seed=seed)


class Algorithm(ABC):
    """Base class of every ``--algo``. Subclasses set ``config_class`` and register themselves."""

    config_class: ClassVar[type[TrainConfig]]
    supports_async_rollouts: ClassVar[bool] = False
    """Whether the algorithm implements the split below (``generation_request`` / ``experience_from_rollouts``,
    its experience one generation call on the policy's engine), which ``--async_rollouts`` requires. Declared by
    each algorithm: a subclass that builds its experience otherwise (e.g. DuPO, Prefix-RL over GRPO) sets it
    back to False."""

    def __init__(self, config: TrainConfig, ctx: AlgoContext) -> None:
        self.config = config
        self.ctx = ctx
        # Algorithm-owned randomness (e.g. diffusion masks); checkpointed with the run.
        self.generator = torch.Generator().manual_seed(derive_seed(config.seed, "algorithm", ctx.rank))

    def sampling_seed(self, step: int) -> int:
        """Rollout seed of training step ``step`` on this rank: ``derive_seed`` of (seed, step, rank)."""
        return derive_seed(self.config.seed, "rollout", step, self.ctx.rank)

    def sampling_params(self, step: int) -> SamplingParams:
        """The rollout sampling settings of the config, seeded for training step ``step`` on this rank."""
        return config_sampling_params(self.config, self.sampling_seed(step))

    def state_dict(self) -> dict[str, Any]:
        """Anything besides the generator that the algorithm carries between steps (JSON-serialisable)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""

    @classmethod
    def declared_roles(cls, config: TrainConfig) -> tuple[ModelRole, ...]:
        """The models a run with ``config`` needs (``posttrain.algos.roles``), from the config alone, so the trainer
        builds exactly these before it builds the algorithm. The default is the policy alone, served by the run's
        ``--rollout`` engine; an algorithm adds e.g. a frozen reference (``reference_role()``) or another
        checkpoint."""
        return (policy_role(config.rollout),)

    def roles(self) -> tuple[ModelRole, ...]:
        """This run's roles: ``declared_roles`` of its config."""
        return self.declared_roles(self.config)

    def declares(self, name: str) -> bool:
        """Whether ``roles()`` includes the role called ``name``."""
        return any(role.name == name for role in self.roles())

    def evaluation_engine(self) -> GenerationEngine:
        """What held-out evaluation generates with: the policy's engine, unless the algorithm answers through
        several roles (Prefix-RL: the adapter's prefix, then the frozen target's continuation)."""
        return self.ctx.rollout

    @abstractmethod
    def make_experience(self, examples: list[Example], policy: torch.nn.Module,
                        step: int) -> tuple[Experience, dict[str, float]]:
        """Roll out, score and prepare training step ``step``'s samples (this rank's share of the batch) with
        ``policy`` (the plain module, in eval mode); returns metrics too."""

    # -- asynchronous rollouts (``--async_rollouts``): the step split in two ---------------------
    # An algorithm whose rollouts are one generation call overrides both methods below and sets
    # ``supports_async_rollouts``; the trainer then asks for step t+1's request while step t trains and hands
    # back the finished rollouts (see ``posttrain.async_rollouts``).
    def generation_request(self, examples: list[Example], step: int) -> GenerationRequest:
        """The one generation training step ``step``'s experience needs (this rank's share of ``examples``)."""
        raise NotImplementedError(f"{type(self).__name__} generates inside make_experience")

    def experience_from_rollouts(self, examples: list[Example], rollouts: Rollouts, policy: torch.nn.Module,
                                 step: int) -> tuple[Experience, dict[str, float]]:
        """``make_experience`` after generation: ``rollouts`` answer ``generation_request(examples, step)``, sampled
        by the engine's weights, which may be older than ``policy``'s (the loss corrects for it from the rollouts'
        own log-probs, never from a count of versions)."""
        raise NotImplementedError(f"{type(self).__name__} generates inside make_experience")

    @abstractmethod
    def loss(self, policy: torch.nn.Module, batch: Experience, iteration: int) -> LossOutput:
        """Loss of one micro-batch (already on the policy's device) in inner iteration ``iteration`` (0 ..
        mu - 1: the trainer's pass over the step's experience), with its metrics. ``policy`` is called for
        the forward passes that train it (the trainer passes a ``TrainedModel``)."""

    def end_step(self, step: int, metrics: dict[str, float]) -> dict[str, float]:
        """Called once training step ``step`` is done, with its metrics (each loss metric the mean over the step's
        micro-batches, inner iterations and ranks, so every rank sees the same values): where an algorithm adapts
        a setting from what its losses measured (GPO-penalty's alpha). Returns metrics of its own to log; the
        default adapts nothing."""
        return {}

    def role_loss(self, name: str, model: torch.nn.Module, batch: Experience, iteration: int) -> LossOutput:
        """Loss of trained role ``name`` (a role besides the policy with ``trains`` set, e.g. PPO's critic) on
        the micro-batch the policy's ``loss`` just used; metrics keys carry their own prefix."""
        raise NotImplementedError(f"{type(self).__name__} declares the trained role {name!r} but no role_loss for it")


ALGORITHMS: Registry[type[Algorithm]] = Registry("algorithm")
