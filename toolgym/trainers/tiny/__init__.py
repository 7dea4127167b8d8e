"""A tiny model built locally: char-level tokenizer, random-init Qwen2, SFT warm start on oracle trajectories."""

from toolgym.trainers.tiny.model import build_tiny_model, load_tiny, save_tiny
from toolgym.trainers.tiny.tokenizer import TINY_FORMAT, build_tokenizer, load_tokenizer

__all__ = ["TINY_FORMAT", "build_tiny_model", "build_tokenizer", "load_tiny", "load_tokenizer", "save_tiny"]
