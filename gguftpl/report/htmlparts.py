"""What the HTML report shows, as plain data (no markup): the runtime matrix and, per template, the prompt each
runtime's engine renders for the canary tools request.

The matrix takes rows in the form ``RuntimeRow.to_dict()`` writes (what ``--format json`` carries under
``runtimes``), so a table of repos (a survey) can be built from the same cells as a table of files.
The prompts are read from the facts: each runtime row says which template and engine it renders a tools request
with (:mod:`gguftpl.runtimes.view`); the engine's render of :data:`gguftpl.templates.probes.TOOLS` is that
runtime's prompt (:func:`gguftpl.templates.enginefacts.engine_facts`). Nothing is rendered here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gguftpl.runtimes.rows import FAILS, INJECTED, REFUSED
from gguftpl.templates import probes

if TYPE_CHECKING:
    from gguftpl.audit import FileAudit
    from gguftpl.runtimes.rows import RuntimeRow
    from gguftpl.templates.facts import EngineFacts, TemplateFacts

__all__ = ["Cell", "Matrix", "MatrixRow", "Panel", "TemplatePrompts", "cell", "file_prompts", "matrix"]

PROMPT_MAX_CHARS = 20_000
"""A prompt longer than this is shown cut, with the count of what was left off."""

SCHEMA_TERMS = (
    probes.CANARY_PARAM_DESCRIPTION,
    probes.CANARY_TOOL_DESCRIPTION,
    probes.CANARY_TOOL_NAME,
    probes.CANARY_PARAM_NAME,
    probes.CANARY_PARAM_TOKEN,
)
"""The canary tool's strings a prompt carries where its schema landed, longest first (highlighted)."""


@dataclass(frozen=True)
class Cell:
    """One runtime's answer for one file (or repo): do the tool schemas reach the prompt?"""

    word: str
    """``yes``, ``no``, ``refused``, ``injected``, ``fails`` or ``unknown``."""
    reason: str = ""


@dataclass(frozen=True)
class MatrixRow:
    label: str
    anchor: str
    """The id of the page section about this row ('' for none)."""
    cells: tuple[Cell | None, ...]
    """One per matrix column; None when this row has no such runtime."""
    note: str = ""
    """What the row says beside its cells (the verdict line, or why there are no cells)."""


@dataclass(frozen=True)
class Matrix:
    corner: str
    """What a row is: ``file`` or ``repo``."""
    columns: tuple[str, ...]
    rows: tuple[MatrixRow, ...]


def cell(row: Mapping[str, Any]) -> Cell:
    """The cell of one runtime row (``RuntimeRow.to_dict()``)."""
    outcome = row.get("outcome")
    if outcome in (INJECTED, REFUSED, FAILS):
        word = str(outcome)
    else:
        word = {True: "yes", False: "no"}.get(row.get("tools_reach_prompt"), "unknown")  # type: ignore[arg-type]
    return Cell(word, str(row.get("reason") or ""))


def matrix(corner: str, entries: Sequence[tuple[str, str, Sequence[Mapping[str, Any]], str]]) -> Matrix:
    """The matrix of ``entries``: (label, anchor, runtime rows as dicts, note) each; the columns are every runtime
    named, in the order they first appear."""
    columns: list[str] = []
    for _, _, rows, _ in entries:
        columns += [str(r.get("name")) for r in rows if str(r.get("name")) not in columns]
    out = []
    for label, anchor, rows, note in entries:
        by_name = {str(r.get("name")): cell(r) for r in rows}
        out.append(MatrixRow(label, anchor, tuple(by_name.get(c) for c in columns), note))
    return Matrix(corner, tuple(columns), tuple(out))


@dataclass(frozen=True)
class Panel:
    """One engine's prompt for a template, as the runtimes that render the tools request with it receive it."""

    engine: str
    runtimes: tuple[tuple[str, str], ...]
    """(runtime name, its cell word) for each runtime that renders this template with this engine."""
    prompt: str | None = None
    """The prompt of the tools request (cut at :data:`PROMPT_MAX_CHARS`); None when there is none to show."""
    cut: int = 0
    """Characters left off the end of ``prompt``."""
    schema: str = "unknown"
    """``present`` (the canary tool's name and parameter are in the prompt), ``name only``, ``missing`` or
    ``unknown`` (nothing rendered)."""
    schema_line: int | None = None
    """1-based line of the prompt where the schema first appears."""
    note: str = ""
    """The engine's error, why it was not asked, what it rendered in the template's place, or the refusal."""


@dataclass(frozen=True)
class TemplatePrompts:
    name: str
    key: str
    sha256: str
    panels: tuple[Panel, ...]


@dataclass
class _Group:
    engine: str
    rows: list[RuntimeRow] = field(default_factory=list)


def _source(row: RuntimeRow, facts: Mapping[str, TemplateFacts]) -> tuple[str, str] | None:
    """(template name, engine id) the runtime renders a tools request with, when it is one of the file's
    templates; None for a template not in the file (llama.cpp's built-in ChatML, a store's own TEMPLATE)."""
    if row.template in facts:
        # Ollama renders the GGUF's own Jinja through its bundled llama-server (the ollama engine is Go's)
        return row.template, "llamacpp" if row.engine == "ollama" else row.engine
    if row.engine == "ollama" and row.template in ("TEMPLATE layer (Go)", "renderer"):
        return None  # a model Ollama has: its manifest's TEMPLATE (or Go renderer), not the curated one an import gets
    default = facts.get("default")
    if row.engine == "ollama" and default is not None:
        e = default.engines.get("ollama")
        if e is not None and e.template:  # its curated Go template, rendered in the default's place
            return "default", "ollama"
    return None


def _schema(e: EngineFacts, text: str) -> tuple[str, int | None]:
    if e.tools_in_prompt:
        status = "present"
    elif e.tools_in_prompt is False:
        status = "name only" if probes.CANARY_TOOL_NAME in text else "missing"
    else:
        status = "unknown"
    at = [text.find(term) for term in SCHEMA_TERMS if term in text]
    return status, (text.count("\n", 0, min(at)) + 1 if at else None)


def _panel(group: _Group, t: TemplateFacts) -> Panel:
    from gguftpl.runtimes.rows import outcome_text
    from gguftpl.templates.enginefacts import engine_facts

    runtimes = tuple((r.name, cell(r.to_dict()).word) for r in group.rows)
    refused = [r for r in group.rows if r.outcome == REFUSED]
    if len(refused) == len(group.rows):
        why = refused[0].error or refused[0].reason
        return Panel(group.engine, runtimes, schema="missing", note=f"refuses a tools request before rendering: {why}")
    e = engine_facts(t, group.engine)
    if e is None or not e.installed or e.unknown:
        why = e.unknown if e is not None and e.unknown else f"{group.engine} was not asked"
        return Panel(group.engine, runtimes, note=why)
    err = e.error(probes.TOOLS)
    text = e.text(probes.TOOLS)
    if err is not None or text is None:
        why = (err.error if err is not None else None) or outcome_text(group.rows[0])
        return Panel(group.engine, runtimes, note=f"its engine renders no prompt: {why}")
    schema, line = _schema(e, text)
    notes = []
    if e.template:
        notes.append(f"rendered from {e.template}, the template Ollama puts in this one's place")
    injecting = [r.name for r in group.rows if r.outcome == INJECTED]
    if injecting:
        notes.append(
            f"{', '.join(injecting)}: writes its own tool prompt beside this one, in a format the model "
            "was not trained on"
        )
    cut = max(0, len(text) - PROMPT_MAX_CHARS)
    return Panel(group.engine, runtimes, text[:PROMPT_MAX_CHARS], cut, schema, line, "; ".join(notes))


def file_prompts(fa: FileAudit) -> tuple[list[TemplatePrompts], list[RuntimeRow]]:
    """Per template of the file, one panel per engine its runtimes render a tools request with; and the rows
    whose template is not in the file (shown with their reason only)."""
    facts = {t.name: t for t in fa.templates}
    groups: dict[str, dict[str, _Group]] = {name: {} for name in facts}
    elsewhere: list[RuntimeRow] = []
    for row in fa.runtimes.rows if fa.runtimes is not None else ():
        source = _source(row, facts)
        if source is None:
            elsewhere.append(row)
            continue
        name, engine = source
        groups[name].setdefault(engine, _Group(engine)).rows.append(row)
    out = []
    for t in fa.templates:
        panels = tuple(_panel(g, t) for g in groups[t.name].values())
        out.append(TemplatePrompts(t.name, t.key, t.sha256, panels))
    return out, elsewhere
