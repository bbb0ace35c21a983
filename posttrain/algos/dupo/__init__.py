"""DuPO (She et al. 2025, arXiv 2508.14460): label-free RL rewards from a dual task, and dual-task reranking.

- ``algo``: ``--algo dupo``, GRPO on the dual reward (``DuPOConfig``, ``DuPO``).
- ``reward``: the dual reward of one step's rollouts, with unknown-component selection (``selection``).
- ``solver``: the dual solver, the live policy or a frozen snapshot refreshed every N steps.
- ``dual_solve``: asking a generation engine the dual questions and checking what it recovers.
- ``rerank`` / ``rerank_cli``: ``posttrain dupo-rerank``, best-of-N by backward accuracy.
- ``warm_start``: the embedded default's warm start on primal and dual questions.

The dual questions and the reward's distance live in ``posttrain.tasks.dual_questions`` and ``posttrain.algos.dupo.dual``.
"""
