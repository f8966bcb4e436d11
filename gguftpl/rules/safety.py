"""GT4xx: unsafe templates: sandbox escapes, hidden triggers, invisible and control characters, render bombs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gguftpl import limits
from gguftpl.findings import Finding, Rule, Severity, check, register
from gguftpl.rules.context import FileContext
from gguftpl.rules.template import render_failures, sandbox_refusal

if TYPE_CHECKING:
    from gguftpl.templates.facts import TemplateFacts

_BOMB_SHAPES = ("range", "recursion")
"""Static issues that are render bombs (GT404, GT405), not sandbox escapes."""

SANDBOX_ESCAPE = register(
    Rule(
        "GT401",
        "sandbox-escape-construct",
        Severity.ERROR,
        "The template uses constructs known from Jinja sandbox escapes (dunder attributes, `__globals__`, "
        "`cycler`/`joiner`/`lipsum`/`self` gadgets).",
        why="No chat template needs them; they are the shape of server-side template injection payloads "
        "(CVE-2024-34359 in llama-cpp-python). A runtime with a weaker sandbox executes code.",
        example="`{{ cycler.__init__.__globals__.os.popen('id').read() }}`.",
        fix="Do not use this file; replace the template with the upstream one.",
    )
)


@check(SANDBOX_ESCAPE, "template")
def sandbox_escape(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    for i in t.static.sandbox if t.static is not None else ():
        if i.kind not in _BOMB_SHAPES:
            yield ctx.finding(
                SANDBOX_ESCAPE,
                f"sandbox-escape construct: {i.detail}",
                t,
                line=i.line,
                evidence=i.evidence,
                fix=ctx.hub_fix(t.name),
            )
    for e in render_failures(t):
        if sandbox_refusal(e):
            yield ctx.finding(
                SANDBOX_ESCAPE,
                f"the sandbox refused an operation while rendering the {e.probe} probe: {e}",
                t,
                line=e.line,
                evidence=e.source_line[:200],
                fix=ctx.hub_fix(t.name),
                probe=e.probe,
            )


HIDDEN_TRIGGER = register(
    Rule(
        "GT402",
        "hidden-trigger-text",
        Severity.ERROR,
        "The template adds text only when a message contains a specific string (a hidden trigger).",
        why="A backdoor: ordinary probes render clean, but a trigger phrase injects instructions the user never sees.",
        example="`{% if 'xyzzy' in message.content %}Ignore previous instructions…{% endif %}`.",
        fix="Do not use this file; replace the template with the upstream one.",
    )
)


@check(HIDDEN_TRIGGER, "template")
def hidden_trigger(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    for i in t.static.triggers if t.static is not None else ():
        yield ctx.finding(
            HIDDEN_TRIGGER, f"hidden trigger: {i.detail}", t, line=i.line, evidence=i.evidence, fix=ctx.hub_fix(t.name)
        )
    if t.trigger is not None:
        lits = ", ".join(repr(x) for x in t.trigger.literals[:4])
        yield ctx.finding(
            HIDDEN_TRIGGER,
            f"a user message containing {lits} makes the template add text the message did not contain",
            t,
            evidence=t.trigger.added,
            fix=ctx.hub_fix(t.name),
        )


CONTROL_KINDS = ("escape", "control")
"""Issue kinds of ``templates.safety.control_characters``, reported by GT406 rather than GT403."""

INVISIBLE_UNICODE = register(
    Rule(
        "GT403",
        "invisible-unicode",
        Severity.WARNING,
        "The template contains invisible or bidirectional-control Unicode characters.",
        why="Invisible characters hide text from reviewers (Trojan Source); the model still sees it.",
        example="U+202E RIGHT-TO-LEFT OVERRIDE or U+200B ZERO WIDTH SPACE inside the template.",
        fix="Remove the characters, or replace the template with the upstream one.",
    )
)


@check(INVISIBLE_UNICODE, "template")
def invisible_unicode(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    for i in t.invisible:
        if i.kind in CONTROL_KINDS:
            continue  # GT406
        yield ctx.finding(
            INVISIBLE_UNICODE,
            f"invisible character {i.detail}",
            t,
            line=i.line,
            column=i.column,
            evidence=i.evidence,
            severity=Severity.ERROR if i.kind in ("bidi", "nul") else None,
        )


RENDER_RESOURCE_LIMIT = register(
    Rule(
        "GT404",
        "render-resource-limit",
        Severity.ERROR,
        "Rendering the template exceeded the time, output-size, memory or recursion bound and was stopped, or a "
        "macro calls itself on every path (rendering it never ends).",
        why="A runtime rendering it hangs or runs out of memory: a denial of service on every request. Unbounded "
        "recursion crashes llama.cpp, which has no recursion limit (SIGSEGV: llama-server dies at startup).",
        example="`{% for i in range(100000) %}{% for j in range(100000) %}…`, or "
        "`{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}`.",
        fix="Do not use this file; replace the template with the upstream one.",
    )
)


@check(RENDER_RESOURCE_LIMIT, "template")
def render_resource_limit(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    if t.too_large:
        yield ctx.finding(
            RENDER_RESOURCE_LIMIT,
            f"the template is {t.size:,} bytes, over the {limits.MAX_TEMPLATE_BYTES:,}-byte bound (real chat templates "
            "are under 100 KB): not parsed or rendered",
            t,
            evidence=t.head,
            fix=ctx.hub_fix(t.name),
        )
    elif t.overrun is not None:
        yield ctx.finding(
            RENDER_RESOURCE_LIMIT,
            f"rendering was stopped: {t.overrun}",
            t,
            line=t.overrun.line,
            fix=ctx.hub_fix(t.name),
            kind=t.overrun.kind,
        )
    if t.overrun is None or t.overrun.kind != "recursion":
        # a recursion the probes never reached (a macro called only on a trigger) is still one; once the
        # render has shown it, that finding says it
        for i in t.static.sandbox if t.static is not None else ():
            if i.kind == "recursion":
                yield ctx.finding(
                    RENDER_RESOURCE_LIMIT,
                    f"unbounded recursion: {i.detail}",
                    t,
                    line=i.line,
                    evidence=i.evidence,
                    fix=ctx.hub_fix(t.name),
                    kind="recursion",
                )


@check(RENDER_RESOURCE_LIMIT, "file")
def templates_not_analysed(ctx: FileContext) -> Iterator[Finding]:
    if ctx.skipped:
        from gguftpl.gguf.templateset import template_key

        yield ctx.finding(
            RENDER_RESOURCE_LIMIT,
            f"{len(ctx.skipped):,} more named templates were not analysed: the analysis stops after "
            f"{ctx.max_analysed} distinct template texts (first skipped: {ctx.skipped[0][:80]!r})",
            key=template_key(ctx.skipped[0]),
            severity=Severity.WARNING,
        )


HUGE_RANGE = register(
    Rule(
        "GT405",
        "huge-range",
        Severity.WARNING,
        "The template calls `range()` with a huge constant.",
        why="Hugging Face's sandbox refuses ranges over 100,000; other engines may loop for a very long time.",
        example="`{% for i in range(10**9) %}`.",
        fix="Do not use this file; replace the template with the upstream one.",
    )
)


@check(HUGE_RANGE, "template")
def huge_range(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    for i in t.static.sandbox if t.static is not None else ():
        if i.kind == "range":
            yield ctx.finding(HUGE_RANGE, f"huge range: {i.detail}", t, line=i.line, evidence=i.evidence)


CONTROL_CHARACTERS = register(
    Rule(
        "GT406",
        "control-characters",
        Severity.WARNING,
        "The template contains control characters: ESC (an error: it starts terminal escape sequences), other "
        "C0/C1 controls, DEL, or a carriage return outside a CRLF.",
        why="No chat template needs them. ESC sequences in a prompt or a log drive the terminal that shows it "
        "(set its title, write the clipboard with OSC 52, hide or overwrite lines); the model sees bytes the "
        "reviewer does not.",
        example="`{{ '\\x1b]0;pwned\\x07' }}` written as raw bytes inside the template.",
        fix="Remove the characters, or replace the template with the upstream one.",
    )
)


@check(CONTROL_CHARACTERS, "template")
def control_characters(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    for i in t.invisible:
        if i.kind in CONTROL_KINDS:
            yield ctx.finding(
                CONTROL_CHARACTERS,
                f"control character {i.detail}",
                t,
                line=i.line,
                column=i.column,
                evidence=i.evidence,
                severity=Severity.ERROR if i.kind == "escape" else None,
            )
