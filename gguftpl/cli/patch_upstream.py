"""``gguftpl patch FILE --from-hub REPO`` / ``--from-catalog [ID]``: copy upstream templates into a GGUF.

parse -> fetch upstream -> plan (added/replaced/removed, as a diff) -> [--dry-run stops] -> audit before ->
rewrite through ``patching.patch_templates`` (tensors byte-identical, proven) with ``gguftpl.patch.*``
provenance -> audit after -> before/after of the tool findings.

The options are declared here and added to the base ``patch`` command with ``upstream_options``; the base
command hands over to ``run_from_upstream`` when ``--from-hub`` or ``--from-catalog`` is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

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


def run_from_upstream(
    file: str,
    *,
    out: str | None,
    from_hub: str | None,
    revision: str | None,
    from_catalog: str | None,
    only: tuple[str, ...],
    remove: tuple[str, ...],
    templates: tuple[str, ...] = (),
    in_place: bool = False,
    force: bool = False,
    dry_run: bool = False,
    no_provenance: bool = False,
    no_fallback: bool = False,
    no_audit: bool = False,
    progress_bar: Callable[[str], Any] | None = None,
    proof_text: Callable[[Any], str] | None = None,
) -> int:
    from gguftpl.cli.diff_cmd import resolve_upstream
    from gguftpl.errors import UsageError
    from gguftpl.gguf.reader import read_header
    from gguftpl.patching import patch_templates, plan_patch, resolve_output
    from gguftpl.templates.templateset import load_templateset
    from gguftpl.upstream.patchplan import format_plan, plan_from_upstream

    if from_hub and from_catalog:
        raise UsageError("--from-hub and --from-catalog cannot be used together")
    if templates:
        raise UsageError("--template cannot be combined with --from-hub/--from-catalog; patch twice instead")
    if revision and not from_hub:
        raise UsageError("--revision goes with --from-hub")
    if not dry_run:
        resolve_output(file, out, in_place=in_place, force=force)  # refuse unsafe outputs before any work
    with read_header(file) as header:
        tset = load_templateset(header)
    upstream, how = resolve_upstream(
        tset,
        hub=from_hub,
        revision=revision,
        upstream=None,
        catalog=from_catalog,
        catalog_fallback=not no_fallback,
    )
    for w in upstream.warnings:
        click.echo(f"gguftpl: {w}", err=True)
    plan = plan_from_upstream(
        tset, upstream, only=list(only) or None, remove=list(remove), provenance=not no_provenance
    )
    click.echo(f"{file}: {how}")
    click.echo(format_plan(plan), nl=False)
    if dry_run:
        click.echo("dry run: nothing written")
        return 0
    if not plan.changes:
        click.echo("nothing written")
        return 0

    before = None if no_audit else _tool_audit(file)
    lead_plan = plan_patch(file, plan.set_templates, plan.remove, plan.extra_kv)
    lead_plan.remove_keys.extend(k for k in plan.stale_keys if k not in lead_plan.remove_keys)
    if progress_bar is not None:
        with progress_bar(file) as progress:
            result = patch_templates(
                file,
                out,
                plan.set_templates,
                plan.remove,
                in_place=in_place,
                force=force,
                progress=progress,
                plan=lead_plan,
            )
    else:
        result = patch_templates(
            file, out, plan.set_templates, plan.remove, in_place=in_place, force=force, plan=lead_plan
        )
    if proof_text is not None:
        click.echo(proof_text(result))
    else:
        click.echo(f"wrote {result.output}")
    if before is not None:
        after = _tool_audit(result.output)
        click.echo(format_before_after(before, after))
    return 0


def _tool_audit(path: str) -> list[Any]:
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
