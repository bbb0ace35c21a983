"""GPO: Guided Policy Optimization (Li, Xie, Lu, ICLR 2026). ``core`` holds the pure loss terms shared by the
control setting (``posttrain.standalone.gpo_control``: gymnasium + torch, ``posttrain gpo-control``) and the LLM
setting."""

from posttrain.algos.gpo.core import (  # noqa: F401
    GPOCoefs,
    backtrack_kl,
    backtrack_mask,
    categorical_kl,
    gaussian_kl,
    gpo_clip_losses,
    gpo_penalty_losses,
    guider_clip_loss,
    guider_clip_surrogate,
    guider_ppo_loss,
    learner_imitation_loss,
    learner_loss,
    learner_rl_aux_loss,
    update_penalty_alpha,
)
