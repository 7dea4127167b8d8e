"""Generation engines behind one token-in/token-out interface: transformers (CPU/GPU) and vLLM (GPU)."""

from toolgym.trainers.engines.base import Engine, GenOutput, GenRequest, SamplingParams, make_engine

__all__ = ["Engine", "GenOutput", "GenRequest", "SamplingParams", "make_engine"]
