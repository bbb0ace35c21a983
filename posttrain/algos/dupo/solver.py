"""DuPO's dual solver: the model that answers the dual questions during training.

- ``policy``: the policy's rollout engine, i.e. the policy being trained (the paper's "same model").
- ``snapshot`` (the default): a frozen copy of the policy, refreshed every ``refresh_every`` steps (at steps
  1, N+1, 2N+1, ...), or never with ``refresh_every`` 0 (the warm start answers every dual question). It is the model role ``solver`` (``solver_role``): the trainer builds it with its own
  HF engine (``--rollout hf``), copies the policy's weights into it on refresh steps and saves it in every
  checkpoint, so a resumed run answers with the snapshot the uninterrupted run had.

Why the snapshot is the default: only the primal tokens are trained, but the solver shares the policy's
weights, so with the live policy every update also moves the judge of the next step. The policy can then
raise its reward by co-adapting with its own grader (e.g. a primal error and a matching dual error that
cancel in the round trip) instead of by answering correctly. A frozen judge cannot follow the policy within
a window of N steps, so inside it reward only rises through better primal answers; the refresh still lets
the judge gain the competence the shared weights acquire, which matters for DuPO's competence asymmetry
(a weak dual penalises correct answers). The paper is silent on this; this choice is ours.
"""

from __future__ import annotations

from posttrain.algos.roles import INITIAL_POLICY, ModelRole

DUAL_SOLVERS = ("snapshot", "policy")
SOLVER = "solver"
"""The snapshot solver's role name (``ctx.engines["solver"]``)."""


def solver_role(refresh_every: int) -> ModelRole:
    """The snapshot solver: a copy of the initial policy on an HF engine, refreshed every ``refresh_every``
    steps (0 = never)."""
    return ModelRole(SOLVER, INITIAL_POLICY, engine="hf", refresh_every=refresh_every, config_field="dual_solver")


def snapshot_step(step: int, refresh_every: int) -> int:
    """The step whose start the snapshot answering at ``step`` was copied at: 1, N+1, 2N+1, ... (with
    ``refresh_every`` 0, never refreshed, 1: the initial policy)."""
    if step < 1 or refresh_every < 0:
        raise ValueError(f"snapshot_step: step {step} must be >= 1 and refresh_every {refresh_every} >= 0")
    return step - (step - 1) % refresh_every if refresh_every else 1
