"""``gguftpl audit PATH...``: check the chat templates of GGUF files and report findings.

parse -> audit (library) -> format (report registry) -> write -> exit code.
Exit codes: 0 nothing at or above ``--fail-on``; 1 findings at or above it; 2 usage or I/O error, or a file that
is no readable GGUF (reported as GT001 with every other file, and one line on stderr).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from gguftpl.cli.modelarg import hash_progress
from gguftpl.cli.output import StderrProgress, echo, echo_json_text, output_width, use_color, width_option
from gguftpl.report import format_names

if TYPE_CHECKING:
    from gguftpl.audit import AuditOptions
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.repo.audit import TargetsAudit

SEVERITIES = ["error", "warning", "info"]


@click.command("audit")
@click.argument("paths", nargs=-1, required=False, metavar="PATH...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(format_names()),
    default="text",
    show_default=True,
    help="Report format: text for people, json for scripts, sarif for code scanning, github for annotations, html "
    "for a self-contained page to look at (with -o report.html).",
)
@click.option(
    "--fail-on",
    type=click.Choice(SEVERITIES),
    default="error",
    show_default=True,
    help="Exit 1 when a finding is at or above this severity.",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (2 still means an error).")
@click.option(
    "--select",
    multiple=True,
    metavar="CODES",
    help="Only these rules; codes or prefixes (GT2), comma-separated or repeated.",
)
@click.option(
    "--ignore", multiple=True, metavar="CODES", help="Skip these rules; codes or prefixes, comma-separated or repeated."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    help="Write the report to FILE (atomically) instead of stdout.",
)
@click.option("--color/--no-color", default=None, help="Force colour on or off (default: only on a terminal).")
@click.option(
    "--repo",
    "repos",
    multiple=True,
    metavar="ORG/REPO[@REV]",
    help="Audit every GGUF of this Hub repo from its headers alone (HTTP Range), and compare the quants "
    "with each other and with upstream. Repeatable.",
)
@click.option(
    "--repo-check",
    is_flag=True,
    help="Treat each directory PATH as one model's quants (a converter's output folder) and compare them "
    "with each other too, as --repo does.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(1, 32),
    default=4,
    show_default=True,
    help="Headers read at once for --repo and --repo-check.",
)
@click.option("--upstream", metavar="ORG/REPO", help="Compare --repo/--repo-check quants with this upstream repo.")
@click.option("--no-upstream", is_flag=True, help="Skip the upstream comparison of --repo/--repo-check.")
@click.option(
    "--engine",
    type=click.Choice(["hf", "hf-only", "llamacpp"]),
    default="hf",
    show_default=True,
    help="hf: analyse under transformers' semantics and, when xllamacpp is installed, have llama.cpp load "
    "each distinct default/tool_use template once (GT606 for one it refuses; llama-server would exit at "
    "startup). hf-only: without that llama.cpp check. llamacpp: also run each local file through llama.cpp "
    "itself (gguftpl verify's stages as GT6xx findings; needs xllamacpp).",
)
@click.option(
    "--runtime",
    "runtimes",
    multiple=True,
    metavar="NAME",
    help="Judge only these runtimes (llama.cpp, goose, jan, lmstudio, vllm, sglang, tgi, mistral.rs, dynamo, "
    "ollama; comma-separated or repeated): only their engines are asked, the runtime view shows them, and the "
    "exit code comes from findings that concern them.",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Analyse every template afresh instead of reusing facts kept in the cache folder "
    "($XDG_CACHE_HOME/gguftpl, or $GGUFTPL_CACHE_DIR).",
)
@width_option
@click.pass_context
def command(
    ctx: click.Context,
    paths: tuple[str, ...],
    fmt: str,
    fail_on: str,
    exit_zero: bool,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    output: str | None,
    color: bool | None,
    repos: tuple[str, ...] = (),
    repo_check: bool = False,
    jobs: int = 4,
    upstream: str | None = None,
    no_upstream: bool = False,
    engine: str = "hf",
    no_cache: bool = False,
    runtimes: tuple[str, ...] = (),
) -> None:
    """Audit the chat templates of GGUF files.

    PATH may be a GGUF file or a directory (searched recursively for *.gguf); give as many as you like.
    A file that cannot be read is reported as a finding (GT001) and the audit goes on.
    Templates are analysed once per distinct template set, so many quants of one model cost little more
    than one, and what was learnt about a template is kept in the cache folder, so auditing it again (every
    quant, every CI run) costs a header read (--no-cache: analyse afresh). `gguftpl rules CODE` explains a
    finding.

    PATH may also be a file on the Hugging Face Hub, hf://ORG/REPO/FILE.gguf[@REV] or an https://…/resolve/…
    URL: only its header is fetched, with HTTP Range requests (HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE
    apply). For a split GGUF, the first shard (which holds the metadata) is read.

    PATH may also be a model a runtime already has: ollama://NAME[:TAG], lmstudio://PUBLISHER/REPO[/FILE] or
    hf-cache://ORG/REPO[@REV][/FILE] (read in place from $OLLAMA_MODELS, LM Studio's models folder, the Hugging
    Face cache; every blob checked against its digest). Findings name the reference; an Ollama model's row
    follows its manifest (the TEMPLATE Ollama renders, its stop parameters).

    --repo ORG/REPO[@REV] audits every GGUF of a Hub repo that way and adds repo-level findings (GT55x): a
    quant missing a template the others carry, templates or special tokens that differ between quants,
    drift from the upstream model, incomplete split sets. --repo-check runs the same checks on a local
    folder of quants before upload; without it, a folder is audited file by file.

    \b
    Exit status:
      0  no finding at or above --fail-on
      1  findings at or above --fail-on
      2  usage or I/O error (missing path, a folder without GGUFs, unknown rule, unwritable output)
    """
    from gguftpl.audit import AuditOptions, audit_paths
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.gguf.hubref import is_remote
    from gguftpl.report import get_formatter

    debug = bool(ctx.obj and ctx.obj.get("debug"))
    options = AuditOptions(
        select=select, ignore=ignore, engine=engine, strict=debug, runtimes=runtimes if runtimes else None
    )
    cache = AnalysisCache() if no_cache else AnalysisCache.on_disk()
    colored = use_color(color, output) if fmt == "text" else False
    formatter = get_formatter(fmt, **({"color": colored, "width": output_width()} if fmt == "text" else {}))
    if not paths and not repos:
        raise click.UsageError("Missing argument 'PATH...' (or --repo ORG/REPO).", ctx=ctx)
    if output:
        from gguftpl.safeio import check_output_folder

        check_output_folder(output)  # a typo in -o is refused before the audit, not after it
    if repos or repo_check or any(is_remote(p) for p in paths):
        result = _audit_targets(paths, repos, repo_check, jobs, options, upstream, no_upstream, cache)
        run = result.run
        report = formatter.format(run, result.context())
    else:
        with hash_progress(), StderrProgress("audit") as progress:  # a store's blob checked first, then the audit
            run = audit_paths(list(paths), options, cache=cache, progress=progress)
        report = formatter.format(run)
    _emit(report, output, fmt, colored)
    for fa in run.unreadable:  # bad input: one line each on stderr beside the report's GT001, and exit 2
        why = fa.error or next(f.message for f in fa.findings if f.code == "GT001")
        echo(f"gguftpl: error: {fa.path}: {why}", err=True)
    ctx.exit(run.exit_code(fail_on, exit_zero=exit_zero))


def _emit(report: str, output: str | None, fmt: str, colored: bool) -> None:
    """The report to -o (atomically), else to stdout: JSON and SARIF as they are, text wrapped and coloured."""
    from gguftpl.report import write_atomic

    if output is not None:
        write_atomic(output, report)
    elif fmt in ("json", "sarif"):
        echo_json_text(report, nl=False)
    else:
        echo(report, nl=False, color=colored, commands=fmt == "github")


def _audit_targets(
    paths: tuple[str, ...],
    repos: tuple[str, ...],
    repo_check: bool,
    jobs: int,
    options: AuditOptions,
    upstream: str | None,
    no_upstream: bool,
    cache: AnalysisCache,
) -> TargetsAudit:
    """Remote files, ``--repo`` and ``--repo-check``: one run, with a progress bar on a terminal."""
    from gguftpl.repo.audit import audit_targets

    with StderrProgress("audit") as progress:
        return audit_targets(
            list(paths),
            repos=list(repos),
            repo_check=repo_check,
            jobs=jobs,
            options=options,
            upstream=False if no_upstream else (upstream or True),
            progress=progress,
            cache=cache,
        )
