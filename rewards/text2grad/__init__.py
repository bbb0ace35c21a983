"""Text2Grad (arXiv 2505.22338): span-level natural-language feedback turned into per-token rewards.

``feedback`` (the three output forms and their parser), ``templates`` (reward-model prompts and SFT
targets), ``alignment`` (fuzzy span matching, per-task character rules, tokenizer-agnostic token
rewards), ``scorer`` (``SpanRewardModel`` over any generation engine), ``remote`` (the same over
``posttrain serve``'s ``/v1/span_feedback``), ``data`` (SFT data), ``tiny`` (the embedded tiny span
reward model) and ``evaluate`` (span precision / recall against the program's labels).
"""
