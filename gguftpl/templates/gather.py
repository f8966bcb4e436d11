"""Gather the facts of one chat template: parse it, walk its AST, render the probe conversations.

Each step observes and records; none decides what is wrong (that is ``gguftpl/rules/``). Rendering uses
transformers' semantics through the bounded worker (``hfrender.render_hf``); a probe transformers refuses
is retried in the lenient sandbox (llama.cpp's leniencies) to learn what the template would print, and
the first probe that overruns a bound stops every later render.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from gguftpl import limits
from gguftpl.engines.transformers import TemplateRenderError, render_hf
from gguftpl.templates import probes
from gguftpl.templates.facts import (
    CallFacts,
    EngineDifference,
    EngineFacts,
    EngineRender,
    LlamaCppFacts,
    RenderFailure,
    ReprLeak,
    SourceIssue,
    StaticFacts,
    TemplateFacts,
    TriggerTrial,
    around,
    trim,
)
from gguftpl.templates.verdicts import (
    dropped_messages,
    tool_calls_verdict,
    tool_results_verdict,
    tools_verdict,
    tools_with_system,
)

PROMPT_KEEP = 65536
"""Characters of each probe prompt kept in the facts."""


def _line_of(text: str, line: int | None) -> str:
    lines = text.splitlines()
    return lines[line - 1].strip() if isinstance(line, int) and 0 < line <= len(lines) else ""


def _failure(probe: str, e: TemplateRenderError, text: str = "") -> RenderFailure:
    return RenderFailure(probe, e.kind, str(e), e.line, e.exc_type, _line_of(text, e.line))


class _Renderer:
    """Renders one template with its bos/eos and the tokenizer's other special tokens (``specials``: variable
    name -> text, as transformers passes them), stopping at the first resource overrun and recording every
    probe transformers refused."""

    def __init__(
        self, text: str, bos: str, eos: str, specials: Mapping[str, str] | None = None, parts: bool = False
    ) -> None:
        self.text = text
        self.bos = bos
        self.eos = eos
        self.specials: dict[str, Any] = {
            k: v for k, v in (specials or {}).items() if k not in ("bos_token", "eos_token")
        }
        self.parts = parts
        """Send string content as one text part, as llama.cpp does for a template that reads only parts."""
        self.overrun: RenderFailure | None = None
        self.lenient_used = False
        self.errors: list[RenderFailure] = []
        self.strict: set[str] = set()
        """Probes transformers' renderer rendered itself."""

    def render(
        self,
        label: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        agp: bool = True,
        fallback: bool = True,
    ) -> str | None:
        if self.overrun is not None:
            return None
        if self.parts:
            messages = probes.content_as_parts(messages)
        try:
            out = render_hf(self.text, messages, tools, agp, self.bos, self.eos, **self.specials)
            self.strict.add(label)
            return out
        except TemplateRenderError as e:
            failure = _failure(label, e, self.text)
            if failure.overran:
                self.overrun = failure
                return None
            self.errors.append(failure)
            if not fallback or e.kind == "syntax":
                return None
        try:
            out = render_hf(self.text, messages, tools, agp, self.bos, self.eos, lenient=True, **self.specials)
            self.lenient_used = True
            return out
        except TemplateRenderError as e:
            if e.overran:
                self.overrun = _failure(label, e, self.text)
            return None

    def quietly(self, *args: Any, **kwargs: Any) -> str | None:
        """``render`` whose refusals are not recorded (odd probes a template may reject without fault)."""
        before = len(self.errors)
        out = self.render(*args, **kwargs)
        del self.errors[before:]
        return out


@dataclass
class _Draft:
    """The facts while they are being gathered (TemplateFacts is frozen)."""

    fields: dict[str, Any] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def set(self, **kw: Any) -> None:
        self.fields.update(kw)

    def freeze(self, t0: float) -> TemplateFacts:
        self.timings["total"] = round((time.perf_counter() - t0) * 1000, 2)
        prompts = {k: trim(v, PROMPT_KEEP) for k, v in self.prompts.items()}
        return TemplateFacts(**self.fields, prompts=prompts, timings_ms=self.timings)


def gather_facts(
    text: str,
    *,
    name: str = "default",
    bos_token: str = "",
    eos_token: str = "",
    key: str | None = None,
    ask_llamacpp: bool = False,
    special_tokens: Mapping[str, str] | None = None,
    engines: Sequence[str] = (),
) -> TemplateFacts:
    """Every fact about ``text``. ``ask_llamacpp`` also has llama.cpp (when xllamacpp is installed) load the text
    as a file's default template and render the probe conversations (``llamacpp``); the verdicts are then
    llama.cpp's where it rendered (``templates.verdicts``). ``special_tokens`` (``{"sep_token": …}``) go to
    transformers' renderer beside bos/eos, as transformers passes its tokenizer's special tokens; llama.cpp
    gets bos/eos only, so a template reading the others renders differently there (``engine_differences``).
    ``engines``: the other engines to ask (``hfjs``, ``minijinja/tgi``: :mod:`gguftpl.templates.enginefacts`), in
    parallel with the rest, each in its own bounded worker."""
    from gguftpl.gguf.templateset import sha256_text, template_key
    from gguftpl.templates import safety

    t0 = time.perf_counter()
    draft = _Draft()
    size = len(text.encode("utf-8", "surrogatepass"))
    draft.set(name=name, key=key or template_key(name), sha256=sha256_text(text), size=size, head=text[:400])
    if size > limits.MAX_TEMPLATE_BYTES:
        # parsing and rendering cost time and memory in proportion: a 50 MB "template" took 20 s and 400 MB
        draft.set(too_large=True, dialect="unknown")
        return draft.freeze(t0)
    others = _start_engines(text, engines, bos_token, eos_token, special_tokens)
    ast = _static_facts(draft, text)
    draft.set(invisible=tuple(_issue(i) for i in safety.invisible_characters(text)))
    draft.timings["static"] = round((time.perf_counter() - t0) * 1000, 2)
    r = _Renderer(text, bos_token, eos_token, special_tokens)
    draft.set(special_tokens=dict(r.specials))
    before = dict(draft.fields)
    if ast is None:
        _dialect_without_ast(draft, text)
    else:
        _render_probes(draft, r, ast)
    llama = None
    if ask_llamacpp and not _is_bomb(draft, r):
        # llama.cpp renders the template at load without limits: a bomb would cost a crashed worker or the
        # whole timeout and say nothing the bounded renderer has not
        t2 = time.perf_counter()
        llama = _llamacpp(text, bos_token, eos_token)
        draft.timings["llamacpp"] = round((time.perf_counter() - t2) * 1000, 2)
    if ast is not None and llama is not None and probes.typed_content_only(llama.caps):
        # llama.cpp sends string content as text parts to this template: probe it as llama.cpp does, so both
        # engines see the same conversation (its caps are known only now: llama.cpp is asked after the bounded
        # renderer has ruled out a bomb)
        draft.fields, draft.prompts = {**before, "content_as_parts": True}, {}
        r = _Renderer(text, bos_token, eos_token, special_tokens, parts=True)
        _render_probes(draft, r, ast)
    _decide(draft, r, llama)
    if llama is not None and ast is not None:
        draft.set(engine_differences=_engine_differences(text, llama, r.specials))
    if others is not None:
        from gguftpl.templates.enginefacts import other_differences

        t3 = time.perf_counter()
        asked = others.result()
        draft.timings["engines wait"] = round((time.perf_counter() - t3) * 1000, 2)
        diffs = other_differences(asked, draft.prompts, r.strict) if ast is not None else ()
        draft.set(engines=asked, engine_differences=tuple(draft.fields.get("engine_differences", ())) + diffs)
    return draft.freeze(t0)


def _start_engines(
    text: str, engines: Sequence[str], bos: str, eos: str, specials: Mapping[str, str] | None
) -> Future[dict[str, EngineFacts]] | None:
    """Ask the other engines in the background (their workers are bounded: no bomb check needed first)."""
    if not engines:
        return None
    from concurrent.futures import ThreadPoolExecutor

    from gguftpl.templates.enginefacts import ask_engines

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gguftpl-engines")
    future = pool.submit(ask_engines, text, tuple(engines), bos, eos, specials)
    pool.shutdown(wait=False)
    return future


def _render_probes(draft: _Draft, r: _Renderer, ast: Any) -> None:
    t1 = time.perf_counter()
    _behaviour(draft, r, r.text, ast)
    draft.timings["render"] = round((time.perf_counter() - t1) * 1000, 2)


def _is_bomb(draft: _Draft, r: _Renderer) -> bool:
    """The bounded renderer had to stop a probe (``r.overrun``: the draft's own ``overrun`` is set only by
    ``_decide``, after llama.cpp was asked), or the AST holds a range too large to run."""
    static = draft.fields.get("static")
    huge_range = static is not None and any(i.kind == "range" for i in static.sandbox)
    return r.overrun is not None or draft.fields.get("overrun") is not None or huge_range


def _issue(i: Any) -> SourceIssue:
    return SourceIssue(i.kind, i.line, i.column, i.evidence, i.detail)


def _static_facts(draft: _Draft, text: str) -> Any:
    """Parse and walk the AST; returns the AST (None when it does not parse)."""
    from gguftpl.templates import safety, static

    try:
        ast = static.parse_template(text)
    except Exception as e:  # TemplateSyntaxError, or RecursionError on absurd nesting
        line = getattr(e, "lineno", None)
        msg = getattr(e, "message", None) or str(e) or type(e).__name__
        draft.set(parse_error=RenderFailure("parse", "syntax", msg, line, None, _line_of(text, line)))
        return None
    try:
        flow = static.data_flow(ast, text, "tools")
        facts = StaticFacts(
            reads_tools=flow.reads,
            tools_rendered=flow.rendered,
            sinks=tuple((s.line, s.expr) for s in flow.sinks[:8]),
            tests_only=tuple(flow.tests_only[:8]),
            literal_text="\0".join(static.literal_text(ast)),
            sandbox=tuple(_issue(i) for i in safety.sandbox_issues(ast, text)),
            triggers=tuple(_issue(i) for i in safety.hidden_triggers(ast, text)),
        )
    except RecursionError:
        # Parsed, but nested deeper than Python's stack lets us walk: say so, keep going.
        facts = StaticFacts(
            reads_tools=False, tools_rendered=None, error="template nested too deeply for static analysis"
        )
    draft.set(static=facts)
    return ast


def _dialect_without_ast(draft: _Draft, text: str) -> None:
    """Nothing renders, but the format the template's text teaches is still worth naming."""
    from gguftpl.templates import dialect as dialects

    found, source = dialects.classify("", text) if text.strip() else ("none", "")
    draft.set(dialect=found if source or not text.strip() else "unknown", dialect_source=source)


def _behaviour(draft: _Draft, r: _Renderer, text: str, ast: Any) -> None:
    """Every probe under transformers' semantics (the lenient sandbox where transformers refuses one)."""
    base_tools = _tools_probes(draft, r)
    _generation_prompt(draft, r, base_tools)
    _system_probe(draft, r, base_tools)
    call, content = _call_probe(draft, r, text, r.bos, r.eos)
    _round_trip(draft, r, call, content)
    _multi_turn(draft, r, base_tools, r.eos)
    _shape_probes(r)
    draft.set(dropped=dropped_messages(draft.prompts.get("system"), draft.prompts.get("multi")))
    _trigger_trials(draft, r, ast, base_tools)
    _python_repr(draft)
    _markers_and_dialect(draft, r.bos)


def _tools_probes(draft: _Draft, r: _Renderer) -> list[dict[str, Any]] | None:
    """The plain probe and the canary-tool probe, user-only and with a system message (some templates write the
    tool block only inside a system turn, others drop it once there is one); returns the tools every later
    probe passes (the canary for a template that renders only with tools, else None)."""
    plain = r.render(probes.PLAIN, probes.plain_conversation(), agp=True)
    with_tools = r.render(probes.TOOLS, probes.tools_conversation(), tools=probes.canary_tools())
    shown = with_tools
    if with_tools is not None:
        # folded if the template refuses the system role; the lenient sandbox only where the tools are missing
        lenient = probes.CANARY_TOOL_NAME not in with_tools
        system_conv = probes.plain_conversation(system=True)
        before = len(r.errors)
        alt = r.render(probes.TOOLS_WITH_SYSTEM, system_conv, tools=probes.canary_tools(), fallback=False)
        if alt is None and r.overrun is None:
            folded = probes.fold_system(system_conv)
            alt = r.render(probes.TOOLS_WITH_SYSTEM, folded, tools=probes.canary_tools(), fallback=lenient)
        del r.errors[before:]
        if alt is not None:
            draft.prompts["tools with system"] = alt
            if lenient and probes.CANARY_TOOL_NAME in alt:
                shown = alt
    base_tools: list[dict[str, Any]] | None = None
    if plain is None and shown is not None:
        # Some tool templates (Hermes tool_use) iterate `tools` unconditionally: probe them with tools.
        base_tools = probes.canary_tools()
        draft.set(requires_tools=True)
        plain = shown
    if plain is not None:
        draft.prompts["plain"] = plain
    if with_tools is not None:
        draft.prompts["tools"] = with_tools
    return base_tools


def _generation_prompt(draft: _Draft, r: _Renderer, base_tools: list[dict[str, Any]] | None) -> None:
    from gguftpl.templates.dialect import inserted_text

    plain = draft.prompts.get("plain")
    without = r.render("plain without generation prompt", probes.plain_conversation(), tools=base_tools, agp=False)
    if plain is not None and without is not None:
        draft.set(
            handles_generation_prompt=plain != without,
            generation_prompt_text=trim(inserted_text(plain, without), 200),
        )


def _system_probe(draft: _Draft, r: _Renderer, base_tools: list[dict[str, Any]] | None) -> None:
    """A system message; a template that rejects the role gets it folded into the first user turn."""
    system_conv = probes.plain_conversation(system=True)
    with_system = r.render("system message", system_conv, tools=base_tools, fallback=False)
    if with_system is not None:
        draft.prompts["system"] = with_system
    elif r.overrun is None and r.errors and r.errors[-1].probe == "system message":
        err = r.errors[-1]
        folded = r.render("system folded", probes.fold_system(system_conv), tools=base_tools)
        if folded is not None and "system" in err.message.lower():
            r.errors.pop()
            draft.set(system_folded=True, system_rejection=err)


def _call_probe(draft: _Draft, r: _Renderer, text: str, bos: str, eos: str) -> tuple[dict[str, Any], str | None]:
    """The canary call, the way the template writes it; returns the call and the assistant content to use
    in the round trip (the shapes the template accepted)."""
    from gguftpl.templates import dialect as dialects

    call = probes.tool_call()
    if r.overrun is not None:
        return call, ""
    tokens: dict[str, Any] = {"bos_token": bos, "eos_token": eos, **r.specials}
    try:
        rendering = dialects.render_call(text, **tokens)
    except TemplateRenderError as e:
        failure = _failure("assistant tool call", e, text)
        if failure.overran:
            r.overrun = failure
            return call, ""
        r.errors.append(failure)
        try:
            rendering = dialects.render_call(text, lenient=True, **tokens)
        except TemplateRenderError:
            return call, ""
        r.lenient_used = True
        draft.set(call=CallFacts(rendering.text, rendering.rendered_call), renders_tool_calls=rendering.rendered_call)
        return call, ""
    named_id = _call_id_in_place_of_name(text, rendering, tokens) if rendering.rendered_call else ""
    draft.set(
        call=CallFacts(
            text=rendering.text,
            rendered=rendering.rendered_call,
            string_arguments=rendering.string_arguments,
            content_none=rendering.content_none,
            id_in_place_of_name=bool(named_id),
            named_id=named_id,
        ),
        renders_tool_calls=rendering.rendered_call,
    )
    return probes.tool_call(string_arguments=rendering.string_arguments), None if rendering.content_none else ""


def _call_id_in_place_of_name(text: str, rendering: Any, tokens: dict[str, Any]) -> str:
    """The rendered call carries its id but not its function name: render it again with an id that carries
    the name (``functions.NAME:0``, Kimi K2's form). Returns that id when the name appears then (the template
    writes the id where the name belongs), else ''."""
    from gguftpl.templates import dialect as dialects

    name = probes.CANARY_TOOL_NAME
    if name in rendering.text or probes.CANARY_CALL_ID not in rendering.text:
        return ""
    named_id = f"functions.{name}:0"
    call = {**probes.tool_call(string_arguments=rendering.string_arguments), "id": named_id}
    try:
        again = dialects.render_call(text, call, **tokens)
    except TemplateRenderError:
        return ""
    return named_id if name in again.text else ""


def _round_trip(draft: _Draft, r: _Renderer, call: dict[str, Any], content: str | None) -> None:
    out = r.render(
        "tool round trip",
        probes.tool_round_trip_conversation(call, content),
        tools=probes.canary_tools(),
        agp=True,
    )
    if out is not None:
        draft.prompts["round_trip"] = out


def _multi_turn(draft: _Draft, r: _Renderer, base_tools: list[dict[str, Any]] | None, eos: str) -> None:
    from gguftpl.gguf import tokens

    multi = r.render("multi-turn", probes.multi_turn_conversation(), tools=base_tools, agp=True)
    if multi is not None:
        draft.prompts["multi"] = multi
        draft.set(end_of_turn=tokens.end_of_turn_marker(multi, probes.CANARY_ASSISTANT, eos))


def _shape_probes(r: _Renderer) -> None:
    """The message shapes OpenAI-compatible clients send (``probes.SHAPE_PROBES``), under transformers'
    renderer itself, each where its plain twin renders: a refusal is recorded as that probe's error."""
    shapes = {name: (msgs, tools, agp) for name, msgs, tools, agp in probes.engine_probes()}
    for name, twin in probes.SHAPE_PROBES.items():
        msgs, tools, agp = shapes[twin]
        if twin != probes.PLAIN and r.quietly(twin, msgs, tools=tools, agp=agp, fallback=False) is None:
            continue
        if twin == probes.PLAIN and twin not in r.strict:
            continue
        from gguftpl.engines.transformers_env import normalize_messages  # jinja2: only when something renders

        msgs, tools, agp = shapes[name]
        # as apply_chat_template sends it: the null key dropped (what the raw shape does is llama.cpp's probe)
        r.render(name, normalize_messages(msgs), tools=tools, agp=agp, fallback=False)


def _trigger_trials(draft: _Draft, r: _Renderer, ast: Any, tools: list[dict[str, Any]] | None) -> None:
    """Send the strings the template compares message data against, and see whether prose appears that
    the message did not contain: a hidden trigger, however indirect the gating."""
    from gguftpl.templates import safety
    from gguftpl.templates.dialect import inserted_text

    baseline = draft.prompts.get("plain")
    static = draft.fields.get("static")
    if baseline is None or r.overrun is not None or (static is not None and static.triggers):
        return  # nothing to compare with, or already proven from the AST
    contains, equals = safety.compared_literals(ast)
    trials = [contains] if contains else []
    trials.extend([lit] for lit in equals[:8])
    for lits in trials:
        content = " ".join(lits) if len(lits) == 1 and lits[0] in equals else f"{probes.CANARY_USER} {' '.join(lits)}"
        # odd content making a template raise is not a finding here
        out = r.quietly("trigger", [{"role": "user", "content": content}], tools=tools, fallback=False)
        if out is None:
            continue
        extra = inserted_text(out, baseline)
        if len(safety.trigger_words(extra, [*lits, probes.CANARY_USER], (r.bos, r.eos, *r.specials.values()))) >= 3:
            draft.set(trigger=TriggerTrial(tuple(lits), trim(extra)))
            return


def _python_repr(draft: _Draft) -> None:
    """A mapping printed without ``tojson`` shows up as Python's repr: the canary's parameter description
    (or the call's argument) between single quotes right after its quoted key. Neither string occurs in
    any template, so finding that exact repr proves the template printed the canary's own data that way."""
    call = draft.fields.get("call")
    shown = draft.prompts.get("tools") or ""
    if probes.CANARY_TOOL_NAME not in shown:
        shown = draft.prompts.get("tools with system") or shown
    checks = (
        (shown, "description", probes.CANARY_PARAM_DESCRIPTION, "the tool schema"),
        (call.text if call else "", probes.CANARY_PARAM_NAME, probes.CANARY_ARG_VALUE, "a tool call's arguments"),
    )
    leaks = []
    for text, key, value, what in checks:
        needle = f"'{key}': '{value}'"
        if needle in text:
            leaks.append(ReprLeak(what, needle, around(text, needle, 120)))
    draft.set(python_repr=tuple(leaks))


def _markers_and_dialect(draft: _Draft, bos: str) -> None:
    from gguftpl.gguf import tokens
    from gguftpl.templates import dialect as dialects

    call = draft.fields.get("call")
    call_text = call.text if call else ""
    keys = ["plain", "tools", "round_trip", "multi"]
    if probes.CANARY_TOOL_NAME not in draft.prompts.get("tools", ""):
        keys.insert(2, "tools with system")  # where it stands in for the user-only tools prompt
    rendered = [draft.prompts.get(k) for k in keys]
    draft.set(markers=tuple(tokens.control_markers([p for p in [*rendered, call_text] if p])))
    plain = draft.prompts.get("plain")
    draft.set(starts_with_bos=bool(bos) and plain is not None and plain.startswith(bos))
    static = draft.fields.get("static")
    found, source = dialects.classify(call_text, static.literal_text if static else "")
    if draft.fields.get("renders_tool_calls") is False and source == "":
        found = "none"
    draft.set(dialect=found, dialect_source=source)


def _llamacpp(text: str, bos: str, eos: str) -> LlamaCppFacts | None:
    """llama.cpp loads the text as a file's default template (its own bos/eos) and renders every engine
    probe, in its bounded child; None without xllamacpp."""
    from gguftpl.engines.llamacpp import Probe, llamacpp_renders
    from gguftpl.errors import LlamaCppError

    asked = [Probe(n, msgs, tools, agp) for n, msgs, tools, agp in probes.engine_probes()]
    try:
        answer = llamacpp_renders(text, (bos, eos), asked)
    except LlamaCppError:  # xllamacpp not installed: the facts say llama.cpp was not asked
        return None
    renders = {
        name: EngineRender(r.get("text"), r.get("error"), bool(r.get("overran")))
        for name, r in (answer.get("renders") or {}).items()
    }
    system, multi = renders.get(probes.SYSTEM), renders.get(probes.MULTI)
    return LlamaCppFacts(
        load_error=answer.get("error"),
        unchecked=answer.get("unchecked"),
        caps=dict(answer.get("caps") or {}),
        renders=renders,
        dropped=dropped_messages(system.text if system else None, multi.text if multi else None),
        specials=tuple(answer.get("specials") or ("", "")),
    )


def _decide(draft: _Draft, r: _Renderer, llama: LlamaCppFacts | None) -> None:
    """The verdicts, each from the engine that decides it (``templates.verdicts``)."""
    strict = tuple(sorted(r.strict))
    tools_error = next((e.message for e in r.errors if e.probe == probes.TOOLS), None)
    static = draft.fields.get("static")
    draft.set(**tools_verdict(llama, draft.prompts, strict, static, tools_error))
    draft.set(tools_with_system=tools_with_system(llama, draft.prompts), llamacpp=llama, strict=strict)
    draft.set(**tool_results_verdict(llama, draft.prompts, strict))
    call_lenient = any(e.probe == "assistant tool call" for e in r.errors)
    draft.set(**tool_calls_verdict(llama, draft.fields.get("renders_tool_calls"), call_lenient))
    draft.set(render_errors=tuple(r.errors), lenient=r.lenient_used, overrun=r.overrun)


def _engine_differences(text: str, llama: LlamaCppFacts, specials: Mapping[str, str]) -> tuple[EngineDifference, ...]:
    """Conversations both engines render, rendered again by transformers with the variables llama.cpp passes
    (templates.enginediff), the other special tokens transformers passes (``specials``) and the messages as llama.cpp
    hands them to the template (``probes.llamacpp_messages``), whose prompts still differ."""
    from gguftpl.templates.enginediff import compare_with_llamacpp

    bos, eos = llama.specials
    shapes = {name: (msgs, tools) for name, msgs, tools, _agp in probes.engine_probes()}
    out = []
    for name in (probes.PLAIN, probes.TOOLS, probes.ROUND_TRIP, probes.SYSTEM, probes.TOOLS_WITH_SYSTEM):
        prompt = llama.text(name)
        if prompt is None:
            continue
        msgs, tools = shapes[name]
        ag = compare_with_llamacpp(text, msgs, tools, prompt, bos, eos, caps=llama.caps, specials=specials)
        d = ag.difference
        if ag.hf_error is None and d is not None:
            out.append(EngineDifference(name, d.at, d.line, d.engine, d.transformers, tuple(ag.normalised)))
    return tuple(out)
