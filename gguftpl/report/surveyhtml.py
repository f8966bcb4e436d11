"""``survey --format html``: the survey as one self-contained page, on the audit report's shell.

A matrix of repos x runtimes (each repo's cell for a runtime is its worst file's answer, ``RepoRow.runtime_rows``;
under each row the runtimes that lose the tools, the top findings and the fix), then per repo its top findings
each with its fix, and the files audited (file x runtime), each file's findings folded below them. The page, its
escaping and its Content-Security-Policy are :func:`gguftpl.report.html.page`'s: every repo id, file name, Hub
error message and finding message (which may quote a template's output) goes through the same autoescaping Jinja2
environment as the audit's report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gguftpl.report._common import fix_is_command

if TYPE_CHECKING:
    from gguftpl.hubsurvey.run import FileRecord, FindingCount, RepoRow, SurveyResult
    from gguftpl.report.htmlparts import Matrix

__all__ = ["HTMLSurveyFormatter"]

REPOS_OPEN = 3
"""Up to this many repos, each repo's section starts open; more (a catalog) start folded."""


def _rule_name(code: str) -> str:
    from gguftpl.findings import get_rule

    try:
        return get_rule(code).name
    except KeyError:
        return ""


def _finding(code: str, severity: str, message: str, fix: str) -> dict[str, Any]:
    """A finding as the page's finding list takes it (the audit's fields a survey does not keep, empty)."""
    return {
        "severity": severity,
        "code": code,
        "name": _rule_name(code),
        "message": message,
        "upstream": "",
        "repo": "",
        "where": "",
        "template": "",
        "evidence": "",
        "evidence_more": 0,
        "fix": fix,
        "fix_command": fix_is_command(fix),
    }


def _top(c: FindingCount) -> dict[str, Any]:
    times = f" (\u00d7{c.count} in the files read)" if c.count > 1 else ""
    return _finding(c.code, c.severity, c.message + times, c.fix)


def _file_findings(f: FileRecord) -> dict[str, Any]:
    fixes = dict(f.fixes)
    return {
        "label": f.path,
        "findings": [_finding(code, sev, msg, fixes.get(code, "")) for code, sev, msg in f.findings],
    }


def _verdict(row: RepoRow) -> str:
    if not row.files:
        return ""
    if row.dropping:
        return f"the tool schemas are lost in {', '.join(row.dropping)}"
    return "no runtime loses the tool schemas"


def _note(row: RepoRow) -> str:
    """The line under a repo's cells: why it was not audited, or what loses the tools, its top findings, its fix."""
    from gguftpl.report.survey import findings_text

    if row.error is not None and not row.files:
        return f"not audited: {row.error}"
    parts = [_verdict(row)]
    if row.top_findings:
        parts.append(f"top findings: {findings_text(row)}")
    if row.fix:
        parts.append(f"fix: {row.fix}")
    if row.error is not None:
        parts.append(f"not finished: {row.error}")
    return "; ".join(p for p in parts if p)


def _files(row: RepoRow) -> Matrix:
    from dataclasses import asdict

    from gguftpl.report.htmlparts import matrix

    entries = []
    for f in row.files:
        if f.error is not None:
            note = f"not read: {f.error}"
        elif not f.runtimes:
            note = "; ".join(msg for _, _, msg in f.findings[:1]) or "no runtime view"
        else:
            note = f"fix: {f.fix}" if f.fix else ""
        entries.append((f.path, "", [asdict(r) for r in f.runtimes], note))
    return matrix("file", entries)


def _headline(row: RepoRow) -> str:
    counts = {"error": 0, "warning": 0, "info": 0}
    for f in row.files:
        for _, sev, _ in f.findings:
            counts[sev] = counts.get(sev, 0) + 1
    total = sum(counts.values())
    read = f"{len(row.files)} of {row.files_listed} GGUF(s) read" if row.files_listed else f"{len(row.files)} read"
    return (
        f"{row.status}: {read}; {total} finding(s): {counts['error']} error, {counts['warning']} warning, "
        f"{counts['info']} info"
    )


def _repo(row: RepoRow, anchor: str) -> dict[str, Any]:
    notes = []
    if row.sha:
        notes.append(f"commit {row.sha}")
    if row.reused:
        notes.append("unchanged since the last run: taken from the survey's state")
    return {
        "anchor": anchor,
        "label": row.repo,
        "headline": _headline(row),
        "notes": notes,
        "error": row.error or "",
        "verdict": _verdict(row),
        "repair": row.fix or "",
        "repair_command": fix_is_command(row.fix or ""),
        "findings": [_top(c) for c in row.top_findings],
        "files": _files(row),
        "file_findings": [_file_findings(f) for f in row.files if f.findings],
    }


class HTMLSurveyFormatter:
    name = "html"

    def __init__(self, **_: Any) -> None:
        pass

    def format(self, result: SurveyResult) -> str:
        from gguftpl.report.html import page
        from gguftpl.report.htmlparts import matrix
        from gguftpl.report.survey import headline

        anchors = [f"repo-{i}" for i in range(1, len(result.rows) + 1)]
        entries = [(r.repo, a, r.runtime_rows(), _note(r)) for r, a in zip(result.rows, anchors, strict=True)]
        footer = [f"{result.header_reads} header(s) read over HTTP by this run, in {result.seconds:.1f} s"]
        return page(
            f"gguftpl survey: {result.source}",
            headline(result),
            matrix("repo", entries),
            repos=[_repo(r, a) for r, a in zip(result.rows, anchors, strict=True)],
            files_open=len(result.rows) <= REPOS_OPEN,
            footer=footer,
        )
