"""The README's worlds example runs and prints what it says."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_worlds_example_runs() -> None:
    section = (ROOT / "README.md").read_text().split("<!-- worlds-example -->", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.splitlines()
    assert out[0] == "Hello, I need to change where one of my orders is shipped."
    assert out[1].startswith("My email is ") and out[-1] == "1.0 True True"
