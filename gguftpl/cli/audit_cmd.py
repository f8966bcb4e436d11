"""``gguftpl audit PATH...``: check the chat templates of GGUF files and report findings.

parse -> audit (library) -> format (report registry) -> write -> exit code.
Exit codes: 0 nothing at or above ``--fail-on``; 1 findings at or above it; 2 usage or I/O error.
"""

from __future__ import annotations

import os
import sys

import click

from gguftpl.report import format_names

SEVERITIES = ["error", "warning", "info"]


def use_color(explicit: bool | None, output: str | None) -> bool:
    """Colour only for a terminal, never into a file, and never when NO_COLOR is set (no-color.org)."""
    if explicit is not None:
        return explicit
    if output is not None or os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


@click.command("audit")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(format_names()),
    default="text",
    show_default=True,
    help="Report format: text for people, json for scripts, sarif for code scanning, github for annotations.",
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
@click.option("--ignore", multiple=True, metavar="CODES", help="Skip these rules; codes or prefixes.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    help="Write the report to FILE (atomically) instead of stdout.",
)
@click.option("--color/--no-color", default=None, help="Force colour on or off (default: only on a terminal).")
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
) -> None:
    """Audit the chat templates of GGUF files.

    PATH may be a GGUF file or a directory (searched recursively for *.gguf); give as many as you like.
    A file that cannot be read is reported as a finding (GT001) and the audit goes on.
    Templates are analysed once per distinct template set, so many quants of one model cost little more
    than one. `gguftpl rules CODE` explains a finding.

    \b
    Exit status:
      0  no finding at or above --fail-on
      1  findings at or above --fail-on
      2  usage or I/O error (missing path, unknown rule, unwritable output)
    """
    from gguftpl.audit import audit_paths
    from gguftpl.report import get_formatter, write_atomic

    debug = bool(ctx.obj and ctx.obj.get("debug"))
    run = audit_paths(list(paths), select=list(select), ignore=list(ignore), strict=debug)
    if not run.files:
        click.echo("gguftpl: warning: no GGUF files found in " + ", ".join(paths), err=True)
    colored = use_color(color, output) if fmt == "text" else False
    options = {"color": colored} if fmt == "text" else {}
    report = get_formatter(fmt, **options).format(run)
    if output is not None:
        write_atomic(output, report)
    else:
        click.echo(report, nl=False, color=colored)
    ctx.exit(0 if exit_zero else run.exit_code(fail_on))
