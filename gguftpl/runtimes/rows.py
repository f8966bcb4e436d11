"""One row of the runtime view: what one runtime does with a tools request for this file (data only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LLAMACPP = "llama.cpp"
OLLAMA = "Ollama"

PROMPT = "prompt"
"""The schemas are in the prompt the template renders."""
INJECTED = "injected"
"""The template ignores them and the runtime writes its own tool prompt (a format the model was not trained on)."""
DROPPED = "dropped"
"""The template ignores them and the runtime sends the prompt without them, silently."""
REFUSED = "refused"
"""The runtime answers the tools request with an error (HTTP 400) before rendering."""
FAILS = "fails"
"""The runtime's engine raises on the template: the request fails."""
UNKNOWN = "unknown"
"""Its engine is not installed, or was not asked."""


@dataclass(frozen=True)
class RuntimeRow:
    name: str
    """The runtime's display name (``llama.cpp``, ``LM Studio``, ``vLLM``, ``Ollama``, ...)."""
    template: str
    """The template it renders a tools request with: ``tool_use``, ``default``, ``fallback``, ``none``, or
    Ollama's curated one (``chatml (Ollama's curated Go template)``)."""
    tools_reach_prompt: bool | None
    """The tool schemas reach the model (in the template's prompt, or in the runtime's own injected tool prompt:
    see ``outcome``); None when that could not be decided (the engine failed, or is not here)."""
    reason: str
    examples: tuple[str, ...] = ()
    """Products built on this runtime (Goose, Jan on llama.cpp)."""
    id: str = ""
    """The profile id (``lmstudio``, ``vllm``, ...): what ``audit --runtime`` takes."""
    engine: str = ""
    """The engine that decided the row (``hfjs``, ``minijinja/tgi``, ...)."""
    outcome: str = UNKNOWN
    """:data:`PROMPT`, :data:`INJECTED`, :data:`DROPPED`, :data:`REFUSED`, :data:`FAILS` or :data:`UNKNOWN`."""
    error: str = ""
    """The engine's own error text when it fails (``outcome`` :data:`FAILS`), or the runtime's refusal."""
    error_line: int | None = None
    parser_takes_dialect: bool | None = None
    """Its tool-call parser takes a call in the template's dialect; None when the dialect is unknown."""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "id": self.id,
            "engine": self.engine,
            "template": self.template,
            "tools_reach_prompt": self.tools_reach_prompt,
            "outcome": self.outcome,
            "reason": self.reason,
            "parser_takes_dialect": self.parser_takes_dialect,
        }
        if self.error:
            d["error"] = self.error
            d["error_line"] = self.error_line
        if self.examples:
            d["examples"] = list(self.examples)
        return d


def outcome_text(r: RuntimeRow) -> str:
    """``yes``, ``no``, ``no (refused)``, ``injected (its own tool prompt)``, ``fails (its engine raises)`` or
    ``unknown``: the row's answer in a word or two."""
    if r.outcome == INJECTED:
        return "injected (its own tool prompt)"
    if r.outcome == REFUSED:
        return "no (refused)"
    if r.outcome == FAILS:
        return "fails (its engine raises)"
    return {True: "yes", False: "no", None: "unknown"}[r.tools_reach_prompt]
