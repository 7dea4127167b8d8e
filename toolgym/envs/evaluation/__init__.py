"""`toolgym eval`: run a policy (oracle, random, an OpenAI-compatible model) on an env and report the metrics."""
