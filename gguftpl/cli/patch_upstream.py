"""``gguftpl patch FILE --from-hub REPO`` / ``--from-catalog [ID]``: copy upstream templates into a GGUF.

parse -> fetch upstream -> plan (``patching.PatchPlan`` with ``gguftpl.patch.*`` provenance) -> the base
command prints it, stops on --dry-run, audits before, applies it (tensors byte-identical, proven), audits
after and prints the before/after of the tool findings.

The options are declared here and added to the base ``patch`` command with ``upstream_options``; the base
command calls ``check_upstream_args`` and ``plan_upstream`` when ``--from-hub`` or ``--from-catalog`` is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from gguftpl.patching import PatchPlan

# Tool-calling rules (GT2xx) are what a template patch is meant to fix; their before/after is the headline.
TOOL_PREFIX = "GT2"


def upstream_options(f: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
        click.option(
            "--from-hub",
            "from_hub",
            metavar="REPO[@REV]",
            help="Copy the chat templates of this Hugging Face repo (llama.cpp's converter priority).",
        ),
        click.option("--revision", metavar="REV", help="Branch, tag or commit of --from-hub (default main)."),
        click.option(
            "--from-catalog",
            "from_catalog",
            is_flag=False,
            flag_value="auto",
            default=None,
            metavar="[ID]",
            help="Copy from the bundled catalog entry ID (without ID: the entry matching this GGUF).",
        ),
        click.option(
            "--only", "only", multiple=True, metavar="NAME", help="Copy only these upstream templates (repeatable)."
        ),
        click.option("--no-provenance", is_flag=True, help="Do not record gguftpl.patch.* provenance keys."),
        click.option(
            "--no-fallback", is_flag=True, help="Never fall back to the bundled catalog when the Hub is unreachable."
        ),
        click.option("--no-audit", is_flag=True, help="Skip the before/after audit."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def check_upstream_args(
    from_hub: str | None, revision: str | None, from_catalog: str | None, templates: tuple[str, ...]
) -> None:
    """Refuse option combinations that make no sense with an upstream source (before any work)."""
    from gguftpl.errors import UsageError

    if from_hub and from_catalog:
        raise UsageError("--from-hub and --from-catalog cannot be used together")
    if templates:
        raise UsageError("--template cannot be combined with --from-hub/--from-catalog; patch twice instead")
    if revision and not from_hub:
        raise UsageError("--revision goes with --from-hub")


def plan_upstream(
    file: str,
    *,
    from_hub: str | None,
    revision: str | None,
    from_catalog: str | None,
    only: tuple[str, ...],
    remove: tuple[str, ...],
    provenance: bool = True,
    fallback: bool = True,
) -> PatchPlan:
    """Fetch the upstream templates (saying where from, and any warning) and plan copying them into FILE."""
    from gguftpl.gguf.reader import read_header
    from gguftpl.templates.templateset import load_templateset
    from gguftpl.upstream.patchplan import plan_from_upstream
    from gguftpl.upstream.resolve import UpstreamSource, resolve_upstream

    with read_header(file) as header:
        tset = load_templateset(header)
    resolved = resolve_upstream(
        tset, UpstreamSource(repo=from_hub, revision=revision, catalog=from_catalog, fallback=fallback)
    )
    upstream, how = resolved.config, resolved.how
    for w in resolved.warnings:
        click.echo(f"gguftpl: {w}", err=True)
    plan = plan_from_upstream(tset, upstream, only=list(only) or None, remove=list(remove), provenance=provenance)
    click.echo(f"{file}: {how}")
    return plan


def tool_audit(path: str) -> list[Any]:
    from gguftpl.audit import audit_file

    return list(audit_file(path).findings)


def format_before_after(before: list[Any], after: list[Any]) -> str:
    def tool(fs: list[Any]) -> list[Any]:
        return [f for f in fs if f.code.startswith(TOOL_PREFIX)]

    def count(fs: list[Any]) -> str:
        by: dict[str, int] = {}
        for f in fs:
            by[f.severity.value] = by.get(f.severity.value, 0) + 1
        return ", ".join(f"{by[s]} {s}" for s in ("error", "warning", "info") if s in by) or "none"

    b, a = tool(before), tool(after)
    lines = ["", "tool-calling findings (audit before -> after):"]
    lines.append(f"  before: {count(b)}")
    for f in b:
        lines.append(f"    {f.code} {f.severity.value:<7} {f.template or '-':<10} {f.name}")
    lines.append(f"  after:  {count(a)}")
    for f in a:
        lines.append(f"    {f.code} {f.severity.value:<7} {f.template or '-':<10} {f.name}")
    fixed = {(f.code, f.template) for f in b} - {(f.code, f.template) for f in a}
    new = {(f.code, f.template) for f in a} - {(f.code, f.template) for f in b}
    if fixed:
        lines.append("  fixed:  " + ", ".join(f"{c}({t or '-'})" for c, t in sorted(fixed, key=str)))
    if new:
        lines.append("  new:    " + ", ".join(f"{c}({t or '-'})" for c, t in sorted(new, key=str)))
    lines.append(f"  all findings: {count(before)} -> {count(after)}")
    return "\n".join(lines)
