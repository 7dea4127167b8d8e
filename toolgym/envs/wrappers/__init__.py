"""Budgets and seeded fault injection as step hooks, and as Gymnasium wrappers that install them."""

from toolgym.envs.wrappers.budget import BudgetHook, BudgetWrapper
from toolgym.envs.wrappers.faults import FaultHook, FaultWrapper

__all__ = ["BudgetHook", "BudgetWrapper", "FaultHook", "FaultWrapper"]
