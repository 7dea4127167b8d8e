"""Rollouts: multi-turn episodes as token sequences (model tokens trainable, env tokens masked)."""
