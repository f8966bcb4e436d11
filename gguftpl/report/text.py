"""Human-readable report: one block per file, findings grouped under the template they concern."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gguftpl.findings import Finding, Severity
from gguftpl.report._common import fix_is_command, fix_of, where
from gguftpl.safeio import printable, terminal_text

if TYPE_CHECKING:
    from gguftpl.audit import AuditRun, FileAudit
    from gguftpl.report.context import ReportContext

_SEVERITY_STYLE: dict[Severity, dict[str, Any]] = {
    Severity.ERROR: {"fg": "red", "bold": True},
    Severity.WARNING: {"fg": "yellow", "bold": True},
    Severity.INFO: {"fg": "blue"},
}

_ANSI_FG = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36}
# the two colours of a fix: a command to run, and advice in words
FIX_COMMAND_FG, FIX_WORDS_FG = "cyan", "magenta"
WHY_COLUMN_MIN = 30
"""A runtime row's reason hangs under its column when at least this many columns are left for it."""

EVIDENCE_MAX_LINES = 12
EVIDENCE_MAX_WIDTH = 160


def _yes_no(value: Any) -> str:
    return {True: "yes", False: "no"}.get(value, "unknown")


def _decided_by(t: Any) -> str:
    """Whose verdict the template line shows (the finding GT211 says why there is none)."""
    engine = getattr(t, "tools_engine", "")
    return f" ({engine})" if engine else ""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _tools_colour(tools: str) -> str | None:
    return "green" if tools == "yes" else "red" if tools.startswith(("no", "fails")) else None


class _Line(str):
    """A report line that knows how it continues when it is wider than the report: ``hang`` columns of
    indent, ``cont`` at the end of each broken piece (`` \\`` for a shell command)."""

    hang: int | None
    cont: str

    def __new__(cls, text: str, hang: int | None = None, cont: str = "") -> _Line:
        line = super().__new__(cls, text)
        line.hang, line.cont = hang, cont
        return line


class TextFormatter:
    name = "text"

    def __init__(self, color: bool = False, show_evidence: bool = True, width: int | None = None) -> None:
        """``width``: fit every line to that many columns (the CLI passes the terminal's); None: lines as long
        as they come."""
        self.color = color
        self.show_evidence = show_evidence
        self.width = width
        self._canary_told = False

    def _s(self, text: str, fg: str | None = None, bold: bool = False) -> str:
        if not self.color:
            return text
        # the sequences click.style writes: colour, then bold, then one reset
        codes = ([f"\x1b[{_ANSI_FG[fg]}m"] if fg else []) + (["\x1b[1m"] if bold else [])
        return "".join(codes) + text + "\x1b[0m"

    def format(self, run: AuditRun, context: ReportContext | None = None) -> str:
        self._canary_told = False  # the canary strings are explained under the first finding that quotes them
        lines: list[str] = []
        for fa in run.files:
            lines.extend(self._file(fa, run))
            lines.append("")
        lines.append(self._summary(run))
        if context is not None:
            lines.extend(_remote_footer(context))
        # every piece from a file is escaped already; this also defuses a line that would start a workflow
        # command in a CI log (a file path that starts with `::`), in a report written with -o too
        if self.width is None:
            return terminal_text("\n".join(lines), keep_sgr=self.color) + "\n"
        from gguftpl.textfit import fit_line

        fitted: list[str] = []
        for line in lines:
            for piece in line.split("\n"):
                safe = terminal_text(piece, keep_sgr=self.color)
                fitted += fit_line(safe, self.width, hang=getattr(line, "hang", None), cont=getattr(line, "cont", ""))
        return "\n".join(fitted) + "\n"

    def _file(self, fa: FileAudit, run: AuditRun) -> list[str]:
        out = [self._s(printable(fa.path), bold=True)]
        out.extend(f"  note: {printable(note)}" for note in fa.notes)
        if fa.upstream_repo:
            how = f" ({fa.upstream_how})" if fa.upstream_how else ""
            out.append(f"  upstream: {printable(fa.upstream_repo)}{printable(how)}")
        out.extend(self._runtimes(fa))
        by_template: dict[str | None, list[Finding]] = {}
        for f in fa.findings:
            by_template.setdefault(f.template, []).append(f)
        if by_template.get(None):
            out.append("  file")
            out.extend(line for f in by_template.pop(None) for line in self._finding(f, run))
        for t in fa.templates:
            name = getattr(t, "name", "?")
            sha = (getattr(t, "sha256", "") or "")[:12]
            out.append(
                f"  template {self._s(printable(str(name)), bold=True)} ({printable(str(getattr(t, 'key', '?')))}, "
                f"sha256 {sha}, "
                f"dialect {getattr(t, 'dialect', '?')}, tools in prompt: "
                f"{_yes_no(getattr(t, 'tools_in_prompt', None))}{_decided_by(t)})"
            )
            out.extend(line for f in by_template.pop(name, []) for line in self._finding(f, run))
        for name, findings in by_template.items():  # a finding about a template not in the report
            out.append(f"  template {printable(str(name))}")
            out.extend(line for f in findings for line in self._finding(f, run))
        if not fa.findings:
            out.append("  " + self._s("no findings", fg="green"))
        out.extend(self._verdict(fa))
        return out

    def _verdict(self, fa: FileAudit) -> list[str]:
        """The file's last lines: where the tools reach the prompt, runtime by runtime, and its one repair."""
        if fa.runtimes is None or not fa.runtimes.rows:
            return []
        from gguftpl.repair import verdict_line

        out: list[str] = [_Line(f"  verdict: {printable(verdict_line(fa.runtimes, fa.upstream_own))}", hang=11)]
        repair = fa.repair
        if repair is not None and repair.needed:
            if repair.command:
                fix = self._s(printable(repair.command), fg=FIX_COMMAND_FG)
                out.append(_Line(f"  fix: {fix}", hang=7, cont=" \\"))
            else:
                out.append(_Line(f"  fix: {self._s(printable(repair.advice), fg=FIX_WORDS_FG)}", hang=7))
        return out

    def _runtimes(self, fa: FileAudit) -> list[_Line]:
        """The runtime view as a small table: runtime, the template it renders a tools request with, whether
        the tool schemas reach the prompt, and why."""
        if fa.runtimes is None:
            return []
        from gguftpl.runtimes.rows import outcome_text

        if not fa.runtimes.rows:
            return []
        rows = [(r.name, r.engine, r.template, outcome_text(r), r.reason) for r in fa.runtimes.rows]
        w1 = max(len("runtime"), *(len(r[0]) for r in rows))
        w2 = max(len("engine"), *(len(r[1]) for r in rows))
        w3 = max(len("template"), *(len(r[2]) for r in rows))
        w4 = max(len("tools"), *(len(r[3]) for r in rows))
        why_at = 4 + w1 + w2 + w3 + w4 + 8
        out = [_Line("  runtimes, for a request with tools (each judged by its own engine):")]
        if self.width is not None and self.width - why_at < WHY_COLUMN_MIN:
            # too narrow for the table: each runtime on a line of its own, its reason below it
            for name, engine, template, tools, reason in rows:
                mark = self._s(tools, fg=_tools_colour(tools))
                out.append(_Line(f"    {name} ({engine}), template {printable(template)}: tools {mark}", hang=8))
                out.append(_Line(f"        {printable(reason)}", hang=8))
            return out
        out.append(_Line(f"    {'runtime':<{w1}}  {'engine':<{w2}}  {'template':<{w3}}  {'tools':<{w4}}  why"))
        for name, engine, template, tools, reason in rows:
            mark = self._s(f"{tools:<{w4}}", fg=_tools_colour(tools))
            row = f"    {name:<{w1}}  {engine:<{w2}}  {printable(template):<{w3}}  {mark}  {printable(reason)}"
            out.append(_Line(row, hang=why_at))
        return out

    def _finding(self, f: Finding, run: AuditRun) -> list[str]:
        sev = self._s(f.severity.value, **_SEVERITY_STYLE[f.severity])
        parts = [f"    {sev} {self._s(f.code, bold=True)} {f.name}: {printable(f.message)}"]
        if f.extra.get("from_upstream"):
            parts[0] += f" (from upstream's own template: {printable(str(f.extra['from_upstream']))})"
        at = where(f)
        if at:
            parts.append(f"      at {printable(at)}")
        if f.evidence and self.show_evidence:
            ev = f.evidence.splitlines() or [""]
            shown = ev[:EVIDENCE_MAX_LINES]
            parts.append("      evidence:")
            for line in shown:
                if len(line) > EVIDENCE_MAX_WIDTH:
                    line = line[: EVIDENCE_MAX_WIDTH - 1] + "…"
                parts.append(f"        | {printable(line)}")
            if len(ev) > len(shown):
                parts.append(f"        | … ({len(ev) - len(shown)} more lines)")
        fix = fix_of(run, f)
        if fix:
            command = fix_is_command(fix)
            text = self._s(printable(fix), fg=FIX_COMMAND_FG if command else FIX_WORDS_FG)
            parts.append(_Line(f"      fix: {text}", hang=11, cont=" \\" if command else ""))
        if not self._canary_told:
            from gguftpl.templates.probes import CANARY_LEGEND, quotes_canary

            if quotes_canary(f.message) or (self.show_evidence and quotes_canary(f.evidence)):
                parts.append(_Line(f"      note: {CANARY_LEGEND}", hang=12))
                self._canary_told = True
        return parts

    def _summary(self, run: AuditRun) -> str:
        counts = run.counts()
        n = sum(counts.values())
        flagged = run.files_with_findings
        detail = ", ".join(
            _plural(counts[s.value], s.value) if s is not Severity.INFO else f"{counts[s.value]} info" for s in Severity
        )
        line = f"{_plural(n, 'finding')} ({detail}) in {_plural(run.file_count, 'file')} ({flagged} with findings)"
        return self._s(line, bold=True) if n else self._s(line, fg="green")


def _remote_footer(context: ReportContext) -> list[str]:
    """What the remote reads cost, and what the reader did that the user should know (a shard followed)."""
    totals = context.remote_totals()
    if totals is None:
        return []
    out = [
        f"remote: {totals['files']} header(s) read over HTTP, {totals['bytes_fetched']:,} bytes in "
        f"{totals['requests']} request(s)"
    ]
    out.extend(f"note: {printable(label)}: {printable(note)}" for label, note in context.notes())
    return out
