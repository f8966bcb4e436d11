"""``gguftpl engines [install NAME...]``: which engine each runtime renders with, and installing the ones pip
does not."""

from __future__ import annotations

import click

from gguftpl.cli.output import echo, width_option


@click.group("engines", invoke_without_command=True)
@width_option
@click.pass_context
def command(ctx: click.Context) -> None:
    """List the template engines runtimes render with: installed or not, version, the runtimes that use each,
    and how to install a missing one. A runtime whose engine is missing is reported as "unknown" by audit and
    verify, never judged by another engine.

    \b
    gguftpl engines install hfjs     @huggingface/jinja (LM Studio) from the npm registry, run by Node.js
    gguftpl engines install ollama   Ollama's Go templates, built with the system's Go toolchain
    gguftpl engines install all      both
    """
    if ctx.invoked_subcommand is not None:
        return
    from gguftpl.engines.install import states
    from gguftpl.runtimes.profiles import for_engine

    rows = states()
    w = max(len(s.engine) for s in rows)
    for s in rows:
        state = s.version if s.installed else f"not installed: {s.hint}" + (f" ({s.detail})" if s.detail else "")
        runtimes = ", ".join(p.name for p in for_engine(s.engine)) or "-"
        echo(f"{s.engine:<{w}}  {runtimes}: {state}")


@command.command("install")
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds each install may take.")
def install_command(names: tuple[str, ...], timeout: float) -> None:
    """Install engines that are not Python packages (hfjs, ollama, or all) into the engines folder
    ($GGUFTPL_ENGINES_DIR, else beside this Python environment)."""
    from gguftpl.engines.install import install

    for line in install(names, timeout=timeout):
        echo(line)
