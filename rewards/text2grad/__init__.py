"""Text2Grad (arXiv 2505.22338) around the reward server: ``tiny`` (the embedded span reward model's warm start),
``policy_samples`` (the warm-start policy's responses, labelled by the program), ``span_metrics`` (span precision /
recall and the chance baselines) and ``evaluate`` (``posttrain text2grad-eval``). The span reward model itself is
``posttrain.algos.span_reward``; its SFT data pipeline is ``data_pipelines.text2grad.sft``.
"""
