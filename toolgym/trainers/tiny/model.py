"""Build, save and load the tiny random-init Qwen2 policy (hidden 128, 2 layers, 4 heads, MLP 512)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolgym.trainers._deps import require


def build_tiny_model(
    tokenizer: Any, *, hidden: int = 128, layers: int = 2, heads: int = 4, mlp: int = 512, seed: int = 0
) -> Any:
    """A random-init `Qwen2ForCausalLM` sized for the tokenizer (about 0.5M parameters)."""
    torch = require("torch")
    transformers = require("transformers")
    config = transformers.Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=mlp,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    return transformers.Qwen2ForCausalLM(config)


def save_tiny(model: Any, tokenizer: Any, path: str | Path) -> Path:
    """Save model and tokenizer with `save_pretrained` into one folder."""
    path = Path(path)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def load_tiny(path: str | Path) -> tuple[Any, Any]:
    """Load a folder written by `save_tiny` (offline: `from_pretrained` on a local path)."""
    transformers = require("transformers")
    from toolgym.trainers.tiny.tokenizer import load_tokenizer

    model = transformers.AutoModelForCausalLM.from_pretrained(str(path))
    tokenizer = load_tokenizer(path)
    return model, tokenizer
