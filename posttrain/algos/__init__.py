"""Algorithms: pure math in core.py, one file per algorithm, all registered by name in ALGORITHMS."""
