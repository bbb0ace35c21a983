"""EntropyLong: long-context training data verified by predictive-entropy reduction (see ``pipeline``)."""

from data_pipelines.entropylong.evaluation import evaluate
from data_pipelines.entropylong.index import build_chunks
from data_pipelines.entropylong.pipeline import (
    EntropyLong,
    EntropyLongConfig,
    find_anchors,
    select_contexts,
)

__all__ = ["EntropyLong", "EntropyLongConfig", "build_chunks", "evaluate", "find_anchors", "select_contexts"]
