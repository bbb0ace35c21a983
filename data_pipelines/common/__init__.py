"""Shared backbone of the data pipelines.

- ``backends``: ``HFBackend`` / ``VLLMBackend`` / ``OpenAIHTTPBackend`` behind one generate/score interface.
- ``runner``: ``StageRunner``, resumable and shardable (``--shard i/N``) over JSONL / Parquet / HF datasets.
- ``io``: record sources and atomic writes.
- ``embed`` / ``retrieval`` / ``dedup``: sentence-transformers (offline MiniLM), FAISS / BM25, MinHash LSH.
- ``corpus``: the built-in synthetic corpus with planted cross-document facts, and the corpus-LM warm start.
"""
