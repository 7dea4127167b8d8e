"""The README's Gymnasium loop and the gym-loop example run as documented."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_gym_loop_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## A Gymnasium loop", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.splitlines()[-1] == "1.0 True"


def test_gym_loop_example_solves_every_episode() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "gym_loop.py")], check=True, capture_output=True, text=True
    )
    assert out.stdout.strip() == "solved 20/20"
