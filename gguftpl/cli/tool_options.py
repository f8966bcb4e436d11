"""Click options for the tools a user really runs, shared by ``render`` and ``verify``.

``@tool_source_options`` adds ``--tools FILE``, ``--mcp "CMD ARGS"``, ``--mcp-url URL`` (all repeatable),
``--tool-prefix`` and ``--mcp-timeout``; ``@tool_check_options`` adds ``--call``, ``--args`` and
``--max-tool-share`` for ``verify``. A command pops them with :func:`pop_tool_source_options` /
:func:`pop_tool_check_options` and opens the sources with :func:`open_from_options`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from gguftpl.verify.toolcheck import DEFAULT_MAX_TOOL_SHARE

if TYPE_CHECKING:
    from gguftpl.verify.toolsources import ToolSources

F = TypeVar("F", bound=Callable[..., Any])

SOURCE_KEYS = ("tools_files", "mcp_commands", "mcp_urls", "mcp_env", "tool_prefix", "mcp_timeout")
CHECK_KEYS = ("call", "call_args", "max_tool_share")


def tool_source_options(f: F) -> F:
    opts = [
        click.option(
            "--tools",
            "tools_files",
            multiple=True,
            type=click.Path(dir_okay=False),
            help="Tools file: an OpenAI tools list, one function, or an MCP tools/list result (repeatable).",
        ),
        click.option(
            "--mcp",
            "mcp_commands",
            multiple=True,
            metavar='"CMD ARGS"',
            help="Start an MCP server over stdio and use its tools (repeatable).",
        ),
        click.option(
            "--mcp-url",
            "mcp_urls",
            multiple=True,
            metavar="URL",
            help="Use the tools of an MCP server over streamable HTTP (repeatable).",
        ),
        click.option(
            "--mcp-env",
            "mcp_env",
            multiple=True,
            metavar="NAME[=VALUE]",
            help="Environment for --mcp servers (repeatable; NAME alone copies it from yours). They get only "
            "PATH, HOME and a few others otherwise, as the MCP SDK and hosts do.",
        ),
        click.option(
            "--tool-prefix",
            default="auto",
            show_default=True,
            help="Name prefix for MCP tools; may use {server}. auto: none for one server, '{server}__' for several.",
        ),
        click.option(
            "--mcp-timeout",
            type=click.FloatRange(min=0.1),
            default=30.0,
            show_default=True,
            help="Seconds to wait for an MCP server to start or answer.",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def tool_check_options(f: F) -> F:
    opts = [
        click.option(
            "--call", "call", metavar="NAME", default=None, help="Tool for the round trip (default: the first)."
        ),
        click.option(
            "--args",
            "call_args",
            metavar="JSON",
            default=None,
            help="Arguments for the round-trip call (default: minimal valid ones built from its schema).",
        ),
        click.option(
            "--max-tool-share",
            type=click.FloatRange(min=0.0, max=1.0),
            default=DEFAULT_MAX_TOOL_SHARE,
            show_default=True,
            help="Warn when the tools take more than this share of the model's context length.",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def pop_tool_source_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: kwargs.pop(k) for k in SOURCE_KEYS if k in kwargs}


def pop_tool_check_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: kwargs.pop(k) for k in CHECK_KEYS if k in kwargs}


def wants_tools(source_opts: dict[str, Any]) -> bool:
    return bool(source_opts.get("tools_files") or source_opts.get("mcp_commands") or source_opts.get("mcp_urls"))


def open_from_options(source_opts: dict[str, Any]) -> ToolSources | None:
    """None when no tool source was given; else the opened sources (close them: a context manager)."""
    if not wants_tools(source_opts):
        return None
    from gguftpl.verify.toolsources import open_tool_sources

    return open_tool_sources(
        source_opts.get("tools_files") or (),
        source_opts.get("mcp_commands") or (),
        source_opts.get("mcp_urls") or (),
        prefix=source_opts.get("tool_prefix"),
        timeout=float(source_opts.get("mcp_timeout") or 30.0),
        env=parse_env(source_opts.get("mcp_env") or ()),
    )


def parse_env(items: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` pairs; a bare ``NAME`` copies the variable from this process (skipped when unset)."""
    import os

    from gguftpl.errors import UsageError

    env: dict[str, str] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not name or not name.replace("_", "a").isalnum():
            raise UsageError(f"--mcp-env {item!r}: expected NAME or NAME=VALUE")
        if eq:
            env[name] = value
        elif name in os.environ:
            env[name] = os.environ[name]
    return env
