"""``verify --live`` without a real model: the call shapes found in a model's text, the live stage's outcomes on
a scripted session, and the bounded child that serves a (tiny) model."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.templates import probes
from gguftpl.verify import live
from gguftpl.verify.callshape import BARE_JSON, JSON_FENCE, JSON_IN_PROSE, PYTHON_CALL, TAGGED, find_call
from gguftpl.verify.live import (
    INVENTED_RESULT,
    NO_ANSWER,
    NO_CALL,
    PARSED_CALL,
    UNPARSED_CALL,
    LiveOptions,
    live_stage,
)

NAME = probes.CANARY_TOOL_NAME
CALL = {"name": NAME, "arguments": {"record_key": "k1"}}


@pytest.mark.parametrize(
    ("text", "shape"),
    [
        ("```json\n" + json.dumps(CALL, indent=2) + "\n```", JSON_FENCE),
        (json.dumps(CALL), BARE_JSON),
        ("Sure, here it is: " + json.dumps(CALL) + " done.", JSON_IN_PROSE),
        ("<tool_call>" + json.dumps(CALL) + "</tool_call>", TAGGED),
        ("[TOOL_CALLS][" + json.dumps(CALL) + "]", TAGGED),
        (f'{NAME}(record_key="k1")', PYTHON_CALL),
        ('{"unrelated": 1} then ' + json.dumps({NAME: {"record_key": "k1"}}), JSON_IN_PROSE),
    ],
)
def test_find_call_names_the_shape(text: str, shape: str) -> None:
    found = find_call(text, [NAME])
    assert found is not None and found.shape == shape and found.name == NAME


def test_find_call_ignores_prose_and_other_json() -> None:
    assert find_call("It is sunny, 22 degrees.", [NAME]) is None
    assert find_call('{"temperature": 22, "sky": "sunny"}', [NAME]) is None
    assert find_call("{" * 5000, [NAME]) is None  # a wall of brackets stays cheap


class Scripted:
    """A session whose model answers from a script (what llama.cpp's /v1/chat/completions would return)."""

    def __init__(self, answers: list[dict[str, Any]], prompt: str) -> None:
        self.answers = list(answers)
        self.prompt = prompt
        self.bodies: list[dict[str, Any]] = []

    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        message = self.answers.pop(0)
        return {"choices": [{"message": message, "finish_reason": "stop"}], "usage": {"completion_tokens": 7}}

    def apply_template(self, messages: list[dict[str, Any]], tools: Any = None) -> str:
        return self.prompt


def _tool_calls(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    fn = {"name": name, "arguments": json.dumps(arguments)}
    return {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": fn}]}


def test_parsed_call_is_dispatched_and_the_final_answer_checked() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    s = Scripted(
        [_tool_calls("get_weather", {"city": "Paris"}), {"role": "assistant", "content": "It is 17 degrees."}],
        "<tools>get_weather</tools>",
    )

    class Result:
        text, is_error = "temperature: 17 C, cloudy", False

    seen: list[Any] = []
    stage = live_stage(
        s,  # type: ignore[arg-type]
        tools,
        options=LiveOptions(ask="Weather in Paris?"),
        dispatch=lambda name, args: seen.append((name, args)) or Result(),
    )
    assert stage.status == "pass" and stage.summary["outcome"] == PARSED_CALL
    assert seen == [("get_weather", {"city": "Paris"})]
    assert stage.data["final"]["uses_result"] is True and "uses the result" in stage.evidence
    second = s.bodies[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool"] and second[2]["content"] == Result.text
    assert all(b["temperature"] == 0 and b["max_tokens"] == live.DEFAULT_MAX_TOKENS for b in s.bodies)


def test_unparsed_call_names_both_shapes_and_tries_tool_choice_required(monkeypatch: pytest.MonkeyPatch) -> None:
    fence = "```json\n" + json.dumps({"name": NAME, "arguments": {"record_key": "x"}}) + "\n```"
    s = Scripted([{"role": "assistant", "content": fence}, _tool_calls(NAME, {"record_key": "x"})], NAME)
    expected = {"dialect": "hermes", "call_text": "<tool_call>…</tool_call>", "evidence": "expects hermes"}
    monkeypatch.setattr(live, "_expected_shape", lambda _s: expected)
    stage = live_stage(s)  # type: ignore[arg-type]
    assert stage.status == "fail" and stage.summary["outcome"] == UNPARSED_CALL
    assert stage.summary["model_output"] == fence and stage.summary["call_shape"] == JSON_FENCE
    assert "```json code fence" in stage.evidence and "expects hermes" in stage.evidence
    assert s.bodies[1]["tool_choice"] == "required" and "tool_choice" not in s.bodies[0]
    assert stage.data["tool_choice_required"]["outcome"] == PARSED_CALL
    assert "with tool_choice=required llama.cpp parsed" in stage.evidence
    # the canary request: the canary tool and a message that needs it
    assert s.bodies[0]["tools"][0]["function"]["name"] == NAME
    assert probes.CANARY_ARG_VALUE in s.bodies[0]["messages"][0]["content"]


def test_no_call_says_whether_the_tools_were_in_the_prompt() -> None:
    # issue 24 item 2: this test's answer was "It is sunny, 22 degrees.", a value nobody returned, which is now
    # invented_result (the next test); an honest refusal keeps the outcome no_call
    s = Scripted([{"role": "assistant", "content": "I'm sorry, I can't look that up."}], "<|im_start|>user\nhi")
    stage = live_stage(s, options=LiveOptions(try_required=False))  # type: ignore[arg-type]
    assert stage.summary == {"outcome": NO_CALL, "model_output": "I'm sorry, I can't look that up."}
    assert "tools were not in the prompt" in stage.evidence and len(s.bodies) == 1
    assert stage.to_dict()["outcome"] == NO_CALL  # JSON shows it without --with-data
    assert stage.data["claim"]["verdict"] == "honest" and "claims no result: says it cannot" in stage.evidence


def test_a_value_nobody_returned_is_an_invented_result() -> None:
    s = Scripted([{"role": "assistant", "content": "It is sunny, 22 degrees."}], "<|im_start|>user\nhi")
    stage = live_stage(s, options=LiveOptions(try_required=False))  # type: ignore[arg-type]
    assert stage.summary == {"outcome": INVENTED_RESULT, "model_output": "It is sunny, 22 degrees."}
    assert stage.status == "fail" and "tools were not in the prompt" in stage.evidence
    assert stage.data["claim"]["values"] == ["22"] and "claims a result no tool returned" in stage.evidence


def test_no_answer_when_llama_cpp_fails() -> None:
    from gguftpl.errors import LlamaCppError

    class Failing(Scripted):
        def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
            raise LlamaCppError("llama.cpp server did not answer /v1/chat/completions: timed out")

    s = Failing([], NAME)
    stage = live_stage(s)  # type: ignore[arg-type]
    assert stage.summary["outcome"] == NO_ANSWER and "timed out" in stage.evidence
    assert "tool_choice_required" not in stage.data  # nothing to retry on a session that may still be busy


def test_ask_belongs_to_live_with_tools(tmp_path: Path, make_gguf: Any) -> None:
    src = make_gguf("m.gguf", templates={"default": "{{ messages[0].content }}"})
    res = CliRunner().invoke(main_group, ["verify", str(src), "--ask", "hi"])
    assert res.exit_code == 2 and "--ask" in res.output


# ------------------------------------------------------------------------------------- the bounded child

needs_llamacpp = pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None, reason="xllamacpp is not installed")


@needs_llamacpp
def test_child_session_serves_the_weights_and_dies_with_the_session(make_gguf: Any) -> None:
    from gguftpl.engines.llamacpp_child import ChildSession

    qwen = _qwen_template()
    src = make_gguf("tiny.gguf", templates={"default": qwen}, specials=["<|im_start|>", "<|im_end|>"])
    with ChildSession(src, n_ctx=2048, n_threads=1) as s:
        pid = s.child_pid
        assert pid is not None and pid != os.getpid()
        prompt = s.apply_template(probes.tools_conversation(), probes.canary_tools())
        assert probes.CANARY_PARAM_TOKEN in prompt  # served by the child's llama.cpp
        gen = live.generate(s, [{"role": "user", "content": "hi"}], None, LiveOptions(max_tokens=4))
        assert gen.error is None and gen.tokens is not None and gen.tokens <= 4
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@needs_llamacpp
def test_verify_live_json_on_a_tiny_model(make_gguf: Any) -> None:
    """The whole path through the CLI: the stage has outcome and model_output; only parsed_call passes."""
    src = make_gguf("tiny.gguf", templates={"default": _qwen_template()}, specials=["<|im_start|>", "<|im_end|>"])
    res = CliRunner().invoke(
        main_group,
        ["verify", str(src), "--live", "--format", "json", "--max-tokens", "8", "--threads", "1"],
        catch_exceptions=False,
    )
    doc = json.loads(res.stdout)
    stage = doc["stages"][-1]
    assert stage["name"] == "live" and doc["load_weights"] is True
    assert stage["outcome"] in (PARSED_CALL, UNPARSED_CALL, NO_CALL) and isinstance(stage["model_output"], str)
    assert res.exit_code == (0 if stage["outcome"] == PARSED_CALL and doc["ok"] else 1)
    # the steps are progress: shown on a terminal's stderr only (tests/test_progress.py), none in a pipe
    assert "live:" not in res.stderr


def _qwen_template() -> str:
    from gguftpl.upstream.catalog import load_catalog

    entry = load_catalog().get("Qwen/Qwen2.5-7B-Instruct")
    assert entry is not None
    return entry.text("default")


def test_when_only_the_model_fails_the_hint_is_no_template_repair() -> None:
    from gguftpl.cli.verify_cmd import _live_hint
    from gguftpl.verify.result import FAIL, Stage

    def stage(outcome: str, in_prompt: bool) -> Stage:
        return Stage("live", FAIL, "", {"tools_in_prompt": in_prompt}, summary={"outcome": outcome})

    assert "another shape" in (_live_hint(stage(UNPARSED_CALL, True)) or "")
    assert "chose to answer without one" in (_live_hint(stage(NO_CALL, True)) or "")
    assert "--live-timeout" in (_live_hint(stage(NO_ANSWER, True)) or "")
    assert _live_hint(stage(NO_CALL, False)) is None  # the tools were dropped: the template repair applies


def test_one_budget_for_the_whole_live_stage() -> None:
    """issue 25 item 9: the tool_choice=required retry ran to its own limit after the first answer had used the
    time; now one budget is stated up front and a retry past it is not started."""
    import time as _time

    class Slow(Scripted):
        def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
            _time.sleep(1.2)  # the first answer uses up a 1 s budget
            return super().chat_completion(body)

    fence = "```json\n" + json.dumps({"name": NAME, "arguments": {"record_key": "x"}}) + "\n```"
    s = Slow([{"role": "assistant", "content": fence}, _tool_calls(NAME, {"record_key": "x"})], NAME)
    said: list[str] = []
    stage = live_stage(s, options=LiveOptions(timeout=1.0), progress=said.append)  # type: ignore[arg-type]
    assert said[0].startswith("live: one time budget of 1 s for the whole live stage (the answer, a tool_choice")
    assert len(s.bodies) == 1 and stage.data["budget_s"] == 1.0
    assert "the live stage's 1 s budget is used up" in stage.data["tool_choice_required"]["skipped"]
    assert "not asked again with tool_choice=required: the live stage's 1 s budget is used up" in stage.evidence


def test_the_retry_gets_what_is_left_of_the_budget() -> None:
    seen: list[float] = []

    import gguftpl.engines.llamacpp_child as child

    class Child(Scripted, child.ChildSession):  # type: ignore[misc]
        """A scripted answer behind the child's type: only a child gets a per-generation timeout."""

        def __init__(self, *a: Any) -> None:
            Scripted.__init__(self, *a)

        def chat_completion(self, body: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
            seen.append(timeout or 0.0)
            return Scripted.chat_completion(self, body)

    fence = "```json\n" + json.dumps({"name": NAME, "arguments": {"record_key": "x"}}) + "\n```"
    s = Child([{"role": "assistant", "content": fence}, _tool_calls(NAME, {"record_key": "x"})], NAME)
    live_stage(s, options=LiveOptions(timeout=100.0))  # type: ignore[arg-type]
    assert len(seen) == 2 and 0 < seen[1] <= seen[0] <= 100.0


def test_gguftpl_answers_the_canary_call_with_a_fresh_marker() -> None:
    """issue 24 item 2: with no dispatcher, a parsed canary call gets gguftpl's own answer, a marker new in every
    run, and the final-answer check names it; a final answer stating another marker is told apart."""
    from gguftpl.verify.canarytools import MARKER_PREFIX

    markers = []
    for final in ("The record's marker is {m}.", "The record's marker is qz7mk-00000000."):
        call = _tool_calls(NAME, {"record_key": probes.CANARY_ARG_VALUE})
        s = Scripted([call, {"role": "assistant", "content": "?"}], NAME)
        first = live_stage(s)  # type: ignore[arg-type]
        marker = first.data["marker"]
        markers.append(marker)
        s = Scripted([call, {"role": "assistant", "content": final.format(m=marker)}], NAME)
        stage = live_stage(s, options=LiveOptions(marker=marker))  # type: ignore[arg-type]
        assert stage.data["marker"] == marker and marker.startswith(MARKER_PREFIX)
        tool_turn = s.bodies[1]["messages"][2]
        assert tool_turn["role"] == "tool" and marker in tool_turn["content"]
        assert stage.data["dispatch"]["result"] == tool_turn["content"]
        # the verdicts are a pure function of the recorded data
        again = live.rejudge(json.loads(json.dumps(stage.data)))
        assert again["outcome"] == PARSED_CALL and again["final"]["claim"] == stage.data["final"]["claim"]
    assert markers[0] != markers[1]  # fresh per run
    good, bad = (
        live.rejudge(
            live_stage(
                Scripted([call, {"role": "assistant", "content": t}], NAME),  # type: ignore[arg-type]
                options=LiveOptions(marker="qz7mk-12345678"),
            ).data
        )["final"]
        for t in ("Its marker is qz7mk-12345678.", "Its marker is qz7mk-00000000.")
    )
    assert good["named"][0] == "qz7mk-12345678" and good["claim"]["verdict"] == "honest"
    assert bad["uses_result"] is False and bad["claim"]["verdict"] == "invented"


def test_an_mcp_result_is_named_in_the_final_answer_evidence() -> None:
    tools = [{"type": "function", "function": {"name": "lookup_metric", "parameters": {"type": "object"}}}]
    s = Scripted(
        [_tool_calls("lookup_metric", {"project": "x"}), {"role": "assistant", "content": "M-77aa: health 0.93"}],
        "lookup_metric",
    )

    class Result:
        text, is_error = "M-77aa project=x health=0.93", False

    stage = live_stage(
        s,
        tools,
        options=LiveOptions(ask="Health of x?"),
        dispatch=lambda n, a: Result(),  # type: ignore[arg-type]
    )
    assert stage.data["marker"] is None  # the user's tools: the server's own values are the reference
    assert "uses the result (names M-77aa" in stage.evidence
    assert stage.data["final"]["claim"]["verdict"] == "honest"
