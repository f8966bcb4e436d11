"""Ollama's row for a model Ollama already has: what its manifest makes Ollama do with a tools request.

Read from ``ollama/ollama`` @fb30760996871fa9460115c753afd2c60d4ab0f7 (v0.33.0-rc2):

- ``server/routes.go::usesOllamaRenderedChat``: a config ``renderer`` or ``parser`` means Ollama's own Go code
  renders the prompt (``model/renderers``), not a template;
- ``shouldUseGoTemplate``: with a TEMPLATE layer, ``OLLAMA_GO_TEMPLATE`` decides when it is set
  (``envconfig.BoolWithDefault``: a value ``strconv.ParseBool`` cannot read counts as true); otherwise the Go
  TEMPLATE is rendered unless ``PreferChatTemplate`` (``server/images.go::GetModel``,
  ``shouldPreferChatTemplate``: the GGUF's Jinja shows more capabilities);
- otherwise "native" mode: the GGUF's own Jinja rendered by the bundled llama-server, which takes
  ``tokenizer.chat_template.tool_use`` for a tools request as llama.cpp does;
- the tools capability (``server/images.go::CheckCapabilities``, ``goTemplateCapabilities``,
  ``chatTemplateCapabilities``): ``tools`` among the Go template's ``Vars()``, or the words ``tools`` /
  ``tool_call`` in the GGUF's ``tokenizer.chat_template`` in native mode; without it a tools request is
  answered with HTTP 400 "does not support tools" before anything is rendered.

The Go TEMPLATE is rendered by Ollama's Go engine (:func:`gguftpl.templates.enginefacts.go_template_facts`) on the
probe conversations; not modelled: the harmony format (gpt-oss) and the renderers' own output.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gguftpl.runtimes.rows import DROPPED, FAILS, LLAMACPP, PROMPT, REFUSED, UNKNOWN, RuntimeRow
from gguftpl.templates import probes

if TYPE_CHECKING:
    from gguftpl.engines.ollama_registry import OllamaPrediction
    from gguftpl.runtimes.profiles import RuntimeProfile
    from gguftpl.stores.model import OllamaLayers
    from gguftpl.templates.facts import EngineFacts, TemplateFacts

__all__ = ["OllamaManifest", "go_template_env", "manifest_row"]

TEMPLATE_LABEL = "TEMPLATE layer (Go)"


@dataclass(frozen=True)
class OllamaManifest:
    """What the view needs of an Ollama model: its layers and the name Ollama answers under."""

    layers: OllamaLayers
    name: str
    """``hermes-test:latest`` (``Name.DisplayShortest``)."""


def go_template_env() -> bool | None:
    """``OLLAMA_GO_TEMPLATE`` as Ollama reads it: None when unset, else its boolean (unreadable counts as true)."""
    raw = os.environ.get("OLLAMA_GO_TEMPLATE", "").strip().strip("\"'")
    if not raw:
        return None
    if raw in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    return raw not in ("0", "f", "F", "FALSE", "false", "False")


def mode(layers: OllamaLayers, default_text: str | None) -> tuple[str, str]:
    """(``renderer``, ``template``, ``native`` or ``none``; why), as ``usesOllamaRenderedChat`` decides."""
    from gguftpl.engines import ollama_registry as reg

    if layers.renderer or layers.parser:
        which = " and ".join(f"{k} '{v}'" for k, v in (("renderer", layers.renderer), ("parser", layers.parser)) if v)
        return "renderer", f"the config names the {which}: Ollama's own Go code renders the prompt"
    if layers.template is not None:
        env = go_template_env()
        if env:
            return "template", "the manifest has a TEMPLATE layer and OLLAMA_GO_TEMPLATE is set true"
        if env is False and not default_text:
            return (
                "none",
                "OLLAMA_GO_TEMPLATE is set false (the TEMPLATE layer is left) and there is no tokenizer.chat_template",
            )
        if env is False:
            return "native", (
                "OLLAMA_GO_TEMPLATE is set false, so Ollama leaves the TEMPLATE layer and runs the GGUF's own Jinja "
                "through its bundled llama-server"
            )
        if not (default_text and reg._prefers_jinja(default_text, reg.go_template("TEMPLATE", layers.template))):
            return "template", "Ollama renders the manifest's TEMPLATE layer (Go template)"
        return "native", (
            "the GGUF's Jinja shows more capabilities than the TEMPLATE layer (PreferChatTemplate), so Ollama "
            "runs it through its bundled llama-server"
        )
    if default_text:
        return "native", "no TEMPLATE layer: Ollama runs the GGUF's own Jinja through its bundled llama-server"
    return "none", "no TEMPLATE layer and no tokenizer.chat_template"


def _row(p: RuntimeProfile, template: str, reaches: bool | None, reason: str, outcome: str, **kw: object) -> RuntimeRow:
    return RuntimeRow(p.name, template, reaches, reason, (), p.id, p.engine, outcome, **kw)  # type: ignore[arg-type]


def _stops(layers: OllamaLayers, eot: str | None) -> str:
    """The params layer's stop lines, and whether they end the turn where the model's template does (``eot``)."""
    if not layers.stops:
        head = "; no stop parameters"
    else:
        head = f"; PARAMETER stop {', '.join(repr(s) for s in layers.stops)}"
    if eot and eot in layers.stops:
        return f"{head} (the turn ends at {eot!r})"
    if eot:
        return f"{head} (none is the template's end of turn {eot!r}: only the GGUF's end-of-generation tokens stop it)"
    return head


def _go_row(p: RuntimeProfile, lead: str, tail: str, go: EngineFacts, refusal: str) -> RuntimeRow:
    if not go.installed or go.unknown:
        return _row(p, TEMPLATE_LABEL, None, f"{lead}; {go.unknown}{tail}", UNKNOWN)
    err = go.error(probes.TOOLS)
    if go.load_error is not None or err is not None:
        why = go.load_error or (err.error if err is not None else "") or ""
        return _row(p, TEMPLATE_LABEL, None, f"{lead}; Go's text/template fails: {why}{tail}", FAILS, error=why)
    if go.reads_tools is False:
        return _row(
            p,
            TEMPLATE_LABEL,
            False,
            f"{lead}, which never reads .Tools (rendered by the Go engine): Ollama refuses a tools request with "
            f"HTTP 400 '{refusal}'{tail}",
            REFUSED,
            error=refusal,
        )
    trip = go.text(probes.ROUND_TRIP) or ""
    calls = "renders the tool call and its result" if probes.CANARY_RESULT in trip else "drops the tool result"
    if go.tools_in_prompt:
        why = f"{lead}, which puts the tool schemas in the prompt (rendered by the Go engine) and {calls}{tail}"
        return _row(p, TEMPLATE_LABEL, True, why, PROMPT)
    return _row(p, TEMPLATE_LABEL, False, f"{lead}, which reads .Tools but renders no tool schema{tail}", DROPPED)


def manifest_row(
    p: RuntimeProfile,
    facts: Mapping[str, TemplateFacts],
    texts: Mapping[str, str],
    m: OllamaManifest,
    specials: tuple[str, str] = ("", ""),
) -> tuple[RuntimeRow, OllamaPrediction]:
    """Ollama's row for the model ``m`` and the prediction the rules read (``renders`` ``template`` for its Go
    TEMPLATE, ``jinja`` for native mode, ``unknown`` for a renderer)."""
    from gguftpl.engines.ollama_registry import OLLAMA_COMMIT, OllamaPrediction, jinja_advertises_tools
    from gguftpl.runtimes import rowverdicts

    default_text = texts.get("default")
    how, why = mode(m.layers, default_text)
    refusal = (p.refusal_message or "<model> does not support tools").replace("<model>", m.name)
    lead = f"{why}"
    default = facts.get("default")
    tail = f"{_stops(m.layers, default.end_of_turn if default is not None else None)} (ollama@{OLLAMA_COMMIT[:7]})"
    if how == "renderer":
        row = _row(p, "renderer", None, f"{lead}; gguftpl does not run Ollama's renderers{tail}", UNKNOWN)
        prediction = OllamaPrediction("unknown", "renderer", None, False, row.reason)
    elif how == "template":
        from gguftpl.templates.enginefacts import go_template_facts

        go = go_template_facts(m.layers.template or "", *specials)
        row = _go_row(p, lead, tail, go, refusal)
        prediction = OllamaPrediction(
            "template", TEMPLATE_LABEL, row.tools_reach_prompt, bool(go.reads_tools), row.reason
        )
    elif how == "none" or not jinja_advertises_tools(default_text or ""):
        words = "; the GGUF's template never says 'tools' or 'tool_call'" if default_text else ""
        reason = f"{lead}{words}: Ollama refuses a tools request with HTTP 400 '{refusal}'{tail}"
        row = _row(p, "default" if default_text else "none", False, reason, REFUSED, error=refusal)
        prediction = OllamaPrediction("jinja" if default_text else "none", row.template, False, False, row.reason)
    else:
        native = rowverdicts.llamacpp_row(p, facts, texts)
        row = replace(native, reason=f"{lead}; llama-server {native.reason}{tail}")
        prediction = OllamaPrediction("jinja", row.template, row.tools_reach_prompt, True, row.reason)
    return _agreement(row, prediction, facts, texts, tail)


def _agreement(
    row: RuntimeRow, prediction: OllamaPrediction, facts: Mapping[str, TemplateFacts], texts: Mapping[str, str],
    tail: str,
) -> tuple[RuntimeRow, OllamaPrediction]:  # fmt: skip
    """The row and prediction saying whether Ollama and the GGUF's own Jinja (rendered by llama.cpp's engine, as
    every runtime on llama.cpp takes it: ``tool_use`` for a tools request) agree about the tools."""
    from gguftpl.runtimes import rowverdicts
    from gguftpl.runtimes.profiles import profile

    own = rowverdicts.llamacpp_row(profile(LLAMACPP), facts, texts)
    which = f"its {own.template}" if own.template in ("default", "tool_use") else "llama.cpp's fallback"
    if own.tools_reach_prompt is None or row.tools_reach_prompt is None:
        agrees, clause = None, f"; whether the GGUF's own Jinja ({which}) agrees about tools is unknown"
    else:
        agrees = own.tools_reach_prompt == row.tools_reach_prompt
        does = "puts the tool schemas in the prompt" if own.tools_reach_prompt else "loses the tools"
        verdict = "they agree about tools" if agrees else "Ollama and the GGUF's own Jinja disagree about tools"
        clause = f"; the GGUF's own Jinja ({which}, by llama.cpp's engine) {does}: {verdict}"
    reason = row.reason[: -len(tail)] + clause + tail if row.reason.endswith(tail) else row.reason + clause
    return replace(row, reason=reason), replace(prediction, reason=reason, manifest=True, jinja_agrees=agrees)
