"""Per runtime, what it does with a GGUF's chat templates and an OpenAI ``tools`` request: pure data, each fact
with the source it was read from (``repo path@commit``, a doc at a commit, or a version).

Read from the runtimes' own code (git snapshots; ``../shared/RUNTIMES.md`` has the longer notes):

| repo | commit | version |
|---|---|---|
| ochafik/llama.cpp (mirror, master == tag b9821) | 050ee92d | b9821 |
| ollama/ollama | fb307609 | v0.33.0-rc2 (pins llama.cpp b10488) |
| lmstudio-ai/docs, lmstudio-ai/lmstudio-js | c6854fba, 6ec11db1 | SDK 1.5.0 (app closed source) |
| huggingface/text-generation-inference | db931fcf | v3.3.7+, minijinja 2.8.0 (Cargo.lock) |
| EricLBuehler/mistral.rs | 9e922623 | v0.9.2+7, minijinja 2.14.0 (Cargo.lock) |
| mitsuhiko/minijinja | eb17be57 | ``Kwargs`` never checks unused keys by itself |

Read file by file from a code index (the repos are too large to fetch; the commit is the stored file's):
vLLM, SGLang, NVIDIA Dynamo, Jan, Goose (aaif-goose/goose, formerly block/goose).

``engine`` names an adapter of :mod:`gguftpl.engines`; ``parser_dialects`` use the dialect names of
:mod:`gguftpl.templates.dialect`. This module imports nothing above :mod:`gguftpl.errors`.
"""

from __future__ import annotations

import re

from gguftpl.errors import GGUFTplError
from gguftpl.runtimes import toolprompts
from gguftpl.runtimes.profiles.hfpython import SGLANG, VLLM
from gguftpl.runtimes.profiles.llamacpp import GOOSE, JAN, LLAMA_CPP
from gguftpl.runtimes.profiles.lmstudio import LMSTUDIO
from gguftpl.runtimes.profiles.minijinja import DYNAMO, MISTRALRS, TGI
from gguftpl.runtimes.profiles.model import (
    CAPABILITY_KINDS,
    ENGINE_IDS,
    IGNORED_TOOLS,
    TEMPLATE_CHOICES,
    RuntimeProfile,
    Sourced,
)
from gguftpl.runtimes.profiles.ollama import OLLAMA

__all__ = [
    "CAPABILITY_KINDS",
    "ENGINE_IDS",
    "IGNORED_TOOLS",
    "PROFILES",
    "TEMPLATE_CHOICES",
    "RuntimeProfile",
    "Sourced",
    "UnknownRuntimeError",
    "for_engine",
    "injected_tool_prompt",
    "profile",
    "profiles_table",
]

PROFILES: tuple[RuntimeProfile, ...] = (LLAMA_CPP, GOOSE, JAN, LMSTUDIO, VLLM, SGLANG, TGI, MISTRALRS, DYNAMO, OLLAMA)
_BY_ID = {p.id: p for p in PROFILES}


class UnknownRuntimeError(GGUFTplError, KeyError):
    """No profile has that id."""

    def __init__(self, runtime_id: str) -> None:
        self.runtime_id = runtime_id
        super().__init__(f"unknown runtime {runtime_id!r}; known: {', '.join(p.id for p in PROFILES)}")

    def __str__(self) -> str:
        return str(self.args[0])


def profile(runtime_id: str) -> RuntimeProfile:
    """The profile with that id; :class:`UnknownRuntimeError` (a KeyError) when there is none."""
    try:
        return _BY_ID[runtime_id]
    except KeyError:
        raise UnknownRuntimeError(runtime_id) from None


def for_engine(engine_id: str) -> tuple[RuntimeProfile, ...]:
    """The runtimes that render with ``engine_id`` (as their main engine or on another path)."""
    return tuple(p for p in PROFILES if p.engine == engine_id or engine_id in p.also_engines)


def injected_tool_prompt(p: RuntimeProfile, tools: list[dict[str, object]], **kwargs: object) -> str:
    """The text runtime ``p`` writes itself for ``tools`` when the template ignores them (``inject`` runtimes);
    ValueError for the others. ``kwargs`` go to TGI's builder (``template_uses_tools``, ``tool_prompt``,
    ``tool_choice``)."""
    if p.id == "lmstudio":
        return toolprompts.lmstudio_tool_prompt(tools)
    if p.id == "tgi":
        return toolprompts.tgi_appended_text(tools, **kwargs)  # type: ignore[arg-type]
    if p.id == "goose":
        return toolprompts.goose_tool_list(tools)
    raise ValueError(f"{p.name} does not inject a tool prompt (it {p.ignored_tools}s tools a template ignores)")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _grouped_sources(sources: tuple[str, ...]) -> str:
    """``repo@commit: file, file`` per repo and commit (functions and line numbers dropped), then the rest."""
    groups: dict[str, list[str]] = {}
    other: list[str] = []
    for source in sources:
        m = _SOURCE.match(source)
        if not m:
            other.append(source)
            continue
        key = f"{m['repo']}@{m['commit']}"
        path = m["path"].split("::")[0].split(":")[0]
        if path not in groups.setdefault(key, []):
            groups[key].append(path)
    parts = [f"{key}: {', '.join(paths)}" for key, paths in groups.items()]
    return "<br>".join(parts + other)


_SOURCE = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+) (?P<path>\S+)@(?P<commit>[0-9a-f]{7,40})")


def _parser_cell(p: RuntimeProfile) -> str:
    parts = ["from the template"] if p.parser_follows_template else []
    dialects = sorted(set(p.parser_dialects) | {d for _, d in p.parser_names if d})
    if dialects:
        parts.append(", ".join(dialects))
    return "; ".join(parts) or "none"


def profiles_table() -> str:
    """The runtime table for the README (Markdown): runtime | engine | template read | tools capability |
    tools ignored | parser | sources."""
    rows = [
        "| runtime | engine | template read | tools capability | tools ignored | parser | sources |",
        "|" + "---|" * 7,
    ]
    for p in PROFILES:
        capability = p.tools_capability
        if p.capability_substrings:
            capability += " (" + ", ".join(f"`{s}`" for s in p.capability_substrings) + ")"
        ignored = p.ignored_tools
        if p.refusal_message:
            ignored += (
                f": `{p.refusal_message}`" if p.ignored_tools == "refuse" else f" (refuses: `{p.refusal_message}`)"
            )
        cells = [
            f"{p.name} ({p.version})",
            ", ".join(f"`{e}`" for e in (p.engine, *p.also_engines)),
            p.template_choice,
            capability,
            ignored,
            _parser_cell(p),
            _grouped_sources(p.sources),
        ]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows) + "\n"
