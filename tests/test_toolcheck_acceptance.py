"""Acceptance: the whole host journey with a real MCP server on the bartowski-like sample, before and after
``patch`` adds upstream's ``tool_use`` template; and a 300-tool file against a small context length."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gguftpl.errors import ToolSourceError
from gguftpl.gguf.reader import ValueType, read_header
from gguftpl.gguf.templateset import load_templateset
from gguftpl.gguf.writer import Typed
from gguftpl.patching import patch_templates
from gguftpl.verify.result import FAIL, PASS, SKIP, WARN
from gguftpl.verify.toolcheck import STAGE_BUDGET, STAGE_SCHEMA, run_tool_checks
from gguftpl.verify.tools import load_tools_file
from gguftpl.verify.toolsources import ToolSources, open_tool_sources
from tests.mcp_servers.harness import LOG_ENV, http_server, markers, read_log, returned_marker, stdio_command
from tests.mcp_servers.metrics_server import PARAM_DESCRIPTION
from tests.test_toolcheck import HERMES_TOOL_USE, _pieces, engine, generated_tools

pytest.importorskip("xllamacpp")
pytest.importorskip("mcp")

SAMPLE = "hermes-2-pro-mistral-7b.chatml.gguf"


@contextmanager
def sources(transport: str, log: Path) -> Iterator[ToolSources]:
    if transport == "stdio":
        with open_tool_sources(mcp_commands=[" ".join(stdio_command())], env={LOG_ENV: str(log)}) as src:
            yield src
    else:
        with http_server(log) as url, open_tool_sources(mcp_urls=[url]) as src:
            yield src


def _context_length(path: Path) -> int | None:
    return load_templateset(read_header(path)).context_length


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sample_fails_at_schema_and_passes_after_patch(samples_dir: Path, tmp_path: Path, transport: str) -> None:
    sample = samples_dir / SAMPLE
    patched = tmp_path / "patched.gguf"
    patch_templates(sample, patched, set_templates={"tool_use": HERMES_TOOL_USE})
    log = tmp_path / "calls.jsonl"
    with sources(transport, log) as src:
        (tool,) = src.tools
        with engine(sample) as eng:
            before = run_tool_checks(
                eng, eng, src.tools, dispatch=src.dispatcher_for(tool), context_length=_context_length(sample)
            )
            prompt_before = before.measurement.all_prompt if before.measurement else ""
        assert PARAM_DESCRIPTION not in prompt_before
        first_fail = next(s for s in before.stages if s.status == FAIL)
        assert first_fail.name == STAGE_SCHEMA
        assert all(s.status == SKIP for s in before.stages[3:])
        assert read_log(log) == []

        with engine(patched) as eng:
            after = run_tool_checks(
                eng, eng, src.tools, dispatch=src.dispatcher_for(tool), context_length=_context_length(patched)
            )
    assert [s.status for s in after.stages] == [PASS] * len(after.stages), [
        f"{s.name}: {s.evidence}" for s in after.stages
    ]
    rt = after.round_trip
    assert rt is not None and rt.parsed_arguments is not None
    assert read_log(log) == [{"tool": "lookup_metric", "args": rt.parsed_arguments}]
    assert rt.second_turn_prompt is not None and returned_marker(log, rt.second_turn_prompt)
    # the marker is in the turn the model reads next, not in the first prompt
    assert after.measurement is not None and markers(log)
    assert not any(m in after.measurement.all_prompt for m in markers(log))


def test_three_hundred_tools_on_a_small_context(samples_dir: Path, tmp_path: Path) -> None:
    f = tmp_path / "tools.json"
    f.write_text(json.dumps(generated_tools(300)), encoding="utf-8")
    tools = load_tools_file(f)
    small = tmp_path / "small-ctx.gguf"
    patch_templates(
        samples_dir / SAMPLE,
        small,
        set_templates={"tool_use": HERMES_TOOL_USE},
        extra_kv={"llama.context_length": Typed(ValueType.UINT32, 8192)},
    )
    ctx = _context_length(small)
    assert ctx == 8192
    with engine(small) as eng:
        res = run_tool_checks(eng, eng, tools, context_length=ctx, max_share=0.5)
        m = res.measurement
        assert m is not None
        by_pieces = sum(len(eng.tokenize(p, True)) for p in _pieces(m.all_prompt))
    assert by_pieces == m.all_tokens
    st = {s.name: s for s in res.stages}
    assert st[STAGE_SCHEMA].status == PASS
    budget = st[STAGE_BUDGET]
    assert budget.data["tool_tokens"] == m.all_tokens - m.base_tokens
    assert budget.data["share"] > 0.5 and "8192" in budget.evidence
    # these tools do not even fit: the request would be refused; the round trip runs with the one tool offered
    assert m.all_tokens > 8192 and budget.status == FAIL and "does not fit" in budget.evidence
    # tools from a file have no server: dispatch is skipped and a synthetic result must render
    assert [s.status for s in res.stages[3:]] == [PASS, PASS, SKIP, PASS]
    assert "with only tool_000 offered" in res.stages[3].evidence


def test_bad_inputs_are_one_line(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"functions": []}), encoding="utf-8")
    with pytest.raises(ToolSourceError) as err:
        open_tool_sources([wrong])
    assert "\n" not in str(err.value)


def test_the_share_warning_fires_below_the_context_length(samples_dir: Path, tmp_path: Path) -> None:
    f = tmp_path / "tools.json"
    f.write_text(json.dumps(generated_tools(12)), encoding="utf-8")
    tools = load_tools_file(f)
    patched = tmp_path / "patched.gguf"
    patch_templates(samples_dir / SAMPLE, patched, set_templates={"tool_use": HERMES_TOOL_USE})
    with engine(patched) as eng:
        res = run_tool_checks(eng, eng, tools, context_length=_context_length(patched), max_share=0.5)
        m = res.measurement
        assert m is not None
        # a context just big enough for the prompt, where the tools are most of it
        ctx = m.all_tokens + 10
        warn = run_tool_checks(eng, eng, tools, context_length=ctx, max_share=0.5)
    st = {s.name: s for s in res.stages}
    assert st[STAGE_BUDGET].status == PASS and m.tool_tokens / 32768 < 0.5
    st = {s.name: s for s in warn.stages}
    assert st[STAGE_BUDGET].status == WARN and "--max-tool-share" in st[STAGE_BUDGET].evidence
    assert warn.ok


DATA = Path(__file__).resolve().parent / "data"
EXPECT = json.loads((DATA / "template_expectations.json").read_text(encoding="utf-8"))["templates"]
NOT_PARSED = json.loads((DATA / "llamacpp_corpus.json").read_text(encoding="utf-8"))["call_not_parsed"]


@pytest.fixture(scope="module")
def metrics_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ToolSources, Path]]:
    log = tmp_path_factory.mktemp("mcp") / "calls.jsonl"
    with open_tool_sources(mcp_commands=[" ".join(stdio_command())], env={LOG_ENV: str(log)}) as src:
        yield src, log


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_real_templates_with_a_real_server(name: str, metrics_server: tuple[ToolSources, Path]) -> None:
    """Each real template alone in a stand-in, with the MCP server's tool: the schema verdict matches the
    expectation derived by reading the template, and the round trip goes through exactly when the template
    renders calls that llama.cpp's parser reads back (the canary's verdicts, measured independently)."""
    from gguftpl.engines.llamacpp_session import LlamaCppSession

    src, log = metrics_server
    exp = EXPECT[name]
    calls_before = len(read_log(log))
    with LlamaCppSession(templates={"default": (DATA / "templates" / name).read_text(encoding="utf-8")}) as s:
        res = run_tool_checks(s, s, src.tools, dispatch=src.dispatch, context_length=32768)
    st = {x.name: x for x in res.stages}
    assert (st[STAGE_SCHEMA].status == PASS) == exp["tools_in_prompt"], st[STAGE_SCHEMA].evidence
    goes_through = exp["tools_in_prompt"] and exp["renders_tool_calls"] and name not in NOT_PARSED
    assert res.ok == goes_through, [f"{x.name}: {x.status} {x.evidence[:160]}" for x in res.stages]
    assert len(read_log(log)) - calls_before == (1 if goes_through else 0)
    if goes_through:
        assert res.round_trip is not None and res.round_trip.second_turn_prompt is not None
        assert returned_marker(log, res.round_trip.second_turn_prompt)
