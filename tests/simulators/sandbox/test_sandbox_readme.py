"""The README's code-sandbox example runs as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def test_readme_sandbox_example_runs():
    text = README.read_text(encoding="utf-8")
    block = re.search(r"<!-- sandbox-example -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert block, "README lost its sandbox example"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.group(1), "README.md", "exec"), {})
    assert out.getvalue() == "42\n\n42\n\nTrue\n"
