from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from gguftpl.cli.patch_upstream import upstream_options
from gguftpl.errors import UsageError
from gguftpl.safeio import read_text_bounded

if TYPE_CHECKING:
    from gguftpl.patching import PatchPlan


def parse_template_args(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--template takes NAME=PATH, got {v!r}")
        if name in out:  # which one was meant? the last silently won
            raise UsageError(f"--template {name}= given twice")
        # a regular file of bounded size: a FIFO or /dev/zero would block or never end
        out[name] = read_text_bounded(path, what="template file")
    return out


# a whole added template is a wall of '+' lines: the head is enough (`gguftpl render`/`diff` show it all)
PLAN_DIFF_LINES = 40


def plan_text(plan: PatchPlan, *, max_diff_lines: int | None = PLAN_DIFF_LINES) -> str:
    """The plan of any ``patch`` (templates from files or from upstream): one row per template, a unified
    diff per change, and the other keys set or removed."""
    from gguftpl.gguf.writer import Typed
    from gguftpl.patching import KEEP, REMOVE

    up = plan.upstream
    lines = [f"plan for {plan.source}:" + (f" templates from {up.label} ({up.origin})" if up else "")]
    key_width = max((len(it.key) for it in plan.items), default=0)
    for it in plan.items:
        old, new = (it.old_sha256 or "-")[:12], (it.new_sha256 or "-")[:12]
        shas = f"{old} (identical)" if it.action == KEEP else f"{old} -> {new}"
        lines.append(f"  {it.action:<9} {it.name:<12} {it.key:<{key_width}}  {shas}")
    if not plan.changes:
        lines.append("  no template changes: the file already has these templates")
    for it in plan.changes:
        new_label = f"upstream:{up.label}:{it.name}" if up else f"new:{it.name}"
        diff = list(
            difflib.unified_diff(
                it.old.text.splitlines() if it.old else [],
                (it.new_text or "").splitlines(),
                f"gguf:{it.name}" if it.old else "/dev/null",
                "/dev/null" if it.action == REMOVE else new_label,
                lineterm="",
            )
        )
        if max_diff_lines is not None and len(diff) > max_diff_lines:
            diff[max_diff_lines:] = [f"... {len(diff) - max_diff_lines} more diff lines"]
        lines += ["", *diff]
    item_keys = {it.key for it in plan.items}
    other = [("set", k, v.value if isinstance(v, Typed) else v) for k, v in plan.set_kv.items() if k not in item_keys]
    other += [("remove", k, None) for k in plan.remove_keys if k not in item_keys]
    if other:
        lines += ["", "other keys:"]
        lines += [f"  {what:<9} {k}" + ("" if what == "remove" else f" = {v}") for what, k, v in other]
    return "\n".join(lines) + "\n"


def proof_text(result: Any) -> str:
    p = result.proof
    ident = "identical" if p.data_identical else "DIFFERENT"
    return "\n".join(
        [
            f"wrote {result.output}",
            f"  proof: tensor data {p.data_bytes:,} bytes ({p.copy_method}), compared byte for byte with the source: "
            f"{ident}; tensor infos {'identical' if p.tensor_infos_identical else 'DIFFERENT'}",
            f"  proof: templates read back from the output: {'as written' if result.readback_ok else 'MISMATCH'} "
            + ", ".join(f"{n}={s[:12]}" for n, s in result.readback.items()),
        ]
    )


@contextmanager
def progress_bar(path: str) -> Iterator[Any]:
    """A progress bar for multi-GB copies, only on a terminal."""
    size = os.path.getsize(path) if os.path.isfile(path) else 0
    if not sys.stderr.isatty() or size < (256 << 20):
        yield None
        return
    with click.progressbar(length=size, label="copying tensors", file=sys.stderr) as bar:
        last = [0]

        def update(done: int, total: int) -> None:
            bar.update(done - last[0])
            last[0] = done

        yield update


@click.command("patch")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), help="Where to write the patched GGUF.")
@click.option("--template", "templates", multiple=True, metavar="NAME=PATH", help="Set template NAME from a file.")
@click.option("--remove", "remove", multiple=True, metavar="NAME", help="Remove template NAME.")
@click.option("--in-place", is_flag=True, help="Replace FILE itself (still via a temp file and rename).")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.option("--dry-run", is_flag=True, help="Show the plan and stop.")
@upstream_options
def command(
    file: str,
    out: str | None,
    templates: tuple[str, ...],
    remove: tuple[str, ...],
    in_place: bool,
    force: bool,
    dry_run: bool,
    **upstream: Any,
) -> None:
    """Rewrite FILE with corrected chat templates; tensor bytes stay identical, and that is proven.

    With --from-hub REPO (or --from-catalog [ID]) the templates come from the upstream repo: the plan is
    shown as a diff, provenance is recorded under gguftpl.patch.* and the output is re-audited.
    """
    from gguftpl.patching import apply_plan, plan_patch, resolve_output

    from_upstream = bool(upstream["from_hub"] or upstream["from_catalog"])
    if from_upstream:
        from gguftpl.cli.patch_upstream import check_upstream_args, format_before_after, plan_upstream, tool_audit

        check_upstream_args(upstream["from_hub"], upstream["revision"], upstream["from_catalog"], templates)
    else:
        unused = [k for k in ("revision", "only") if upstream.get(k)]
        if unused:
            raise UsageError(f"--{unused[0]} goes with --from-hub/--from-catalog")
        set_templates = parse_template_args(templates)
        if not set_templates and not remove:
            raise UsageError("nothing to do: give --template NAME=PATH or --remove NAME")
    if not dry_run:
        resolve_output(file, out, in_place=in_place, force=force)  # refuse unsafe outputs before any work
    if from_upstream:
        plan = plan_upstream(
            file,
            from_hub=upstream["from_hub"],
            revision=upstream["revision"],
            from_catalog=upstream["from_catalog"],
            only=upstream["only"],
            remove=remove,
            provenance=not upstream["no_provenance"],
            fallback=not upstream["no_fallback"],
        )
    else:
        plan = plan_patch(file, set_templates, list(remove))
    click.echo(plan_text(plan), nl=False)
    if dry_run:
        click.echo("dry run: nothing written")
        return
    if from_upstream and not plan.changes:
        click.echo("nothing written")  # upstream agrees with the file: not an error
        return
    # the tool-calling findings before and after are the headline of a patch from upstream
    before = tool_audit(file) if from_upstream and not upstream["no_audit"] else None
    with progress_bar(file) as progress:
        result = apply_plan(plan, out, in_place=in_place, force=force, progress=progress)
    click.echo(proof_text(result))
    if before is not None:
        click.echo(format_before_after(before, tool_audit(result.output)))
