"""GT1xx: template presence, parsing and rendering."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gguftpl.findings import Finding, Rule, Severity, check, register
from gguftpl.repair import RULE_FIX, TOOLS_NEVER_REACH
from gguftpl.rules.context import FileContext
from gguftpl.templates import probes
from gguftpl.templates.facts import trim

if TYPE_CHECKING:
    from gguftpl.templates.facts import RenderFailure, TemplateFacts

NO_CHAT_TEMPLATE = register(
    Rule(
        "GT101",
        "no-chat-template",
        Severity.ERROR,
        "The file has no chat template at all.",
        why="Runtimes silently fall back to a built-in format (usually ChatML) that may not match the model, "
        "and that fallback drops any tools passed to it: the tools never reach the prompt, the verdict of GT201, "
        "with GT201's severity (a repair that adds a template ignoring tools is then no change, not a regression).",
        example="A GGUF without `tokenizer.chat_template` loaded in llama.cpp or Ollama.",
        fix="Add the model's templates: " + RULE_FIX,
    )
)


@check(NO_CHAT_TEMPLATE, "file")
def no_chat_template(ctx: FileContext) -> Iterator[Finding]:
    tset = ctx.tset
    if tset is None or tset.templates:
        return
    # a template key that holds no string is no template either (GT003 names its type)
    what = "no usable" if tset.non_string_templates else "no"
    yield ctx.finding(
        NO_CHAT_TEMPLATE,
        f"the file has {what} tokenizer.chat_template: runtimes fall back to a built-in format "
        "(usually ChatML) and drop tools",
        key="tokenizer.chat_template",
        fix=ctx.tools_fix() or ctx.hub_fix("default"),
        verdict=TOOLS_NEVER_REACH,
    )


TEMPLATE_PARSE_ERROR = register(
    Rule(
        "GT102",
        "template-parse-error",
        Severity.ERROR,
        "The chat template is not valid Jinja (it fails to parse under Hugging Face's jinja2 environment).",
        why="transformers, vLLM, llama-cpp-python and similar runtimes refuse the template; nothing renders.",
        example="`{% for m in messages %}` without `{% endfor %}`.",
        fix="Replace the template with a working upstream one (`gguftpl patch --from-hub` or `--template`).",
    )
)


@check(TEMPLATE_PARSE_ERROR, "template")
def template_parse_error(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    e = t.parse_error
    if e is not None:
        yield ctx.finding(
            TEMPLATE_PARSE_ERROR, f"template does not parse: {e.message}", t, line=e.line, evidence=e.source_line
        )
    for e in render_failures(t):
        if e.kind == "syntax":
            yield ctx.finding(
                TEMPLATE_PARSE_ERROR,
                f"transformers cannot compile the template: {e}",
                t,
                line=e.line,
                evidence=e.source_line[:200],
                probe=e.probe,
            )


TEMPLATE_RENDER_ERROR = register(
    Rule(
        "GT103",
        "template-render-error",
        Severity.ERROR,
        "The chat template raises while rendering a probe conversation, in transformers, in llama.cpp or both; "
        "the finding names the engines that fail and its severity depends on them.",
        why="A runtime fails every request of that kind (for example a tool round trip). Severity follows the "
        "engines: error when llama.cpp fails (llama.cpp, and the runtimes built on it, refuse the request) or "
        "when both do; warning when only transformers fails (transformers, vLLM and other jinja2 runtimes "
        "refuse it while llama.cpp's more lenient engine renders it); error when llama.cpp could not be asked "
        "(xllamacpp not installed). A conversation without tools failing in a named template is a warning "
        "(default) or information (others): llama.cpp picks a named template only for tool requests.",
        example="`tools | map(...) | tojson` (a generator transformers' tojson refuses), `list.append` in the "
        "immutable sandbox: transformers only. An undefined filter: both.",
        fix="Fix the failing line or replace the template with a working upstream one.",
    )
)


TOOL_PROBES = ("tools", "assistant tool call", "tool round trip")
"""Probes whose conversations carry tools, tool calls or tool results."""


def render_failures(t: TemplateFacts) -> list[RenderFailure]:
    """The probes transformers refused, once per distinct error. A template without tool support failing
    on tool messages says nothing GT201 does not."""
    seen: set[str] = set()
    out = []
    for e in t.render_errors:
        if e.probe in probes.SHAPE_PROBES:
            continue  # GT106
        if (e.probe in TOOL_PROBES and t.tools_static is False) or e.message in seen:
            continue
        seen.add(e.message)
        out.append(e)
    return out


def sandbox_refusal(e: RenderFailure) -> bool:
    """The sandbox refused an attribute walk (``__class__`` …): a safety finding (GT401), not a bug."""
    return e.kind == "security" and "__" in e.message


# transformers' probes that llama.cpp renders under another name
_LLAMA_EQUIVALENT = {
    "plain without generation prompt": probes.PLAIN,
    "assistant tool call": probes.ROUND_TRIP,
    "system folded": probes.SYSTEM,
}


def engines_failing(t: TemplateFacts, probe: str) -> tuple[list[str], Severity | None]:
    """Besides transformers (which failed ``probe``), does llama.cpp fail it? The engines that fail and the
    severity that follows: error when llama.cpp fails too, warning when it renders the conversation, None
    (the rule's own) when llama.cpp was not asked."""
    llama = t.llamacpp
    if llama is None or llama.unchecked:
        return ["transformers"], None
    if llama.load_error:
        return ["transformers", "llama.cpp"], Severity.ERROR
    r = llama.renders.get(_LLAMA_EQUIVALENT.get(probe, probe))
    if r is None:
        return ["transformers"], None
    if r.text is not None:
        return ["transformers"], Severity.WARNING
    return ["transformers", "llama.cpp"], Severity.ERROR


def _milder(a: Severity | None, b: Severity | None) -> Severity | None:
    if a is None or b is None:
        return a or b
    return a if a.rank < b.rank else b


@check(TEMPLATE_RENDER_ERROR, "template")
def template_render_error(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    for e in render_failures(t):
        if e.kind == "syntax" or sandbox_refusal(e):
            continue
        engines, severity = engines_failing(t, e.probe)
        msg = f"rendering the {e.probe} probe raised {e.exc_type or 'an error'} in {' and '.join(engines)}: {e}"
        if e.probe not in TOOL_PROBES and (t.requires_tools or t.name != "default"):
            # llama.cpp picks a named template only for tool (or document) requests.
            msg = f"the template fails on a conversation without tools ({e.probe} probe, {' and '.join(engines)}): {e}"
            severity = _milder(severity, Severity.WARNING if t.name == "default" else Severity.INFO)
        if engines == ["transformers"]:
            if severity is Severity.WARNING:
                msg += " (llama.cpp renders it)"
            elif t.lenient:
                msg += " (a lenient engine like llama.cpp's renders it)"
        yield ctx.finding(
            TEMPLATE_RENDER_ERROR,
            msg,
            t,
            line=e.line,
            evidence=e.source_line[:200],
            severity=severity,
            probe=e.probe,
            engines=engines,
        )
    yield from _llamacpp_only_failures(t, ctx)


def _llamacpp_only_failures(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    """Conversations transformers renders and llama.cpp refuses: llama.cpp users get an error there."""
    llama = t.llamacpp
    if llama is None or llama.load_error or llama.unchecked:
        return
    for probe, r in llama.renders.items():
        if r.text is not None or r.overran or probe in probes.SHAPE_PROBES or probe not in t.strict:
            continue
        yield ctx.finding(
            TEMPLATE_RENDER_ERROR,
            f"rendering the {probe} probe fails in llama.cpp (transformers renders it): {r.error}",
            t,
            severity=Severity.ERROR,
            probe=probe,
            engines=["llama.cpp"],
        )


MESSAGE_SHAPE_CRASH = register(
    Rule(
        "GT106",
        "message-shape-crash",
        Severity.WARNING,
        "The template raises on a message in the shape OpenAI-compatible clients send: an assistant turn that "
        'calls a tool with `content: null`, or content given as a list of parts (`[{"type": "text", …}]`).',
        why="Agents and SDKs send exactly these shapes (the OpenAI API returns `content: null` beside "
        "`tool_calls`, and multimodal clients send parts), so the first tool round trip or the first message of "
        "such a client fails. Only the shape is judged: the same conversation with string content must render. "
        "Severity follows the engines: error when llama.cpp fails too; when only transformers does (llama.cpp "
        "normalises the message first: null content becomes empty text, parts are joined for templates that "
        "expect a string), a warning for null content and information for parts (servers like vLLM join them "
        "too).",
        example="Plain ChatML `'\\n' + message['content']`: TypeError on None and on a list.",
        fix="Use a template that tests `message.content is string` / `is none`, or the upstream one.",
    )
)


_SHAPES = {
    probes.NULL_CONTENT: "an assistant tool call with `content: null`",
    probes.TEXT_PARTS: "content given as a list of text parts",
}


@check(MESSAGE_SHAPE_CRASH, "template")
def message_shape_crash(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    for probe, shape in _SHAPES.items():
        hf = next((e for e in t.render_errors if e.probe == probe), None)
        llama = t.llamacpp
        twin_renders = llama is not None and llama.text(probes.SHAPE_PROBES[probe]) is not None
        r = llama.renders.get(probe) if llama is not None and twin_renders else None
        llama_fails = r is not None and r.text is None and not r.overran
        if hf is None and not llama_fails:
            continue
        engines = [e for e, failed in (("transformers", hf is not None), ("llama.cpp", llama_fails)) if failed]
        error = hf.message if hf is not None else (r.error if r is not None else "")
        kept = " (llama.cpp renders it)" if r is not None and r.text is not None else ""
        if hf is not None and probe == probes.NULL_CONTENT:
            kept += "; transformers' apply_chat_template drops the null key and the template reads it anyway"
        # parts are joined into a string by llama.cpp and vLLM for templates that expect one: information
        only_hf = Severity.INFO if probe == probes.TEXT_PARTS else None
        yield ctx.finding(
            MESSAGE_SHAPE_CRASH,
            f"the template raises on {shape} in {' and '.join(engines)}{kept}: {error}",
            t,
            line=hf.line if hf is not None else None,
            evidence=hf.source_line[:200] if hf is not None else "",
            severity=Severity.ERROR if llama_fails else only_hf,
            probe=probe,
            engines=engines,
        )


SYSTEM_ROLE_UNSUPPORTED = register(
    Rule(
        "GT104",
        "system-role-unsupported",
        Severity.INFO,
        "The template rejects system messages; the analysis folded the system text into the first user turn.",
        why="llama.cpp does the same folding; other runtimes raise, so system prompts (and any tool "
        "instructions placed there) are lost or fail.",
        example="gemma-2: `raise_exception('System role not supported')`.",
        fix="Nothing to do for llama.cpp; elsewhere put the system text in the first user message.",
    )
)


@check(SYSTEM_ROLE_UNSUPPORTED, "template")
def system_role_unsupported(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    e = t.system_rejection
    if t.system_folded and e is not None:
        yield ctx.finding(
            SYSTEM_ROLE_UNSUPPORTED,
            f"the template rejects the system role ({e}); system text was folded into the first user turn",
            t,
            line=e.line,
        )


MESSAGE_DROPPED = register(
    Rule(
        "GT105",
        "message-dropped",
        Severity.WARNING,
        "A system message or an assistant reply in history renders without error but never reaches the prompt, "
        "in the engines the finding names.",
        why="The template has no branch for that role, so the text vanishes silently: a system prompt (and any "
        "instructions in it) is ignored, or the model never sees its own earlier answers in a multi-turn chat. "
        "Engines differ: llama.cpp folds the system text into the first user turn when the template has no "
        "system role (its capability probe: supports_system_role=false), so nothing is lost there, and the "
        "finding says so; transformers renders what the template writes.",
        example="A loop that writes only `{% if message['role'] == 'user' %}` turns.",
        fix="Use the upstream template, which renders every role.",
    )
)


# what was dropped -> llama.cpp's probe of it
_LLAMA_PROBE = {"system message": probes.SYSTEM, "assistant reply": probes.MULTI}
# what was dropped -> (the probe that showed it, its canary, how the message says it)
_DROPPED = {
    "system message": ("system", probes.CANARY_SYSTEM, "a system message"),
    "assistant reply": ("multi", probes.CANARY_ASSISTANT, "an assistant reply in history"),
}


@check(MESSAGE_DROPPED, "template")
def message_dropped(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    llama = t.llamacpp if t.llamacpp is not None and t.llamacpp.renders else None
    for what in dict.fromkeys([*t.dropped, *(llama.dropped if llama else ())]):
        probe, canary, subject = _DROPPED[what]
        engines = [
            e
            for e, lost in (("transformers", what in t.dropped), ("llama.cpp", llama and what in llama.dropped))
            if lost
        ]
        note = ""
        if llama is not None and what not in llama.dropped and llama.text(_LLAMA_PROBE[what]) is not None:
            folds = what == "system message" and llama.caps.get("supports_system_role") is False
            note = (
                "; llama.cpp keeps it: it folds the system text into the first user turn (the template has no "
                "system role)"
                if folds
                else "; llama.cpp keeps it"
            )
        prompt = (
            t.prompts.get(probe) if "transformers" in engines else (llama.text(_LLAMA_PROBE[what]) if llama else "")
        )
        yield ctx.finding(
            MESSAGE_DROPPED,
            f"{subject} never reaches the prompt in {' and '.join(engines)}: the template renders without it "
            f"({canary!r} is missing){note}",
            t,
            evidence=trim(prompt or "", 200),
            role=what.split()[0],
            engines=engines,
        )


RUNTIME_ENGINE_ERROR = register(
    Rule(
        "GT107",
        "runtime-engine-error",
        Severity.WARNING,
        "A runtime's own template engine cannot render the template it uses for a request with tools.",
        why="Runtimes do not share one Jinja engine: LM Studio renders with a JavaScript engine "
        "(`@huggingface/jinja`), "
        "TGI, mistral.rs and Dynamo with minijinja (each configured its own way), vLLM and SGLang with transformers' "
        "jinja2, llama.cpp with its own C++ engine. A construct one engine accepts (`tojson(ensure_ascii=False)`, "
        "the `~` operator, tuple unpacking in a loop, a filter on a mapping) makes another raise, and that "
        'runtime\'s users get an error for every request ("Error rendering prompt with jinja template"). The '
        "message names the runtime, its engine and the engine's own words; the runtime view shows every runtime.",
        example="vLLM's Llama-3.2 JSON tool template in LM Studio: `Expected iterable or object type in for loop: "
        "got StringValue`; GLM-4.6 in TGI: `unknown keyword argument 'ensure_ascii'`.",
        fix="Use a template that runtime's engine renders (upstream's, or one without the construct the engine "
        "names); `gguftpl render --engine ENGINE FILE` shows the engine's error and the prompt once it renders.",
    )
)


@check(RUNTIME_ENGINE_ERROR, "file")
def runtime_engine_error(ctx: FileContext) -> Iterator[Finding]:
    failing: dict[tuple[str, str, str], list[str]] = {}
    lines: dict[tuple[str, str, str], int | None] = {}
    for row in ctx.runtimes.failing():
        if row.engine == "llamacpp":
            continue  # llama.cpp's own failures are GT103/GT606, with its load log
        k = (row.engine, row.template, row.error)
        failing.setdefault(k, []).append(row.name)
        lines[k] = row.error_line
    for (engine, template, error), names in failing.items():
        t = next((x for x in ctx.templates if x.name == template), None)
        who = " and ".join(names)
        yield ctx.finding(
            RUNTIME_ENGINE_ERROR,
            f"{who} cannot render a request with tools: its engine ({engine}) raises on the {template} template: "
            f"{error}",
            t,
            line=lines[(engine, template, error)],
            evidence=trim(error),
            runtimes=names,
            engine=engine,
        )
