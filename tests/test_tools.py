"""Tool files in every accepted shape, MCP → OpenAI conversion, example arguments, schema walking."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gguftpl.errors import ToolSourceError
from gguftpl.verify.schema import example_arguments, inserted_text, schema_items, text_variants, validate_arguments
from gguftpl.verify.tools import (
    ToolSpec,
    load_tools_file,
    mcp_tool_to_spec,
    merge_tool_lists,
    resolve_prefix,
    tools_from_json,
)

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name, e.g. Lisbon"}},
    "required": ["city"],
}
FN = {"name": "get_weather", "description": "Current weather", "parameters": SCHEMA}
MCP_TOOL = {"name": "get_weather", "description": "Current weather", "inputSchema": SCHEMA}

SHAPES = {
    "openai list": [{"type": "function", "function": FN}],
    "wrapped single": {"type": "function", "function": FN},
    "bare function": FN,
    "mcp tools/list result": {"tools": [MCP_TOOL]},
    "mcp bare list": [MCP_TOOL],
    "mcp json-rpc response": {"jsonrpc": "2.0", "id": 1, "result": {"tools": [MCP_TOOL]}},
    "request body": {"model": "x", "messages": [], "tools": [{"type": "function", "function": FN}]},
    "mcp single tool": MCP_TOOL,
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_accepted_shape_gives_the_same_tool(tmp_path: Path, shape: str) -> None:
    f = tmp_path / "tools.json"
    f.write_text(json.dumps(SHAPES[shape]), encoding="utf-8")
    (tool,) = load_tools_file(f)
    assert (tool.name, tool.description, tool.parameters) == (FN["name"], FN["description"], SCHEMA)
    assert tool.to_openai() == {"type": "function", "function": FN}
    assert tool.server is None and tool.source == str(f)


def test_a_tool_without_schema_gets_an_empty_object_schema() -> None:
    (tool,) = tools_from_json({"name": "ping"})
    assert tool.parameters == {"type": "object", "properties": {}}
    assert tool.description == ""


BAD = {
    "a number": 3,
    "a string": "get_weather",
    "an empty list": [],
    "an object of something else": {"foo": 1, "bar": 2},
    "tools not a list": {"tools": {"name": "x"}},
    "a list of strings": ["get_weather"],
    "a tool without a name": [{"description": "x", "parameters": SCHEMA}],
    "a blank name": [{"name": "  ", "parameters": SCHEMA}],
    "parameters not an object": [{"name": "x", "parameters": [1, 2]}],
    "parameters of type string": [{"name": "x", "parameters": {"type": "string"}}],
    "properties not an object": [{"name": "x", "parameters": {"type": "object", "properties": []}}],
    "an invalid JSON Schema": [{"name": "x", "parameters": {"type": "object", "properties": {"a": {"type": 5}}}}],
    "a non-function tool type": [{"type": "retrieval", "function": FN}],
    "a description that is not text": [{"name": "x", "description": 5}],
    "duplicate names": [FN, FN],
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_wrong_shapes_give_one_clear_line(tmp_path: Path, case: str) -> None:
    f = tmp_path / "tools.json"
    f.write_text(json.dumps(BAD[case]), encoding="utf-8")
    with pytest.raises(ToolSourceError) as err:
        load_tools_file(f)
    msg = str(err.value)
    assert "\n" not in msg and str(f) in msg


@pytest.mark.parametrize(
    ("content", "expect"),
    [(b"{not json", "not JSON"), (b"\xff\xfe\x00", "not UTF-8"), (None, "not found")],
)
def test_unreadable_files(tmp_path: Path, content: bytes | None, expect: str) -> None:
    f = tmp_path / "tools.json"
    if content is not None:
        f.write_bytes(content)
    with pytest.raises(ToolSourceError, match=expect):
        load_tools_file(f)


def test_mcp_conversion_namespaces_and_sanitises_like_hosts() -> None:
    assert resolve_prefix(None, 1) == "" and resolve_prefix("auto", 1) == ""
    assert resolve_prefix(None, 2) == "{server}__"
    assert resolve_prefix("", 3) == ""
    spec = mcp_tool_to_spec(MCP_TOOL, "my weather.server", "{server}__")
    assert spec.name == "my_weather_server__get_weather"
    assert spec.remote_name == "get_weather" and spec.server == "my weather.server"
    assert spec.source == "mcp:my weather.server"
    assert spec.to_openai()["function"]["parameters"] == SCHEMA
    assert mcp_tool_to_spec(MCP_TOOL, "w", "").name == "get_weather"
    assert mcp_tool_to_spec({**MCP_TOOL, "name": "a.b/c"}, "w").name == "a_b_c"
    with pytest.raises(ToolSourceError, match="prefix"):
        mcp_tool_to_spec(MCP_TOOL, "w", "{host}_")


def test_merge_refuses_a_name_clash() -> None:
    a = [mcp_tool_to_spec(MCP_TOOL, "one")]
    b = [mcp_tool_to_spec(MCP_TOOL, "two")]
    with pytest.raises(ToolSourceError, match="--tool-prefix"):
        merge_tool_lists([a, b])
    assert [t.name for t in merge_tool_lists([a, [mcp_tool_to_spec(MCP_TOOL, "two", "{server}__")]])] == [
        "get_weather",
        "two__get_weather",
    ]


NESTED = {
    "type": "object",
    "$defs": {
        "Filter": {
            "type": "object",
            "properties": {
                "field": {"type": "string", "description": "Column to filter on"},
                "op": {"type": "string", "enum": ["eq", "lt", "gt"], "description": "Comparison"},
            },
            "required": ["field", "op"],
        }
    },
    "properties": {
        "query": {"type": "string", "description": "Free text", "minLength": 12},
        "limit": {"type": "integer", "minimum": 5, "maximum": 50, "description": "Max rows"},
        "ratio": {"type": "number", "exclusiveMinimum": 0.5},
        "since": {"type": "string", "format": "date-time"},
        "owner": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 3},
        "filters": {"type": "array", "items": {"$ref": "#/$defs/Filter"}, "description": "All must hold"},
        "mode": {"anyOf": [{"type": "null"}, {"type": "string", "enum": ["fast", "exact"]}]},
        "flag": {"type": ["boolean", "null"]},
        "page": {"type": "integer", "multipleOf": 10, "minimum": 3},
        "opts": {
            "type": "object",
            "properties": {"deep": {"type": "object", "properties": {"level": {"description": "Depth level"}}}},
            "required": ["deep"],
        },
    },
    "required": ["query", "limit", "ratio", "since", "owner", "tags", "filters", "mode", "flag", "page", "opts"],
}


def test_example_arguments_satisfy_their_schema() -> None:
    args = example_arguments(NESTED)
    assert set(args) == set(NESTED["required"])
    assert validate_arguments(NESTED, args) == []
    # and the validator is not a rubber stamp
    assert validate_arguments(NESTED, {**args, "limit": "ten"}) != []
    assert any("owner" in e for e in validate_arguments(NESTED, {**args, "owner": "not-an-email"}))
    assert example_arguments({"type": "object", "properties": {"a": {"type": "string"}}}) == {}
    assert example_arguments(SCHEMA) == {"city": "example"}


def test_schema_items_reach_nested_properties_and_refs() -> None:
    tool = ToolSpec("search", "Search rows", NESTED, "t")
    items = {(i.kind, i.path) for i in schema_items(tool)}
    assert ("name", "") in items and ("description", "") in items
    assert ("property", "filters.items.field") in items
    assert ("property-description", "filters.items.op") in items
    assert ("property-description", "opts.deep.level") in items
    assert ("property", "mode") in items and ("property-description", "mode") not in items


def test_inserted_text_is_what_the_tools_added() -> None:
    base = "<s>sys\nuser: hi\nassistant:"
    with_tools = "<s>sys\n<tools>[x]</tools>\nuser: hi\nassistant:"
    assert inserted_text(base, with_tools) == "<tools>[x]</tools>\n"
    assert inserted_text(base, base) == ""
    assert "\\u003c" in "".join(text_variants("a<b"))


def test_a_sloppy_server_schema_is_kept_and_reported_not_fatal() -> None:
    from gguftpl.verify.toolcheck import tools_stage

    sloppy = {"name": "q", "description": "Query", "inputSchema": {"type": "object", "properties": {"a": {"type": 5}}}}
    spec = mcp_tool_to_spec(sloppy, "srv")
    assert spec.parameters == sloppy["inputSchema"] and "invalid JSON Schema" in spec.extra["schema_error"]
    st = tools_stage([spec])
    assert st.status == "warn" and "not valid JSON Schema" in st.evidence
    assert validate_arguments(spec.parameters, {"a": 1})[0].startswith("the tool's own schema is not valid")
    # a tool file is the user's own: the same schema there is an error
    with pytest.raises(ToolSourceError, match="invalid JSON Schema"):
        tools_from_json([{"name": "q", "parameters": sloppy["inputSchema"]}])


def _schemas() -> Any:
    from hypothesis import strategies as st

    names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
    bounded_len = st.tuples(st.integers(0, 20), st.integers(0, 20)).map(
        lambda t: {"type": "string", "minLength": min(t), "maxLength": max(t)}
    )
    formatted = st.sampled_from(["date", "date-time", "email", "uri", "uuid", "ipv4", "ipv6", "hostname"]).map(
        lambda f: {"type": "string", "format": f}
    )
    ints = st.tuples(st.integers(-50, 50), st.integers(0, 100)).map(
        lambda t: {"type": "integer", "minimum": t[0], "maximum": t[0] + t[1]}
    )
    stepped = st.tuples(st.integers(-50, 50), st.integers(1, 9)).map(
        lambda t: {"type": "integer", "minimum": t[0], "multipleOf": t[1]}
    )
    nums = st.floats(-10, 10, allow_nan=False).map(lambda x: {"type": "number", "exclusiveMinimum": x})
    enums = st.lists(st.one_of(st.integers(), names), min_size=1, max_size=4, unique=True).map(lambda v: {"enum": v})
    leaf = st.one_of(
        bounded_len,
        formatted,
        ints,
        stepped,
        nums,
        enums,
        st.just({"type": "boolean"}),
        st.just({"type": ["string", "null"]}),
    )

    def grow(children: Any) -> Any:
        obj = st.dictionaries(names, children, max_size=4).flatmap(
            lambda props: (
                st.lists(st.sampled_from(sorted(props)), unique=True).map(
                    lambda req: {"type": "object", "properties": props, "required": req}
                )
                if props
                else st.just({"type": "object", "properties": {}})
            )
        )
        arr = st.tuples(children, st.integers(0, 3), st.integers(0, 3)).map(
            lambda t: {"type": "array", "items": t[0], "minItems": min(t[1], t[2]), "maxItems": max(t[1], t[2])}
        )
        any_of = st.lists(children, min_size=1, max_size=3).map(lambda bs: {"anyOf": bs})
        return st.one_of(obj, arr, any_of)

    tree = st.recursive(leaf, grow, max_leaves=12)
    return st.dictionaries(names, tree, min_size=1, max_size=5).flatmap(
        lambda props: st.lists(st.sampled_from(sorted(props)), unique=True).map(
            lambda req: {"type": "object", "properties": props, "required": req}
        )
    )


def test_example_arguments_are_valid_for_generated_schemas() -> None:
    from hypothesis import given, settings

    @settings(max_examples=150, deadline=None)
    @given(_schemas())
    def check(schema: dict[str, Any]) -> None:
        args = example_arguments(schema)
        assert validate_arguments(schema, args) == [], (schema, args)
        assert set(args) == set(schema["required"])

    check()
