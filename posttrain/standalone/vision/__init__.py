"""Auxiliary vision methods on the toolkit's torch / transformers / diffusers backend.

- ``attwarp``: AttWarp, "Constructive Distortion: Improving MLLMs with Attention-Guided Image Warping"
  (ICLR 2026): a query-conditioned attention map from a multimodal LLM warps the image rectilinearly
  (``warp``), and the model answers on the warped image; AttWarp-Chain iterates until the maps agree.
- ``deleaker``: DeLeaker, "Dynamic Inference-Time Reweighting for Semantic Leakage Mitigation in
  Text-to-Image Models" (ICLR 2026): attention reweighting inside diffusers' Flux processors.
- ``fga``: FGA, "Flatness-Guided Test-Time Adaptation for Vision-Language Models" (ICLR 2026):
  sharpness-aware prompt tuning of CLIP and sharpness-scored test-time view selection, with TPT as baseline.

Shared pieces: ``tap`` (record attention of chosen transformers layers), ``processors`` (swap diffusers
attention processors), ``tiny`` (random-init tiny models from configs), ``shapes`` (generated images).
``posttrain vision attwarp|deleaker|fga`` runs each (``cli``). Needs the ``vision`` extra (diffusers).
"""
