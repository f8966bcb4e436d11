"""The ``gguftpl`` command's subcommands, and whether a text is a command line to run.

One home for both: the CLI registers its subcommands from :data:`COMMANDS`, and a report that prints a fix
decides from the same names whether that fix is a command (coloured as one, wrapped with `` \\`` so a pasted
copy still runs) or advice in words that happens to start with "gguftpl" ("gguftpl knows no upstream…").
"""

from __future__ import annotations

import shlex

COMMANDS: dict[str, str] = {
    "inspect": "inspect_cmd",
    "audit": "audit_cmd",
    "rules": "rules_cmd",
    "patch": "patch_cmd",
    "diff": "diff_cmd",
    "render": "render_cmd",
    "verify": "verify_cmd",
    "engines": "engines_cmd",
    "cache": "cache_cmd",
    "catalog": "catalog_cmd",
    "scan": "scan_cmd",
    "survey": "survey_cmd",
}
"""Subcommand name -> its module under ``gguftpl.cli``."""

_OPERATORS = frozenset({"&&", "||", ";", "|"})
"""What joins the commands of one line (``patch … && gguftpl verify FIXED.gguf``)."""


def is_command(text: str) -> bool:
    """Whether ``text`` is a shell command line of gguftpl commands: read as the shell reads it (shlex, with
    its operators), each command joined by ``&&``, ``||``, ``;`` or ``|`` is ``gguftpl SUBCOMMAND …`` with a
    real subcommand, and no word is prose (a bracket, or a word that ends a clause with ``,`` or ``:``)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unclosed quote: not a line the shell would run
        return False
    commands: list[list[str]] = [[]]
    for word in words:
        if word in _OPERATORS:
            commands.append([])
        elif word in ("(", ")") or (word[-1:] in (",", ":") and not word.startswith("-")):
            return False
        else:
            commands[-1].append(word)
    return all(len(c) >= 2 and c[0] == "gguftpl" and c[1] in COMMANDS for c in commands)
