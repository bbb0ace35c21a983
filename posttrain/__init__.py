"""posttrain: an LLM post-training toolkit with one DeepSpeed trainer for recent RL methods."""

__version__ = "0.1.0"
