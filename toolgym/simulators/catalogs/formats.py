"""Conversions between canonical `ToolSpec`s and OpenAI, MCP and ToolBench/RapidAPI tool JSON."""

from __future__ import annotations

import re
from typing import Any

from toolgym.schemas import ToolAnnotations, ToolSpec

JsonDict = dict[str, Any]
MCP_META_KEY = "toolgym/annotations"
STRICT_TAG = "openai:strict"
WEAK_SCHEMA_COMMENT = "weak schema inferred from a ToolBench template_response"
_BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "int": "integer", "bool": "boolean"}
_OUTPUT_KEYS = ("output_schema", "outputSchema", "response", "returns")


# ---------------------------------------------------------------- OpenAI
def normalize_schema(schema: Any) -> Any:
    """Map BFCL-style types (`dict`, `float`, `tuple`, `any`) onto JSON Schema, recursively."""
    if isinstance(schema, list):
        return [normalize_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: normalize_schema(value) for key, value in schema.items()}
    kind = out.get("type")
    if kind == "any":
        out.pop("type")
    elif isinstance(kind, str) and kind in _BFCL_TYPES:
        out["type"] = _BFCL_TYPES[kind]
    return out


def spec_from_openai(definition: JsonDict) -> ToolSpec:
    """A spec from an OpenAI tool (with or without the `function` wrapper); extra keys
    `output_schema`/`response`/`returns` become the output schema, `strict` a tag."""
    function = definition.get("function", definition)
    if "name" not in function:
        raise ValueError(f"OpenAI tool definition without a name: {str(definition)[:200]}")
    output = next((function[key] for key in _OUTPUT_KEYS if isinstance(function.get(key), dict)), None)
    tags = [STRICT_TAG] if function.get("strict") else []
    return ToolSpec(
        name=function["name"],
        description=function.get("description", ""),
        input_schema=normalize_schema(function.get("parameters") or {"type": "object", "properties": {}}),
        output_schema=normalize_schema(output) if output is not None else None,
        annotations=ToolAnnotations(tags=tags),
    )


def spec_to_openai(spec: ToolSpec, *, output_schema: bool = False) -> JsonDict:
    """The OpenAI tool definition; `output_schema=True` adds the (non-standard) output schema."""
    definition = spec.to_openai()
    if STRICT_TAG in spec.annotations.tags:
        definition["function"]["strict"] = True
    if output_schema and spec.output_schema is not None:
        definition["function"]["output_schema"] = spec.output_schema
    return definition


# ---------------------------------------------------------------- MCP
def spec_to_mcp(spec: ToolSpec) -> JsonDict:
    """The MCP `Tool` object; toolgym's own annotations travel losslessly in `_meta`."""
    tool: JsonDict = {"name": spec.name, "description": spec.description, "inputSchema": spec.input_schema}
    if spec.output_schema is not None:
        tool["outputSchema"] = spec.output_schema
    tool["annotations"] = {
        "readOnlyHint": spec.annotations.read_only,
        "destructiveHint": any(tag == "effect:delete" for tag in spec.annotations.tags),
    }
    tool["_meta"] = {MCP_META_KEY: spec.annotations.model_dump(mode="json")}
    return tool


def spec_from_mcp(tool: JsonDict) -> ToolSpec:
    """A spec from an MCP `Tool` object (a dict in wire form, camelCase keys)."""
    meta = tool.get("_meta") or tool.get("meta") or {}
    hints = tool.get("annotations") or {}
    if isinstance(meta, dict) and MCP_META_KEY in meta:
        annotations = ToolAnnotations.model_validate(meta[MCP_META_KEY])
    else:
        annotations = ToolAnnotations(read_only=bool(hints.get("readOnlyHint", False)))
    return ToolSpec(
        name=tool["name"],
        description=tool.get("description") or "",
        input_schema=tool.get("inputSchema") or {"type": "object", "properties": {}},
        output_schema=tool.get("outputSchema"),
        annotations=annotations,
    )


# ---------------------------------------------------------------- ToolBench / RapidAPI
_TOOLBENCH_TYPES = {
    "STRING": "string",
    "NUMBER": "number",
    "INTEGER": "integer",
    "BOOLEAN": "boolean",
    "ARRAY": "array",
    "OBJECT": "object",
}
_TYPE_WORDS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "NoneType": "null"}


def standardize(name: str) -> str:
    """ToolBench's name normalisation: lower case, `_` for anything not alphanumeric."""
    text = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    return f"get_{text}" if text[:1].isdigit() else text or "tool"


def weak_schema(example: Any) -> JsonDict:
    """A permissive JSON Schema inferred from a ToolBench `template_response` example."""
    if isinstance(example, dict):
        return {"type": "object", "properties": {str(k): weak_schema(v) for k, v in example.items()}}
    if isinstance(example, list):
        return {"type": "array", "items": weak_schema(example[0])} if example else {"type": "array"}
    if isinstance(example, str) and example in _TYPE_WORDS:
        return {"type": _TYPE_WORDS[example]}
    if isinstance(example, bool):
        return {"type": "boolean"}
    if isinstance(example, int):
        return {"type": "integer"}
    if isinstance(example, float):
        return {"type": "number"}
    return {"type": "string"} if isinstance(example, str) else {}


def _toolbench_param(param: JsonDict) -> JsonDict:
    schema: JsonDict = {"type": _TOOLBENCH_TYPES.get(str(param.get("type", "STRING")).upper(), "string")}
    if param.get("description"):
        schema["description"] = str(param["description"])
    default = param.get("default")
    if default not in (None, ""):
        schema["default"] = default
        schema["examples"] = [default]
    return schema


def spec_from_toolbench_api(api: JsonDict, tool_name: str = "", category: str = "") -> ToolSpec:
    """One ToolBench API entry (from a tool file's or a query's `api_list`) as a spec."""
    tool_name = str(api.get("tool_name") or tool_name)
    api_name = str(api.get("api_name") or api.get("name") or "")
    if not api_name:
        raise ValueError(f"ToolBench API entry without a name: {str(api)[:200]}")
    required = [p for p in api.get("required_parameters") or [] if p.get("name")]
    optional = [p for p in api.get("optional_parameters") or [] if p.get("name")]
    properties = {str(p["name"]): _toolbench_param(p) for p in [*required, *optional]}
    input_schema: JsonDict = {"type": "object", "properties": properties, "required": [p["name"] for p in required]}
    output = None
    template = api.get("template_response")
    if template not in (None, "", {}):
        output = {"$comment": WEAK_SCHEMA_COMMENT, **weak_schema(template)}
    category = str(api.get("category_name") or category)
    method = str(api.get("method") or "GET").upper()
    name = f"{standardize(api_name)}_for_{standardize(tool_name)}"[:64] if tool_name else standardize(api_name)
    description = str(api.get("api_description") or api.get("description") or "")
    return ToolSpec(
        name=name,
        description=description,
        input_schema=input_schema,
        output_schema=output,
        annotations=ToolAnnotations(read_only=method == "GET", tags=["toolbench", *([category] if category else [])]),
    )


def specs_from_toolbench(document: JsonDict) -> list[ToolSpec]:
    """Specs from a ToolBench tool file (`tool_name` + `api_list`) or a query (`api_list` of APIs)."""
    tool_name = str(document.get("tool_name") or document.get("standardized_name") or document.get("name") or "")
    category = str(document.get("category_name") or "")
    return [spec_from_toolbench_api(api, tool_name, category) for api in document.get("api_list", [])]
