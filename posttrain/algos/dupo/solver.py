"""DuPO's dual solver: the engine that answers the dual questions during training.

- ``policy``: the trainer's rollout engine, i.e. the policy being trained (the paper's "same model").
- ``snapshot`` (the default): a frozen copy of the policy, refreshed every ``refresh_every`` steps (at steps
  1, N+1, 2N+1, ...).

Why the snapshot is the default: only the primal tokens are trained, but the solver shares the policy's
weights, so with the live policy every update also moves the judge of the next step. The policy can then
raise its reward by co-adapting with its own grader (e.g. a primal error and a matching dual error that
cancel in the round trip) instead of by answering correctly. A frozen judge cannot follow the policy within
a window of N steps, so inside it reward only rises through better primal answers; the refresh still lets
the judge gain the competence the shared weights acquire, which matters for DuPO's competence asymmetry
(a weak dual penalises correct answers). The paper is silent on this; this choice is ours.

A snapshot is a deep copy of the HF rollout engine's model (``--rollout hf``). It is not checkpointed: a
resumed run rebuilds it at its first step, which equals the uninterrupted run because ``DuPOConfig`` requires
checkpoints to fall on refresh boundaries (``save_every`` a multiple of ``refresh_every``).
"""

from __future__ import annotations

import copy
import logging

from posttrain.engines.base import GenerationEngine
from posttrain.engines.hf import HFRolloutEngine

logger = logging.getLogger(__name__)

DUAL_SOLVERS = ("snapshot", "policy")


class DualSolver:
    """Hands out the engine that answers the dual questions of a training step."""

    def __init__(self, mode: str, refresh_every: int) -> None:
        if mode not in DUAL_SOLVERS:
            raise ValueError(f"dual solver {mode!r} is unknown; choose one of {list(DUAL_SOLVERS)}")
        if refresh_every < 1:
            raise ValueError(f"refresh_every must be >= 1, got {refresh_every}")
        self.mode = mode
        self.refresh_every = refresh_every
        self.snapshot: HFRolloutEngine | None = None
        self.snapshot_step = 0

    def is_refresh_step(self, step: int) -> bool:
        return (step - 1) % self.refresh_every == 0

    def engine(self, step: int, rollout: GenerationEngine) -> GenerationEngine:
        """The policy's ``rollout`` engine, or the snapshot (copied from it first on a refresh step)."""
        if self.mode == "policy":
            return rollout
        if self.snapshot is None or self.is_refresh_step(step):
            if not isinstance(rollout, HFRolloutEngine):
                raise TypeError(f"the snapshot dual solver copies an HF rollout engine, got {type(rollout).__name__}; "
                                "use --rollout hf or --dual_solver policy")
            if not self.is_refresh_step(step):
                logger.warning("dual solver snapshot rebuilt at step %d, between refreshes (every %d steps): "
                               "this run's dual rewards differ from an uninterrupted run's until the next refresh",
                               step, self.refresh_every)
            self.snapshot = HFRolloutEngine(copy.deepcopy(rollout.model), rollout.tokenizer,
                                            max_batch_size=rollout.max_batch_size, device=rollout.device)
            self.snapshot_step = step
        return self.snapshot
