from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from gguftpl.cli.patch_upstream import upstream_options
from gguftpl.errors import UsageError


def parse_template_args(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--template takes NAME=PATH, got {v!r}")
        try:
            with open(path, encoding="utf-8") as fh:
                out[name] = fh.read()
        except OSError as exc:
            raise UsageError(f"cannot read template file {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise UsageError(f"template file {path} is not UTF-8 text") from None
    return out


def plan_text(plan: Any) -> str:
    lines = []
    for it in plan.items:
        old_sha = it.old.sha256[:12] if it.old else "-"
        new_sha = it.new_sha256[:12] if it.new_sha256 else "-"
        lines.append(f"  {it.action:9} {it.name:12} {it.key}  {old_sha} -> {new_sha}")
        if it.action == "replace":
            diff = difflib.unified_diff(
                it.old.text.splitlines(),
                it.new_text.splitlines(),
                f"{it.name} (in file)",
                f"{it.name} (new)",
                lineterm="",
            )
            lines.extend("      " + d for d in list(diff)[:60])
    return "\n".join(lines)


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
    from gguftpl.patching import patch_templates, plan_patch, resolve_output

    if upstream.get("from_hub") or upstream.get("from_catalog"):
        from gguftpl.cli.patch_upstream import run_from_upstream

        run_from_upstream(
            file,
            out=out,
            templates=templates,
            remove=remove,
            in_place=in_place,
            force=force,
            dry_run=dry_run,
            progress_bar=progress_bar,
            proof_text=proof_text,
            **upstream,
        )
        return
    unused = [k for k in ("revision", "only") if upstream.get(k)]
    if unused:
        raise UsageError(f"--{unused[0]} goes with --from-hub/--from-catalog")

    set_templates = parse_template_args(templates)
    if not set_templates and not remove:
        raise UsageError("nothing to do: give --template NAME=PATH or --remove NAME")
    if not dry_run:
        resolve_output(file, out, in_place=in_place, force=force)
    plan = plan_patch(file, set_templates, list(remove))
    click.echo(f"plan for {file}:")
    click.echo(plan_text(plan))
    if dry_run:
        return
    with progress_bar(file) as progress:
        result = patch_templates(
            file, out, set_templates, list(remove), in_place=in_place, force=force, progress=progress, plan=plan
        )
    click.echo(proof_text(result))
