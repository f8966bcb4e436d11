"""GT7xx: what runtimes other than llama.cpp do with the file's templates (the runtime view,
``gguftpl.runtimes.view``). GT205 (rules/tools.py) names the runtimes that drop tools a ``tool_use`` renders."""

from __future__ import annotations

from collections.abc import Iterator

from gguftpl.engines.ollama_registry import OLLAMA_COMMIT
from gguftpl.findings import Finding, Rule, Severity, check, register
from gguftpl.repair import RULE_FIX
from gguftpl.rules.context import FileContext


def runtime_lines(ctx: FileContext) -> str:
    """The runtime view as evidence lines: ``Ollama: chatml (…) -> tools reach the prompt: no (refused)``."""
    from gguftpl.runtimes.rows import outcome_text

    return "\n".join(f"{r.name}: {r.template} -> tools reach the prompt: {outcome_text(r)}" for r in ctx.runtimes.rows)


OLLAMA_SUBSTITUTES_TEMPLATE = register(
    Rule(
        "GT701",
        "ollama-substitutes-template",
        Severity.INFO,
        "Ollama would replace the default template with a curated Go template of its own that loses the tools.",
        why="`ollama create` compares `tokenizer.chat_template` with the Jinja templates of its registry "
        "(`template/index.json`) and, when the nearest is closer than Levenshtein distance 100, renders its curated Go "
        "template instead: the GGUF's template is not what Ollama sends the model. Most curated templates "
        "(`chatml`, `llama3-instruct`, `mistral-instruct`, …) never read `.Tools`, so a tools request loses its "
        "schemas there. Reported when the file has a template that renders the tools (information when that is "
        "`tool_use`, which GT205 also reports; a warning when it is the default itself); the runtime view shows "
        f"every substitution. Predicted from Ollama's registry and Go source at commit {OLLAMA_COMMIT[:12]}.",
        example="A Hermes-2-Pro GGUF whose default is plain ChatML: distance 0 to the `chatml` entry, rendered "
        "with `chatml.gotmpl`, which has no tools.",
        fix="Make the default carry the tools (`gguftpl patch FILE --tools-in-default -o FIXED.gguf && gguftpl "
        "verify FIXED.gguf`, after upstream's templates when the file has no tool_use: " + RULE_FIX + "): the "
        "longer default is no longer near a registry entry, so Ollama renders it; or give Ollama a Modelfile "
        "`TEMPLATE`.",
    )
)


@check(OLLAMA_SUBSTITUTES_TEMPLATE, "file")
def ollama_substitutes_template(ctx: FileContext) -> Iterator[Finding]:
    view = ctx.runtimes
    o = view.ollama
    from gguftpl.runtimes.view import reaches

    default_renders = reaches(next((t for t in ctx.templates if t.name == "default"), None))
    # a finding only when the file has tools Ollama's template loses; the runtime view names every substitution
    if not o.substituted or o.tools_rendered or not (view.tool_use_renders or default_renders):
        return
    lost = (
        "the file's own default renders them"
        if default_renders
        else "the file's tool_use, which renders them, is invisible to Ollama"
    )
    yield ctx.finding(
        OLLAMA_SUBSTITUTES_TEMPLATE,
        f"Ollama would render its curated '{o.match}' Go template instead of the default (Levenshtein distance "
        f"{o.distance} to its '{o.match}' entry), which does not render tools; {lost} (ollama@{o.commit[:7]})",
        key="tokenizer.chat_template",
        evidence=runtime_lines(ctx),
        fix=_fix(ctx) if view.tool_use_renders and not default_renders else None,
        severity=Severity.WARNING if default_renders else None,  # nothing else reports tools lost only here
        runtime="Ollama",
        ollama=o.to_dict(),
    )


OLLAMA_ADVERTISES_UNRENDERED_TOOLS = register(
    Rule(
        "GT702",
        "ollama-advertises-unrendered-tools",
        Severity.WARNING,
        "Ollama would advertise the tools capability, but the template it renders puts no tool schema in the prompt.",
        why="Ollama decides that a GGUF supports tools from a substring test: its Jinja template contains `tools` "
        "or `tool_call`. Clients (agents, IDE plugins) then send tools, Ollama renders a prompt without them, "
        "and the model answers as if it had none, or invents a call. A template that merely mentions the word "
        f"(a comment, a system prompt) is enough. Read from Ollama's Go source at commit {OLLAMA_COMMIT[:12]}.",
        example="`{# no tools support #}{% for message in messages %}…` is advertised as tool-capable.",
        fix="Use a default that renders `tools` (" + RULE_FIX + "), or remove the word from a template that "
        "cannot call tools.",
    )
)


@check(OLLAMA_ADVERTISES_UNRENDERED_TOOLS, "file")
def ollama_advertises_unrendered_tools(ctx: FileContext) -> Iterator[Finding]:
    o = ctx.runtimes.ollama
    if not o.advertises_tools or o.tools_rendered is not False:
        return
    what = (
        f"its curated '{o.match}' template"
        if o.substituted
        else "the model's TEMPLATE layer"
        if o.renders == "template"
        else "the GGUF's default"
    )
    yield ctx.finding(
        OLLAMA_ADVERTISES_UNRENDERED_TOOLS,
        f"Ollama would advertise the tools capability (the template text contains 'tools' or 'tool_call'), but "
        f"{what}, which it renders, puts no tool schema in the prompt (ollama@{o.commit[:7]})",
        key="tokenizer.chat_template",
        evidence=runtime_lines(ctx),
        fix=_fix(ctx),
        runtime="Ollama",
        ollama=o.to_dict(),
    )


OLLAMA_TEMPLATE_DROPS_TOOLS = register(
    Rule(
        "GT703",
        "ollama-template-drops-tools",
        Severity.WARNING,
        "A model Ollama already has loses the tools there, while its GGUF's own template renders them.",
        why="`ollama create` (or `ollama pull`) gave the model a Go TEMPLATE layer, and Ollama renders that instead of "
        "the GGUF's Jinja: a TEMPLATE that never reads `.Tools` makes Ollama answer every tools request with HTTP "
        '400 "does not support tools", one that reads it but prints nothing drops them silently. The GGUF itself '
        "is fine for the other runtimes: its `tool_use` (or its default) renders the schemas. Judged from the "
        "model's manifest (`ollama://NAME`), the TEMPLATE rendered by Ollama's Go engine on the probe conversations.",
        example="`ollama create hermes -f Modelfile` from a Hermes-2-Pro GGUF: its ChatML default is replaced by "
        "Ollama's curated `chatml.gotmpl`, which has no `.Tools`, while the GGUF's `tool_use` renders them.",
        fix="Give the model a TEMPLATE that renders the tools: `gguftpl patch ollama://NAME --ollama-modelfile DIR` "
        "writes a Modelfile (FROM the GGUF, the TEMPLATE proven by the Go engine, the PARAMETER stop lines) and "
        "prints the `ollama create` command.",
    )
)


@check(OLLAMA_TEMPLATE_DROPS_TOOLS, "file")
def ollama_template_drops_tools(ctx: FileContext) -> Iterator[Finding]:
    from gguftpl.runtimes.view import reaches

    o = ctx.runtimes.ollama
    if ctx.store is None or ctx.store.ollama is None or o.renders != "template" or o.tools_rendered is not False:
        return
    default_renders = reaches(next((t for t in ctx.templates if t.name == "default"), None))
    if not (ctx.runtimes.tool_use_renders or default_renders):
        return
    own = "its default" if default_renders else "its tool_use"
    row = ctx.runtimes.row("ollama")
    # the row already says when the GGUF's own Jinja renders them (the two disagree): not said twice
    tail = "" if o.jinja_agrees is False else f"; the GGUF's own template ({own}) renders them"
    yield ctx.finding(
        OLLAMA_TEMPLATE_DROPS_TOOLS,
        f"Ollama drops the tools of {ctx.store.ref}: {row.reason}{tail}",
        evidence=runtime_lines(ctx) + "\n\nTEMPLATE layer:\n" + (ctx.store.ollama.template or "")[:2000],
        fix=f"gguftpl patch {ctx.quoted()} --ollama-modelfile DIR",
        runtime="Ollama",
        ollama=o.to_dict(),
    )


def _fix(ctx: FileContext) -> str | None:
    """The file's one repair (``gguftpl.repair``): ``--tools-in-default`` when its tool_use renders the tools, else
    upstream's templates first, or the plain fact that none gives the model tools."""
    return ctx.tools_fix()
