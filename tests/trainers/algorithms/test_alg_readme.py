"""The README's algorithm example runs as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def test_readme_algorithms_example_runs():
    text = README.read_text(encoding="utf-8")
    block = re.search(r"<!-- algorithms-example -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert block, "README lost its algorithms example"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.group(1), "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    assert "[DOCS]" in lines[0]
    assert lines[-1].startswith("1 {'losses/policy'")
