"""One tool call the whole way a host takes it: written in the template's dialect → parsed by llama.cpp →
arguments validated → dispatched (MCP ``tools/call``) → the result rendered into the next turn.

Only the model's sampling is replaced, by a canned call. Everything talks to llama.cpp through the small
:class:`PromptEngine` and :class:`CallParser` protocols (the llama.cpp session satisfies both) and to the MCP
server through a ``dispatch`` callable, so each step is driven by the real components and nothing else.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gguftpl.errors import GGUFTplError
from gguftpl.verify.result import FAIL, PASS, SKIP, WARN, Stage
from gguftpl.verify.schema import appears, example_arguments, validate_arguments
from gguftpl.verify.tools import ToolSpec, openai_tools

Message = dict[str, Any]

STAGE_CALL_PARSED = "call parsed"
STAGE_ARGS_VALID = "arguments valid"
STAGE_DISPATCH = "dispatched"
STAGE_RESULT = "result rendered"
ROUND_TRIP_STAGES = (STAGE_CALL_PARSED, STAGE_ARGS_VALID, STAGE_DISPATCH, STAGE_RESULT)


class PromptEngine(Protocol):
    """What the checks need from llama.cpp (``gguftpl.engines.llamacpp_session.LlamaCppSession`` provides it)."""

    def apply_template(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> str: ...

    def tokenize(self, text: str, parse_special: bool = True) -> list[int]: ...


class CallParser(Protocol):
    def parse_completion(self, messages: list[Message], tools: list[dict[str, Any]], canned_text: str) -> Message: ...


CallText = Callable[[ToolSpec, dict[str, Any]], str]
"""Writes one call in the template's own dialect (what the model would emit)."""


class ResultLike(Protocol):
    @property
    def text(self) -> str: ...

    @property
    def is_error(self) -> bool: ...


Dispatch = Callable[[ToolSpec, dict[str, Any]], ResultLike]
"""Runs a parsed call (``McpToolSource.dispatch`` sends it as MCP ``tools/call``)."""


@dataclass(frozen=True)
class DispatchResult:
    text: str
    is_error: bool = False


@dataclass
class RoundTrip:
    stages: list[Stage]
    tool: str | None
    arguments: dict[str, Any] | None = None
    parsed_arguments: dict[str, Any] | None = None
    result_text: str | None = None
    second_turn_prompt: str | None = None

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.stages)


def probe_messages(
    question: str = "Please use the available tools to answer: what is the current status?",
) -> list[Message]:
    return [{"role": "user", "content": question}]


_CALL_ID = "gtcall001"


def rendered_call_text(
    engine: PromptEngine, tools: Sequence[ToolSpec], messages: list[Message] | None = None
) -> CallText:
    """A :data:`CallText` that writes a call the way the template itself renders one in history, cut out of
    llama.cpp's render by :func:`gguftpl.verify.calltext.call_text_from_template` (needs only
    ``apply_template``)."""
    from gguftpl.errors import LlamaCppError
    from gguftpl.verify.calltext import call_text_from_template

    oa = openai_tools(tools)

    def write(tool: ToolSpec, args: dict[str, Any]) -> str:
        msgs = list(messages or probe_messages(f"Use {tool.name} to answer my question."))
        # nine alphanumerics: Mistral's templates refuse any other tool call id
        call = {"id": _CALL_ID, "type": "function", "function": {"name": tool.name, "arguments": json.dumps(args)}}
        ct = call_text_from_template(engine, msgs, oa, call)  # type: ignore[arg-type]
        if not ct.text.strip() or tool.name not in ct.text:
            raise LlamaCppError("the template does not render an assistant tool call in the conversation history")
        return ct.text

    return write


def pick_tool(tools: Sequence[ToolSpec], name: str | None) -> ToolSpec:
    from gguftpl.errors import UsageError

    if not tools:
        raise UsageError("no tools to call")
    if name is None:
        return tools[0]
    for t in tools:
        if name in (t.name, t.remote_name):
            return t
    names = ", ".join(t.name for t in tools[:8]) + (", …" if len(tools) > 8 else "")
    raise UsageError(f"--call {name!r}: no such tool (have: {names})")


def round_trip(
    engine: PromptEngine,
    parser: CallParser,
    call_text: CallText | None,
    tools: Sequence[ToolSpec],
    tool: ToolSpec,
    arguments: dict[str, Any] | None = None,
    dispatch: Dispatch | None = None,
    messages: list[Message] | None = None,
) -> RoundTrip:
    """One call the whole way a host takes it, with only the model's sampling replaced by a canned call.

    ``call_text`` writes the call in the template's dialect; llama.cpp parses it back (``parser``); the
    parsed arguments are checked against the schema; ``dispatch`` runs it (the MCP ``tools/call``; None →
    skipped and a synthetic result is used); the result goes back as a ``tool`` message and the second turn
    is rendered by llama.cpp, which must show the result text.
    """
    msgs = list(messages or probe_messages(f"Use {tool.name} to answer my question."))
    oa = openai_tools(tools)
    if call_text is None:
        call_text = rendered_call_text(engine, tools, msgs)
    args = dict(arguments) if arguments is not None else example_arguments(tool.parameters)
    rt = RoundTrip([], tool.name, arguments=args)
    parsed = _parse_step(parser, call_text, msgs, oa, tool, args)
    rt.stages.append(parsed.stage)
    if parsed.arguments is None:
        return _skip_rest(rt, STAGE_CALL_PARSED)
    rt.parsed_arguments = parsed.arguments
    rt.stages.append(_arguments_stage(tool, parsed.arguments))
    if rt.stages[-1].status == FAIL:
        return _skip_rest(rt, STAGE_ARGS_VALID)
    stage, result = _dispatch_step(tool, parsed.arguments, dispatch)
    rt.stages.append(stage)
    if result is None:
        return _skip_rest(rt, STAGE_DISPATCH)
    rt.result_text = result.text
    stage, rt.second_turn_prompt = _result_step(engine, msgs, oa, tool, parsed, result)
    rt.stages.append(stage)
    return rt


def _skip_rest(rt: RoundTrip, after: str) -> RoundTrip:
    for name in ROUND_TRIP_STAGES[ROUND_TRIP_STAGES.index(after) + 1 :]:
        rt.stages.append(Stage(name, SKIP, f"not reached: {after} failed"))
    return rt


@dataclass(frozen=True)
class _Parsed:
    stage: Stage
    message: Message | None = None
    call: dict[str, Any] | None = None
    arguments: dict[str, Any] | None = None
    """None: the step failed."""


def _parse(
    parser: CallParser, msgs: list[Message], tools: list[dict[str, Any]], text: str
) -> tuple[Message | None, str | None]:
    try:
        return parser.parse_completion(msgs, tools, text), None
    except GGUFTplError as exc:
        return None, str(exc)


def _parse_step(
    parser: CallParser,
    call_text: CallText,
    msgs: list[Message],
    oa: list[dict[str, Any]],
    tool: ToolSpec,
    args: dict[str, Any],
) -> _Parsed:
    """1. the model's turn, written in the template's dialect, parsed by llama.cpp."""
    try:
        canned = call_text(tool, args)
    except GGUFTplError as exc:
        return _Parsed(Stage(STAGE_CALL_PARSED, FAIL, f"cannot write a call in this template's dialect: {exc}"))
    parsed, error = _parse(parser, msgs, oa, canned)
    trimmed = False
    if not (parsed and parsed.get("tool_calls")) and canned.strip() != canned:
        # the whitespace around a turn belongs to the template's layout; a model need not emit it
        again, _ = _parse(parser, msgs, oa, canned.strip())
        if again and again.get("tool_calls"):
            parsed, error, canned, trimmed = again, None, canned.strip(), True
    if parsed is None:
        return _Parsed(Stage(STAGE_CALL_PARSED, FAIL, f"llama.cpp refused the call: {error}", {"call_text": canned}))
    return _parsed_call(parsed, {"call_text": canned, "parsed": parsed, "trimmed": trimmed}, tool, args)


def _parsed_call(parsed: Message, data: dict[str, Any], tool: ToolSpec, args: dict[str, Any]) -> _Parsed:
    """The verdict on what llama.cpp parsed: one call of ``tool`` with an object of arguments."""
    canned = data["call_text"]
    calls = parsed.get("tool_calls") or []
    if not calls:
        content = str(parsed.get("content") or "")[:120]
        evidence = f"llama.cpp parsed no tool call from {canned[:120]!r} (content: {content!r})"
        return _Parsed(Stage(STAGE_CALL_PARSED, FAIL, evidence, data))
    call = calls[0]
    fn = call.get("function") or {}
    raw_args = fn.get("arguments")
    try:
        parsed_args = json.loads(raw_args) if isinstance(raw_args, str) else raw_args
    except json.JSONDecodeError as exc:
        return _Parsed(Stage(STAGE_CALL_PARSED, FAIL, f"parsed arguments are not JSON: {exc.msg}", data))
    if fn.get("name") != tool.name or not isinstance(parsed_args, dict):
        evidence = (
            f"llama.cpp parsed {fn.get('name')!r} with {json.dumps(parsed_args)[:80]}, "
            f"expected {tool.name!r} with an object"
        )
        return _Parsed(Stage(STAGE_CALL_PARSED, FAIL, evidence, data))
    same = parsed_args == args
    evidence = (
        f"llama.cpp parsed {tool.name}({json.dumps(parsed_args, ensure_ascii=False)[:120]})"
        + (" (only without the whitespace the template puts around the turn)" if data["trimmed"] else "")
        + ("" if same else f" — differs from what was written: {json.dumps(args)[:120]}")
    )
    return _Parsed(Stage(STAGE_CALL_PARSED, PASS if same else WARN, evidence, data), parsed, call, parsed_args)


def _arguments_stage(tool: ToolSpec, parsed_args: dict[str, Any]) -> Stage:
    """2. what a host checks before dispatch."""
    errors = validate_arguments(tool.parameters, parsed_args)
    if errors:
        evidence = f"arguments break {tool.name}'s schema: {'; '.join(errors[:3])}"
        return Stage(STAGE_ARGS_VALID, FAIL, evidence, {"errors": errors})
    return Stage(STAGE_ARGS_VALID, PASS, f"arguments match {tool.name}'s input schema")


def _dispatch_step(
    tool: ToolSpec, parsed_args: dict[str, Any], dispatch: Dispatch | None
) -> tuple[Stage, ResultLike | None]:
    """3. dispatch (None: it failed)."""
    if dispatch is None or tool.server is None:
        result = DispatchResult(f"gguftpl-result-{uuid.uuid4().hex[:12]}")
        evidence = f"{tool.name} comes from {tool.source}, no server: using a synthetic result"
        return Stage(STAGE_DISPATCH, SKIP, evidence), result
    try:
        answer = dispatch(tool, parsed_args)
    except GGUFTplError as exc:
        return Stage(STAGE_DISPATCH, FAIL, str(exc)), None
    if answer.is_error:
        # the call went through and came back; hosts hand the error text to the model like any result
        evidence = (
            f"tools/call {tool.remote_name or tool.name} reached {tool.server or 'the server'}, which answered "
            f"with an error (isError): {' '.join(answer.text.split())[:160]!r}; the error text goes on to "
            "the next turn, as hosts do (give --args for arguments the tool accepts)"
        )
        return Stage(STAGE_DISPATCH, WARN, evidence, {"result": answer.text, "is_error": True}), answer
    evidence = (
        f"tools/call {tool.remote_name or tool.name} on {tool.server or 'server'} returned "
        f"{len(answer.text)} chars: {' '.join(answer.text.split())[:80]!r}"
    )
    return Stage(STAGE_DISPATCH, PASS, evidence, {"result": answer.text}), answer


def _result_step(
    engine: PromptEngine,
    msgs: list[Message],
    oa: list[dict[str, Any]],
    tool: ToolSpec,
    parsed: _Parsed,
    result: ResultLike,
) -> tuple[Stage, str | None]:
    """4. the next turn must show the result to the model."""
    assert parsed.call is not None and parsed.message is not None
    call_id = parsed.call.get("id") or f"call_{uuid.uuid4().hex[:8]}"
    arguments = json.dumps(parsed.arguments)
    assistant: Message = {
        "role": "assistant",
        "content": parsed.message.get("content") or "",
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": tool.name, "arguments": arguments}}],
    }
    tool_msg: Message = {"role": "tool", "tool_call_id": call_id, "name": tool.name, "content": result.text}
    try:
        prompt = engine.apply_template([*msgs, assistant, tool_msg], oa)
    except GGUFTplError as exc:
        return Stage(STAGE_RESULT, FAIL, f"llama.cpp cannot render the turn after the call: {exc}"), None
    if result.text.strip() and appears(result.text, prompt):
        at = prompt.find(result.text.strip()[:40])
        shown = prompt[max(0, at - 60) : at + 80] if at >= 0 else ""
        return Stage(
            STAGE_RESULT, PASS, f"the tool result is in the next prompt: …{shown!r}…", {"prompt": prompt}
        ), prompt
    evidence = f"the next prompt ({len(prompt)} chars) does not contain the tool result {result.text[:60]!r}"
    return Stage(STAGE_RESULT, FAIL, evidence, {"prompt": prompt}), prompt
