"""LLM-simulated APIs: backends, the validate → state → generate → audit pipeline, cache and audit."""

from toolgym.simulators.simulated.audit import ToolAudit, audit_catalog
from toolgym.simulators.simulated.backends import (
    Backend,
    BackendError,
    OfflineBackend,
    OpenAIBackend,
    TransformersBackend,
    make_backend,
)
from toolgym.simulators.simulated.cache import CACHE_MODES, ReplayMiss, SimCache, cache_key
from toolgym.simulators.simulated.simulator import PROMPT_VERSION, SimulatedTool, Simulator, parse_json_reply
from toolgym.simulators.simulated.state import EffectPlan, StateStore, infer_plans
from toolgym.simulators.simulated.text import generate_text
from toolgym.simulators.simulated.values import generate_value

__all__ = [
    "CACHE_MODES",
    "PROMPT_VERSION",
    "Backend",
    "BackendError",
    "EffectPlan",
    "OfflineBackend",
    "OpenAIBackend",
    "ReplayMiss",
    "SimCache",
    "SimulatedTool",
    "Simulator",
    "StateStore",
    "ToolAudit",
    "TransformersBackend",
    "audit_catalog",
    "cache_key",
    "generate_text",
    "generate_value",
    "infer_plans",
    "make_backend",
    "parse_json_reply",
]
