"""Everything the CLI prints goes through here, so no terminal control from a model file, a Hub answer or an
MCP server reaches the terminal or a CI log, and no line of text is wider than the terminal.

Text passes :func:`gguftpl.safeio.terminal_text` (control, bidi and invisible characters shown as escapes,
GitHub workflow commands defused), then :func:`gguftpl.textfit.fit_text` (each line broken between tokens to
the width: ``--width``, else ``COLUMNS``, else the terminal's, else 100). JSON passes
:func:`gguftpl.safeio.json_text` (the same value, invisible characters as ``\\uXXXX``). Only the ``--raw``
outputs write exact bytes, because the user asked for them.

Colour: gguftpl's own sequences only, on a terminal, and never when ``NO_COLOR`` is set (no-color.org).

Progress (:class:`StderrProgress`): a tqdm bar or status line on stderr with the current item, only when stderr
is a terminal; nothing at all otherwise (a pipe, a file, CI), and never on stdout, so a report piped on is the
same with or without it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from gguftpl.safeio import json_text, terminal_text

__all__ = [
    "StderrProgress",
    "colour_fixes",
    "dumps_json",
    "echo",
    "echo_json",
    "echo_json_text",
    "output_width",
    "use_color",
    "width_option",
]

_WIDTH_KEY = "gguftpl.width"
F = TypeVar("F", bound=Callable[..., Any])


def use_color(explicit: bool | None = None, output: str | None = None, *, err: bool = False) -> bool:
    """Colour only for a terminal, never into a file, and never when NO_COLOR is set (no-color.org)."""
    if explicit is not None:
        return explicit
    if output is not None or os.environ.get("NO_COLOR"):
        return False
    stream = sys.stderr if err else sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def _store_width(ctx: click.Context, _param: click.Parameter, value: int | None) -> None:
    if value is not None:
        ctx.meta[_WIDTH_KEY] = value


def width_option(f: F) -> F:
    """``--width N``: the text output's width (default: COLUMNS, else the terminal's, else 100)."""
    return click.option(
        "--width",
        type=click.IntRange(20, 10_000),
        expose_value=False,
        callback=_store_width,
        metavar="N",
        help="Fit text output to N columns (default: $COLUMNS, else the terminal's width, else 100).",
    )(f)


def output_width() -> int:
    """The width text output is fitted to, for the command running now."""
    from gguftpl.textfit import terminal_width

    ctx = click.get_current_context(silent=True)
    return terminal_width(ctx.meta.get(_WIDTH_KEY) if ctx is not None else None)


def echo(text: str, *, err: bool = False, nl: bool = True, color: bool | None = False, commands: bool = False) -> None:
    """``click.echo`` of text made safe and, on stdout, fitted to :func:`output_width`. ``color`` True keeps
    gguftpl's own colour sequences, None keeps them on a terminal without NO_COLOR (and drops them
    elsewhere), False escapes every one; ``commands`` keeps the ``::`` that starts each line of the
    ``github`` report format, whose lines are annotations and are never broken."""
    shown = color if color is not None else use_color(err=err)
    safe = terminal_text(text, keep_sgr=color is not False, commands=commands)
    if not err and not commands:
        from gguftpl.textfit import fit_text

        safe = fit_text(safe, output_width())
    click.echo(safe, err=err, nl=nl, color=shown)


FIX_LABELS = ("fix: ", "repair: ")


def colour_fixes(text: str) -> str:
    """``text`` (escaped already) with the fix of each line that starts ``fix: `` or ``repair: `` coloured as
    the audit's text report colours one: cyan a command to run, magenta advice in words
    (:func:`gguftpl.commandline.is_command` tells them apart). :func:`echo` with ``color=None`` shows the
    colour on a terminal only, and never with NO_COLOR."""
    from gguftpl.commandline import is_command
    from gguftpl.report.text import FIX_COMMAND_FG, FIX_WORDS_FG

    out = []
    for line in text.split("\n"):
        # at column 0 only: a quoted template's line (a diff's context, indented evidence) is never one
        label = next((lb for lb in FIX_LABELS if line.startswith(lb)), None)
        if label is not None and "\x1b" not in line:
            fix = line[len(label) :]
            line = label + click.style(fix, fg=FIX_COMMAND_FG if is_command(fix) else FIX_WORDS_FG)
        out.append(line)
    return "\n".join(out)


def dumps_json(obj: Any) -> str:
    return json_text(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def echo_json(obj: Any) -> None:
    click.echo(dumps_json(obj))


def echo_json_text(text: str, *, nl: bool = True) -> None:
    """JSON that is already text (a report format's output)."""
    click.echo(json_text(text), nl=nl)


_BAR = "{desc}: {n_fmt}/{total_fmt} |{bar}| {elapsed}{postfix}"
"""Count first, the current item last: a narrow terminal cuts the item's name, never the count."""
LABEL_MAX = 48


def _short(label: str) -> str:
    """The current item as the bar shows it: a path's last part (a file name, ``file.gguf@rev``), at most
    :data:`LABEL_MAX` characters (its end kept: the quant's name is there)."""
    name = label.rstrip("/").rsplit("/", 1)[-1] or label
    return name if len(name) <= LABEL_MAX else "…" + name[-(LABEL_MAX - 1) :]


class StderrProgress:
    """Progress of long work on stderr, drawn by tqdm, only when stderr is a terminal (else every call does
    nothing). Called as the library's progress callbacks are: ``progress(done, total, label)`` (files of an
    audit: a bar, ``label`` the current file), ``progress(done, total)`` (bytes copied: a bar in bytes), or
    :meth:`status` for work in steps of unknown length (the live stage: the step and the time so far).
    A context manager: the bar is cleared on exit, so the terminal keeps only the report."""

    def __init__(self, desc: str, *, unit: str = "file", in_bytes: bool = False) -> None:
        self.desc, self.unit, self.in_bytes = desc, unit, in_bytes
        stream = sys.stderr
        self.enabled = bool(getattr(stream, "isatty", lambda: False)())
        self._bar: Any = None

    def _open(self, total: int | None, fmt: str | None = None) -> Any:
        if self._bar is None:
            from tqdm import tqdm

            tqdm.monitor_interval = 0  # no monitor thread: each bar is redrawn at each item or step anyway
            options: dict[str, Any] = {"bar_format": fmt or _BAR}
            if self.in_bytes:
                options.update(unit="B", unit_scale=True, unit_divisor=1024)
            else:
                options.update(unit=self.unit)
            self._bar = tqdm(total=total, desc=self.desc, file=sys.stderr, leave=False, dynamic_ncols=True, **options)
        return self._bar

    def __call__(self, done: int, total: int, label: str = "") -> None:
        if not self.enabled:
            return
        from gguftpl.safeio import printable

        bar = self._open(total)
        bar.total = total
        bar.n = done
        if label:
            bar.set_postfix_str(_short(printable(label)), refresh=False)
        bar.refresh()

    def status(self, message: str) -> None:
        """One step of work whose length is unknown: the step's words and the time since the first."""
        if not self.enabled:
            return
        from gguftpl.safeio import printable

        bar = self._open(None, "{desc} [{elapsed}]")
        bar.set_description_str(printable(message), refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> StderrProgress:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
