"""World environments: the WorldEnv base and its domains (Retail-v0, Clinic-v0)."""

from toolgym.envs.worlds.base import Domain, WorldEnv, gold_milestones, replay_gold, tool_call

__all__ = ["Domain", "WorldEnv", "gold_milestones", "replay_gold", "tool_call"]
