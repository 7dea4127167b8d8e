"""The README's simulated-API example runs as documented."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_readme_simulated_api_example(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- simulated-example -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert block is not None, "the README lost its simulated-API example"
    out = subprocess.run(
        [sys.executable, "-c", block.group(1)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True
    )
    lines = out.stdout.splitlines()
    assert lines[:3] == ["note_1 groceries", "note 'note_9' not found", "1.0 record"], out.stdout
    assert len(lines) == 4 and lines[3]
    assert (tmp_path / "sim-cache.sqlite").stat().st_size > 0
