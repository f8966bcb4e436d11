"""The command line: a thin click layer over the library.

Each command lives in its own module (``gguftpl/cli/<name>.py`` defining ``command``) and is imported only
when it runs, so ``gguftpl inspect`` does not pay for transformers or llama.cpp. Every typed library error is
turned into one line on stderr and exit code 2 here, in one place; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any, NoReturn

import click

from gguftpl import __version__, interrupts
from gguftpl.commandline import COMMANDS  # command name -> module under gguftpl.cli
from gguftpl.errors import GGUFTplError

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n in COMMANDS if importlib.util.find_spec(f"gguftpl.cli.{COMMANDS[n]}"))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        mod = COMMANDS.get(name)
        if mod is None:
            return None
        try:
            module = importlib.import_module(f"gguftpl.cli.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name == f"gguftpl.cli.{mod}":
                return None
            raise
        cmd: click.Command = module.command
        return cmd

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.ClickException as exc:  # a bad option before the command name
            _usage_error(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:  # click's own usage errors: one line too, not usage + blank + Error
            if ctx.obj and ctx.obj.get("debug"):
                raise
            _usage_error(exc)
        except GGUFTplError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"gguftpl: error: {one_line(str(exc))}", err=True)
            ctx.exit(EXIT_ERROR)
        except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM (interrupts.Terminated)
            ctx.exit(interrupts.report(exc))
        except BrokenPipeError:
            raise  # `gguftpl ... | head`: click quiets stdout and exits 1, no error line for a closed reader
        except OSError as exc:
            # full disk, permissions, vanished files: the library cleaned up, say what happened
            if ctx.obj and ctx.obj.get("debug"):
                raise
            where = f" ({one_line(str(exc.filename))})" if getattr(exc, "filename", None) else ""
            click.echo(f"gguftpl: error: {one_line(str(exc.strerror or exc))}{where}", err=True)
            ctx.exit(EXIT_ERROR)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except MemoryError:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo("gguftpl: error: out of memory", err=True)
            ctx.exit(EXIT_ERROR)
        except Exception as exc:
            interrupted = interrupts.wrapped_interrupt(exc)
            if interrupted is not None:  # a Ctrl-C or SIGTERM that Python handed on inside another error
                ctx.exit(interrupts.report(interrupted))
            # last resort: a bug still ends in one line (and --debug shows where), never a traceback
            if ctx.obj and ctx.obj.get("debug"):
                raise
            msg = one_line(str(exc))[:500]
            click.echo(
                f"gguftpl: error: unexpected {type(exc).__name__}: {msg} (run with --debug for the traceback)",
                err=True,
            )
            ctx.exit(EXIT_ERROR)


def one_line(text: str) -> str:
    from gguftpl.safeio import terminal_text

    # messages quote file names, template names and server answers: no terminal control gets through
    return terminal_text(" ".join(text.split())) or "unknown error"


def _usage_error(exc: click.ClickException) -> NoReturn:
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        raise exc  # `gguftpl` alone prints the help, as click does
    hint = ""
    if isinstance(exc, click.UsageError) and exc.ctx is not None:
        hint = f" (see '{exc.ctx.command_path} --help')"
    click.echo(f"gguftpl: error: {one_line(exc.format_message())}{hint}", err=True)
    raise click.exceptions.Exit(exc.exit_code)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(version=__version__, package_name="gguftpl")
@click.pass_context
def main_group(ctx: click.Context, debug: bool) -> None:
    """Find and repair broken chat templates inside GGUF model files."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    # a template's text in a Latin-1 or ASCII locale: escape what the terminal cannot show, never crash
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # pragma: no cover - a stream that cannot change its error handler
                pass


def main(argv: list[str] | None = None) -> NoReturn:
    # the `gguftpl` command installed these before importing click (gguftpl.__main__); a caller of main()
    # gets them here
    interrupts.install()
    try:
        # not click's standalone mode: it turns a Ctrl-C that lands while it parses into "Aborted!", exit 1
        rv = main_group.main(args=argv, prog_name="gguftpl", standalone_mode=False)
    except click.exceptions.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):
            sys.exit(interrupts.report(exc.__cause__))
        click.echo("Aborted!", err=True)
        sys.exit(1)
    except click.ClickException as exc:  # click's usage errors exit 2, matching our convention
        exc.show()
        sys.exit(exc.exit_code)
    sys.exit(rv if isinstance(rv, int) else EXIT_OK)


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
