"""One self-contained HTML page: the runtime matrix (file x runtime), each file's findings with their fix, and per
template the prompt each runtime's engine renders for the canary tools request, side by side, the tool schema
highlighted where it landed.

Inert by construction: the page is rendered from ``report.html.j2`` (next to this module) by jinja2 with
autoescape on, and every value goes through :func:`_finalize` on its way out, which shows control, bidi and
invisible characters as escapes (:func:`gguftpl.safeio.printable`, as the text report does) before markupsafe
escapes it. The only markup not written by the template is :func:`highlight`'s, built with ``Markup.format``,
which escapes each piece. A Content-Security-Policy allows no script, no network and no external asset at all,
so even a mistake here could run nothing; the page needs no script.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from gguftpl.report import tool_version
from gguftpl.report._common import fix_is_command, fix_of, repo_context, where
from gguftpl.safeio import printable

if TYPE_CHECKING:
    from jinja2 import Template
    from markupsafe import Markup

    from gguftpl.audit import AuditRun, FileAudit
    from gguftpl.findings import Finding
    from gguftpl.report.context import ReportContext
    from gguftpl.report.htmlparts import Matrix

__all__ = ["HTMLFormatter", "audit_page", "highlight", "page"]

EVIDENCE_MAX_LINES = 40
FILES_OPEN = 3
"""Up to this many files, each file's section starts open; more (a folder of quants) start folded."""


def shown(text: str) -> str:
    """``text`` as the page shows it: each line through :func:`gguftpl.safeio.printable` (newlines stay)."""
    return "\n".join(printable(line) for line in text.split("\n"))


def _finalize(value: Any) -> Any:
    from markupsafe import Markup

    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    return shown(str(value))


@lru_cache(maxsize=1)
def _template() -> Template:
    from importlib.resources import files

    import jinja2

    env = jinja2.Environment(
        autoescape=True,
        finalize=_finalize,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return env.from_string(files("gguftpl.report").joinpath("report.html.j2").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _terms() -> re.Pattern[str]:
    from gguftpl.report.htmlparts import SCHEMA_TERMS

    return re.compile("|".join(re.escape(t) for t in SCHEMA_TERMS))


def highlight(text: str) -> Markup:
    """``text`` escaped, with every canary schema string (the tool's name, description, parameter) in a
    ``<mark>``: where the tool schema landed in the prompt."""
    from markupsafe import Markup, escape

    out, pos = [], 0
    for m in _terms().finditer(text):
        out.append(escape(shown(text[pos : m.start()])))
        out.append(Markup('<mark class="schema">{0}</mark>').format(m.group(0)))
        pos = m.end()
    out.append(escape(shown(text[pos:])))
    return Markup("").join(out)


def _finding(f: Finding, run: AuditRun) -> dict[str, Any]:
    ev = f.evidence.splitlines() if f.evidence else []
    fix = fix_of(run, f)
    return {
        "severity": f.severity.value,
        "code": f.code,
        "name": f.name,
        "message": f.message,
        "upstream": str(f.extra["from_upstream"]) if f.extra.get("from_upstream") else "",
        "repo": repo_context(f),
        "where": where(f),
        "template": f.template or "",
        "evidence": "\n".join(ev[:EVIDENCE_MAX_LINES]),
        "evidence_more": max(0, len(ev) - EVIDENCE_MAX_LINES),
        "fix": fix,
        "fix_command": fix_is_command(fix),
    }


def _file(fa: FileAudit, run: AuditRun, index: int, prompts_anchor: str) -> dict[str, Any]:
    from gguftpl.report.htmlparts import cell

    counts = {"error": 0, "warning": 0, "info": 0}
    for f in fa.findings:
        counts[f.severity.value] += 1
    rows = fa.runtimes.rows if fa.runtimes is not None else ()
    verdict = ""
    if rows:
        from gguftpl.repair import verdict_line

        verdict = verdict_line(fa.runtimes, fa.upstream_own)  # type: ignore[arg-type]
    repair = fa.repair if fa.repair is not None and fa.repair.needed else None
    return {
        "anchor": f"file-{index}",
        "label": fa.path,
        "repo_level": fa.repo_level,
        "notes": list(fa.notes),
        "upstream": f"{fa.upstream_repo} ({fa.upstream_how})" if fa.upstream_repo and fa.upstream_how else "",
        "model": f"{fa.kind.kind}: {fa.kind.reason}" if fa.kind is not None and not fa.kind.generates else "",
        "counts": counts,
        "findings": [_finding(f, run) for f in fa.findings],
        "runtimes": [
            {
                "name": r.name,
                "engine": r.engine,
                "template": r.template,
                "word": cell(r.to_dict()).word,
                "reason": r.reason,
            }
            for r in rows
        ],
        "verdict": verdict,
        "repair": repair.text() if repair is not None else "",
        "repair_command": bool(repair is not None and repair.command),
        "prompts": prompts_anchor,
    }


def _signature(fa: FileAudit) -> tuple[Any, ...]:
    """Files with the same templates and the same runtime rows share one prompts section (a folder of quants)."""
    rows = fa.runtimes.rows if fa.runtimes is not None else ()
    return tuple((t.name, t.sha256) for t in fa.templates), tuple((r.name, r.template, r.outcome) for r in rows)


def _prompt_sections(files: Sequence[FileAudit], labels: Sequence[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The distinct prompts sections, and for each file the anchor of its section ('' when it has none)."""
    from gguftpl.report.htmlparts import file_prompts

    sections: dict[tuple[Any, ...], dict[str, Any]] = {}
    anchors = []
    for fa, label in zip(files, labels, strict=True):
        if fa.repo_level or not fa.templates:
            anchors.append("")
            continue
        key = _signature(fa)
        if key not in sections:
            templates, elsewhere = file_prompts(fa)
            sections[key] = {
                "anchor": f"prompts-{len(sections) + 1}",
                "files": [],
                "templates": templates,
                "elsewhere": [{"name": r.name, "template": r.template, "reason": r.reason} for r in elsewhere],
            }
        sections[key]["files"].append(label)
        anchors.append(sections[key]["anchor"])
    return list(sections.values()), anchors


def run_matrix(run: AuditRun) -> Matrix:
    """The file x runtime matrix of a run (a repo's own entry, which has no runtimes, is left out)."""
    from gguftpl.repair import verdict_line
    from gguftpl.report.htmlparts import matrix

    entries = []
    for i, fa in enumerate(run.files, 1):
        if fa.repo_level:
            continue
        rows = fa.runtimes.rows if fa.runtimes is not None else ()
        note = verdict_line(fa.runtimes, fa.upstream_own) if rows else (fa.error or "no runtime view")  # type: ignore[arg-type]
        entries.append((fa.path, f"file-{i}", [r.to_dict() for r in rows], note))
    return matrix("file", entries)


def _footer(context: ReportContext | None) -> list[str]:
    if context is None:
        return []
    out = []
    totals = context.remote_totals()
    if totals is not None:
        out.append(
            f"remote: {totals['files']} header(s) read over HTTP, {totals['bytes_fetched']:,} bytes in "
            f"{totals['requests']} request(s)"
        )
    out += [f"note: {label}: {note}" for label, note in context.notes()]
    for repo in context.repos:
        target = repo.get("target") or repo.get("repo") or ""
        out.append(f"repo: {target} ({len(repo.get('files') or ())} file(s))")
    return out


def page(title: str, summary: str, matrix: Matrix, **parts: Any) -> str:
    """The whole page: ``matrix`` (files or repos x runtimes) and the optional ``parts`` (``files``, ``repos``,
    ``files_open``, ``prompt_sections``, ``footer``) the template shows below it."""
    from gguftpl.templates.probes import CANARY_LEGEND, CANARY_PARAM_NAME, CANARY_TOOL_NAME

    values = {
        "title": title,
        "summary": summary,
        "matrix": matrix,
        "files": [],
        "repos": [],
        "files_open": False,
        "prompt_sections": [],
        "footer": [],
        "legend": CANARY_LEGEND,
        "tool_name": CANARY_TOOL_NAME,
        "param_name": CANARY_PARAM_NAME,
        "version": tool_version(),
        "highlight": highlight,
    }
    values.update(parts)
    return _template().render(**values)


def _summary(run: AuditRun) -> str:
    counts = run.counts()
    n = sum(counts.values())
    return (
        f"{n} finding(s) ({counts['error']} error, {counts['warning']} warning, {counts['info']} info) in "
        f"{run.file_count} file(s) ({run.files_with_findings} with findings)"
    )


def audit_page(run: AuditRun, title: str, footer: Sequence[str] = ()) -> str:
    """The page of ``run``: its file x runtime matrix, each file's findings with their fixes, the prompts side by
    side (``audit --format html``; ``scan --format html`` with the models a user has as the files)."""
    labels = [fa.path for fa in run.files]
    sections, anchors = _prompt_sections(run.files, labels)
    files = [_file(fa, run, i, anchors[i - 1]) for i, fa in enumerate(run.files, 1)]
    return page(
        title,
        _summary(run),
        run_matrix(run),
        files=files,
        files_open=len(files) <= FILES_OPEN,
        prompt_sections=sections,
        footer=list(footer),
    )


class HTMLFormatter:
    name = "html"

    def format(self, run: AuditRun, context: ReportContext | None = None) -> str:
        first = next((fa.path for fa in run.files if not fa.repo_level), "")
        title = f"gguftpl audit: {first}" if run.file_count == 1 else f"gguftpl audit: {run.file_count} files"
        return audit_page(run, title, _footer(context))
