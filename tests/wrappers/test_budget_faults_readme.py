"""The README's budget and faults example runs as documented."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).parent.parent.parent / "README.md"


def test_readme_budget_and_faults_example_runs() -> None:
    text = README.read_text()
    block = re.search(r"<!-- budget-faults-example -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert block is not None, "the README lost its budget/faults example"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.group(1), "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[budget] calls 6 of 6 left; cost $1 of $1 left")
    assert lines[2].startswith("{'limit': 6.0, 'used': 1.0, 'remaining': 5.0}")
