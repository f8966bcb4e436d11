"""Output formats of a survey (``gguftpl survey``): each a small class that turns a ``SurveyResult`` into a string.

The survey's own registry (``SURVEY_FORMATS``), beside the audit's: a format is added by one entry here and
one class (module imported only when chosen). The CLI's ``--format`` choices are its keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gguftpl.hubsurvey.run import RepoRow, SurveyResult

__all__ = [
    "SURVEY_FORMATS",
    "CSVSurveyFormatter",
    "JSONSurveyFormatter",
    "SurveyFormatter",
    "TextSurveyFormatter",
    "findings_text",
    "get_survey_formatter",
    "headline",
    "survey_format_names",
]


class SurveyFormatter(Protocol):
    name: str

    def format(self, result: SurveyResult) -> str:
        """The whole report, ending with a newline."""


# format name -> "module:Class" under gguftpl.report
SURVEY_FORMATS: dict[str, str] = {
    "text": "survey:TextSurveyFormatter",
    "json": "survey:JSONSurveyFormatter",
    "csv": "survey:CSVSurveyFormatter",
    "html": "surveyhtml:HTMLSurveyFormatter",
}


def survey_format_names() -> list[str]:
    return list(SURVEY_FORMATS)


def get_survey_formatter(name: str, **options: Any) -> SurveyFormatter:
    from gguftpl.report import load_formatter

    formatter: SurveyFormatter = load_formatter(SURVEY_FORMATS, name, "survey format", **options)
    return formatter


def headline(result: SurveyResult) -> str:
    """The survey's summary line (raw: each format escapes it its own way)."""
    return (
        f"survey of {result.source}: {len(result.rows)} repos, {result.audited} audited, "
        f"{result.reused} unchanged since the last run, {result.failed} failed; {result.header_reads} headers read"
    )


def findings_text(row: RepoRow) -> str:
    return ", ".join(f"{c.code} x{c.count}" if c.count > 1 else c.code for c in row.top_findings)


def _tools_text(row: RepoRow) -> str:
    if row.error is not None and not row.files:
        return "-"
    return ", ".join(row.dropping) or "none"


class TextSurveyFormatter:
    """One line per repo (files read of listed, the runtimes that lose the tools, the top findings), its fix or
    its error below it; a summary line first."""

    name = "text"

    def __init__(self, *, width: int | None = None, **_: Any) -> None:
        self.width = width

    def format(self, result: SurveyResult) -> str:
        from gguftpl.safeio import printable

        head = printable(headline(result))
        table = [("repo", "files", "tools lost in", "top findings")]
        for r in result.rows:
            table.append((printable(r.repo), f"{len(r.files)}/{r.files_listed}", _tools_text(r), findings_text(r)))
        w = [max(len(row[i]) for row in table) for i in range(3)]
        out = [head, ""]
        for i, (repo, files, tools, findings) in enumerate(table):
            out.append(f"{repo:<{w[0]}}  {files:>{w[1]}}  {tools:<{w[2]}}  {findings or '-'}".rstrip())
            if i == 0:
                continue
            row = result.rows[i - 1]
            if row.error is not None:
                out.append(f"  error: {printable(row.error)}")
            elif row.fix:
                out.append(f"  fix: {printable(row.fix)}")
        return "\n".join(out) + "\n"


class JSONSurveyFormatter:
    name = "json"

    def __init__(self, **_: Any) -> None:
        pass

    def format(self, result: SurveyResult) -> str:
        import json

        return json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n"


CSV_COLUMNS = (
    "repo",
    "sha",
    "status",
    "files_read",
    "files_listed",
    "runtimes_losing_tools",
    "top_findings",
    "fix",
    "error",
    "reused",
)


class CSVSurveyFormatter:
    """One row per repo (``CSV_COLUMNS``); lists joined with ``; ``. A cell that a spreadsheet would run as a
    formula (``=``, ``+``, ``-``, ``@`` first) starts with a quote mark: repo names and fixes come from strangers."""

    name = "csv"

    def __init__(self, **_: Any) -> None:
        pass

    def format(self, result: SurveyResult) -> str:
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        for r in result.rows:
            cells = [
                r.repo,
                r.sha or "",
                r.status,
                len(r.files),
                r.files_listed,
                "; ".join(r.dropping),
                "; ".join(f"{c.code} x{c.count}" for c in r.top_findings),
                r.fix or "",
                r.error or "",
                "yes" if r.reused else "no",
            ]
            w.writerow([_cell(c) for c in cells])
        return buf.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value
