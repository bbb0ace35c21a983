"""Rollout engines: one generation core per backend behind the RolloutEngine protocol."""
