"""Shared backbone of the data pipelines.

- ``backends``: ``load_backend(spec)`` -> the project's engines (HF, vLLM, OpenAI-compatible HTTP, copy-cache LM)
  behind ``posttrain.engines.base``'s generate / score protocols; text -> token-id conventions; ``model_identity``.
- ``runner``: ``StageRunner`` on Ray Data (``run_once`` / ``run_step``), content-addressed resume; ``stage``: what a
  stage is (``Process``, ``ActorStage``, ``Reject``); ``options``: the backbone flags (``--ray_address`` /
  ``--num_workers`` / ``--overwrite`` / ``--failure_retries`` / ``--stall_timeout_s``) and ``BackboneOptions``;
  ``ray_read``: the workers read the input (JSONL / Parquet / HF Arrow files, any pyarrow filesystem); ``ray_exec``:
  the one Ray start-up (``init_ray``) and the block step; ``blocks``: one block on a worker (identity check, retries
  of infrastructure failures, its part files).
- ``diversity``: diversity metrics of a question set (pairwise cosine / L2, 1-NN, k-means inertia, radius).
- ``io``: record sources and atomic writes.
- ``embed`` / ``retrieval`` / ``dedup``: sentence-transformers (offline MiniLM), FAISS / BM25, MinHash LSH.
- ``corpus``: the built-in synthetic corpus with planted cross-document facts, and the corpus-LM warm start.
"""
