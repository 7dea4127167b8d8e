"""Fixtures: a real local OpenAI-compatible server and a tiny transformers model built by the tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from simfakes import FakeOpenAI, build_bigram_lm, build_tiny_lm  # noqa: E402


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    yield server
    server.close()


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_lm(tmp_path_factory.mktemp("tiny-lm"))


@pytest.fixture(scope="session")
def braces_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama programmed (weights set by hand) to answer every prompt with exactly `{}`."""
    return build_bigram_lm(tmp_path_factory.mktemp("braces-lm"), {" ": "{", "{": "}"})
