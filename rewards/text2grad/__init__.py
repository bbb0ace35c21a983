"""Text2Grad (arXiv 2505.22338) around the reward server: ``tiny`` (the embedded span reward model's warm start)
and ``evaluate`` (span precision / recall against the program's labels). The span reward model itself is
``posttrain.algos.span_reward``; its SFT data pipeline is ``data_pipelines.text2grad.sft``.
"""
