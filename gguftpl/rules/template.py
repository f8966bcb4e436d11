"""GT1xx: template presence, parsing and rendering."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gguftpl.findings import Finding, Rule, Severity, check, register
from gguftpl.rules.context import FileContext
from gguftpl.templates import probes
from gguftpl.templates.facts import trim

if TYPE_CHECKING:
    from gguftpl.templates.facts import RenderFailure, TemplateFacts

NO_CHAT_TEMPLATE = register(
    Rule(
        "GT101",
        "no-chat-template",
        Severity.WARNING,
        "The file has no chat template at all.",
        why="Runtimes silently fall back to a built-in format (usually ChatML) that may not match the model, "
        "and that fallback drops any tools passed to it.",
        example="A GGUF without `tokenizer.chat_template` loaded in llama.cpp or Ollama.",
        fix="Add the model's template from its Hugging Face repo: `gguftpl patch FILE --from-hub REPO -o OUT.gguf`.",
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
        fix=ctx.hub_fix("default"),
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
        "The chat template raises while rendering a probe conversation under Hugging Face semantics.",
        why="A runtime that renders templates with jinja2 fails on that kind of conversation (for example a "
        "tool round trip), or the template only works in llama.cpp's more lenient engine.",
        example="`tools | map(...) | tojson` (a generator), `list.append` in the immutable sandbox.",
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
        if (e.probe in TOOL_PROBES and t.tools_static is False) or e.message in seen:
            continue
        seen.add(e.message)
        out.append(e)
    return out


def sandbox_refusal(e: RenderFailure) -> bool:
    """The sandbox refused an attribute walk (``__class__`` …): a safety finding (GT401), not a bug."""
    return e.kind == "security" and "__" in e.message


@check(TEMPLATE_RENDER_ERROR, "template")
def template_render_error(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    for e in render_failures(t):
        if e.kind == "syntax" or sandbox_refusal(e):
            continue
        severity = None
        msg = f"rendering the {e.probe} probe raised {e.exc_type or 'an error'}: {e}"
        if e.probe not in TOOL_PROBES and (t.requires_tools or t.name != "default"):
            # llama.cpp picks a named template only for tool (or document) requests.
            msg = f"the template fails on a conversation without tools ({e.probe} probe): {e}"
            severity = Severity.WARNING if t.name == "default" else Severity.INFO
        if t.lenient:
            msg += " (a lenient engine like llama.cpp's renders it)"
        yield ctx.finding(
            TEMPLATE_RENDER_ERROR,
            msg,
            t,
            line=e.line,
            evidence=e.source_line[:200],
            severity=severity,
            probe=e.probe,
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
        "A system message or an assistant reply in history renders without error but never reaches the prompt.",
        why="The template has no branch for that role, so the text vanishes silently: a system prompt (and any "
        "instructions in it) is ignored, or the model never sees its own earlier answers in a multi-turn chat.",
        example="A loop that writes only `{% if message['role'] == 'user' %}` turns.",
        fix="Use the upstream template, which renders every role.",
    )
)


# what was dropped -> (the probe that showed it, its canary, how the message says it)
_DROPPED = {
    "system message": ("system", probes.CANARY_SYSTEM, "a system message"),
    "assistant reply": ("multi", probes.CANARY_ASSISTANT, "an assistant reply in history"),
}


@check(MESSAGE_DROPPED, "template")
def message_dropped(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    for what in t.dropped:
        probe, canary, subject = _DROPPED[what]
        yield ctx.finding(
            MESSAGE_DROPPED,
            f"{subject} never reaches the prompt: the template renders without it ({canary!r} is missing)",
            t,
            evidence=trim(t.prompts.get(probe, ""), 200),
            role=what.split()[0],
        )
