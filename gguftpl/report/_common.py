"""Bits every formatter shares: rule lookup with a fallback, template fields, SARIF levels."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gguftpl.findings import Finding, Rule, Severity, fix_text

if TYPE_CHECKING:
    from gguftpl.audit import AuditRun

TEMPLATE_FIELDS = (
    "name",
    "key",
    "sha256",
    "tools_in_prompt",
    "tools_engine",
    "tools_with_system",
    "tools_static",
    "dialect",
    "renders_tool_calls",
    "renders_tool_results",
    "handles_generation_prompt",
)


def rule_of(run: AuditRun, finding: Finding) -> Rule:
    """The rule behind a finding; a finding from an unregistered code still gets usable metadata."""
    rule = run.rule(finding.code)
    if rule is not None:
        return rule
    return Rule(finding.code, finding.name, finding.severity, finding.name.replace("-", " "))


def fix_of(run: AuditRun, finding: Finding) -> str:
    """How to fix ``finding``: its runnable command, else its rule's fix in words (a finding that only says
    what is wrong is half a finding); :func:`gguftpl.findings.fix_text` with the run's rule."""
    return fix_text(finding, rule_of(run, finding))


def fix_is_command(fix: str) -> bool:
    """Whether a fix is a command to run (``gguftpl patch …``) rather than advice in words that may start with
    "gguftpl" too: read as the shell reads it (:func:`gguftpl.commandline.is_command`). The text report colours
    the two apart and keeps a wrapped command runnable."""
    from gguftpl.commandline import is_command

    return is_command(fix)


def template_dict(report: Any) -> dict[str, Any]:
    return {f: _plain(getattr(report, f, None)) for f in TEMPLATE_FIELDS}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def plain(value: Any) -> Any:
    """JSON-safe copy of ``value`` (unknown objects become their ``str``)."""
    return _plain(value)


def where(finding: Finding) -> str:
    """``tokenizer.chat_template:3:5`` or ``tokenizer.chat_template`` or ``""``."""
    loc = finding.location
    if not loc.key:
        return ""
    out = loc.key
    if loc.line is not None:
        out += f":{loc.line}"
        if loc.column is not None:
            out += f":{loc.column}"
    return out


QUANTS_SHOWN = 12


def repo_context(finding: Finding) -> str:
    """``Repo: hf://ORG/REPO@SHA; quants: a.gguf, b.gguf`` for a repo-level (GT55x) finding, else ``""``:
    which repo or folder and which quants it concerns, for formats that show only the message."""
    repo = finding.extra.get("repo")
    if not isinstance(repo, str):
        return ""
    quants = [str(q) for q in finding.extra.get("quants") or ()]
    shown = ", ".join(quants[:QUANTS_SHOWN])
    if len(quants) > QUANTS_SHOWN:
        shown += f", … ({len(quants) - QUANTS_SHOWN} more)"
    return f"Repo: {repo}" + (f"; quants: {shown}" if quants else "")


SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
