"""Packaging contracts: `import toolgym` stays light and registers the environments."""

import subprocess
import sys

HEAVY = ["torch", "ray", "vllm", "transformers", "fastapi", "uvicorn", "docker", "sqlmodel", "sqlalchemy"]


def test_import_is_light_and_registers_envs() -> None:
    code = (
        "import sys, gymnasium as gym, toolgym\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert 'toolgym/Calculator-v0' in gym.registry and 'toolgym/Calendar-v0' in gym.registry\n"
        "env = gym.make('toolgym/Calculator-v0'); env.reset(seed=0)\n"
        "heavy = [m for m in " + repr(HEAVY) + " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_console_script_lists_envs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "toolgym.cli", "envs"], check=True, capture_output=True, text=True
    ).stdout
    assert "toolgym/Calculator-v0" in out and "toolgym/Calendar-v0" in out


def test_unknown_subcommand_fails_clearly() -> None:
    proc = subprocess.run([sys.executable, "-m", "toolgym.cli", "nope"], capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_ray_is_confined_to_trainers_ray() -> None:
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "toolgym"
    offenders = []
    for path in package.rglob("*.py"):
        if path.is_relative_to(package / "trainers" / "ray"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            if any(name == "ray" or name.startswith("ray.") for name in names):
                offenders.append(f"{path.relative_to(package)}:{node.lineno}")
    assert offenders == [], f"ray imported outside toolgym/trainers/ray: {offenders}"
