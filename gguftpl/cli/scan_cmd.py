"""``gguftpl scan``: parse -> ``scan.scan`` (discover the stores, audit each model once) -> table or JSON -> exit."""

from __future__ import annotations

from typing import Any

import click

from gguftpl.cli.output import StderrProgress, echo, echo_json_text, width_option

_SHORT = {"prompt": "yes", "dropped": "no", "refused": "400", "injected": "own", "fails": "fails", "unknown": "?"}
"""A row's outcome in the table: the schemas reach the prompt, are dropped silently, the request is refused (HTTP
400), the runtime writes its own tool prompt, its engine raises, unknown."""


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def table(result: Any) -> str:
    """One line per model (its other names below it), one column per runtime, the fix under each broken one."""
    names: list[str] = []
    for e in result.entries:
        if e.audit.runtimes is not None:
            names += [r.name for r in e.audit.runtimes.rows if r.name not in names]
    width = max([len(e.model.ref) for e in result.entries] + [5])
    head = f"{'MODEL':<{width}}  {'STORE':<8}  {'SIZE':>9}  " + "  ".join(names)
    lines = [head]
    for e in result.entries:
        view = e.audit.runtimes
        cells = []
        for n in names:
            row = next((r for r in view.rows if r.name == n), None) if view is not None else None
            cells.append(f"{(_SHORT.get(row.outcome, '?') if row else '-'):<{len(n)}}")
        verdict = "  ".join(cells) if view is not None else f"not audited: {e.audit.error or 'not a chat model'}"
        lines.append(f"{e.model.ref:<{width}}  {e.model.store:<8}  {_size(e.model.size):>9}  {verdict}".rstrip())
        lines += [f"  also: {m.ref}" for m in e.models[1:]]
        if e.dropping:
            lines.append(f"  drops tools: {', '.join(e.dropping)}")
            fix = e.fix()
            if fix:
                lines.append(f"  fix: {fix}")
    for p in result.problems:
        lines.append(f"{p.ref:<{width}}  {p.store:<8}  {'':>9}  error: {p.error}")
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
    """Audit the models you already have: every GGUF in Ollama's store ($OLLAMA_MODELS or ~/.ollama/models),
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
    with StderrProgress("scan", unit="model") as progress:  # a bar with the model being audited, on a terminal
        result = scan(list(stores) or None, list(paths), AuditOptions(select=("GT7", "GT2")), progress=progress)
    if fmt == "html":
        from gguftpl.report.scanhtml import scan_page

        report = scan_page(result)
    else:
        report = result.to_json() + "\n" if fmt == "json" else table(result)
    if output is not None:
        from gguftpl.report import write_atomic

        write_atomic(output, report)
    elif fmt == "json":
        echo_json_text(report, nl=False)
    else:
        echo(report, nl=False)
    ctx.exit(result.exit_code())
