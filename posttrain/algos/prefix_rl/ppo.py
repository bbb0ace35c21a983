"""``--algo prefix-rl-ppo``: Prefix-RL with the paper's estimator, PPO with a critic and GAE (the paper trains
the adapter with OpenRLHF's PPO), instead of ``--algo prefix-rl``'s group advantages.

Everything Prefix-RL-specific is ``posttrain.algos.prefix_rl.algo.PrefixAnswering``'s, which ``--algo prefix-rl``
has too (the adapter writes exactly k tokens, the frozen target continues from the same ids through its own
engine, only the k prefix tokens carry the loss); everything PPO-specific is ``posttrain.algos.ppo.algo.PPO``'s,
this class's other base (per-token rewards with the KL folded in, the critic as a trained model role, GAE, clipped
policy and value losses). The critic sees the prompt and the prefix only, so its values and the advantages live
on the adapter's k tokens, with the whole answer's reward on the last prefix token. Roles: PPO's policy, critic
and reference, plus the target.
"""

from __future__ import annotations

from dataclasses import dataclass

from posttrain.algos.base import ALGORITHMS
from posttrain.algos.ppo.algo import PPO, PPOConfig
from posttrain.algos.prefix_rl.algo import PrefixAnswering, PrefixRLConfig
from posttrain.config import opt


@dataclass
class PrefixRLPPOConfig(PrefixRLConfig, PPOConfig):
    """Prefix-RL's adapter and target, trained by PPO with a critic (the paper's estimator)."""

    advantage: str = opt("gae", "Advantage estimator: GAE with the critic's values (the paper's PPO).", ["gae"])
    group_size: int = opt(4, "Prefixes sampled per prompt (PPO needs no group; several give more samples per "
                             "prompt, as OpenRLHF's n_samples_per_prompt).")


@ALGORITHMS.register("prefix-rl-ppo")
class PrefixRLPPO(PrefixAnswering, PPO):
    """PPO answering through ``PrefixAnswering``."""

    config_class = PrefixRLPPOConfig
    config: PrefixRLPPOConfig
