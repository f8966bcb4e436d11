"""One runtime's row of the runtime view, decided from that runtime's own engine and profile.

Each function reads the engine facts of the template the runtime renders a tools request with
(:meth:`gguftpl.templates.facts.TemplateFacts.engine`), then applies what the profile says the runtime does when
the schemas are not in the prompt (drop them, inject its own tool prompt, refuse the request).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from gguftpl.runtimes.rows import DROPPED, FAILS, INJECTED, LLAMACPP, PROMPT, REFUSED, UNKNOWN, RuntimeRow
from gguftpl.templates import probes
from gguftpl.templates.enginefacts import engine_facts

if TYPE_CHECKING:
    from gguftpl.engines.ollama_registry import OllamaPrediction
    from gguftpl.runtimes.profiles import RuntimeProfile
    from gguftpl.templates.facts import EngineFacts, TemplateFacts


def _verdict(t: TemplateFacts | None, e: EngineFacts | None) -> str:
    v = e.tools_in_prompt if e is not None and e.tools_in_prompt is not None else None
    if v is None and t is not None and t.tools_static is False:
        v = False
    if v is None:
        return "could not be rendered, so whether the schemas reach the prompt is unknown"
    if v:
        return "puts the tool schemas in the prompt"
    tools = e.text(probes.TOOLS) if e is not None else None
    if tools is not None and probes.CANARY_TOOL_NAME in tools:
        return "renders the tool names but not their schemas"
    return "drops the tool schemas"


def _row(p: RuntimeProfile, template: str, reaches: bool | None, reason: str, outcome: str, **kw: object) -> RuntimeRow:
    hosts = tuple(h for h in p.hosts)
    return RuntimeRow(p.name, template, reaches, reason, hosts, p.id, p.engine, outcome, **kw)  # type: ignore[arg-type]


def _unknown(p: RuntimeProfile, template: str, engine_id: str, lead: str) -> RuntimeRow | None:
    """The row when ``engine_id`` is not installed (its install command), else None."""
    from gguftpl.engines import registry

    available = registry.availability(engine_id)
    if available.installed:
        return None
    return _row(p, template, None, f"{lead}; {available.unknown_reason()}", UNKNOWN)


def _ignored(p: RuntimeProfile, template: str, lead: str, t: TemplateFacts, e: EngineFacts | None) -> RuntimeRow:
    """The template does not put the schemas in the prompt: what this runtime does about it."""
    verdict = _verdict(t, e)
    if p.ignored_tools == "inject":
        return _row(
            p,
            template,
            True,
            f"{lead}, which {verdict}: it writes its own tool prompt instead, in a format the model was not trained on",
            INJECTED,
        )
    if p.ignored_tools == "refuse" and p.refusal_message:
        return _row(
            p,
            template,
            False,
            f"{lead}, which {verdict}; it refuses the request",
            REFUSED,
            error=p.refusal_message,
        )
    return _row(p, template, False, f"{lead}, which {verdict}: it sends the prompt without them, silently", DROPPED)


def _judge(p: RuntimeProfile, template: str, lead: str, t: TemplateFacts, engine_id: str) -> RuntimeRow:
    """The row from ``engine_id``'s render of ``t`` (the tools request)."""
    e = engine_facts(t, engine_id)
    if e is None or not e.installed or e.unknown:
        missing = _unknown(p, template, engine_id, lead)
        if missing is not None:
            return missing
        if t.tools_static is False:  # never read: no engine's prompt carries them
            return _ignored(p, template, lead, t, None)
        why = e.unknown if e is not None and e.unknown else f"{engine_id} was not asked"
        return _row(p, template, None, f"{lead}; {why}", UNKNOWN)
    err = e.error(probes.TOOLS)
    if err is not None:
        what = (
            "refuses to load"
            if e.load_error is not None
            else "cannot finish a tools request with"
            if err.overran
            else "raises on a tools request with"
        )
        return _row(
            p,
            template,
            None,
            f"{lead}; its engine ({engine_id}) {what} it: {err.error}",
            FAILS,
            error=err.error or "",
            error_line=err.line,
        )
    if e.tools_in_prompt:
        return _row(p, template, True, f"{lead}, which {_verdict(t, e)}", PROMPT)
    return _ignored(p, template, lead, t, e)


def template_row(p: RuntimeProfile, t: TemplateFacts, template: str, how: str) -> RuntimeRow:
    """A runtime that renders ``t`` (the default, or ``tool_use`` by name) with its own engine."""
    return _judge(p, template, how, t, p.engine)


def no_default_row(p: RuntimeProfile) -> RuntimeRow:
    return _row(
        p,
        "none",
        None,
        "reads only tokenizer.chat_template, which the file lacks: it falls back to a format of its own",
        UNKNOWN,
    )


def llamacpp_row(p: RuntimeProfile, facts: Mapping[str, TemplateFacts], texts: Mapping[str, str]) -> RuntimeRow:
    """llama-server: ``tool_use`` when tools are passed, else the default, else its built-in ChatML."""
    from gguftpl.engines.llamacpp_choice import choose_template, loaded_templates

    loaded = loaded_templates(dict(texts))
    refused = ""
    tool_use = facts.get("tool_use")
    if tool_use is not None and tool_use.llamacpp_load_error:
        loaded.pop("tool_use", None)  # llama.cpp drops a tool_use it cannot parse, silently
        refused = f"llama.cpp cannot load tool_use ({tool_use.llamacpp_load_error}) and drops it; "
    choice = choose_template(loaded, tools=True)
    if choice.fallback:
        return _row(
            p,
            "fallback",
            False,
            refused + "the file has no default template: llama.cpp renders its built-in ChatML, which never "
            "reads tools",
            DROPPED,
        )
    t = facts[choice.name]
    if choice.name == "default" and t.llamacpp_load_error:
        lead = f"llama.cpp refuses to load the default ({t.llamacpp_load_error})"
        return _row(p, "default", None, lead, FAILS, error=t.llamacpp_load_error)
    how = "switches to tool_use when tools are passed" if choice.name == "tool_use" else "renders the default"
    if choice.name == "default" and not refused:
        how += " (the file has no tool_use)"
    return _judge(p, choice.name, f"{refused}{how}", t, "llamacpp")


def ollama_row(p: RuntimeProfile, facts: Mapping[str, TemplateFacts], o: OllamaPrediction) -> RuntimeRow:
    """Ollama: its curated Go template rendered by the Go engine, or the GGUF's default through its bundled
    llama-server, behind its tools capability test."""
    default, tool_use = facts.get("default"), facts.get("tool_use")
    note = (
        "; tool_use, which renders them, is invisible to Ollama"
        if tool_use is not None and tool_use.renders_tools
        else ""
    )
    if o.renders == "unknown":
        return _row(p, o.template, None, o.reason, UNKNOWN)
    if o.renders == "none" or default is None:
        return _row(p, o.template, False, o.reason + note, REFUSED, error=p.refusal_message)
    if o.renders == "jinja":
        if not o.advertises_tools:
            return _row(p, o.template, False, o.reason + note, REFUSED, error=p.refusal_message)
        return _judge(p, "default", o.reason + note, default, "llamacpp")
    e = engine_facts(default, "ollama")
    lead = o.reason + note
    if e is None or not e.installed or e.unknown:
        missing = _unknown(p, o.template, "ollama", lead)
        return missing or _row(p, o.template, None, f"{lead}; the Go engine was not asked", UNKNOWN)
    if e.reads_tools is False:
        return _row(p, o.template, False, f"{lead}; Ollama refuses a tools request", REFUSED, error=p.refusal_message)
    err = e.error(probes.TOOLS)
    if err is not None:
        return _row(p, o.template, None, f"{lead}; Go's text/template fails: {err.error}", FAILS, error=err.error or "")
    if e.tools_in_prompt:
        return _row(p, o.template, True, lead, PROMPT)
    return _row(p, o.template, False, f"{lead}; the Go template renders no tool schema", DROPPED)


__all__ = ["LLAMACPP", "llamacpp_row", "no_default_row", "ollama_row", "template_row"]
