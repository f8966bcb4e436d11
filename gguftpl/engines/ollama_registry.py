"""What Ollama does with a GGUF's chat template, predicted from Ollama's own template registry.

The registry (``ollama_templates/``: ``index.json``, the curated ``<name>.gotmpl`` Go templates, MIT) is copied
byte for byte from ``ollama/ollama`` at :data:`OLLAMA_COMMIT`, ``index.json`` stored as ``ollama-index.json`` (in
this tree ``index.json`` names the one upstream catalog, which a test keeps single); ``ollama_templates/SOURCES.md``
says what Ollama's Go source does with it at that commit. The prediction follows that reading:

- Ollama reads only ``tokenizer.chat_template``; named templates (``tool_use``) are invisible to it.
- ``ollama create`` compares that text with every ``index.json`` entry by Levenshtein distance (code points,
  as Go's runes); the nearest entry wins (the first one on a tie), accepted only below
  :data:`MATCH_BELOW`, and its curated Go template becomes the model's template.
- It advertises the ``tools`` capability when the Jinja text contains ``tools`` or ``tool_call``, or, for a
  Go template, when the template reads ``.Tools`` at all.
- When it has both, it renders the GGUF's Jinja only if that one has more capabilities (and the Go one has no
  tool round trip, unless the Jinja one has one too) (``shouldPreferChatTemplate``).

Not modelled: a Modelfile ``TEMPLATE``/``RENDERER``/``PARSER``, ``OLLAMA_GO_TEMPLATE``, the harmony format and
capabilities other than ``tools`` (thinking, insert), which all change the choice.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

OLLAMA_COMMIT = "fb30760996871fa9460115c753afd2c60d4ab0f7"
"""The ``ollama/ollama`` commit the registry was copied from and the prediction holds for."""
MATCH_BELOW = 100
"""``template.Named`` accepts the nearest entry only when its distance is below this."""
_DATA = "ollama_templates"
_INDEX = "ollama-index.json"
"""Ollama's ``template/index.json``, byte for byte under another name."""


@dataclass(frozen=True)
class Curated:
    """One curated Go template of Ollama's registry."""

    name: str
    text: str
    reads_tools: bool
    """The template reads ``.Tools`` at all (what Ollama advertises the tools capability from)."""
    renders_tools: bool
    """Something of each tool reaches the output (see :func:`go_renders_tools`)."""
    round_trip: bool
    """``goTemplateHasToolRoundTrip``: reads ``.Tools`` and ``.ToolCalls`` and renders tool-role messages."""


@dataclass(frozen=True)
class OllamaPrediction:
    """Which template Ollama renders a request with, and what it advertises, at :data:`OLLAMA_COMMIT`."""

    renders: str
    """``curated`` (Ollama's Go template), ``jinja`` (the GGUF's own default), ``none`` (no default) or
    ``unknown`` (the text was not at hand)."""
    template: str
    """What the report shows: ``chatml (Ollama's curated Go template)``, ``default`` or ``none``."""
    tools_rendered: bool | None
    """The tool schemas reach the prompt Ollama renders; None when unknown."""
    advertises_tools: bool
    """Ollama lists ``tools`` among the model's capabilities (clients then send tools)."""
    reason: str
    match: str | None = None
    """The nearest ``index.json`` entry's curated template, when accepted."""
    distance: int | None = None
    """Levenshtein distance to that entry (None: no default, or none below :data:`MATCH_BELOW`)."""
    commit: str = OLLAMA_COMMIT
    manifest: bool = False
    """Read from the manifest of a model Ollama already has (``ollama://NAME``), not predicted for an import."""
    jinja_agrees: bool | None = None
    """With :attr:`manifest`: Ollama and the GGUF's own Jinja (what llama.cpp and the runtimes on it render for
    a tools request) agree on whether the tool schemas reach the prompt; None when either is unknown."""

    @property
    def substituted(self) -> bool:
        return self.renders == "curated"

    def to_dict(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "renders": self.renders,
            "curated_template": self.match if self.substituted else None,
            "nearest_entry": self.match,
            "distance": self.distance,
            "advertises_tools": self.advertises_tools,
        } | ({"manifest": True, "jinja_agrees_on_tools": self.jinja_agrees} if self.manifest else {})


# ------------------------------------------------------------------------------------------------ the registry


def _read(name: str) -> str:
    from importlib.resources import files

    return (files("gguftpl.engines") / _DATA / name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def registry() -> tuple[tuple[str, str], ...]:
    """``index.json`` as (curated template name, Jinja text) pairs, in file order."""
    return tuple((str(e["name"]), str(e["template"])) for e in json.loads(_read(_INDEX)))


@functools.lru_cache(maxsize=64)
def curated(name: str) -> Curated:
    return go_template(name, _read(f"{name}.gotmpl"))


def go_template(name: str, text: str) -> Curated:
    """A Go template's tool facts read statically (a curated one, or a model's own TEMPLATE layer)."""
    reads = bool(re.search(r"\.Tools\b", text))
    round_trip = (
        reads
        and bool(re.search(r"\.ToolCalls\b", text))
        and any(s in text for s in ('eq .Role "tool"', "tool_response", "TOOL_RESULTS"))
    )
    return Curated(name, text, reads, go_renders_tools(text), round_trip)


@functools.lru_cache(maxsize=256)
def nearest(text: str) -> tuple[str, int] | None:
    """The registry entry nearest ``text`` (its curated template's name and the distance) when below
    :data:`MATCH_BELOW`, as ``template.Named`` picks it; None otherwise."""
    from rapidfuzz.distance import Levenshtein

    best: tuple[str, int] | None = None
    for name, jinja in registry():
        # the cutoff keeps a long template cheap: past it rapidfuzz stops (and says cutoff + 1)
        d = Levenshtein.distance(text, jinja, score_cutoff=MATCH_BELOW - 1)
        if d < MATCH_BELOW and (best is None or d < best[1]):
            best = (name, d)
    return best


# ------------------------------------------------------------------------------------ Go templates and .Tools

_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)
_OPENS = ("if", "with", "range", "define", "block")
_QUIET = ("else", "end", "template", "break", "continue", "/*")


def go_renders_tools(text: str) -> bool:
    """Does a Go template put the tools into its output? Read statically from its actions, never run: yes when a
    ``range`` over ``.Tools`` (or ``$.Tools``) has a body that prints a field of its element, or when an action
    prints ``.Tools`` itself (``{{ json .Tools }}``); ``{{ if .Tools }}`` alone only tests it. Ollama's Go
    renderer is not run, so a body that prints only under a condition the request never meets still counts."""
    stack: list[bool] = []  # per open block: is it a range over the tools?
    for m in _ACTION.finditer(text):
        action = m.group(1)
        word = action.split(None, 1)[0] if action else ""
        if word in _OPENS:
            stack.append(word == "range" and bool(re.search(r"(?<![\w$])\$?\.Tools\b", action)))
        elif word == "end":
            if stack:
                stack.pop()
        elif word in _QUIET or re.match(r"\$\w*\s*:?=", action):
            continue  # control words and variable assignments print nothing
        elif any(stack) and "." in action:
            return True  # a field of the tool (or the tool itself) printed inside the range
        elif re.search(r"(?<![\w$])\$?\.Tools\b", action):
            return True
    return False


# --------------------------------------------------------------------------------------------- the prediction


def jinja_advertises_tools(text: str) -> bool:
    """``chatTemplateHasToolSupport``: a substring test, not a reading of the template."""
    return "tools" in text or "tool_call" in text


def jinja_round_trip(text: str) -> bool:
    """``chatTemplateHasToolRoundTrip``: the tool words, ``tool_calls``, and a tool-role branch."""
    if not jinja_advertises_tools(text):
        return False
    calls = "tool_calls" in text or "assistant_tool_call" in text
    roles = (
        "tool_response",
        "tool_results",
        "role'] == 'tool'",
        'role\'] == "tool"',
        "role\"] == 'tool'",
        'role"] == "tool"',
        "message.role == 'tool'",
        'message.role == "tool"',
        "ipython",
    )
    return calls and any(r in text for r in roles)


def _prefers_jinja(text: str, go: Curated) -> bool:
    """``shouldPreferChatTemplate`` with the tools capability alone (both sides add the same others)."""
    jinja_caps, go_caps = int(jinja_advertises_tools(text)), int(go.reads_tools)
    if jinja_caps > go_caps:
        return not go.round_trip or jinja_round_trip(text)
    if not (jinja_caps and go_caps):
        return False
    return jinja_round_trip(text) and not go.round_trip


def unknown(why: str) -> OllamaPrediction:
    return OllamaPrediction("unknown", "unknown", None, False, f"{why} (ollama@{OLLAMA_COMMIT[:7]})")


def predict(default_text: str | None, default_tools: bool | None) -> OllamaPrediction:
    """What Ollama renders for a GGUF whose ``tokenizer.chat_template`` is ``default_text`` (None: absent);
    ``default_tools``: whether that Jinja template puts the tool schemas in the prompt (its facts)."""
    short = OLLAMA_COMMIT[:7]
    if default_text is None:
        return OllamaPrediction(
            "none",
            "none",
            False,
            False,
            f"the file has no tokenizer.chat_template, the only template Ollama reads (ollama@{short})",
        )
    found = nearest(default_text)
    advertised = jinja_advertises_tools(default_text)
    if found is not None:
        name, dist = found
        go = curated(name)
        if not _prefers_jinja(default_text, go):
            tools = "renders the tools" if go.renders_tools else "never reads .Tools" if not go.reads_tools else ""
            tools = tools or "reads .Tools but prints nothing of them"
            return OllamaPrediction(
                "curated",
                f"{name} (Ollama's curated Go template)",
                go.renders_tools,
                go.reads_tools,
                f"ollama create replaces the default (Levenshtein distance {dist} to its '{name}' entry) with "
                f"its curated {name}.gotmpl, which {tools} (ollama@{short})",
                name,
                dist,
            )
        why = (
            f"the default is at distance {dist} of its '{name}' entry, but it mentions tools and {name}.gotmpl "
            "advertises fewer capabilities, so Ollama keeps the GGUF's Jinja"
        )
    else:
        name, dist = None, None
        why = f"no entry of its registry is closer than Levenshtein distance {MATCH_BELOW} to the default"
    if advertised and default_tools is False:
        adv = "; it advertises tools (the text contains 'tools' or 'tool_call') though no schema is rendered"
    elif advertised:
        adv = "; it advertises tools (the text contains 'tools' or 'tool_call')"
    else:
        adv = "; it does not advertise tools (the text never says 'tools' or 'tool_call')"
    return OllamaPrediction(
        "jinja",
        "default",
        default_tools,
        advertised,
        f"{why}: it renders the GGUF's own default{adv} (ollama@{short})",
        name,
        dist,
    )
