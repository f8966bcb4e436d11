"""SARIF 2.1.0 for code-scanning dashboards (GitHub, Azure DevOps, VS Code SARIF viewer).

Rules carry their documentation (``tool.driver.rules``); each result points at the GGUF file and, as a
logical location, at the metadata key holding the template. A GGUF is a binary artifact, so a result has no
``region``: the line of the template (a line of a metadata string, not of the file) is said before the message
(``key:line:column:``) and kept in the result's properties (``templateLine``, ``templateColumn``). The fix is the
one every format prints (:func:`gguftpl.report._common.fix_of`); SARIF's ``fixes`` (byte replacements in the
artifact) are not used.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.parse
from pathlib import PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any

from gguftpl.findings import Finding, Rule
from gguftpl.report import tool_version
from gguftpl.report._common import SARIF_LEVEL, fix_of, plain, repo_context, rule_of, where
from gguftpl.safeio import json_text

if TYPE_CHECKING:
    from gguftpl.audit import AuditRun
    from gguftpl.report.context import ReportContext

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"


def artifact_uri(label: str) -> str:
    """A URI reference (RFC 3986, as SARIF requires) for a path as the user gave it: absolute paths become
    ``file://`` URIs, relative paths stay relative (code scanning resolves them against the checkout). Any
    file name: its bytes as the filesystem holds them (a name that is not UTF-8 too) are percent-encoded.
    URLs keep what they have and get their disallowed characters percent-encoded."""
    url = _URL.match(label)
    if url:
        # a URL may be encoded already: keep a valid %XX, encode a stray %
        rest = _STRAY_PERCENT.sub("%25", label[url.end() :])
        return url.group() + urllib.parse.quote(os.fsencode(rest), safe=_URI_CHARS)
    if os.path.isabs(label) or PureWindowsPath(label).is_absolute():
        path = label.replace("\\", "/")
        if not path.startswith("/"):
            path = "/" + path  # C:/x -> /C:/x
        return "file://" + urllib.parse.quote(os.fsencode(path), safe="/:")
    return urllib.parse.quote(os.fsencode(str(PurePosixPath(label.replace("\\", "/")))), safe="/")


_URI_CHARS = "/:@!$&'()*+,;=?#[]~%"
"""RFC 3986's reserved characters and ``%`` (unreserved ones are never encoded)."""
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def rule_dict(rule: Rule) -> dict[str, Any]:
    help_text = rule.summary
    help_md = f"**{rule.code} {rule.name}**: {rule.summary}"
    if rule.why:
        help_text += f"\n\nWhy is this bad? {rule.why}"
        help_md += f"\n\n## Why is this bad?\n{rule.why}"
    if rule.example:
        help_text += f"\n\nExample: {rule.example}"
        help_md += f"\n\n## Example\n{rule.example}"
    if rule.fix:
        help_text += f"\n\nFix: {rule.fix}"
        help_md += f"\n\n## Fix\n{rule.fix}"
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.why or rule.summary},
        "help": {"text": help_text, "markdown": help_md},
        "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
        "properties": {"tags": [rule.code[:3] + "xx"]},
    }


def fingerprint(f: Finding, uri: str) -> str:
    """Stable identity of a finding across runs: rule, file, metadata key and template, not the wording.

    Given here because otherwise GitHub's upload-sarif hashes the lines of the artifact, and a GGUF is a
    multi-gigabyte binary."""
    ident = "\x1f".join((f.code, uri, f.location.key or "", f.template or ""))
    return hashlib.sha256(ident.encode("utf-8")).hexdigest()[:16]


def result_dict(f: Finding, rule_index: int, file_label: str, occurrence: int = 1, fix: str = "") -> dict[str, Any]:
    uri = artifact_uri(f.location.file or file_label)
    location: dict[str, Any] = {"physicalLocation": {"artifactLocation": {"uri": uri}}}
    logical: list[dict[str, Any]] = []
    if f.location.key:
        logical.append({"name": f.location.key, "fullyQualifiedName": f.location.key, "kind": "property"})
    if f.template:
        logical.append({"name": f.template, "fullyQualifiedName": f"template:{f.template}", "kind": "object"})
    if logical:
        location["logicalLocations"] = logical
    line, column = f.location.line, f.location.column
    # a line of the template text, not of the binary GGUF: said as `key:line:column: ` (as the github format
    # does), never a region
    text = f"{where(f)}: {f.message}" if line is not None and f.location.key else f.message
    context = repo_context(f)  # a dashboard shows the message: say which repo and quants
    if context:
        text += f"\n{context}"
    if fix:
        text += f"\nFix: {fix}"
    props: dict[str, Any] = {"template": f.template, "evidence": f.evidence, "fix": fix or None}
    if line is not None:
        props["templateLine"] = line
        if column is not None:
            props["templateColumn"] = column
    if f.extra:
        props["extra"] = plain(f.extra)
    return {
        "ruleId": f.code,
        "ruleIndex": rule_index,
        "level": SARIF_LEVEL[f.severity],
        "message": {"text": text},
        "locations": [location],
        # "hash:n" like GitHub's own, n telling apart findings with the same identity in one file
        "partialFingerprints": {"primaryLocationLineHash": f"{fingerprint(f, uri)}:{occurrence}"},
        "properties": props,
    }


class SARIFFormatter:
    name = "sarif"

    def format(self, run: AuditRun, context: ReportContext | None = None) -> str:
        # Only the rules that fired, sorted by code: indices stay meaningful and the log small.
        rules: dict[str, Rule] = {}
        for f in run.findings:
            rules.setdefault(f.code, rule_of(run, f))
        ordered = sorted(rules)
        index = {code: i for i, code in enumerate(ordered)}
        results = []
        for fa in run.files:
            seen: dict[str, int] = {}
            for f in fa.findings:
                base = fingerprint(f, artifact_uri(f.location.file or fa.path))
                seen[base] = seen.get(base, 0) + 1
                results.append(result_dict(f, index[f.code], fa.path, seen[base], fix_of(run, f)))
        sarif_run: dict[str, Any] = {
            "tool": {
                "driver": {
                    "name": "gguftpl",
                    "version": tool_version(),
                    "rules": [rule_dict(rules[c]) for c in ordered],
                }
            },
            "columnKind": "unicodeCodePoints",
            "results": results,
        }
        props = _context_properties(context)
        views = {fa.path: fa.runtimes.to_list() for fa in run.files if fa.runtimes is not None}
        if views:  # per file, which template each runtime renders a tools request with (the JSON's "runtimes")
            props["runtimes"] = views
        if props:
            sarif_run["properties"] = props
        log = {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [sarif_run]}
        return json_text(json.dumps(log, indent=2, ensure_ascii=False)) + "\n"


def _context_properties(context: ReportContext | None) -> dict[str, Any]:
    """The run's property bag: the repos audited as sets of quants and what the remote reads cost, as in
    the JSON report's ``"repos"`` and ``"remote"``."""
    if context is None:
        return {}
    props: dict[str, Any] = {}
    if context.repos:
        props["repos"] = [plain(r) for r in context.repos]
    totals = context.remote_totals()
    if totals is not None:
        props["remote"] = totals
        props["remoteFiles"] = {label: plain(info) for label, info in context.remote.items()}
    return props
