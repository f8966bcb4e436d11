"""``gguftpl patch FILE``: parse -> plan (templates from files, or from upstream) -> print the plan -> carry it
out (``patching.run_patch``: write, prove, provenance, audit before and after) -> print what happened."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from gguftpl.cli.modelarg import MODEL
from gguftpl.cli.output import echo, width_option
from gguftpl.cli.template_args import parse_template_args, read_templates
from gguftpl.errors import PatchError, UsageError

if TYPE_CHECKING:
    from gguftpl.upstream.resolve import UpstreamSource


@contextmanager
def progress_bar(path: str) -> Iterator[Any]:
    """A bar in bytes for multi-GB copies on a terminal's stderr (a smaller file is copied in no time)."""
    from gguftpl.cli.output import StderrProgress

    size = os.path.getsize(path) if os.path.isfile(path) else 0
    with StderrProgress("copying tensors", in_bytes=True) as bar:
        yield bar if bar.enabled and size >= (256 << 20) else None


def wants_diff(plan: Any, show_diff: bool) -> bool:
    """``--show-diff``, or a diff short enough to read on a terminal."""
    if show_diff:
        return True
    from gguftpl.patchtext import PLAN_DIFF_LINES, diff_line_count

    return sys.stdout.isatty() and diff_line_count(plan) <= PLAN_DIFF_LINES


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
        click.option(
            "--no-fallback", is_flag=True, help="Never fall back to the bundled catalog when the Hub is unreachable."
        ),
        click.option(
            "--accept-family",
            is_flag=True,
            help="--from-catalog ID: apply an entry that is not this file's upstream even when its vocabulary or "
            "special tokens differ (refused by default).",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def upstream_source(
    from_hub: str | None,
    revision: str | None,
    from_catalog: str | None,
    no_fallback: bool,
    templates: tuple[str, ...],
    accept_family: bool = False,
) -> UpstreamSource | None:
    """The upstream to copy from, or None for ``--template``/``--remove`` alone; refuses option combinations
    that make no sense (before any work)."""
    from gguftpl.upstream.resolve import UpstreamSource

    if not (from_hub or from_catalog):
        if accept_family:
            raise UsageError("--accept-family goes with --from-catalog")
        return None
    if templates:
        raise UsageError("--template cannot be combined with --from-hub/--from-catalog; patch twice instead")
    if revision and not from_hub:
        raise UsageError("--revision goes with --from-hub")
    return UpstreamSource(
        repo=from_hub,
        revision=revision,
        catalog=from_catalog,
        fallback=not no_fallback,
        accept_family=accept_family,
        labels=("--from-hub", "--upstream", "--from-catalog"),
    )


@dataclass(frozen=True)
class PatchArgs:
    """The options of ``patch``, typed once (click passes them by name)."""

    out: str | None
    templates: tuple[str, ...]
    remove: tuple[str, ...]
    in_place: bool
    force: bool
    dry_run: bool
    from_hub: str | None
    revision: str | None
    from_catalog: str | None
    only: tuple[str, ...]
    no_fallback: bool
    no_provenance: bool
    no_audit: bool
    tools_in_default: bool = False
    accept_differences: bool = False
    allow_new_errors: bool = False
    accept_family: bool = False
    modelfile_dir: str | None = None
    modelfile_from: str | None = None
    show_diff: bool = False
    jobs: int | None = None

    def source(self) -> UpstreamSource | None:
        return upstream_source(
            self.from_hub, self.revision, self.from_catalog, self.no_fallback, self.templates, self.accept_family
        )


@click.command("patch")
@click.argument("paths", nargs=-1, required=True, metavar="FILE | DIR...", type=MODEL)
@click.option("-o", "--output", "out", type=click.Path(), help="Where to write the patched GGUF (for folders: OUTDIR).")
@click.option("--template", "templates", multiple=True, metavar="NAME=PATH", help="Set template NAME from a file.")
@click.option("--remove", "remove", multiple=True, metavar="NAME", help="Remove template NAME.")
@click.option(
    "--in-place",
    is_flag=True,
    help="Replace FILE itself (still via a temp file and rename). A second patch of FILE meanwhile waits for this one, "
    "then stops, nothing written, as FILE changed since it read it.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.option("--dry-run", is_flag=True, help="Show the plan and stop.")
@click.option(
    "--show-diff",
    is_flag=True,
    help="Show the plan's diff of every template and list every other key (by default one line per template; "
    "a short diff is shown on a terminal anyway).",
)
@upstream_options
@click.option(
    "--tools-in-default",
    is_flag=True,
    help="Make the default template carry the tools for runtimes that read only the default (Ollama, LM Studio, "
    "vLLM): {% if tools %} tool_use {% else %} default {% endif %}, proven by rendering before it is written. "
    "Combines with --from-hub/--from-catalog (applied to upstream's templates).",
)
@click.option(
    "--accept-differences",
    is_flag=True,
    help="With --tools-in-default: write even when a probe prompt of the new default differs (shown).",
)
@click.option(
    "--jobs",
    type=int,
    default=None,
    help="Folders: files written at once (default: one per core, at most 4).",
)
@click.option("--no-provenance", is_flag=True, help="Do not record gguftpl.patch.* provenance keys.")
@click.option("--no-audit", is_flag=True, help="Skip the before/after report (the check for new errors still runs).")
@click.option(
    "--allow-new-errors",
    is_flag=True,
    help="Write even when the new templates add error findings (GT102 does not parse, GT4xx unsafe such as a "
    "sandbox escape, GT606 llama.cpp refuses it); by default such a patch is refused before anything is written.",
)
@width_option
@click.option(
    "--ollama-modelfile",
    "modelfile_dir",
    metavar="DIR",
    help="For ollama://NAME: write DIR/Modelfile, FROM the model's GGUF with a TEMPLATE that renders its tools "
    "(proven by Ollama's Go engine on the probe conversations) and its PARAMETER stop lines, and print the "
    "`ollama create` command. Nothing in Ollama's store is written.",
)
@click.option(
    "--ollama-from",
    "modelfile_from",
    metavar="GGUF",
    help="With --ollama-modelfile: the GGUF the Modelfile's FROM names (a repaired copy), instead of the model's blob.",
)
def command(paths: tuple[str, ...], **opts: Any) -> None:
    """Rewrite FILE with corrected chat templates; tensor bytes stay identical, and that is proven.

    Templates come from files (--template NAME=PATH, --remove NAME) or from the upstream repo (--from-hub
    REPO, --from-catalog [ID]). Every way, the plan is shown (one line per template; --show-diff for its
    diff), provenance is recorded under gguftpl.patch.* and the output is re-audited: the findings before and
    after are shown. A patch whose
    templates would add error findings is refused before anything is written (--allow-new-errors).

    --tools-in-default (alone, or after --from-hub/--from-catalog) rewrites the default so that runtimes
    reading only tokenizer.chat_template get the tools too; the new default is rendered on probe conversations
    through transformers and llama.cpp first, and any prompt that differs from the old one refuses the patch.

    DIR...: every GGUF under the folders with one plan (split sets as sets), -o OUTDIR or --in-place, --jobs N
    files at once; a file that fails is reported and the others done (exit 1); files already patched are
    skipped; one table at the end, then the folder checks (GT55x) on the result.
    """
    args = PatchArgs(**opts)
    if len(paths) != 1 or os.path.isdir(paths[0]):
        _patch_folders(paths, args)
        return
    if args.jobs is not None:
        raise UsageError("--jobs goes with folders (patch DIR...)")
    if args.modelfile_dir is not None or args.modelfile_from is not None:
        from gguftpl.cli.ollamafix import write_modelfile

        a = args
        others = bool(a.templates or a.remove or a.in_place or a.out or a.tools_in_default or a.from_hub)
        write_modelfile(paths[0], a.modelfile_dir, a.modelfile_from, a.force, others or bool(a.from_catalog))
    else:
        _patch_file(paths[0], args)


def _patch_folders(paths: tuple[str, ...], a: PatchArgs) -> None:
    from gguftpl.cli.patchfolder_cmd import run_folder

    run_folder(
        paths,
        a.out,
        in_place=a.in_place,
        source=a.source(),
        templates=a.templates,
        remove=a.remove,
        only=a.only,
        tools_in_default=a.tools_in_default,
        accept_differences=a.accept_differences,
        force=a.force,
        dry_run=a.dry_run,
        provenance=not a.no_provenance,
        audit=not a.no_audit,
        allow_new_errors=a.allow_new_errors,
        jobs=a.jobs,
    )


def _patch_file(file: str, a: PatchArgs) -> None:
    """refuse what cannot be done -> plan (upstream or files) -> print the plan -> write, prove, audit."""
    from gguftpl.patching import PatchOptions, plan_upstream_patch, run_patch
    from gguftpl.patchoutput import resolve_output
    from gguftpl.patchplan import plan_from_files
    from gguftpl.patchtext import plan_text, result_text

    keep = {"provenance": not a.no_provenance, "audit": not a.no_audit, "allow_new_errors": a.allow_new_errors}
    options = PatchOptions(in_place=a.in_place, force=a.force, **keep)
    source = a.source()
    _refuse_store_writes(file, a.out, a.in_place, a.dry_run)
    label = _label(file)
    if a.accept_differences and not a.tools_in_default:
        raise UsageError("--accept-differences goes with --tools-in-default")
    if a.tools_in_default:
        if a.templates or a.remove:
            raise UsageError("--tools-in-default cannot be combined with --template/--remove; patch twice instead")
        _tools_in_default(file, a.out, source, a.only, options, a.dry_run, a.accept_differences, a.show_diff, label)
        return
    if source is None:
        unused = [name for name, v in (("revision", a.revision), ("only", a.only)) if v]
        if unused:
            raise UsageError(f"--{unused[0]} goes with --from-hub/--from-catalog")
        files = parse_template_args(a.templates)
        texts = read_templates(files)
        if not texts and not a.remove:
            raise UsageError("nothing to do: give --template NAME=PATH or --remove NAME")
    if not a.dry_run:
        resolve_output(file, a.out, in_place=a.in_place, force=a.force)  # refuse unsafe outputs before any work
    if source is not None:
        only = list(a.only) or None
        plan = plan_upstream_patch(file, source, only=only, remove=a.remove, provenance=options.provenance)
        for w in plan.warnings:
            echo(f"gguftpl: {w}", err=True)
        echo(f"{label}: {plan.how_found}")
    else:
        plan = plan_from_files(file, texts, a.remove, template_files=files, provenance=options.provenance)
    _say_nothing_to_change(plan, label)
    echo(plan_text(plan, show_diff=wants_diff(plan, a.show_diff), label=label), nl=False)
    if a.dry_run:
        echo("dry run: nothing written")
        return
    with progress_bar(file) as progress:
        result = run_patch(plan, a.out, options, progress=progress)
    echo(result_text(result), nl=False)
    _store_note(file, a.out)


def _label(file: str) -> str:
    """What the patch's lines call the source: the reference it was resolved from, else the path."""
    from gguftpl.cli.modelarg import store_model

    model = store_model(file)
    return model.ref if model is not None else file


def _refuse_store_writes(file: str, out: str | None, in_place: bool, dry_run: bool = False) -> None:
    """A model from a store is read, never written: no ``--in-place`` (an Ollama blob is named by its content, an
    HF snapshot is shared by every revision that has the file), a ``-o`` always (the generic "or --in-place" would
    point at what is refused), and no output inside Ollama's or the cache's folder. An LM Studio copy may go into
    its models folder: that is where LM Studio finds it."""
    from gguftpl.cli.modelarg import store_model

    model = store_model(file)
    if model is None:
        return
    if in_place:
        raise UsageError(f"{model.ref} is in {model.store}'s store: it is never patched in place; give -o OUT.gguf")
    if out is None and not dry_run:
        raise UsageError(
            f"{model.ref} is in {model.store}'s store, which gguftpl never writes: give -o OUT.gguf for the "
            "repaired copy"
        )
    if out is not None and model.content_addressed:
        real_out = os.path.realpath(os.path.dirname(os.path.abspath(out)))
        top = os.path.realpath(model.root)
        if os.path.commonpath([real_out, top]) == top:
            raise UsageError(f"-o {out} is inside {model.store}'s store ({top}); write the repaired copy elsewhere")


def _store_note(file: str, out: str | None) -> None:
    """Where the runtime whose store the source came from finds the repaired copy."""
    from gguftpl.cli.modelarg import store_model

    model = store_model(file)
    if model is None or out is None:
        return
    if model.store == "ollama":
        echo(
            f"Ollama runs the copy once imported: gguftpl patch {model.ref} --ollama-modelfile DIR --ollama-from {out}"
        )
    elif model.store == "lmstudio":
        top = os.path.realpath(model.root)
        where = os.path.relpath(os.path.realpath(out), top)
        if not where.startswith("..") and where.count(os.sep) >= 2:
            echo(f"LM Studio lists the copy as lmstudio://{where.replace(os.sep, '/')}")
        else:
            echo(f"LM Studio lists the copy once it is in {top}{os.sep}PUBLISHER{os.sep}REPO{os.sep}")
    else:
        echo(f"the cached {model.ref} is unchanged; point the runtime at {out} (llama-server -m {out})")


def _tools_in_default(
    file: str,
    out: str | None,
    source: UpstreamSource | None,
    only: tuple[str, ...],
    options: Any,
    dry_run: bool,
    accept: bool,
    show_diff: bool = False,
    label: str | None = None,
) -> None:
    """plan (and prove by rendering) -> print plan and proof -> refuse differences unless accepted -> carry out."""
    from gguftpl.patching import plan_tools_in_default, run_patch
    from gguftpl.patchoutput import resolve_output
    from gguftpl.patchtext import plan_text, result_text
    from gguftpl.runtimes.toolsdefault import refuse_unless_accepted

    if source is None and only:
        raise UsageError("--only goes with --from-hub/--from-catalog")
    if not dry_run:
        resolve_output(file, out, in_place=options.in_place, force=options.force)
    plan, made = plan_tools_in_default(file, source, only=list(only) or None, provenance=options.provenance)
    for w in plan.warnings:
        echo(f"gguftpl: {w}", err=True)
    if source is not None:
        echo(f"{label or file}: {plan.how_found}")
    if made is None:
        _say_nothing_to_change(plan, label)
    echo(plan_text(plan, show_diff=wants_diff(plan, show_diff), label=label), nl=False)
    if made is None:
        echo("--tools-in-default: upstream's default already puts the tool schemas in the prompt; kept as it is")
    else:
        echo(made.proof.text(), nl=False)
        refuse_unless_accepted(made, accept)
    if dry_run:
        echo("dry run: nothing written")
        return
    with progress_bar(file) as progress:
        result = run_patch(plan, out, options, progress=progress, tools_default=made)
    echo(result_text(result), nl=False)
    _store_note(file, out)


def _say_nothing_to_change(plan: Any, label: str | None = None) -> None:
    """A patch that would write nothing says so before its plan: one line and exit 2 when the templates given are
    the file's own; the line, then the plan's rows and "nothing written" (exit 0) when upstream agrees."""
    from gguftpl.patching import NOTHING_TO_CHANGE
    from gguftpl.patchtext import nothing_to_change_text

    if plan.agrees:
        echo(nothing_to_change_text(plan, label), nl=False)
    elif plan.writes_nothing:
        raise PatchError(NOTHING_TO_CHANGE)
