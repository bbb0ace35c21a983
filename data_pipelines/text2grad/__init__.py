"""Text2Grad's data: ``sft`` writes a span reward model's SFT data (``posttrain data text2grad-sft``)."""
