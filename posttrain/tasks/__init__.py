"""Verifiable tasks (built-in and from JSONL / Hugging Face datasets) with their rewards."""
