"""The runtime view of one GGUF: for each runtime, which template renders a request with tools, and whether the
tool schemas reach the prompt.

A fact computed once per file from the templates' own facts (``TemplateFacts.tools_in_prompt``, transformers'
semantics) and their texts; the GT205 and GT7xx rules, the reports and ``verify`` read it.

- llama.cpp: ``tool_use`` when tools are passed and there is one, else the default, else its built-in ChatML
  (asked of :func:`gguftpl.engines.llamacpp_choice.choose_template`, the one place that decides it).
- default-only runtimes (LM Studio, vLLM, other OpenAI-compatible servers): ``tokenizer.chat_template`` only.
- Ollama: its own registry (:mod:`gguftpl.runtimes.ollama`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gguftpl.runtimes.ollama import OllamaPrediction
    from gguftpl.templates.facts import TemplateFacts

LLAMACPP = "llama.cpp"
DEFAULT_ONLY = "default-only"
OLLAMA = "Ollama"
DEFAULT_ONLY_RUNTIMES = ("LM Studio", "vLLM", "other OpenAI-compatible servers")
_WHO = "LM Studio, vLLM and other OpenAI-compatible servers"


@dataclass(frozen=True)
class RuntimeRow:
    name: str
    """:data:`LLAMACPP`, :data:`DEFAULT_ONLY` or :data:`OLLAMA`."""
    template: str
    """The template it renders a tools request with: ``tool_use``, ``default``, ``fallback``, ``none``, or
    Ollama's curated one (``chatml (Ollama's curated Go template)``)."""
    tools_reach_prompt: bool | None
    """The tool schemas reach the prompt; None when that could not be decided (the template did not render)."""
    reason: str
    examples: tuple[str, ...] = ()
    """The products this row stands for (default-only runtimes)."""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "template": self.template,
            "tools_reach_prompt": self.tools_reach_prompt,
            "reason": self.reason,
        }
        if self.examples:
            d["examples"] = list(self.examples)
        return d


@dataclass(frozen=True)
class RuntimeView:
    rows: tuple[RuntimeRow, ...]
    ollama: OllamaPrediction
    tool_use_renders: bool = False
    """The file has a ``tool_use`` template that puts the schemas in the prompt."""

    def row(self, name: str) -> RuntimeRow:
        return next(r for r in self.rows if r.name == name)

    def dropping(self) -> list[RuntimeRow]:
        """The runtimes whose tools request loses the schemas (decided, not unknown)."""
        return [r for r in self.rows if r.tools_reach_prompt is False]

    def to_list(self) -> list[dict[str, Any]]:
        out = [r.to_dict() for r in self.rows]
        for d in out:
            if d["name"] == OLLAMA:
                d["ollama"] = self.ollama.to_dict()
        return out


def reaches(t: TemplateFacts | None) -> bool | None:
    """Do the tool schemas reach the prompt this template renders? Rendered facts first, then the AST."""
    if t is None:
        return None
    if t.tools_in_prompt is not None:
        return t.tools_in_prompt
    return False if t.tools_static is False else None


def _verdict(t: TemplateFacts | None) -> str:
    v = reaches(t)
    if v is None:
        return "could not be rendered, so whether the schemas reach the prompt is unknown"
    if v:
        return "puts the tool schemas in the prompt"
    if t is not None and t.tool_name_in_prompt:
        return "renders the tool names but not their schemas"
    return "drops the tool schemas"


def runtime_view(templates: Sequence[TemplateFacts], texts: Mapping[str, str] | None) -> RuntimeView:
    """The view of a file whose templates have these facts and texts (name -> text; None when only the facts
    are at hand, e.g. a bare template: then Ollama's choice is unknown)."""
    from gguftpl.runtimes import ollama

    facts = {t.name: t for t in templates}
    default = facts.get("default")
    tool_use = facts.get("tool_use")
    names = dict(texts) if texts is not None else {t.name: "" for t in templates}
    rows = [_llamacpp_row(facts, names), _default_only_row(default, "default" in names)]
    if texts is None:
        prediction = ollama.unknown("the template's text is not at hand")
    else:
        prediction = ollama.predict(texts.get("default"), reaches(default))
    reason = prediction.reason
    if reaches(tool_use) and not prediction.tools_rendered:
        reason += "; tool_use, which renders them, is invisible to Ollama"
    rows.append(RuntimeRow(OLLAMA, prediction.template, prediction.tools_rendered, reason))
    return RuntimeView(tuple(rows), prediction, bool(reaches(tool_use)))


def _llamacpp_row(facts: Mapping[str, TemplateFacts], texts: Mapping[str, str]) -> RuntimeRow:
    from gguftpl.engines.llamacpp_choice import choose_template, loaded_templates

    loaded = loaded_templates(dict(texts))
    refused = ""
    tool_use = facts.get("tool_use")
    if tool_use is not None and tool_use.llamacpp_load_error:
        loaded.pop("tool_use", None)  # llama.cpp drops a tool_use it cannot parse, silently
        refused = f"llama.cpp cannot load tool_use ({tool_use.llamacpp_load_error}) and drops it; "
    choice = choose_template(loaded, tools=True)
    if choice.fallback:
        return RuntimeRow(
            LLAMACPP,
            "fallback",
            False,
            refused + "the file has no default template: llama.cpp renders its built-in ChatML, which never "
            "reads tools",
        )
    t = facts.get(choice.name)
    if choice.name == "default" and t is not None and t.llamacpp_load_error:
        return RuntimeRow(LLAMACPP, "default", None, f"llama.cpp refuses to load the default ({t.llamacpp_load_error})")
    how = "switches to tool_use when tools are passed" if choice.name == "tool_use" else "renders the default"
    if choice.name == "default" and not refused:
        how += " (the file has no tool_use)"
    return RuntimeRow(LLAMACPP, choice.name, reaches(t), f"{refused}{how}, which {_verdict(t)}")


def _default_only_row(default: TemplateFacts | None, has_default: bool) -> RuntimeRow:
    if not has_default:
        return RuntimeRow(
            DEFAULT_ONLY,
            "none",
            None,
            f"{_WHO} read only tokenizer.chat_template, which the file lacks: each falls back to a format of its own",
            DEFAULT_ONLY_RUNTIMES,
        )
    return RuntimeRow(
        DEFAULT_ONLY,
        "default",
        reaches(default),
        f"{_WHO} read only tokenizer.chat_template, which {_verdict(default)}",
        DEFAULT_ONLY_RUNTIMES,
    )
