"""The `@tool` decorator: typed Python functions become validated, schema-described tools."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any, cast, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from toolgym.schemas import ErrorKind, ToolAnnotations, ToolResult, ToolSpec

JsonDict = dict[str, Any]
_SECTION = re.compile(r"^\s*(Args|Arguments|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


class ToolError(Exception):
    """Raised by a tool to report an expected failure; becomes an error result, not a crash."""

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.EXECUTION) -> None:
        super().__init__(message)
        self.kind = kind


def parse_google_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and its per-argument descriptions."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
        elif section is None:
            summary.append(line)
        elif section in ("Args", "Arguments"):
            current = _add_arg_line(args, line, current)
    return "\n".join(summary).strip(), args


def _add_arg_line(args: dict[str, str], line: str, current: str | None) -> str | None:
    match = _ARG_LINE.match(line)
    indent = len(line) - len(line.lstrip())
    if match and (current is None or indent <= 4):
        name = match.group(1).lstrip("*")
        args[name] = match.group(3).strip()
        return name
    if current is not None and line.strip():
        args[current] = f"{args[current]} {line.strip()}".strip()
    return current


def _clean_schema(schema: Any) -> Any:
    """Drop pydantic's cosmetic `title` keys so the schema reads like a hand-written one."""
    if isinstance(schema, dict):
        return {k: _clean_schema(v) for k, v in schema.items() if k != "title" or not isinstance(v, str)}
    if isinstance(schema, list):
        return [_clean_schema(item) for item in schema]
    return schema


class Tool:
    """A callable tool: its spec, the function behind it and a compiled argument validator."""

    def __init__(
        self,
        fn: Callable[..., Any],
        spec: ToolSpec,
        arguments_model: type[BaseModel],
        bound: JsonDict | None = None,
    ) -> None:
        self.fn = fn
        self.spec = spec
        self.name = spec.name
        self.arguments_model = arguments_model
        self._validate = arguments_model.__pydantic_validator__.validate_python
        self._bound = bound or {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **self._bound, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def bind(self, **injected: Any) -> Tool:
        """Return a copy with injected arguments (e.g. the episode's world) filled in."""
        return Tool(self.fn, self.spec, self.arguments_model, {**self._bound, **injected})

    def with_spec(self, spec: ToolSpec) -> Tool:
        """Return a copy that presents another spec (a renamed or re-described tool)."""
        return Tool(self.fn, spec, self.arguments_model, self._bound)

    def validate(self, arguments: Any) -> JsonDict:
        """Validate arguments against the input schema; raise `ValidationError` when they do not fit."""
        return dict(self._validate(arguments).__dict__)

    def invoke(self, arguments: Any) -> ToolResult:
        """Validate, then run; every failure becomes an error result, never an exception."""
        content, error_kind, error_message = self.execute(arguments)
        if error_kind is not None:
            return ToolResult.failure(error_kind, error_message or "")
        annotations = self.spec.annotations
        return ToolResult(ok=True, content=content, cost=annotations.price, latency=annotations.latency)

    def execute(self, arguments: Any) -> tuple[Any, ErrorKind | None, str | None]:
        """`invoke` without building a `ToolResult`: (content, error kind, error message), never raising."""
        try:
            kwargs = self._validate(arguments).__dict__
        except ValidationError as error:
            return None, ErrorKind.INVALID_ARGUMENTS, describe_validation_error(error)
        try:
            return self.fn(**self._bound, **kwargs), None, None
        except ToolError as error:
            return None, error.kind, str(error)
        except Exception as error:  # noqa: BLE001 - a tool's crash is the agent's observation
            return None, ErrorKind.EXECUTION, f"{type(error).__name__}: {error}"


def describe_validation_error(error: ValidationError) -> str:
    """A short, agent-readable account of what was wrong with the arguments."""
    parts = []
    for item in error.errors(include_url=False):
        where = ".".join(str(p) for p in item["loc"]) or "arguments"
        parts.append(f"{where}: {item['msg']}")
    return "invalid arguments: " + "; ".join(parts)


def _arguments_model(fn: Callable[..., Any], name: str, injected: set[str], docs: dict[str, str]) -> type[BaseModel]:
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.name in injected or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, Field(default, description=docs.get(param.name)))
    config = ConfigDict(extra="forbid", strict=True)
    model_name = "".join(part.title() for part in re.split(r"\W+", name)) + "Arguments"
    return create_model(model_name, __config__=config, **fields)


def _output_schema(fn: Callable[..., Any]) -> JsonDict | None:
    hint = get_type_hints(fn).get("return")
    if hint is None or hint is Any or hint is type(None):
        return None
    try:
        return cast(JsonDict, _clean_schema(TypeAdapter(hint).json_schema()))
    except Exception:  # noqa: BLE001 - an unschemable return type simply has no output schema
        return None


def make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    inject: Iterable[str] = (),
    annotations: ToolAnnotations | None = None,
) -> Tool:
    """Build a `Tool` from a typed function and its Google-style docstring."""
    tool_name = name or fn.__name__
    summary, docs = parse_google_docstring(fn.__doc__)
    model = _arguments_model(fn, tool_name, set(inject), docs)
    input_schema = _clean_schema(model.model_json_schema())
    input_schema.pop("additionalProperties", None)
    input_schema["additionalProperties"] = False
    spec = ToolSpec(
        name=tool_name,
        description=description if description is not None else summary,
        input_schema=input_schema,
        output_schema=_output_schema(fn),
        annotations=annotations or ToolAnnotations(),
    )
    return Tool(fn, spec, model)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    inject: Iterable[str] = (),
    read_only: bool = True,
    writes: Iterable[str] = (),
    reads: Iterable[str] = (),
    price: float = 0.0,
    latency: float = 0.0,
    tags: Iterable[str] = (),
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    inject: Iterable[str] = (),
    read_only: bool = True,
    writes: Iterable[str] = (),
    reads: Iterable[str] = (),
    price: float = 0.0,
    latency: float = 0.0,
    tags: Iterable[str] = (),
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorate a typed function so that it becomes a `Tool`.

    Usable bare (`@tool`) or with options (`@tool(read_only=False, writes=["events"], price=0.01)`).
    Parameters named in `inject` are hidden from the schema and supplied later with `Tool.bind`.
    """
    annotations = ToolAnnotations(
        read_only=read_only and not list(writes),
        writes=list(writes),
        reads=list(reads),
        price=price,
        latency=latency,
        tags=list(tags),
    )

    def decorate(function: Callable[..., Any]) -> Tool:
        return make_tool(function, name=name, description=description, inject=inject, annotations=annotations)

    return decorate(fn) if fn is not None else decorate
