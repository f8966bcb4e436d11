"""What every engine adapter answers, in one shape: load a template, render conversations, parse model output.

An engine is the code a runtime really renders a chat template with (transformers' jinja2, llama.cpp's C++
Jinja, ``@huggingface/jinja`` under Node.js, minijinja as a given runtime configures it, Go ``text/template``
with Ollama's functions). Each adapter runs its engine in a bounded worker (:mod:`gguftpl.worker`): a template
that loops, crashes the engine or eats memory is a :class:`EngineError` of kind ``overrun`` or ``crashed``,
never the caller's hang. An engine that is not installed answers :class:`Availability` with ``installed=False``
and the command that installs it; callers then say "unknown", never ask another engine instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

SYNTAX = "syntax"
"""The engine refused to parse the template."""
RENDER = "render"
"""The template parsed but raised while rendering this conversation (its own error, or the engine's)."""
OVERRUN = "overrun"
"""A bound stopped it: time, output size, memory or recursion."""
CRASHED = "crashed"
"""The engine's process died (a signal, an abort) or answered garbage."""
UNAVAILABLE = "unavailable"
"""The engine is not installed (or would not start): nothing was rendered."""

ERROR_KINDS = (SYNTAX, RENDER, OVERRUN, CRASHED, UNAVAILABLE)


@dataclass(frozen=True)
class EngineError:
    """An engine's refusal, in its own words."""

    kind: str
    """One of :data:`ERROR_KINDS`."""
    message: str
    """The engine's own error text (what a user of that runtime sees), trimmed to a few hundred characters."""
    line: int | None = None
    """1-based template line, when the engine says."""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "line": self.line}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EngineError:
        line = d.get("line")
        return cls(str(d.get("kind") or RENDER), str(d.get("message") or ""), line if isinstance(line, int) else None)


@dataclass(frozen=True)
class RenderRequest:
    """One conversation to render, as the runtime hands it to the template."""

    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] | None = None
    add_generation_prompt: bool = True
    variables: Mapping[str, Any] = field(default_factory=dict)
    """Everything else the template sees: ``bos_token``, ``eos_token``, other special tokens, and what the
    runtime adds (``date_string``, ``enable_thinking``, ...)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": [dict(m) for m in self.messages],
            "tools": [dict(t) for t in self.tools] if self.tools is not None else None,
            "add_generation_prompt": self.add_generation_prompt,
            "variables": dict(self.variables),
        }


@dataclass(frozen=True)
class Rendered:
    """One request's answer: the prompt, or the engine's error."""

    text: str | None = None
    error: EngineError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "error": self.error.to_dict() if self.error else None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rendered:
        err = d.get("error")
        text = d.get("text")
        return cls(text if isinstance(text, str) else None, EngineError.from_dict(err) if err else None)


@dataclass(frozen=True)
class ParsedCalls:
    """What a runtime's parser made of a model's output."""

    calls: tuple[Mapping[str, Any], ...] = ()
    """``{"name": ..., "arguments": {...}}`` each."""
    content: str = ""
    """The text left over as the message's content."""
    error: EngineError | None = None


@dataclass(frozen=True)
class Availability:
    """Is the engine here, which version, and how to get it."""

    engine: str
    installed: bool
    version: str = ""
    """The engine's own version (``@huggingface/jinja 0.5.11``, ``minijinja 3.0.5``, ...)."""
    install_hint: str = ""
    """The one command that installs it."""
    detail: str = ""
    """Why it is missing (no Node.js, the npm package not installed, no Go toolchain, ...)."""

    def unknown_reason(self) -> str:
        """What a verdict that needed this engine says instead."""
        why = f" ({self.detail})" if self.detail else ""
        hint = f": install with {self.install_hint}" if self.install_hint else ""
        return f"unknown: {self.engine} is not installed{why}{hint}"


@runtime_checkable
class Engine(Protocol):
    """One engine, as one runtime configures it (``name`` says which: ``minijinja/tgi``)."""

    name: str
    """Stable id: ``transformers``, ``llamacpp``, ``hfjs``, ``minijinja/tgi``, ``ollama``, ..."""

    def availability(self) -> Availability: ...

    def load(self, template: str) -> EngineError | None:
        """None when the engine parses ``template``; else its error (kind :data:`SYNTAX` for a parse error)."""
        ...

    def render(self, template: str, requests: Sequence[RenderRequest]) -> list[Rendered]:
        """One :class:`Rendered` per request, in order; never raises for the template's fault. An engine that
        is not installed answers every request with an :data:`UNAVAILABLE` error."""
        ...


def unavailable(availability: Availability, n: int) -> list[Rendered]:
    """``n`` answers saying the engine is not here."""
    err = EngineError(UNAVAILABLE, availability.unknown_reason())
    return [Rendered(None, err) for _ in range(n)]


def trim_message(message: str, limit: int = 600) -> str:
    """An engine's error text, short enough for a report line (engines print whole stack traces)."""
    message = " ".join(str(message).split())
    return message if len(message) <= limit else message[: limit - 1] + "…"


def not_tried(stopped: EngineError) -> EngineError:
    """A conversation skipped after an earlier one of the same template stopped the engine: what stopped it
    would most likely stop it again, and each try costs the whole time limit."""
    return EngineError(
        stopped.kind, f"not rendered: an earlier conversation of this template stopped the engine ({stopped.message})"
    )
