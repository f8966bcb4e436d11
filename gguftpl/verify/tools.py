"""Tool lists as a host hands them to a chat template: read from files or converted from MCP servers.

Every source ends as a list of :class:`ToolSpec`, the OpenAI ``tools`` entry a runtime puts in the
request (``{"type": "function", "function": {name, description, parameters}}``) plus where the tool came
from, so a call the model makes can be dispatched back to the MCP server that owns it.

Accepted tool files (detected from the content, never from the file name):

- an OpenAI ``tools`` list: ``[{"type": "function", "function": {...}}, ...]``
- a single function, with or without the ``{"type": "function", "function": ...}`` wrapper
- an MCP ``tools/list`` result: ``{"tools": [{name, description, inputSchema}, ...]}``, a bare list of
  such tools, or the whole JSON-RPC response (``{"jsonrpc": ..., "result": {"tools": [...]}}``)
- a chat request body with a ``tools`` key (``{"messages": ..., "tools": [...]}``)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gguftpl import limits
from gguftpl.errors import ToolSourceError

# OpenAI (and most hosts) accept function names matching this; hosts replace anything else.
_NAME_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NAME_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")

# Default namespacing when tools from several MCP servers are merged, as Goose does: `<server>__<tool>`.
AUTO_PREFIX = "auto"
DEFAULT_MULTI_PREFIX = "{server}__"


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the model sees it, and where a call to it must go."""

    name: str
    """The function name in the request (after any ``server__`` namespacing)."""
    description: str
    parameters: dict[str, Any]
    """JSON Schema of the arguments (MCP ``inputSchema``, OpenAI ``parameters``)."""
    source: str
    """File path, or ``mcp:<server-name>``."""
    server: str | None = None
    """MCP server name when the tool came from a server; None for tool files."""
    remote_name: str | None = None
    """The tool's own name on its MCP server (``tools/call`` wants this, not the namespaced one)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else the source carried (``annotations``, ``strict``, ...), kept for the record."""

    def to_openai(self) -> dict[str, Any]:
        fn: dict[str, Any] = {"name": self.name, "description": self.description, "parameters": self.parameters}
        return {"type": "function", "function": fn}


def openai_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    return [t.to_openai() for t in tools]


# ---------------------------------------------------------------------------------------------- files


def load_tools_file(path: str | Path) -> list[ToolSpec]:
    """Read a tools file in any accepted shape; raise :class:`ToolSourceError` with one line otherwise."""
    from gguftpl.safeio import read_json_file

    p = Path(path)
    # a FIFO, a device, a 10 GB file, JSON nested past the parser's recursion or lone surrogates: one line each
    data = read_json_file(p, what="tools file", error=ToolSourceError)
    return tools_from_json(data, source=str(p))


def tools_from_json(data: Any, source: str = "<tools>") -> list[ToolSpec]:
    """Turn decoded JSON of any accepted shape into tools; the shape is detected from the content."""
    from gguftpl.safeio import check_encodable

    check_encodable(data, what=source, error=ToolSourceError)  # MCP results too, not only files
    items = _tool_items(data, source)
    if not items:
        raise ToolSourceError(f"{source}: the tool list is empty")
    if len(items) > limits.MAX_TOOLS:
        raise ToolSourceError(
            f"{source}: {len(items):,} tools, more than the {limits.MAX_TOOLS:,} one source may offer (hosts cap a "
            "request far lower: OpenAI at 128)"
        )
    tools = [_one_tool(item, f"{source}: tool #{i}", source) for i, item in enumerate(items)]
    _check_unique(tools, source)
    return tools


def _tool_items(data: Any, source: str) -> list[Any]:
    if isinstance(data, list):
        return data
    if not isinstance(data, dict):
        raise ToolSourceError(
            f"{source}: expected a tools list, a function object or an MCP tools/list result, "
            f"got a JSON {_json_kind(data)}"
        )
    # JSON-RPC response around an MCP tools/list result
    if "tools" not in data and isinstance(data.get("result"), dict) and "tools" in data["result"]:
        data = data["result"]
    if "tools" in data:
        if not isinstance(data["tools"], list):
            raise ToolSourceError(f"{source}: 'tools' must be a list, got a JSON {_json_kind(data['tools'])}")
        return list(data["tools"])
    if _looks_like_tool(data):
        return [data]
    keys = ", ".join(sorted(map(str, data))[:6]) or "none"
    raise ToolSourceError(
        f"{source}: not a tools list, function object or MCP tools/list result (top-level keys: {keys})"
    )


def _looks_like_tool(d: Mapping[str, Any]) -> bool:
    return (d.get("type") == "function" and "function" in d) or "name" in d


def _one_tool(item: Any, where: str, source: str) -> ToolSpec:
    if not isinstance(item, dict):
        raise ToolSourceError(f"{where} is a JSON {_json_kind(item)}, not an object")
    if "function" in item or item.get("type") == "function":
        if item.get("type", "function") != "function":
            raise ToolSourceError(f"{where}: unsupported tool type {item.get('type')!r} (only 'function')")
        fn = item.get("function")
        if not isinstance(fn, dict):
            raise ToolSourceError(f"{where}: 'function' must be an object")
        extra = {k: v for k, v in fn.items() if k not in ("name", "description", "parameters")}
        return _make(fn, fn.get("parameters"), where, source, extra)
    if "inputSchema" in item or "input_schema" in item:
        schema = item.get("inputSchema", item.get("input_schema"))
        extra = {k: v for k, v in item.items() if k not in ("name", "description", "inputSchema", "input_schema")}
        return _make(item, schema, where, source, extra)
    if "name" in item:
        extra = {k: v for k, v in item.items() if k not in ("name", "description", "parameters")}
        return _make(item, item.get("parameters"), where, source, extra)
    keys = ", ".join(sorted(map(str, item))[:6]) or "none"
    raise ToolSourceError(f"{where} has no 'name' or 'function' (keys: {keys})")


def _make(fn: Mapping[str, Any], schema: Any, where: str, source: str, extra: dict[str, Any]) -> ToolSpec:
    name = fn.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ToolSourceError(f"{where}: 'name' must be a non-empty string")
    desc = fn.get("description")
    if desc is None:
        desc = ""
    if not isinstance(desc, str):
        raise ToolSourceError(f"{where} ({name}): 'description' must be a string")
    _check_description(desc, f"{where} ({name})")
    params = _check_schema(schema, f"{where} ({name})")
    return ToolSpec(name=name, description=desc, parameters=params, source=source, extra=extra)


def _check_schema(schema: Any, where: str) -> dict[str, Any]:
    if schema is None:
        # a tool without arguments; hosts send an empty object schema
        return {"type": "object", "properties": {}}
    if not isinstance(schema, dict):
        raise ToolSourceError(f"{where}: the parameter schema must be a JSON object, got {_json_kind(schema)}")
    if schema.get("type", "object") != "object":
        raise ToolSourceError(f"{where}: the parameter schema must have type 'object', got {schema.get('type')!r}")
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise ToolSourceError(f"{where}: 'properties' must be an object")
    _check_schema_size(schema, where)
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        path = "/".join(map(str, exc.path)) or "(root)"
        raise ToolSourceError(f"{where}: invalid JSON Schema at {path}: {exc.message}") from None
    return schema


def _check_description(desc: str, where: str) -> None:
    if len(desc) > limits.MAX_TOOL_DESCRIPTION_CHARS:
        raise ToolSourceError(
            f"{where}: a description of {len(desc):,} characters, more than {limits.MAX_TOOL_DESCRIPTION_CHARS:,} "
            "(every character goes into each prompt)"
        )


def _check_schema_size(schema: dict[str, Any], where: str) -> None:
    nodes = 0
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > limits.MAX_SCHEMA_NODES:
            raise ToolSourceError(
                f"{where}: the parameter schema holds more than {limits.MAX_SCHEMA_NODES:,} objects and arrays, "
                "far past any real tool's; not checked"
            )
        if depth > limits.MAX_SCHEMA_DEPTH:
            raise ToolSourceError(
                f"{where}: the parameter schema is nested more than {limits.MAX_SCHEMA_DEPTH} levels deep"
            )
        children = value.values() if isinstance(value, dict) else value
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))


def _check_unique(tools: Sequence[ToolSpec], source: str) -> None:
    seen: set[str] = set()
    for t in tools:
        if t.name in seen:
            raise ToolSourceError(f"{source}: two tools are named {t.name!r}; hosts reject duplicate names")
        seen.add(t.name)


def _json_kind(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(v), "number")


# ------------------------------------------------------------------------------------------ MCP -> OpenAI


def sanitize_name(name: str) -> str:
    """What hosts do to names the OpenAI API would refuse: replace other characters with ``_``, cut at 64."""
    return _NAME_BAD_CHARS.sub("_", name)[:64] or "_"


def resolve_prefix(prefix: str | None, n_servers: int) -> str:
    """``auto`` (the default): no prefix for one server, ``{server}__`` for several. ``""``: never."""
    if prefix is None or prefix == AUTO_PREFIX:
        return "" if n_servers <= 1 else DEFAULT_MULTI_PREFIX
    return prefix


def mcp_tool_to_spec(tool: Mapping[str, Any], server: str, prefix: str = "") -> ToolSpec:
    """Convert one MCP tool (wire shape: ``name``, ``description``, ``inputSchema``) the way hosts do.

    ``prefix`` may contain ``{server}``; the server name is sanitised first, then the whole function name,
    so the model sees a name the OpenAI API would accept (Goose: ``<extension>__<tool>``).
    """
    remote = tool.get("name")
    where = f"mcp:{server}"
    if not isinstance(remote, str) or not remote:
        raise ToolSourceError(f"{where}: a tool without a name")
    try:
        pfx = prefix.format(server=sanitize_name(server))
    except (KeyError, IndexError, ValueError) as exc:
        raise ToolSourceError(f"bad tool prefix {prefix!r}: only {{server}} may be used ({exc})") from None
    name = sanitize_name(pfx + remote)
    desc = tool.get("description") or ""
    if not isinstance(desc, str):
        raise ToolSourceError(f"{where} ({remote}): 'description' must be a string")
    _check_description(desc, f"{where} ({remote})")
    extra = {k: v for k, v in tool.items() if k not in ("name", "description", "inputSchema", "input_schema")}
    try:
        params = _check_schema(tool.get("inputSchema", tool.get("input_schema")), f"{where} ({remote})")
    except ToolSourceError as exc:
        # hosts pass a sloppy server schema through to the model as it is; say so, do not stop the run
        raw = tool.get("inputSchema", tool.get("input_schema"))
        params = raw if isinstance(raw, dict) else {"type": "object", "properties": {}}
        extra["schema_error"] = str(exc)
    return ToolSpec(
        name=name, description=desc, parameters=params, source=where, server=server, remote_name=remote, extra=extra
    )


def merge_tool_lists(lists: Iterable[Sequence[ToolSpec]]) -> list[ToolSpec]:
    """Concatenate tool lists from several sources, refusing a name clash (a host could not dispatch it)."""
    out: list[ToolSpec] = []
    owner: dict[str, str] = {}
    for tools in lists:
        for t in tools:
            if t.name in owner:
                raise ToolSourceError(
                    f"tool name {t.name!r} comes from both {owner[t.name]} and {t.source}; "
                    "use --tool-prefix '{server}__' to namespace them"
                )
            owner[t.name] = t.source
            out.append(t)
    return out


def name_is_portable(name: str) -> bool:
    return bool(_NAME_OK.match(name))


def parse_arguments_json(text: str) -> dict[str, Any]:
    """``--args JSON``: a JSON object, or a one-line error."""
    from gguftpl.errors import UsageError
    from gguftpl.safeio import loads_json

    value = loads_json(text, what="--args", error=UsageError)
    if not isinstance(value, dict):
        raise UsageError(f"--args must be a JSON object, got a JSON {_json_kind(value)}")
    return value
