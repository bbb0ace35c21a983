"""Reward server: FastAPI app, batching, backends, CLI."""
