"""Test doubles built for these tests: a real OpenAI-compatible chat server and a tiny local causal LM."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Reply = tuple[int, str]  # (HTTP status, assistant content or raw body for errors)
RAW = "RAW:"  # a 200 reply starting with this is sent as the raw body (a broken completion)

BOOK = {
    "type": "object",
    "properties": {
        "book_id": {"type": "string"},
        "title": {"type": "string"},
        "author": {"type": "string"},
        "year": {"type": "integer", "minimum": 1400, "maximum": 2100},
        "shelf": {"type": "string"},
    },
    "required": ["book_id", "title", "author"],
}


def _fn(name: str, params: dict[str, Any], required: list[str], output: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": name.replace("_", " "),
            "parameters": {"type": "object", "properties": params, "required": required},
            "output_schema": output,
        },
    }


ID = {"book_id": {"type": "string"}}
FIELDS = {"title": {"type": "string"}, "author": {"type": "string"}, "year": {"type": "integer"}}
CRUD_CATALOG = [
    _fn("add_book", FIELDS, ["title", "author"], BOOK),
    _fn("get_book", ID, ["book_id"], BOOK),
    _fn("update_book", {**ID, "shelf": {"type": "string"}, "year": {"type": "integer"}}, ["book_id"], BOOK),
    _fn("remove_book", ID, ["book_id"], {"type": "object", "properties": {"removed": {"type": "boolean"}}}),
    _fn(
        "list_books",
        {"author": {"type": "string"}},
        [],
        {"type": "object", "properties": {"books": {"type": "array", "items": BOOK}, "count": {"type": "integer"}}},
    ),
]


def liar_value(schema: dict[str, Any]) -> Any:
    """A schema-valid value that contradicts any real state (wrong ids, wrong names, no items)."""
    if "enum" in schema:
        return schema["enum"][-1]
    kind = schema.get("type", "string")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {k: liar_value(s) for k, s in schema.get("properties", {}).items()}
    if kind == "array":
        return []
    if kind == "integer":
        return int(schema.get("maximum", 7))
    if kind == "number":
        return float(schema.get("maximum", 1.5))
    if kind == "boolean":
        return False
    return "LIE"


def liar_responder(body: dict[str, Any]) -> Reply:
    """Answers a simulator prompt with a valid but state-contradicting JSON value; other prompts
    (free text, e.g. a user simulator's) with a sentence that quotes the last message."""
    last = str(body["messages"][-1]["content"])
    try:
        request = json.loads(last)
    except ValueError:
        return 200, f"fake reply to: {last[:40]}"
    return 200, json.dumps(liar_value(request["output_schema"]))


class FakeOpenAI:
    """A `ThreadingHTTPServer` on 127.0.0.1 speaking `/v1/chat/completions`.

    Replies come from `script` (consumed in order) and then from `responder`. Every request body
    and its headers are kept in `requests`.
    """

    def __init__(self, responder: Callable[[dict[str, Any]], Reply] = liar_responder) -> None:
        self.responder = responder
        self.script: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                fake.headers.append(dict(self.headers))
                status, content = fake.script.pop(0) if fake.script else fake.responder(body)
                raw = status != 200 or content.startswith(RAW)
                payload = content.removeprefix(RAW) if raw else _completion(body, content)
                data = payload.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def backend(self, **options: Any) -> dict[str, Any]:
        return {"kind": "openai", "base_url": self.base_url, "model": "fake-sim", **options}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _completion(body: dict[str, Any], content: str) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        }
    )


def _char_tokenizer() -> Any:
    """A character-level fast tokenizer built here (no download): printable ASCII plus 3 specials."""
    import string

    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<unk>": 1, "<eos>": 2}
    for ch in string.printable:
        vocab.setdefault(ch, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")


def _llama_config(vocab_size: int, hidden: int) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        pad_token_id=0,
        eos_token_id=2,
        bos_token_id=None,
        tie_word_embeddings=False,
    )


def build_tiny_lm(path: Path) -> Path:
    """A random-init 2-layer Llama with a char-level tokenizer made here, saved with `save_pretrained`."""
    import torch
    from transformers import LlamaForCausalLM

    tokenizer = _char_tokenizer()
    torch.manual_seed(0)
    LlamaForCausalLM(_llama_config(len(tokenizer), 32)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def build_bigram_lm(path: Path, successors: dict[str, str]) -> Path:
    """A 2-layer Llama whose weights are set by hand so that greedy decoding follows `successors`
    (next character given the last one; anything else is followed by end-of-sequence).

    The layers' output projections are zero, so the residual stream is the token embedding: a
    one-hot vector. The LM head maps that one-hot onto the successor's logit. With the prompt
    ending in "assistant: ", `{" ": "{", "{": "}"}` makes the model answer exactly `{}`.
    """
    import torch
    from transformers import LlamaForCausalLM

    tokenizer = _char_tokenizer()
    vocab = tokenizer.get_vocab()
    hidden = len(vocab) + (len(vocab) % 2)
    model = LlamaForCausalLM(_llama_config(len(vocab), hidden))
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight.copy_(torch.eye(len(vocab), hidden))
        head = torch.zeros(len(vocab), hidden)
        for token in range(len(vocab)):
            head[2, token] = 1.0  # default: end of sequence
        for char, nxt in successors.items():
            head[2, vocab[char]] = 0.0
            head[vocab[nxt], vocab[char]] = 1.0
        model.lm_head.weight.copy_(head * 10.0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
