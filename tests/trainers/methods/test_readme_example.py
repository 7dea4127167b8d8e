"""The README's rollout-strategy example runs."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def test_readme_strategies_example_runs() -> None:
    text = README.read_text(encoding="utf-8")
    code = re.search(r"<!-- strategies-example -->\n```python\n(.*?)```", text, re.S)
    assert code is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), "README-strategies", "exec"), {})  # noqa: S102 — the documented example
    printed = out.getvalue()
    assert printed.count("'tools_off'") == 2 and printed.count("'tools_on'") == 6
