"""Machine-readable report. ``schema_version`` changes only when a field changes meaning or goes away."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from gguftpl.findings import Finding
from gguftpl.report import tool_version
from gguftpl.report._common import plain, template_dict
from gguftpl.safeio import json_text

if TYPE_CHECKING:
    from gguftpl.audit import AuditRun, FileAudit
    from gguftpl.report.context import ReportContext

SCHEMA_VERSION = 1


def finding_dict(f: Finding) -> dict[str, Any]:
    loc = f.location
    out: dict[str, Any] = {
        "code": f.code,
        "name": f.name,
        "severity": f.severity.value,
        "message": f.message,
        "location": {"file": loc.file, "key": loc.key, "line": loc.line, "column": loc.column},
        "template": f.template,
        "evidence": f.evidence,
        "fix": f.fix,
    }
    if f.extra:
        out["extra"] = plain(f.extra)
    return out


def file_dict(fa: FileAudit) -> dict[str, Any]:
    d: dict[str, Any] = {
        "path": fa.path,
        "error": fa.error,
        "upstream": {"repo": fa.upstream_repo, "how": fa.upstream_how or None},
        "templates": [template_dict(t) for t in fa.templates],
        "findings": [finding_dict(f) for f in fa.findings],
        "cached": fa.cached,
        "seconds": round(fa.seconds, 6),
    }
    if fa.runtimes is not None:
        d["runtimes"] = fa.runtimes.to_list()
    if fa.repair is not None:
        d["repair"] = fa.repair.to_dict()
    if fa.kind is not None and not fa.kind.generates:  # an embedding model or a reranker: why rules were skipped
        d["model"] = {"kind": fa.kind.kind, "reason": fa.kind.reason, "key": fa.kind.key}
    if fa.notes:  # only when there is something to say (e.g. a later shard read through shard 1)
        d["notes"] = list(fa.notes)
    return d


def run_dict(run: AuditRun, context: ReportContext | None = None) -> dict[str, Any]:
    counts = run.counts()
    d = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "gguftpl", "version": tool_version()},
        "summary": {
            "files": run.file_count,
            "files_with_findings": run.files_with_findings,
            "findings": sum(counts.values()),
            "by_severity": counts,
            "analyses": run.analyses,
            "seconds": round(run.seconds, 6),
        },
        "files": [file_dict(fa) for fa in run.files],
    }
    if context is not None:
        _add_context(d, context)
    return d


def _add_context(d: dict[str, Any], context: ReportContext) -> None:
    """Each remote file's ``"remote"`` object, ``"repos"`` and the run's ``"remote"`` totals."""
    for fd in d["files"]:
        if fd["path"] in context.remote:
            fd["remote"] = plain(context.remote[fd["path"]])
    if context.repos:
        d["repos"] = [plain(r) for r in context.repos]
    totals = context.remote_totals()
    if totals is not None:
        d["remote"] = totals


class JSONFormatter:
    name = "json"

    def __init__(self, indent: int | None = 2) -> None:
        self.indent = indent

    def format(self, run: AuditRun, context: ReportContext | None = None) -> str:
        return json_text(json.dumps(run_dict(run, context), indent=self.indent, ensure_ascii=False)) + "\n"
