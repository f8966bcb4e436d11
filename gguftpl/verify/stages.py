"""``verify``: five stages through llama.cpp itself, each PASS/FAIL/SKIP with evidence.

1. template selection: which template llama.cpp uses for a request with tools (``tool_use`` if loaded, else
   the default, else its built-in ChatML fallback: FAIL) and its capability probe (``chat_template_caps``);
   a template llama.cpp cannot parse makes the file unloadable: FAIL with llama.cpp's own error.
2. schema in prompt: the canary tool's name and parameter description are in ``/apply-template``'s prompt.
3. call parsed: a canary call cut out of llama.cpp's render of a history that contains it (so in the
   template's own dialect and spacing, :mod:`gguftpl.verify.calltext`), prefilled as the reply, is parsed
   into that call by llama.cpp.
4. result rendered: the canary tool result is in the next turn's prompt.
5. engine agreement: llama.cpp's prompts for stages 2 and 4 equal transformers'
   (:func:`gguftpl.verify.compare.compare_engines`), or the first difference is shown.

With the user's tools, the tool checks of :mod:`gguftpl.verify.toolcheck` are appended as more stages. With
``live`` the real weights are served from a bounded child (:mod:`gguftpl.engines.llamacpp_child`) and the model's
own answer is judged last (:mod:`gguftpl.verify.live`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gguftpl.engines.llamacpp_choice import TemplateChoice
from gguftpl.engines.llamacpp_session import LlamaCppLoadError, LlamaCppSession, Message
from gguftpl.errors import LlamaCppError
from gguftpl.verify.calltext import CallText, arg_values, call_matches, call_text_from_template, parse_call
from gguftpl.verify.compare import agreement_stage
from gguftpl.verify.preflight import check_regular, incomplete, not_chat, render_bombs
from gguftpl.verify.result import (
    FAIL,
    INCOMPLETE,
    NOT_CHAT,
    PASS,
    REJECTED,
    RENDER_BOMB,
    SKIP,
    STAGE_AGREEMENT,
    STAGE_CALL,
    STAGE_RESULT,
    STAGE_SCHEMA,
    STAGE_SELECTION,
    Stage,
    VerifyResult,
    excerpt,
    skipped_after,
)

if TYPE_CHECKING:
    from gguftpl.verify.live import LiveOptions


@dataclass(frozen=True)
class ToolRun:
    """The user's tools and how to check them (``verify --tools/--mcp``)."""

    tools: list[Any]
    """:class:`gguftpl.verify.tools.ToolSpec` objects."""
    dispatch: Any = None
    """Runs the round-trip call (e.g. ``ToolSources.dispatch``); None: a synthetic result."""
    call: str | None = None
    arguments: dict[str, Any] | None = None
    max_tool_share: float | None = None


@dataclass(frozen=True)
class LiveRun:
    """``verify --live``: how the model is asked, who runs its call, who hears about progress."""

    options: LiveOptions
    dispatch: Callable[[str, dict[str, Any]], Any] | None = None
    """Runs the model's parsed call by tool name (an MCP ``tools/call``); None: not dispatched."""
    progress: Callable[[str], None] | None = None
    exchanges: list[dict[str, Any]] | None = None
    """A list to append every request the live stage sends the model to, with the prompt llama.cpp rendered for
    it and the answer (``--record``: :func:`gguftpl.verify.record.tap`); None: nothing kept."""


def verify_file(
    path: str | os.PathLike[str],
    *,
    load_weights: bool = False,
    tools: Sequence[Any] | None = None,
    dispatch: Any = None,
    call: str | None = None,
    arguments: dict[str, Any] | None = None,
    max_tool_share: float | None = None,
    session: LlamaCppSession | None = None,
    live: LiveRun | None = None,
) -> VerifyResult:
    """Run the five llama.cpp stages on ``path`` (and the tool checks of :mod:`gguftpl.verify.toolcheck` when
    ``tools`` is given: :class:`gguftpl.verify.tools.ToolSpec` objects or OpenAI ``tools`` entries).
    ``session`` reuses a running one; ``dispatch`` runs the round-trip call (e.g. ``ToolSources.dispatch``).
    ``live`` loads the real weights (in a child process) and adds the live stage: the model answers."""
    path = os.fspath(path)
    if session is None:
        check_regular(path)
        cut = incomplete(path)
        if cut is not None:
            first = Stage(STAGE_SELECTION, FAIL, f"llama.cpp cannot load this file: {cut}", {"template": INCOMPLETE})
            stages = skipped_after(first, "the file is incomplete")
            return VerifyResult(path, stages, template=INCOMPLETE, load_weights=load_weights)
        kind = not_chat(path)
        if kind is not None:
            first = Stage(
                STAGE_SELECTION,
                SKIP,
                f"not a chat model: {kind.describe()}; llama.cpp serves its embeddings or scores, never a chat "
                "request, so there is no tool calling to verify",
                {"template": NOT_CHAT, "kind": kind.kind},
            )
            return VerifyResult(path, skipped_after(first, "not a chat model"), NOT_CHAT, load_weights=load_weights)
    run = ToolRun(_tool_specs(tools), dispatch, call, arguments, max_tool_share) if tools else None
    load_weights = load_weights or live is not None
    t0 = time.perf_counter()
    if session is not None:
        return _timed(_verify_with_tools(session, path, run, live), session, t0)
    refused = _not_safe_for_llamacpp(path, run, t0, load_weights)
    if refused is not None:
        return refused
    try:
        s = _open_session(path, load_weights, live)
    except LlamaCppLoadError as exc:
        if not any("chat template" in line for line in exc.log):
            raise
        return _rejected_result(path, exc, time.perf_counter() - t0, load_weights)
    with s:
        return _timed(_verify_with_tools(s, path, run, live), s, t0)


def _open_session(path: str, load_weights: bool, live: LiveRun | None) -> LlamaCppSession:
    if live is None:
        s = LlamaCppSession(path, load_weights=load_weights)
    else:
        from gguftpl.engines.llamacpp_child import ChildSession

        if live.progress is not None:
            size = os.path.getsize(path) / (1 << 20)
            name = os.path.basename(path)
            live.progress(f"live: loading {name} ({size:,.0f} MiB) into llama.cpp in a child process…")
        s = ChildSession(path, n_threads=live.options.threads)
    s.start()
    if live is not None and live.progress is not None:
        live.progress(f"live: loaded in {s.timings.get('load_s', 0.0):.1f} s; stages 1-5 on the real weights…")
    return s


def verify_session(s: LlamaCppSession, label: str | None = None) -> VerifyResult:
    """The five stages on a running session (its file, or its bare templates)."""
    return _verify(s, label or s.path or "<templates>")


def _tool_specs(tools: Sequence[Any] | None) -> list[Any]:
    if tools and isinstance(tools[0], Mapping):
        from gguftpl.verify.tools import tools_from_json

        return list(tools_from_json(list(tools), "<tools>"))
    return list(tools or [])


def _timed(result: VerifyResult, s: LlamaCppSession, t0: float) -> VerifyResult:
    result.timings = {**s.timings, "total_s": time.perf_counter() - t0}
    result.load_weights = s.load_weights
    return result


def _verify_with_tools(s: LlamaCppSession, path: str, run: ToolRun | None, live: LiveRun | None) -> VerifyResult:
    result = _verify(s, path)
    if run is not None:
        result.stages.extend(_tool_stages(s, run))
    if live is not None:
        # last: a generation that overran its time still runs in the child until the session ends
        from gguftpl.verify.live import live_stage
        from gguftpl.verify.tools import openai_tools

        tools = openai_tools(run.tools) if run is not None else None
        from gguftpl.verify.record import tap

        with tap(s, live.exchanges):  # every request of the live stage and its probes, for --record
            result.stages.append(
                live_stage(s, tools, options=live.options, dispatch=live.dispatch, progress=live.progress)
            )
            if live.options.probes:
                from gguftpl.verify.liveprobes import probe_stages

                result.stages.extend(probe_stages(s, live.options, live.progress))
    return result


def _not_safe_for_llamacpp(path: str, run: ToolRun | None, t0: float, load_weights: bool) -> VerifyResult | None:
    """The result when a template would hang or crash llama.cpp in this process (never run there)."""
    bombs = render_bombs(path)
    if not bombs and run is not None:
        # the tool stages render the user's tools in llama.cpp: a template may blow up only on those
        from gguftpl.verify.tools import openai_tools

        bombs = render_bombs(path, tools=openai_tools(run.tools))
    if not bombs:
        return None
    first = Stage(
        STAGE_SELECTION,
        FAIL,
        "not run through llama.cpp: "
        + "; ".join(bombs[:3])
        + ". llama.cpp renders without limits, so this template would hang or crash it",
        {"template": RENDER_BOMB, "bombs": bombs},
    )
    stages = skipped_after(first, "the template is not safe to render in llama.cpp")
    seconds = time.perf_counter() - t0
    return VerifyResult(path, stages, template=RENDER_BOMB, timings={"total_s": seconds}, load_weights=load_weights)


def _rejected_result(path: str, exc: LlamaCppLoadError, seconds: float, load_weights: bool = False) -> VerifyResult:
    """llama.cpp refuses the file at load because of its chat template: llama-server would exit at startup."""
    errors = [line for line in exc.log if "consider" not in line and "for example" not in line]
    first = Stage(
        STAGE_SELECTION,
        FAIL,
        "llama.cpp refuses to load this file: it cannot parse a chat template, so llama-server exits at "
        "startup (and a runtime that falls back renders something else): " + " | ".join(errors[:3]),
        {"template": REJECTED, "llamacpp_log": exc.log},
    )
    stages = skipped_after(first, "llama.cpp cannot load the file")
    return VerifyResult(path, stages, template=REJECTED, timings={"total_s": seconds}, load_weights=load_weights)


def _tool_stages(s: LlamaCppSession, run: ToolRun) -> list[Stage]:
    from gguftpl.verify.toolcheck import run_tool_checks

    ctx = None
    if s.path is not None:
        from gguftpl.gguf.reader import read_header
        from gguftpl.gguf.templateset import load_templateset

        ctx = load_templateset(read_header(s.path)).context_length
    kw: dict[str, Any] = {}
    if run.max_tool_share is not None:
        kw["max_share"] = run.max_tool_share
    res = run_tool_checks(
        s, s, run.tools, dispatch=run.dispatch, context_length=ctx, call=run.call, arguments=run.arguments, **kw
    )
    return [Stage(f"tools: {t.name}", t.status, t.evidence, dict(t.data)) for t in res.stages]


# ---------------------------------------------------------------------------------------------- the stages


def _verify(s: LlamaCppSession, path: str) -> VerifyResult:
    from gguftpl.templates import probes

    tools = probes.canary_tools()
    msgs = probes.tools_conversation()
    choice = s.template_for(tools)
    result = VerifyResult(path, [selection_stage(s, choice)], template=choice.name, standin=_standin_info(s))
    prompt, stage2 = schema_stage(s, msgs, tools)
    call = probes.tool_call()
    stage3, ct = call_stage(s, msgs, tools, call, choice)
    round_trip = [*msgs, {"role": "assistant", "content": "" if not ct.content_none else None, "tool_calls": [call]}]
    round_trip.append(probes.tool_result_message())
    rt_prompt, stage4 = result_stage(s, round_trip, tools)
    requests = [("tools request", msgs, prompt), ("tool round trip", round_trip, rt_prompt)]
    if choice.fallback:
        # transformers has no template to render for such a file (apply_chat_template refuses): rendering
        # llama.cpp's own ChatML there would compare llama.cpp with itself
        stage5 = Stage(
            STAGE_AGREEMENT,
            SKIP,
            "not compared: the file has no chat template, so transformers has none to render (it refuses the "
            "request); llama.cpp's prompt is its built-in ChatML",
        )
    else:
        stage5 = agreement_stage(s, choice.text, requests, tools)
    result.stages += [stage2, stage3, stage4, stage5]
    return result


def _standin_info(s: LlamaCppSession) -> dict[str, Any] | None:
    if s.standin is None:
        return None
    info = s.standin
    return {"vocab": info.vocab, "n_vocab": info.n_vocab, "added_tokens": info.added_tokens, "notes": info.notes}


def selection_stage(s: LlamaCppSession, choice: TemplateChoice) -> Stage:
    """Stage 1: which template llama.cpp uses with tools, and what its capability probe says."""
    from gguftpl.gguf.templateset import sha256_text

    names = s.template_names()
    caps = s.caps
    caps_txt = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in sorted(caps.items()))
    data = {"template": choice.name, "sha256": sha256_text(choice.text), "caps": caps, "file_templates": names}
    if choice.fallback:
        plain = _plain_text_markers(s, choice.text)
        also = (
            f"; its markers {', '.join(plain)} are not tokens of this file's vocabulary, so the fallback prompt "
            "tokenises them as plain text"
            if plain
            else ""
        )
        return Stage(
            STAGE_SELECTION,
            FAIL,
            "the file has no chat template: llama.cpp silently falls back to its built-in ChatML "
            f"({len(choice.text)} bytes, sha256 {sha256_text(choice.text)[:12]}){also}; capabilities: {caps_txt}",
            {**data, "fallback_text": choice.text, "markers_not_tokens": plain},
        )
    if s.chat_template is not None:
        src = "the --chat-template override"
    elif choice.name == "tool_use":
        src = "tokenizer.chat_template.tool_use (llama.cpp uses it for every request with tools)"
    else:
        src = "tokenizer.chat_template" + ("; the file has no tool_use template" if "tool_use" not in names else "")
    return Stage(STAGE_SELECTION, PASS, f"llama.cpp uses {src}; capabilities: {caps_txt}", data)


def _plain_text_markers(s: LlamaCppSession, text: str) -> list[str]:
    """The control markers of ``text`` (the ChatML fallback's ``<|im_start|>``...) that llama.cpp's tokenizer of
    this file does not read as one token: the model sees them as the characters ``<``, ``|``, ``im``..."""
    from gguftpl.gguf.tokens import control_markers

    out = []
    for marker in control_markers([text]):
        try:
            if len(s.tokenize(marker, True)) != 1:
                out.append(marker)
        except LlamaCppError:
            return []  # not asked: no claim either way
    return out


def schema_stage(s: LlamaCppSession, msgs: list[Message], tools: list[dict[str, Any]]) -> tuple[str | None, Stage]:
    """Stage 2: the canary's name and parameter description reach llama.cpp's prompt."""
    from gguftpl.templates import probes

    try:
        prompt = s.apply_template(msgs, tools)
    except LlamaCppError as exc:
        return None, Stage(STAGE_SCHEMA, FAIL, f"llama.cpp cannot render the tools request: {exc}")
    has_name = probes.CANARY_TOOL_NAME in prompt
    has_desc = probes.CANARY_PARAM_TOKEN in prompt
    data = {"prompt": prompt, "name_found": has_name, "description_found": has_desc}
    if has_name and has_desc:
        at = prompt.find(probes.CANARY_PARAM_TOKEN)
        line = prompt.count("\n", 0, at) + 1
        return prompt, Stage(
            STAGE_SCHEMA,
            PASS,
            f"the canary tool {probes.CANARY_TOOL_NAME!r} and its parameter description are in the "
            f"prompt (line {line}): …{excerpt(prompt, at, 60)}…",
            data,
        )
    missing = [w for w, ok in (("name", has_name), ("parameter description", has_desc)) if not ok]
    return prompt, Stage(
        STAGE_SCHEMA,
        FAIL,
        f"llama.cpp dropped the tools: the canary's {' and '.join(missing)} never reach the prompt "
        f"(supports_tools={s.caps.get('supports_tools')}); prompt: {excerpt(prompt)!r}",
        data,
    )


def result_stage(
    s: LlamaCppSession, round_trip: list[Message], tools: list[dict[str, Any]]
) -> tuple[str | None, Stage]:
    """Stage 4: the tool result comes back in the next turn's prompt."""
    from gguftpl.templates import probes

    try:
        prompt = s.apply_template(round_trip, tools)
    except LlamaCppError as exc:
        return None, Stage(STAGE_RESULT, FAIL, f"llama.cpp cannot render the tool-result turn: {exc}")
    at = prompt.find(probes.CANARY_RESULT)
    if at < 0:
        evidence = f"the tool result never reaches the second-turn prompt: {excerpt(prompt)!r}"
        return prompt, Stage(STAGE_RESULT, FAIL, evidence, {"prompt": prompt})
    evidence = f"the tool result {probes.CANARY_RESULT!r} is in the second-turn prompt: …{excerpt(prompt, at, 80)}…"
    return prompt, Stage(STAGE_RESULT, PASS, evidence, {"prompt": prompt})


def call_stage(
    s: LlamaCppSession,
    msgs: list[Message],
    tools: list[dict[str, Any]],
    call: dict[str, Any],
    choice: TemplateChoice | None = None,
) -> tuple[Stage, CallText]:
    """Stage 3: cut the call out of llama.cpp's render of history, prefill it, let llama.cpp parse it. When
    llama.cpp writes no call, the stage says whether transformers does (the audit's GT206 shows that call)."""
    try:
        ct = call_text_from_template(s, msgs, tools, call)
    except LlamaCppError as exc:
        return Stage(STAGE_CALL, FAIL, f"llama.cpp cannot render a conversation with a tool call: {exc}"), CallText("")
    data: dict[str, Any] = {"call_text": ct.text, "content_none": ct.content_none}
    if ct.call_id:
        data["call_id"] = ct.call_id
    unwritten = _unwritten_call(ct, call["function"], data)
    if unwritten is not None:
        if data.get("call_written") is False and choice is not None and not choice.fallback and s.path:
            _add_hf_call(unwritten, _hf_call_text(s.path, choice.name), s.caps)
        return unwritten, ct
    return _parsed_call(s, msgs, tools, ct, call, data), ct


def _unwritten_call(ct: CallText, fn: dict[str, Any], data: dict[str, Any]) -> Stage | None:
    """FAIL when the template writes no call, or one without the function's name."""
    # text of the turn that carries neither the name nor an argument is the turn's own scaffolding
    # ('ASSISTANT: ', '[TOOL_CALLS]'), not a call written without its name
    call_written = fn["name"] in ct.text or any(str(v) in ct.text for v in arg_values(fn["arguments"]))
    if ct.text.strip() and fn["name"] not in ct.text and call_written:
        return Stage(
            STAGE_CALL,
            FAIL,
            f"the template writes the call without the function's name ({ct.text!r}), so a model's call "
            "cannot say which tool it calls",
            data,
        )
    if not call_written:
        data["call_written"] = False
        shown = f"the turn renders as {ct.text!r}" if ct.text.strip() else f"inserted text: {ct.text!r}"
        return Stage(
            STAGE_CALL,
            FAIL,
            "the template writes no text for an assistant tool call (neither the function's name nor its "
            f"arguments; {shown}), so there is no call format for llama.cpp to parse",
            data,
        )
    return None


def _hf_call_text(path: str, template: str) -> str:
    """How transformers writes the canary call with the file's template ``template`` (the audit's facts, which
    GT206 quotes; cached on disk, so ``verify``'s runtime view reads the same), '' when it writes none. The
    facts straight from the cache the audit loads them from: no audit (and no rules) run for one field, and
    verify does not import the audit above it."""
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.errors import GGUFTplError
    from gguftpl.gguf.reader import read_header

    try:
        loaded, _ = AnalysisCache.on_disk().load(read_header(path), "hf")
    except (GGUFTplError, OSError, ValueError):
        return ""
    t = next((t for t in loaded.facts.templates if t.name == template), None)
    return t.call_text if t is not None and t.call is not None and t.call.rendered else ""


def _add_hf_call(stage: Stage, hf_text: str, caps: Mapping[str, bool]) -> None:
    """Stage 3 names whose render wrote no call: llama.cpp's, when transformers' render of the same template
    writes one (never 'the template writes no text' while the audit shows the call it rendered)."""
    if not hf_text:
        return
    stage.data["hf_call_text"] = hf_text
    probe = "" if caps.get("supports_tool_calls", True) else " (its capability probe: supports_tool_calls=no)"
    stage.evidence = (
        f"llama.cpp's render of a history with a tool call holds no text for the call{probe}, though "
        f"transformers (HF semantics) writes it with the same template as {excerpt(hf_text, -1, 0, 160)!r}: "
        "the call format exists, but llama.cpp never writes it, so it has no call in history to parse"
    )


def _history_note(ct: CallText, call: dict[str, Any]) -> str:
    """What the evidence adds when the call that parses is not the one history shows."""
    also = (
        f" (history writes the call as {ct.history_text!r}, which llama.cpp does not parse: the model's own turn "
        "differs)"
        if ct.history_text
        else ""
    )
    if ct.call_id:
        also += (
            f" (the template writes the call's id where the name belongs: the name reaches history only when "
            f"ids carry it, as {ct.call_id!r}; with an id like {call.get('id')!r} it is lost)"
        )
    return also


def _parsed_call(
    s: LlamaCppSession,
    msgs: list[Message],
    tools: list[dict[str, Any]],
    ct: CallText,
    call: dict[str, Any],
    data: dict[str, Any],
) -> Stage:
    fn = call["function"]
    also = _history_note(ct, call)
    if ct.history_text:
        data["history_text"] = ct.history_text
    attempt = parse_call(s, msgs, tools, ct.text)
    if not call_matches(attempt, fn) and ct.text.strip() != ct.text:
        # the whitespace around a turn belongs to the template's layout; a model need not emit it
        trimmed = parse_call(s, msgs, tools, ct.text.strip())
        if call_matches(trimmed, fn):
            data.update(parsed=trimmed[0], trimmed=True)
            return Stage(
                STAGE_CALL,
                PASS,
                f"llama.cpp parsed {ct.text.strip()!r} into {fn['name']}({json.dumps(trimmed[1])}) (the call "
                f"as the template writes it, {ct.text!r}, parses only without its surrounding whitespace){also}",
                data,
            )
    parsed, args, error = attempt
    if error is not None:
        return Stage(STAGE_CALL, FAIL, f"llama.cpp's parser rejected {ct.text!r}: {error}", data)
    assert parsed is not None
    data["parsed"] = parsed
    if call_matches(attempt, fn):
        evidence = f"llama.cpp parsed {ct.text!r} into {fn['name']}({json.dumps(args)}){also}"
        return Stage(STAGE_CALL, PASS, evidence, data)
    return Stage(STAGE_CALL, FAIL, _wrong_parse(ct, fn, parsed), data)


def _wrong_parse(ct: CallText, fn: dict[str, Any], parsed: Message) -> str:
    got = [(c.get("function") or {}) for c in parsed.get("tool_calls") or []]
    if got:
        return (
            f"llama.cpp parsed {ct.text!r} into {json.dumps(got)}, expected one call "
            f"{fn['name']}({json.dumps(fn['arguments'])})"
        )
    content = str(parsed.get("content") or "")
    reasoning = str(parsed.get("reasoning_content") or "")
    # llama.cpp may read the call as the model's reasoning (a template whose reasoning turn and call
    # turn open alike): say where the call went, not only what was left as content
    where = (
        f"it took the call as reasoning ({reasoning!r}) and left content {content!r}"
        if fn["name"] in reasoning
        else f"it came back as content {content!r}"
    )
    return f"llama.cpp parsed no tool call from {ct.text!r}; {where}"
