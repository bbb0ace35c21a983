"""Prefix-RL and Prefix Clustering ("Parameter-Efficient Reinforcement Learning using Prefix Optimization",
ICLR 2026): steer a frozen target model by optimising only the first k tokens of its answers.

- ``algo``: ``--algo prefix-rl``, RL on a small adapter that writes the k-token prefix (``PrefixRLConfig``);
- ``generation``: adapter prefix then target continuation, token ids passed unchanged;
- ``cluster``: Prefix Clustering's maths (prefix embedding, seeded k-means++, elbow rule);
- ``cluster_cli``: ``posttrain prefix-cluster``, the training-free probe.
"""
