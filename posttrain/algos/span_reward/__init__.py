"""Text2Grad's span reward model (arXiv 2505.22338) as the algorithm reads it: ``alignment`` (feedback spans ->
per-token rewards), ``scorer`` (``SpanRewardModel`` over any generation engine) and ``remote`` (the same over
``posttrain serve``'s ``/v1/span_feedback``). The feedback format and the reward model's prompts are task data
(``posttrain.tasks.span_feedback``, ``posttrain.tasks.span_templates``); the reward server
(``rewards.server.span_feedback``) serves this scorer.
"""

SPAN_RM_RECIPES = ("reward-text2grad", "reward-text2grad-nocritique")
"""The embedded span reward models (``posttrain.models.tiny`` recipes): critique then spans (the paper's),
and spans only (its ablation); the first is the default."""
