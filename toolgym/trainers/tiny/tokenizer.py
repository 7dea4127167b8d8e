"""A char-level tokenizer (one token per character, every digit its own token) with chat markers."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

from toolgym.trainers.rollouts.format import ChatFormat

PAD, UNK, EOS = "<|pad|>", "<|unk|>", "<|eos|>"
USER, ASSISTANT, TOOL = "<|user|>", "<|assistant|>", "<|tool|>"
CONTROL_TOKENS = (PAD, UNK, EOS, USER, ASSISTANT, TOOL)
# Markup the model writes or reads often: one token each keeps episodes short.
MARKUP_TOKENS = (
    "<tool_call>",
    "</tool_call>",
    "<answer>",
    "</answer>",
    "<tool_response>",
    "</tool_response>",
    '{"name": "calculator", "arguments": {"expression": "',
    '"}}',
)
CHARACTERS = "".join(ch for ch in string.printable if ch not in "\t\r\x0b\x0c")

MARKER = "toolgym_char_level"
TINY_FORMAT = ChatFormat(user=USER, assistant=ASSISTANT, tool=TOOL, end_of_turn=EOS)


def build_tokenizer() -> Any:
    """A `PreTrainedTokenizerFast` over single characters plus the control and markup tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(CONTROL_TOKENS)}
    for ch in CHARACTERS:
        vocab.setdefault(ch, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, unk_token=UNK, eos_token=EOS, clean_up_tokenization_spaces=False
    )
    tokenizer.add_special_tokens({"additional_special_tokens": [USER, ASSISTANT, TOOL]})
    tokenizer.add_tokens(list(MARKUP_TOKENS))
    tokenizer.init_kwargs[MARKER] = True  # saved in tokenizer_config.json: see `load_tokenizer`
    return tokenizer


def load_tokenizer(path: str | Path) -> Any:
    """Load a tokenizer folder; the char-level one is loaded as-is (AutoTokenizer would swap in Qwen2's)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    config = Path(path) / "tokenizer_config.json"
    if config.exists() and json.loads(config.read_text()).get(MARKER):
        return PreTrainedTokenizerFast.from_pretrained(str(path))
    return AutoTokenizer.from_pretrained(str(path))
