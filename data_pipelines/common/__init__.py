"""Shared backbone of the data pipelines.

- ``backends``: ``load_backend(spec)`` -> the project's engines (HF, vLLM, OpenAI-compatible HTTP, copy-cache LM)
  behind ``posttrain.rollout.base``'s generate / score protocols; text -> token-id conventions.
- ``runner``: ``StageRunner``, resumable and shardable (``--shard i/N``) over JSONL / Parquet / HF datasets.
- ``io``: record sources and atomic writes.
- ``embed`` / ``retrieval`` / ``dedup``: sentence-transformers (offline MiniLM), FAISS / BM25, MinHash LSH.
- ``corpus``: the built-in synthetic corpus with planted cross-document facts, and the corpus-LM warm start.
"""
