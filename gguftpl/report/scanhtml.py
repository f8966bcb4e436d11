"""``scan --format html``: the models a user has, on the audit report's page (:func:`gguftpl.report.html.audit_page`).

Each model is one file of the page (labelled with its name in its store, ``ollama://NAME:TAG``): the matrix of
models x runtimes, each model's findings with their fixes and the prompt each runtime renders side by side. What
the scan adds beside the audit goes under the page: a model's other names, the scan's own fix where it differs
from the file's repair (Ollama's Modelfile), and the models that could not be read safely.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gguftpl.scan import ScanResult

__all__ = ["scan_page"]


def _footer(result: ScanResult) -> list[str]:
    out = []
    for e in result.entries:
        out += [f"{e.model.ref}: also {m.ref}" for m in e.models[1:]]
        fix = e.fix()
        repair = e.audit.repair.text() if e.audit.repair is not None and e.audit.repair.needed else None
        if fix and fix != repair:
            out.append(f"{e.model.ref}: fix: {fix}")
    out += [f"not read: {p.ref} ({p.store}): {p.error}" for p in result.problems]
    dropping = sum(1 for e in result.entries if e.dropping)
    out.append(
        f"{len(result.entries)} models ({dropping} dropping tools, {len(result.problems)} unreadable) in "
        f"{result.seconds:.2f}s; {result.analysed} templates analysed"
    )
    return out


def scan_page(result: ScanResult) -> str:
    from gguftpl.audit import AuditRun
    from gguftpl.report.html import audit_page

    run = AuditRun(files=[e.audit for e in result.entries])
    return audit_page(run, f"gguftpl scan: {len(result.entries)} models", _footer(result))
