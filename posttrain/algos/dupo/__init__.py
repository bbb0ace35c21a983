"""DuPO (She et al. 2025, arXiv 2508.14460): label-free RL rewards from a dual task, and dual-task reranking.

- ``algo``: ``--algo dupo``, GRPO on the dual reward (``DuPOConfig``, ``DuPO``).
- ``reward``: the math dual's reward of one step's rollouts, with unknown-component selection (``selection``,
  online over each group; ``offline_selection``: the paper's, once per problem with a frozen model's pool).
- ``back_translation``: the translation dual's reward (``dual_task translation``): back-translate, BLEU.
- ``solver``: the dual solver, the live policy or a frozen snapshot refreshed every N steps.
- ``dual_solve``: asking a generation engine the dual questions and checking what it recovers.
- ``rerank`` / ``rerank_cli``: ``posttrain dupo-rerank``, best-of-N by backward accuracy.
- ``warm_start``: the embedded default's warm start on primal and dual questions.

The dual questions (math and translation) and the reward's distances live in ``posttrain.tasks.dual_questions`` and
``posttrain.algos.dupo.dual``.
"""
