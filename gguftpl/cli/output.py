"""Everything the CLI prints goes through here, so no terminal control from a model file, a Hub answer or an
MCP server reaches the terminal or a CI log.

Text passes :func:`gguftpl.safeio.terminal_text` (control, bidi and invisible characters shown as escapes,
GitHub workflow commands defused), JSON passes :func:`gguftpl.safeio.json_text` (the same value, invisible
characters as ``\\uXXXX``). Only the ``--raw`` outputs write exact bytes, because the user asked for them.
"""

from __future__ import annotations

import json
from typing import Any

import click

from gguftpl.safeio import json_text, terminal_text

__all__ = ["dumps_json", "echo", "echo_json", "echo_json_text"]


def echo(text: str, *, err: bool = False, nl: bool = True, color: bool | None = False, commands: bool = False) -> None:
    """``click.echo`` of text made safe. ``color`` True or None (click decides: only on a terminal) keeps
    gguftpl's own colour sequences, False escapes every one; ``commands`` keeps the ``::`` that starts each
    line of the ``github`` report format."""
    click.echo(terminal_text(text, keep_sgr=color is not False, commands=commands), err=err, nl=nl, color=color)


def dumps_json(obj: Any) -> str:
    return json_text(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def echo_json(obj: Any) -> None:
    click.echo(dumps_json(obj))


def echo_json_text(text: str, *, nl: bool = True) -> None:
    """JSON that is already text (a report format's output)."""
    click.echo(json_text(text), nl=nl)
