"""docs/methods.md is generated from the registry and must be up to date."""

from __future__ import annotations

import re

from toolgym.trainers.methods import REGISTRY
from toolgym.trainers.methods.table import DOC, current, evidence_labels, find_tests, plugins


def without_tests_column(text: str) -> list[str]:
    """The document with the last cell (tests) of every table row removed."""
    return [line.rsplit(" | ", 1)[0] if line.startswith("| `") else line for line in text.splitlines()]


def test_committed_table_is_up_to_date() -> None:
    """Everything derived from the registry must match; the tests column may lag other people's new
    test files, but every test it names must exist."""
    committed = DOC.read_text(encoding="utf-8")
    assert without_tests_column(committed) == without_tests_column(current()), (
        "docs/methods.md is stale: run `python -m toolgym.trainers.methods.table --write`"
    )
    for path in re.findall(r"tests/[\w/]+\.py", committed):
        assert (DOC.parents[1] / path).exists(), path


def test_every_tier_b_c_method_is_documented_with_assumptions_and_tests() -> None:
    text = current()
    for name in REGISTRY.names():
        preset = REGISTRY.get(name)
        assert f"| `{name}` |" in text
        if preset.tier in ("B", "C"):
            assert "ASSUMED" in preset.evidence, name  # every Tier B/C method names its assumptions
            assert find_tests(name, sorted(DOC.parents[1].glob("tests/trainers/methods/test_*.py"))), name


def test_row_helpers() -> None:
    assert evidence_labels("[CODE-3P] x; [ABS] y; ASSUMED z; [CODE-3P] w") == "CODE-3P, ABS, ASSUMED"
    cell = plugins(REGISTRY.get("llds"))
    assert "reg `llds`×0.1" in cell and "adv `grpo`" in cell
    assert "strategy `axpo_resample`" in plugins(REGISTRY.get("axpo"))
