"""``gguftpl scan``: parse -> ``scan.scan`` (discover the stores, audit each model once) -> table or JSON -> exit."""

from __future__ import annotations

from typing import Any

import click

from gguftpl.cli.output import StderrProgress, echo, echo_json_text, output_width, width_option

_SHORT = {"prompt": "yes", "dropped": "no", "refused": "400", "injected": "own", "fails": "fails", "unknown": "?"}
"""A row's outcome in the table: the schemas reach the prompt, are dropped silently, the request is refused (HTTP
400), the runtime writes its own tool prompt, its engine raises, unknown."""


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def table(result: Any, width: int | None = None) -> str:
    """One line per model (its other names below it), one column per runtime, the fix under each broken one;
    narrower than the table (``width``), each model's runtimes on a line of their own under it, since a table
    row broken over two lines no longer has columns."""
    names: list[str] = []
    for e in result.entries:
        if e.audit.runtimes is not None:
            names += [r.name for r in e.audit.runtimes.rows if r.name not in names]
    refs = [e.model.ref for e in result.entries] + [p.ref for p in result.problems]
    w = max([len(r) for r in refs] + [5])
    sw = max([len(e.model.store) for e in result.entries] + [len(p.store) for p in result.problems] + [5])
    head = f"{'MODEL':<{w}}  {'STORE':<{sw}}  {'SIZE':>9}  " + "  ".join(names)
    narrow = width is not None and len(head) > width
    lines = [] if narrow else [head]
    for e in result.entries:
        view = e.audit.runtimes
        cells = []
        for n in names:
            row = next((r for r in view.rows if r.name == n), None) if view is not None else None
            short = _SHORT.get(row.outcome, "?") if row else "-"
            cells.append(f"{n} {short}" if narrow else f"{short:<{len(n)}}")
        verdict = ("  " if not narrow else ", ").join(cells) if view is not None else None
        verdict = verdict or f"not audited: {e.audit.error or 'not a chat model'}"
        if narrow:
            lines.append(f"{e.model.ref}  ({e.model.store}, {_size(e.model.size)})")
            lines.append(f"  {verdict}" if view is None else f"  tools: {verdict}")
        else:
            lines.append(f"{e.model.ref:<{w}}  {e.model.store:<{sw}}  {_size(e.model.size):>9}  {verdict}".rstrip())
        lines += [f"  also: {m.ref}" for m in e.models[1:]]
        if e.dropping:
            lines.append(f"  drops tools: {', '.join(e.dropping)}")
            fix = e.fix()
            if fix:
                lines.append(f"  fix: {fix}")
    for p in result.problems:
        lines.append(
            f"{p.ref}  ({p.store})\n  error: {p.error}"
            if narrow
            else f"{p.ref:<{w}}  {p.store:<{sw}}  {'':>9}  error: {p.error}"
        )
    dropping = sum(1 for e in result.entries if e.dropping)
    lines.append("")
    lines.append(
        f"{len(result.entries)} models ({dropping} dropping tools, {len(result.problems)} unreadable) in "
        f"{result.seconds:.2f}s; {result.analysed} templates analysed, {result.go_rendered} Ollama TEMPLATEs "
        f"rendered, {result.bytes_hashed} blob bytes hashed"
    )
    lines.append("yes: the tool schemas reach the prompt; no: dropped silently; 400: refused; own: its own tool prompt")
    return "\n".join(lines) + "\n"


@click.command("scan")
@click.option(
    "--store",
    "stores",
    multiple=True,
    type=click.Choice(["ollama", "lmstudio", "hf-cache", "llama.cpp"]),
    help="Only this store (repeatable); default: every store present.",
)
@click.option("--path", "paths", multiple=True, metavar="DIR", help="Also every *.gguf below DIR (repeatable).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
    help="text for people, json for scripts, html for a self-contained page (with -o scan.html): the model x "
    "runtime matrix, each finding with its fix, the prompt each runtime renders.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report to FILE (atomically).")
@width_option
@click.pass_context
def command(ctx: click.Context, stores: tuple[str, ...], paths: tuple[str, ...], fmt: str, output: str | None) -> None:
    """Audit the models you already have: every GGUF in Ollama's store ($OLLAMA_MODELS, else ~/.ollama/models and
    the Linux service's, ~ollama/.ollama/models),
    LM Studio's models folder (~/.lmstudio/models, or the older ~/.cache/lm-studio/models), the Hugging Face
    cache and llama.cpp's cache ($LLAMA_CACHE or ~/.cache/llama.cpp), plus the folders given with --path. A
    blob several names share is audited once, and what was learnt is cached, so a second run renders nothing.

    One line per model: its store, its size, and for each runtime whether the tool schemas reach the prompt,
    with the command that fixes each model that loses them (for Ollama, a Modelfile with a TEMPLATE that renders
    them).

    \b
    Exit status:
      0  no model drops tools it could render
      1  a model drops tools in some runtime
      2  a model could not be read safely (a hostile or broken store), or a usage error
    """
    from gguftpl.audit import AuditOptions
    from gguftpl.scan import scan

    if output:
        from gguftpl.safeio import check_output_folder

        check_output_folder(output)
    from gguftpl.cli.modelarg import hash_progress

    with hash_progress(), StderrProgress("scan", unit="model") as progress:  # bars on a terminal only
        result = scan(list(stores) or None, list(paths), AuditOptions(select=("GT7", "GT2")), progress=progress)
    if fmt == "html":
        from gguftpl.report.scanhtml import scan_page

        report = scan_page(result)
    else:
        report = result.to_json() + "\n" if fmt == "json" else table(result, None if output else output_width())
    if output is not None:
        from gguftpl.report import write_atomic

        write_atomic(output, report)
    elif fmt == "json":
        echo_json_text(report, nl=False)
    else:
        echo(report, nl=False)
    ctx.exit(result.exit_code())
