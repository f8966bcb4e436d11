"""The runtime view of one GGUF: for each runtime, which template renders a request with tools, whether its own
engine renders it, whether the tool schemas reach the prompt, what it does when they do not, and whether its
parser takes a call in the template's dialect.

One row per runtime profile (:mod:`gguftpl.runtimes.profiles`), each verdict read from that runtime's engine
(:meth:`TemplateFacts.engine`): llama.cpp's C++ Jinja for llama.cpp and the hosts on it, ``@huggingface/jinja``
for LM Studio, transformers' jinja2 for vLLM and SGLang, minijinja as TGI, mistral.rs and Dynamo configure it, Go
``text/template`` for Ollama's curated template. An engine that is not installed makes its rows "unknown" with
the install command; no row borrows another engine's answer. The one exception is a proof, not an answer: a
template whose AST never reads ``tools`` puts them in no engine's prompt.

Which template each runtime takes: ``tool_use`` when tools are passed and there is one, else the default, else
ChatML (llama.cpp: :func:`gguftpl.engines.llamacpp_choice.choose_template`, the one place that decides it);
``tokenizer.chat_template`` only (default-only runtimes); ``tool_use`` by name (Dynamo); Ollama's own registry
(:mod:`gguftpl.engines.ollama_registry`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gguftpl.engines.ollama_registry import OllamaPrediction
    from gguftpl.runtimes.ollamamanifest import OllamaManifest
    from gguftpl.runtimes.profiles import RuntimeProfile
    from gguftpl.templates.facts import TemplateFacts

from gguftpl.runtimes.rows import (  # noqa: F401 - the outcomes and the row are read from here too
    DROPPED,
    FAILS,
    INJECTED,
    LLAMACPP,
    OLLAMA,
    PROMPT,
    REFUSED,
    UNKNOWN,
    RuntimeRow,
)
from gguftpl.templates.enginefacts import engine_facts


@dataclass(frozen=True)
class RuntimeView:
    rows: tuple[RuntimeRow, ...]
    ollama: OllamaPrediction
    tool_use_renders: bool = False
    """The file has a ``tool_use`` template that puts the schemas in the prompt."""

    def row(self, name: str) -> RuntimeRow:
        """The row of a runtime, by display name or profile id (a host that does what llama.cpp does, such as
        Jan, is llama.cpp's row)."""
        found = next((r for r in self.rows if name in (r.name, r.id)), None)
        if found is None:
            from gguftpl.runtimes.profiles import profile

            found = next(r for r in self.rows if profile(name).name in r.examples)
        return found

    def dropping(self) -> list[RuntimeRow]:
        """The runtimes whose tools request loses the schemas (decided, not unknown): dropped or refused."""
        return [r for r in self.rows if r.tools_reach_prompt is False]

    def failing(self) -> list[RuntimeRow]:
        """The runtimes whose own engine raises on the template they render a tools request with."""
        return [r for r in self.rows if r.outcome == FAILS]

    def only(self, ids: Sequence[str]) -> RuntimeView:
        """The view restricted to these runtimes (``audit --runtime``)."""
        keep = {self.row(i).id for i in ids}
        return RuntimeView(tuple(r for r in self.rows if r.id in keep), self.ollama, self.tool_use_renders)

    def to_list(self) -> list[dict[str, Any]]:
        out = [r.to_dict() for r in self.rows]
        for d in out:
            if d["id"] == "ollama":
                d["ollama"] = self.ollama.to_dict()
        return out


def reaches(t: TemplateFacts | None) -> bool | None:
    """Do the tool schemas reach the prompt this template renders? Rendered facts first, then the AST (the
    template's own verdict, :func:`gguftpl.templates.verdicts.tools_verdict`)."""
    if t is None:
        return None
    if t.tools_in_prompt is not None:
        return t.tools_in_prompt
    return False if t.tools_static is False else None


def runtime_view(
    templates: Sequence[TemplateFacts],
    texts: Mapping[str, str] | None,
    manifest: OllamaManifest | None = None,
    specials: tuple[str, str] = ("", ""),
) -> RuntimeView:
    """The view of a file whose templates have these facts and texts (name -> text; None when only the facts
    are at hand, e.g. a bare template: then Ollama's choice is unknown). ``manifest``: the file is a model Ollama
    already has, and its row follows that model's manifest (:mod:`gguftpl.runtimes.ollamamanifest`) instead of
    predicting what ``ollama create`` would do; ``specials``: the file's bos and eos texts."""
    from gguftpl.engines import ollama_registry as ollama
    from gguftpl.runtimes.profiles import PROFILES

    facts = {t.name: t for t in templates}
    names = dict(texts) if texts is not None else {t.name: "" for t in templates}
    default, tool_use = facts.get("default"), facts.get("tool_use")
    ollama_row: RuntimeRow | None = None
    if manifest is not None:
        from gguftpl.runtimes.ollamamanifest import manifest_row
        from gguftpl.runtimes.profiles import profile

        ollama_row, prediction = manifest_row(profile("ollama"), facts, names, manifest, specials)
    elif texts is None:
        prediction = ollama.unknown("the template's text is not at hand")
    else:
        prediction = ollama.predict(texts.get("default"), _engine_reaches(default, "llamacpp"))
    rows = []
    for p in PROFILES:
        if p.based_on == LLAMACPP and p.template_choice == "tool_use_with_tools":
            continue  # a host that does what llama.cpp does: named on llama.cpp's row
        row = ollama_row if ollama_row is not None and p.id == "ollama" else _row(p, facts, names, prediction)
        rows.append(_with_parser(row, p, facts))
    return RuntimeView(tuple(rows), prediction, bool(reaches(tool_use)))


def _row(
    p: RuntimeProfile, facts: Mapping[str, TemplateFacts], texts: Mapping[str, str], prediction: OllamaPrediction
) -> RuntimeRow:
    from gguftpl.runtimes import rowverdicts

    if p.template_choice == "tool_use_with_tools":
        return rowverdicts.llamacpp_row(p, facts, texts)
    if p.template_choice == "ollama":
        return rowverdicts.ollama_row(p, facts, prediction)
    if p.template_choice == "named_list" and "tool_use" in facts:
        return rowverdicts.template_row(
            p, facts["tool_use"], "tool_use", "takes tool_use by name when tools are passed"
        )
    default = facts.get("default")
    if default is None:
        return rowverdicts.no_default_row(p)
    return rowverdicts.template_row(p, default, "default", "reads only tokenizer.chat_template")


def _engine_reaches(t: TemplateFacts | None, engine_id: str) -> bool | None:
    if t is None:
        return None
    e = engine_facts(t, engine_id)
    if e is not None and e.tools_in_prompt is not None:
        return e.tools_in_prompt
    return False if t.tools_static is False else None


def _with_parser(row: RuntimeRow, p: RuntimeProfile, facts: Mapping[str, TemplateFacts]) -> RuntimeRow:
    """Does the runtime's parser take a call in the dialect of the template it renders?"""
    from dataclasses import replace

    t = facts.get("tool_use" if row.template == "tool_use" else "default")
    if t is None or t.dialect in ("none", "unknown"):
        return row
    if p.parser_follows_template:
        return replace(row, parser_takes_dialect=True)
    dialects = set(p.parser_dialects) | {d for _, d in p.parser_names if d}
    return replace(row, parser_takes_dialect=t.dialect in dialects if dialects else None)
