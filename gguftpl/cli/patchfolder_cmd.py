"""``gguftpl patch DIR...``: parse -> ``folderpatch.patch_folder`` -> print the table -> exit 1 when a file
failed (or the folder checks found an error)."""

from __future__ import annotations

from typing import Any

import click

from gguftpl.cli.output import StderrProgress, echo
from gguftpl.errors import UsageError


def run_folder(
    paths: tuple[str, ...],
    out: str | None,
    *,
    source: Any,
    templates: tuple[str, ...],
    remove: tuple[str, ...],
    only: tuple[str, ...],
    dry_run: bool,
    jobs: int | None,
    force: bool,
    provenance: bool,
    audit: bool,
    allow_new_errors: bool,
    **flags: Any,
) -> None:
    from gguftpl.cli.template_args import parse_template_args, read_templates
    from gguftpl.folderpatch import patch_folder
    from gguftpl.folderpatchtext import folder_text
    from gguftpl.patching import PatchOptions

    if dry_run:
        raise UsageError("--dry-run takes one FILE; for folders, patch -o OUTDIR and look at the table")
    if only and source is None:
        raise UsageError("--only goes with --from-hub/--from-catalog")
    files = parse_template_args(templates)
    texts = read_templates(files)
    options = PatchOptions(force=force, provenance=provenance, audit=audit, allow_new_errors=allow_new_errors)
    with StderrProgress("patch") as progress:  # a bar with the file being written, on a terminal only
        result = patch_folder(
            list(paths),
            out,
            source=source,
            templates=texts,
            remove=remove,
            template_files=files,
            only=list(only) or None,
            options=options,
            jobs=jobs,
            progress=progress,
            **flags,
        )
    for w in result.warnings:
        echo(f"gguftpl: {w}", err=True)
    if result.how_found:
        echo(f"{', '.join(paths)}: {result.how_found}")
    echo(folder_text(result), nl=False)
    click.get_current_context().exit(result.exit_code())
