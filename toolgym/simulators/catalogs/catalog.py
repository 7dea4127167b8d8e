"""`Catalog`: canonical tool specs, plus the real implementations some sources also provide."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from toolgym.schemas import ToolResult, ToolSpec

JsonDict = dict[str, Any]
Implementation = Callable[[JsonDict], ToolResult]


@dataclass
class Catalog:
    """An ordered set of tool specs with unique names.

    `implementations` maps a tool name to a callable that really runs it (a Python `@tool`
    function or an MCP server's `tools/call`); simulated tools have none.
    """

    specs: list[ToolSpec]
    implementations: dict[str, Implementation] = field(default_factory=dict)
    source: str = ""
    closers: list[Callable[[], None]] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for spec in self.specs:
            if spec.name in seen:
                raise ValueError(f"duplicate tool name {spec.name!r} in catalog {self.source or '<memory>'}")
            seen.add(spec.name)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)

    def __contains__(self, name: object) -> bool:
        return any(spec.name == name for spec in self.specs)

    @property
    def names(self) -> list[str]:
        """Tool names in catalog order."""
        return [spec.name for spec in self.specs]

    def get(self, name: str) -> ToolSpec:
        """The spec named `name`; `KeyError` with the available names otherwise."""
        for spec in self.specs:
            if spec.name == name:
                return spec
        raise KeyError(f"no tool {name!r} in catalog; available: {', '.join(self.names)}")

    def close(self) -> None:
        """Release what the source holds open (an MCP server connection); idempotent."""
        for closer in self.closers:
            closer()
        self.closers.clear()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def to_openai(self) -> list[JsonDict]:
        """Every spec as an OpenAI chat-completions tool definition."""
        from toolgym.simulators.catalogs.formats import spec_to_openai

        return [spec_to_openai(spec) for spec in self.specs]

    def to_mcp(self) -> list[JsonDict]:
        """Every spec as an MCP `Tool` object (`tools/list` form)."""
        from toolgym.simulators.catalogs.formats import spec_to_mcp

        return [spec_to_mcp(spec) for spec in self.specs]

    def to_json(self) -> list[JsonDict]:
        """Every spec in toolgym's canonical JSON form (loadable with `load_catalog`)."""
        return [spec.model_dump(mode="json") for spec in self.specs]
