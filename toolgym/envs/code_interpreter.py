"""`toolgym/CodeInterpreter-v0`: math and data questions answered with a sandboxed `python` tool."""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

import numpy as np

from toolgym.envs.code_tasks import make_code_task
from toolgym.envs.core import ToolEnv
from toolgym.schemas import Task
from toolgym.simulators import Tool, ToolError, tool
from toolgym.simulators.sandbox import ExecResult, InterpreterSession, SandboxLimits, get_backend

JsonDict = dict[str, Any]
DEFAULT_LIMITS: JsonDict = {"wall_time": 10.0, "cpu_time": 10.0, "memory_bytes": 512 * 1024 * 1024}


def answers_match(given: str, expected: str) -> bool:
    """Exact check: equal text after trimming, or exactly equal decimal numbers ("12.50" == "12.5")."""
    given, expected = given.strip(), expected.strip()
    if given == expected:
        return True
    try:
        return Decimal(given) == Decimal(expected)
    except (InvalidOperation, ValueError):
        return False


def format_result(result: ExecResult) -> str:
    """What the agent sees of one execution: stdout, then stderr, then why it stopped (if it did)."""
    parts = [result.stdout.rstrip("\n")]
    if result.stderr.strip():
        parts.append(f"[stderr]\n{result.stderr.rstrip()}")
    if result.timed_out:
        parts.append("[timed out: the call hit its time limit]")
    elif result.killed_reason:
        parts.append(f"[interpreter restarted: {result.killed_reason}; variables were lost]")
    if result.truncated:
        parts.append("[output truncated]")
    return "\n".join(p for p in parts if p)


def _file_setup(files: dict[str, str]) -> str:
    return f"import json as _j, pathlib as _p\nfor _n, _t in _j.loads({json.dumps(files)!r}).items():\n    _p.Path(_n).write_text(_t)\ndel _j, _p, _n, _t"


class Executor(Protocol):
    """Whatever runs the code of the `python` tool (the env, bound at each episode)."""

    def execute(self, code: str) -> ExecResult: ...


@tool(inject=["env"])
def python(env: Executor, code: str) -> str:
    """Run Python code in a sandboxed interpreter and return what it printed.

    Variables, imports and files persist between calls of one episode; the last expression's
    value is echoed. There is no network.

    Args:
        code: Python source to execute.
    """
    result = env.execute(code)
    text = format_result(result)
    if not result.ok:
        raise ToolError(text or f"exit code {result.exit_code}")
    return text


class CodeInterpreterEnv(ToolEnv):
    """Exact-answer math and data questions, solved by writing Python that runs in a sandbox.

    ## Description
    Tasks `code-<n>` (any n ≥ 0) of eight kinds: prime sums, Fibonacci numbers modulo m, Collatz
    lengths, digit sums of powers, inclusion–exclusion counts, and three questions over a CSV file
    placed in the interpreter's working directory. The `python` tool runs in
    `toolgym.simulators.sandbox` (bubblewrap where it works; no network, read-only system,
    resource limits) and, by default, keeps one interpreter per episode.

    ## Action Space
    Text: tool calls (Hermes `<tool_call>` blocks or OpenAI message JSON) or `<answer>…</answer>`.

    ## Observation Space
    Text: the question at reset, then `<tool_response>` blocks with the printed output.

    ## Rewards
    `success`: 1.0 when the answer equals the expected one exactly (trimmed text, or the same
    decimal number), else 0.0; `invalid_call/*`: −0.05 per malformed or unknown call.

    ## Starting State
    A task drawn from the seed, or `options={"task_id": "code-<n>"}`.

    ## Episode End
    Terminates on an answer; truncates after `max_turns` steps.

    ## Arguments
    `sandbox` ("auto", "bwrap", "docker", "subprocess"), `limits` (SandboxLimits fields),
    `persistent` (default True: one interpreter per episode), `max_turns` (8), `budget`,
    `faults`, `render_mode`.

    ## Version History
    * v0: initial version.
    """

    def __init__(
        self,
        *,
        sandbox: str = "auto",
        limits: JsonDict | None = None,
        persistent: bool = True,
        max_turns: int = 8,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_turns=max_turns, **kwargs)
        self.limits = SandboxLimits(**{**DEFAULT_LIMITS, **(limits or {})})
        self.sandbox = get_backend(sandbox, self.limits)
        self.persistent = persistent
        self.cells: list[str] = []
        self._session: InterpreterSession | None = None

    # ----------------------------------------------------------------- episode
    def _make_task(self, rng: np.random.Generator, task_id: str | None) -> Task:
        if task_id is None:
            index = int(rng.integers(2**31))
        else:
            prefix, _, number = str(task_id).partition("-")
            if prefix != "code" or not number.isdigit():
                raise ValueError(f"CodeInterpreter task ids look like 'code-<non-negative int>', got {task_id!r}")
            index = int(number)
        self._close_session()
        self.cells = []
        return make_code_task(index)

    def _system_prompt(self) -> str:
        return f"{super()._system_prompt()} The python tool runs your code in a sandbox without network access."

    def _episode_tools(self) -> list[Tool]:
        return [python.bind(env=self)]

    def _score(self, answer: str | None) -> dict[str, float]:
        assert self.task is not None and self.task.answer is not None
        return {"success": float(answer is not None and answers_match(answer, self.task.answer))}

    # ----------------------------------------------------------------- execution
    def execute(self, code: str) -> ExecResult:
        """Run one cell: in the episode's interpreter (persistent) or a fresh sandbox each time."""
        if not self.persistent:
            return self.sandbox.run(f"{self._setup_code()}\n{code}")
        result = self._interpreter().run(code)
        self.cells.append(code)
        return result

    def _setup_code(self) -> str:
        files = self.task.metadata.get("files", {}) if self.task is not None else {}
        return _file_setup(files) if files else ""

    def _interpreter(self) -> InterpreterSession:
        if self._session is None:
            self._session = self.sandbox.open_session()
            if self._setup_code():
                self._session.run(self._setup_code())
        return self._session

    def _close_session(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def close(self) -> None:
        """Stop the episode's interpreter."""
        self._close_session()
        super().close()

    # ----------------------------------------------------------------- snapshot
    def _world_state(self) -> Any:
        """The cells run so far: a fork replays them in a fresh interpreter."""
        return {"cells": list(self.cells)}

    def _load_world_state(self, state: Any) -> None:
        self._close_session()
        self.cells = []
        if self.persistent and state["cells"]:
            session = self._interpreter()
            for cell in state["cells"]:
                session.run(cell)
            self.cells = list(state["cells"])
