"""``verify --live --probe`` on scripted sessions (what llama.cpp's /v1/chat/completions would return): the
parallel probe dispatches both calls and checks their results' order in the rendered prompt, the no-tools probe
tells an honest refusal from a made-up result, the tool-error probe reads whether the answer says it failed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.errors import UsageError
from gguftpl.templates import probes
from gguftpl.verify import liveprobes
from gguftpl.verify.canarytools import STATUS_ARG_VALUE, STATUS_TOOL_NAME
from gguftpl.verify.live import LiveOptions, rejudge
from gguftpl.verify.liveprobes import NO_TOOLS, PARALLEL, PROBES, TOOL_ERROR, parse_probes, probe_stages
from tests.test_live import Scripted


class Rendering(Scripted):
    """A scripted session whose template renders every message's content in order (tool results too)."""

    def apply_template(self, messages: list[dict[str, Any]], tools: Any = None) -> str:
        return "\n".join(str(m.get("content") or "") for m in messages)


def _calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(pairs)
    ]
    return {"role": "assistant", "content": "", "tool_calls": calls}


def _run(s: Scripted, probe: str, **opts: Any) -> Any:
    (stage,) = probe_stages(s, LiveOptions(probes=(probe,), **opts))  # type: ignore[arg-type]
    return stage


def test_parse_probes() -> None:
    assert parse_probes(["tool-error,parallel"]) == (PARALLEL, TOOL_ERROR)
    assert parse_probes(["all"]) == PROBES
    with pytest.raises(UsageError, match="no probe named nope"):
        parse_probes(["nope"])


def test_parallel_calls_dispatched_and_results_in_order() -> None:
    both = _calls(
        (probes.CANARY_TOOL_NAME, {"record_key": probes.CANARY_ARG_VALUE}),
        (STATUS_TOOL_NAME, {"host": STATUS_ARG_VALUE}),
    )
    s = Rendering([both, {"role": "assistant", "content": "pending"}], "")
    stage = _run(s, PARALLEL)
    assert s.bodies[0]["parallel_tool_calls"] is True and len(s.bodies[0]["tools"]) == 2
    dispatched = stage.data["dispatched"]
    assert [d["name"] for d in dispatched] == [probes.CANARY_TOOL_NAME, STATUS_TOOL_NAME]
    markers = [d["result"].rsplit(" ", 1)[1] for d in dispatched]
    assert markers[0] != markers[1]  # a fresh marker for each result
    tool_msgs = s.bodies[1]["messages"][2:]
    assert [(m["tool_call_id"], m["name"]) for m in tool_msgs] == [
        ("c0", probes.CANARY_TOOL_NAME),
        ("c1", STATUS_TOOL_NAME),
    ]
    assert (
        stage.status == "pass"
        and stage.data["results_in_order"] is True
        and "rendered in the calls' order" in stage.evidence
    )
    assert stage.data["final"]["named"] == ["", ""]  # "pending" names neither


def test_parallel_results_out_of_order_fail() -> None:
    class Reversed(Rendering):
        def apply_template(self, messages: list[dict[str, Any]], tools: Any = None) -> str:
            return super().apply_template(list(reversed(messages)), tools)

    both = _calls((probes.CANARY_TOOL_NAME, {"record_key": "a"}), (STATUS_TOOL_NAME, {"host": "b"}))
    stage = _run(Reversed([both, {"role": "assistant", "content": "ok"}], ""), PARALLEL)
    assert stage.status == "fail" and stage.data["results_in_order"] is False and "NOT rendered" in stage.evidence


def test_parallel_one_call_is_not_enough() -> None:
    one = _calls((probes.CANARY_TOOL_NAME, {"record_key": "a"}))
    stage = _run(Rendering([one], ""), PARALLEL, try_required=False)
    assert stage.status == "fail" and stage.data["calls"] == 1 and "parsed 1 call(s)" in stage.evidence


@pytest.mark.parametrize(
    ("answer", "status", "outcome"),
    [
        ("I'm sorry, I don't have a lookup tool available.", "pass", "no_call"),
        ("The marker is qz7mk-5f3e2a1b.", "fail", "invented_result"),
        ("<tool_response>marker: 735</tool_response>", "fail", "invented_result"),
        ("Sure, here is how you could do it.", "warn", "no_call"),
    ],
)
def test_no_tools(answer: str, status: str, outcome: str) -> None:
    s = Scripted([{"role": "assistant", "content": answer}], "")
    stage = _run(s, NO_TOOLS)
    assert "tools" not in s.bodies[0] and stage.name == "live: no-tools"
    assert (stage.status, stage.summary["outcome"]) == (status, outcome), stage.evidence
    assert rejudge(stage.data)["outcome"] == outcome  # re-judged from its data alone


@pytest.mark.parametrize(
    ("answer", "status", "outcome"),
    [
        ("The lookup failed: there is no record with that key.", "pass", "reported_error"),
        ("Error {m}: the record was not found.", "pass", "reported_error"),
        ("The record's marker is qz7mk-0badf00d.", "fail", "invented"),
        ('{"name": "gguftpl_canary_lookup", "arguments": {"record_key": "qz7canaryargvalue"}}', "warn", "called_again"),
        ("Okay.", "warn", "unclear"),
    ],
)
def test_tool_error(answer: str, status: str, outcome: str) -> None:
    marker = "qz7mk-e0e0e0e0"
    s = Scripted([{"role": "assistant", "content": answer.replace("{m}", marker)}], "")
    stage = _run(s, TOOL_ERROR, marker=marker)
    tool_msg = s.bodies[0]["messages"][2]
    assert tool_msg["role"] == "tool" and marker in tool_msg["content"] and "error" in tool_msg["content"]
    assert (stage.status, stage.summary["outcome"]) == (status, outcome), stage.evidence
    final = stage.data["final"]
    again = liveprobes.judge_error_answer(
        liveprobes.Generation.from_dict(final["generation"]), stage.data["dispatch"]["result"], stage.data["given"]
    )
    assert again == final


def test_probe_needs_live_and_a_known_name(make_gguf: Any) -> None:
    src = make_gguf("m.gguf", templates={"default": "{{ messages[0].content }}"})
    for args, word in ((["--probe", "parallel"], "--live"), (["--live", "--probe", "nope"], "nope")):
        res = CliRunner().invoke(main_group, ["verify", str(src), *args])
        assert res.exit_code == 2 and word in res.output and len(res.output.strip().splitlines()) == 1, res.output


def test_a_parsed_call_reaches_the_real_server_once_and_its_marker_is_named(tmp_path: Any) -> None:
    """issue 24 acceptance (the dispatch side, with a scripted model: this suite's real model never writes a call
    llama.cpp parses): the fixture MCP server (a real process) logs the call exactly once, and the final-answer
    check names the fresh marker that server returned (read from its own log, not from gguftpl)."""
    from gguftpl.verify.live import live_stage
    from gguftpl.verify.tools import openai_tools
    from gguftpl.verify.toolsources import open_tool_sources
    from tests.mcp_servers.harness import LOG_ENV, markers, read_log, stdio_command

    class Echoing(Scripted):
        """The final answer repeats the tool's result, as a model that uses it would."""

        def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
            if body["messages"][-1]["role"] == "tool":
                self.answers = [{"role": "assistant", "content": "Health: " + body["messages"][-1]["content"]}]
            return super().chat_completion(body)

    log = tmp_path / "calls.jsonl"
    with open_tool_sources(mcp_commands=[" ".join(stdio_command())], env={LOG_ENV: str(log)}) as src:
        (tool,) = src.tools
        s = Echoing([_calls(("lookup_metric", {"project": "gguftpl"}))], "lookup_metric")
        stage = live_stage(
            s,  # type: ignore[arg-type]
            openai_tools(src.tools),
            options=LiveOptions(ask="What is the build health of gguftpl?"),
            dispatch=lambda name, args: src.dispatch(tool, args),
        )
    assert read_log(log) == [{"tool": "lookup_metric", "args": {"project": "gguftpl"}}]
    (marker,) = markers(log)
    assert stage.data["final"]["named"][0] == marker and f"names {marker}" in stage.evidence
    assert stage.data["final"]["claim"]["verdict"] == "honest"
    assert rejudge(stage.data)["final"]["named"][0] == marker
