"""Generation and scoring engines, the bottom layer of the project: one protocol (``base``), one typed spec
per engine kind and one string form naming it (``spec``), one builder and cache (``build``), and the engines
themselves (hf, diffusion, vllm colocated, vllm-remote workers, the OpenAI-compatible HTTP client, fake).

Engines import shared helpers, torch and transformers (vLLM lazily), never the trainer, ``dist``, algorithms,
tasks, rewards or data pipelines: they take token ids and named tensors, not trainer state.
"""
