"""Tool checks through a real llama.cpp (xllamacpp): schema reach per tool, context budget, per-tool cost."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gguftpl.verify.result import FAIL, PASS, SKIP, WARN
from gguftpl.verify.roundtrip import STAGE_ARGS_VALID, STAGE_CALL_PARSED, STAGE_DISPATCH, STAGE_RESULT
from gguftpl.verify.schema import schema_items
from gguftpl.verify.toolcheck import (
    STAGE_BUDGET,
    STAGE_SCHEMA,
    STAGE_TOOLS,
    budget_stage,
    measure_tools,
    run_tool_checks,
    schema_stage,
)
from gguftpl.verify.tools import ToolSpec, load_tools_file, tools_from_json
from tests.conftest import CHATML

ROOT = Path(__file__).resolve().parent.parent
HERMES_TOOL_USE = (ROOT / "upstream_templates/NousResearch/Hermes-2-Pro-Mistral-7B/tool_use.jinja").read_text(
    encoding="utf-8"
)

pytest.importorskip("xllamacpp")


@contextmanager
def engine(path: Path) -> Iterator[Any]:
    """llama.cpp's own /apply-template, /tokenize and parser on a stand-in of ``path``."""
    from gguftpl.engines.llamacpp_session import LlamaCppSession

    with LlamaCppSession(path) as s:
        yield s


MCP_LIKE = {
    "name": "lookup_metric",
    "description": "Look up the current build health metric of a project.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "project": {"type": "string", "description": "Slug of the project whose nightly build health is wanted"},
            "window": {
                "type": "object",
                "description": "Time window to aggregate over",
                "properties": {"days": {"type": "integer", "description": "Number of trailing days"}},
            },
        },
        "required": ["project"],
    },
}

NAMES_ONLY = (
    "{% if tools %}<|im_start|>system\nTools: {% for t in tools %}{{ t.function.name }} {% endfor %}<|im_end|>\n"
    "{% endif %}" + CHATML
)
FIRST_ONLY = "{% if tools %}<|im_start|>system\n{{ tools[0] | tojson }}<|im_end|>\n{% endif %}" + CHATML


@pytest.fixture
def gguf(make_gguf: Callable[..., Path]) -> Callable[..., Path]:
    def make(default: str = CHATML, tool_use: str | None = None, **kw: Any) -> Path:
        templates = {"default": default}
        if tool_use is not None:
            templates["tool_use"] = tool_use
        return make_gguf("m.gguf", templates=templates, **kw)

    return make


def test_plain_chatml_drops_the_tools_and_hermes_tool_use_renders_them(gguf: Callable[..., Path]) -> None:
    tools = tools_from_json({"tools": [MCP_LIKE]})
    with engine(gguf()) as eng:
        m = measure_tools(eng, tools)
    st = schema_stage(m)
    assert st.status == FAIL and "same prompt with and without the tools" in st.evidence
    assert m.tool_tokens == 0 and m.base_prompt == m.all_prompt
    with engine(gguf(tool_use=HERMES_TOOL_USE)) as eng:
        m = measure_tools(eng, tools)
    st = schema_stage(m)
    assert st.status == PASS, st.evidence
    # the nested property's description is there, and it was checked
    assert "Number of trailing days" in m.all_prompt
    assert any(it.path == "window.days" for it in schema_items(tools[0]))
    assert m.tool_tokens > 0


def test_names_without_parameters_fail(gguf: Callable[..., Path]) -> None:
    tools = tools_from_json({"tools": [MCP_LIKE]})
    with engine(gguf(default=NAMES_ONLY)) as eng:
        m = measure_tools(eng, tools)
    assert "lookup_metric" in m.all_prompt
    st = schema_stage(m)
    assert st.status == FAIL and "not even by name" not in st.evidence
    missing = {(it.kind, it.path) for it in m.tools[0].missing}
    assert ("property", "project") in missing and ("property-description", "window.days") in missing
    assert ("name", "") not in missing


def test_a_template_that_renders_only_the_first_tool_fails_for_the_others(gguf: Callable[..., Path]) -> None:
    second = {**MCP_LIKE, "name": "list_projects", "description": "List every project the user can see."}
    tools = tools_from_json([MCP_LIKE, second])
    with engine(gguf(default=FIRST_ONLY)) as eng:
        m = measure_tools(eng, tools)
    assert [r.ok for r in m.tools] == [True, False]
    st = schema_stage(m)
    assert st.status == FAIL and "1/2 tools" in st.evidence and "(1 not even by name)" in st.evidence


def generated_tools(n: int) -> list[dict[str, Any]]:
    """Deterministic, varied tools: 1-4 parameters, enums, nested objects, long descriptions."""
    out = []
    for i in range(n):
        props: dict[str, Any] = {
            f"arg_{j}": {"type": ["string", "integer", "boolean"][j % 3], "description": f"Parameter {j} of tool {i}"}
            for j in range(1 + i % 4)
        }
        if i % 5 == 0:
            props["mode"] = {"type": "string", "enum": ["fast", "exact"], "description": "How hard to try"}
        if i % 7 == 0:
            props["filter"] = {
                "type": "object",
                "description": "Optional filter",
                "properties": {"field": {"type": "string", "description": "Field to match"}},
            }
        out.append(
            {
                "type": "function",
                "function": {
                    "name": f"tool_{i:03d}",
                    "description": f"Tool number {i}. " + "It does a specific thing. " * (1 + i % 3),
                    "parameters": {"type": "object", "properties": props, "required": ["arg_0"]},
                },
            }
        )
    return out


def _pieces(prompt: str) -> list[str]:
    # cut after a newline that is followed by a non-space: a pre-tokenizer boundary for byte-level BPE
    return [p for p in re.split(r"(?<=\n)(?=\S)", prompt) if p]


def test_three_hundred_tools_budget(gguf: Callable[..., Path], tmp_path: Path) -> None:
    f = tmp_path / "tools.json"
    f.write_text(json.dumps(generated_tools(300)), encoding="utf-8")
    tools = load_tools_file(f)
    assert len(tools) == 300
    small = gguf(tool_use=HERMES_TOOL_USE, context_length=8192)
    with engine(small) as eng:
        m = measure_tools(eng, tools)
        # cross-check the count with a second tokenisation: the prompt in pieces, tokenised one by one
        by_pieces = sum(len(eng.tokenize(p, True)) for p in _pieces(m.all_prompt))
        assert len(_pieces(m.all_prompt)) > 300
        base_by_pieces = sum(len(eng.tokenize(p, True)) for p in _pieces(m.base_prompt))
    assert by_pieces == m.all_tokens and base_by_pieces == m.base_tokens
    assert schema_stage(m).status == PASS
    assert m.tool_tokens == m.all_tokens - m.base_tokens > 0
    # every tool costs something; the preamble estimate is positive and smaller than any single tool's alone cost
    oh = m.overhead_tokens
    assert oh is not None and 0 < oh < min(r.cost_alone for r in m.tools)
    assert all(m.marginal(r) > 0 for r in m.tools)
    # costs track the definitions' size
    size = {t.name: len(json.dumps(t.to_openai())) for t in tools}
    cost = {r.name: r.cost_alone for r in m.tools}
    assert cost[max(size, key=size.__getitem__)] > cost[min(size, key=size.__getitem__)]
    st = budget_stage(m, context_length=8192, max_share=0.5)
    assert st.status == FAIL and "does not fit" in st.evidence
    assert st.data["tool_tokens"] == m.tool_tokens and st.data["share"] == m.tool_tokens / 8192
    st = budget_stage(m, context_length=m.all_tokens + 1, max_share=0.5)
    assert st.status == WARN and "--max-tool-share" in st.evidence
    big = budget_stage(m, context_length=m.tool_tokens * 4, max_share=0.5)
    assert big.status == PASS
    assert budget_stage(m, context_length=m.tool_tokens * 4, max_share=0.2).status == WARN


def test_budget_without_tools_costs_nothing(gguf: Callable[..., Path]) -> None:
    one = [ToolSpec("ping", "Check the service is alive.", {"type": "object", "properties": {}}, "t")]
    with engine(gguf(tool_use=HERMES_TOOL_USE)) as eng:
        m = measure_tools(eng, one)
    assert m.overhead_tokens is None and m.tools[0].cost_alone == m.tool_tokens > 0
    assert budget_stage(m, None).status == WARN


def _mcp_tools(log: Path) -> Any:
    from gguftpl.verify.mcp import McpServerSpec, open_mcp_tools
    from tests.mcp_servers.harness import LOG_ENV, stdio_command

    return open_mcp_tools([McpServerSpec.stdio(stdio_command(), env={LOG_ENV: str(log)})])


def test_round_trip_through_llama_cpp_and_a_real_mcp_server(gguf: Callable[..., Path], tmp_path: Path) -> None:
    from tests.mcp_servers.harness import read_log, returned_marker

    log = tmp_path / "calls.jsonl"
    with _mcp_tools(log) as src:
        with engine(gguf()) as eng:
            res = run_tool_checks(eng, eng, src.tools, dispatch=src.dispatch, context_length=4096)
        assert [s.status for s in res.stages] == [PASS, FAIL, PASS, SKIP, SKIP, SKIP, SKIP]
        assert read_log(log) == []
        with engine(gguf(tool_use=HERMES_TOOL_USE)) as eng:
            res = run_tool_checks(eng, eng, src.tools, dispatch=src.dispatch, context_length=4096)
    assert [(s.name, s.status) for s in res.stages] == [
        (STAGE_TOOLS, PASS),
        (STAGE_SCHEMA, PASS),
        (STAGE_BUDGET, PASS),
        (STAGE_CALL_PARSED, PASS),
        (STAGE_ARGS_VALID, PASS),
        (STAGE_DISPATCH, PASS),
        (STAGE_RESULT, PASS),
    ], [s.evidence for s in res.stages]
    rt = res.round_trip
    assert rt is not None and rt.parsed_arguments == {"project": "example"}
    assert read_log(log) == [{"tool": "lookup_metric", "args": rt.parsed_arguments}]
    assert rt.second_turn_prompt is not None and returned_marker(log, rt.second_turn_prompt)
    assert "<tool_call>" in res.stages[3].data["call_text"]


def test_round_trip_failures_are_stages(gguf: Callable[..., Path], tmp_path: Path) -> None:
    from tests.mcp_servers.harness import read_log

    log = tmp_path / "calls.jsonl"
    with _mcp_tools(log) as src, engine(gguf(tool_use=HERMES_TOOL_USE)) as eng:
        # arguments that break the schema: parsed by llama.cpp (it checks no types), stopped before dispatch
        bad = run_tool_checks(eng, eng, src.tools, dispatch=src.dispatch, arguments={"project": 42})
        st = {s.name: s for s in bad.stages}
        assert st[STAGE_CALL_PARSED].status == PASS
        assert st[STAGE_ARGS_VALID].status == FAIL and "project" in st[STAGE_ARGS_VALID].evidence
        assert st[STAGE_DISPATCH].status == SKIP
        # a call llama.cpp cannot parse (the compact form this template does not write)
        compact = run_tool_checks(
            eng,
            eng,
            src.tools,
            dispatch=src.dispatch,
            call_text=lambda t, a: f"<tool_call>{json.dumps({'name': t.name, 'arguments': a})}</tool_call>",
        )
        st = {s.name: s for s in compact.stages}
        assert st[STAGE_CALL_PARSED].status == FAIL and "parsed no tool call" in st[STAGE_CALL_PARSED].evidence
    assert read_log(log) == []


def test_a_server_that_dies_mid_call_fails_the_dispatch_stage(gguf: Callable[..., Path], tmp_path: Path) -> None:
    from gguftpl.verify.mcp import McpServerSpec, open_mcp_tools
    from tests.mcp_servers.harness import LOG_ENV, read_log, stdio_command

    log = tmp_path / "calls.jsonl"
    spec = McpServerSpec.stdio(stdio_command(), env={LOG_ENV: str(log), "GGUFTPL_TEST_MCP_CRASH": "1"})
    with open_mcp_tools([spec]) as src, engine(gguf(tool_use=HERMES_TOOL_USE)) as eng:
        res = run_tool_checks(eng, eng, src.tools, dispatch=src.dispatch)
    st = {s.name: s for s in res.stages}
    assert st[STAGE_ARGS_VALID].status == PASS
    assert st[STAGE_DISPATCH].status == FAIL and "tools/call" in st[STAGE_DISPATCH].evidence
    assert "\n" not in st[STAGE_DISPATCH].evidence
    assert st[STAGE_RESULT].status == SKIP
    assert len(read_log(log)) == 1


def test_round_trip_over_streamable_http(gguf: Callable[..., Path], tmp_path: Path) -> None:
    from gguftpl.verify.mcp import McpServerSpec, open_mcp_tools
    from tests.mcp_servers.harness import http_server, read_log, returned_marker

    log = tmp_path / "calls.jsonl"
    with http_server(log) as url, open_mcp_tools([McpServerSpec.http(url)]) as src:
        with engine(gguf(tool_use=HERMES_TOOL_USE)) as eng:
            res = run_tool_checks(eng, eng, src.tools, dispatch=src.dispatch, call="lookup_metric", context_length=4096)
        assert res.ok and all(s.status == PASS for s in res.stages), [s.evidence for s in res.stages]
        assert res.round_trip is not None and res.round_trip.second_turn_prompt is not None
        assert returned_marker(log, res.round_trip.second_turn_prompt)
        assert read_log(log) == [{"tool": "lookup_metric", "args": res.round_trip.parsed_arguments}]


def test_tools_stage_points_at_what_a_model_will_struggle_with() -> None:
    from gguftpl.verify.toolcheck import tools_stage

    good = tools_from_json({"tools": [MCP_LIKE]})
    st = tools_stage(good)
    assert st.status == PASS and "1 tool: 1 from <tools>" in st.evidence
    bare = tools_from_json(
        [{"name": "do it!", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}]
    )
    st = tools_stage(bare)
    assert st.status == WARN
    assert "do it!" in st.evidence and "without a description" in st.evidence and "do it!.x" in st.evidence
