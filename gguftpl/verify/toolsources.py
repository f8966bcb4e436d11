"""Tools from files and MCP servers together, as one host would offer them (``--tools``, ``--mcp``,
``--mcp-url``), kept connected for the round trip's ``tools/call``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gguftpl.errors import ToolSourceError
from gguftpl.verify.tools import ToolSpec, load_tools_file, merge_tool_lists


class ToolSources:
    """Tools from files and MCP servers together, as one host would offer them. A context manager: MCP
    servers stay connected (for the round trip's ``tools/call``) until it exits."""

    def __init__(self, tools: list[ToolSpec], mcp: Any = None) -> None:
        self.tools = tools
        self._mcp = mcp

    @property
    def has_servers(self) -> bool:
        return self._mcp is not None

    def dispatch(self, tool: ToolSpec, arguments: dict[str, Any]) -> Any:
        """``tools/call`` on the owning server; raises :class:`ToolSourceError` for a tool from a file."""
        if self._mcp is None or tool.server is None:
            raise ToolSourceError(f"tool {tool.name!r} comes from {tool.source}, not from an MCP server")
        return self._mcp.dispatch(tool, arguments)

    def dispatcher_for(self, tool: ToolSpec) -> Any:
        """``dispatch`` when ``tool`` has a server to run it, else None (the round trip then skips dispatch)."""
        return self.dispatch if (self._mcp is not None and tool.server is not None) else None

    def close(self) -> None:
        if self._mcp is not None:
            self._mcp.close()
            self._mcp = None

    def __enter__(self) -> ToolSources:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_tool_sources(
    files: Sequence[str | Path] = (),
    mcp_commands: Sequence[str] = (),
    mcp_urls: Sequence[str] = (),
    *,
    prefix: str | None = None,
    timeout: float = 30.0,
    env: Mapping[str, str] | None = None,
) -> ToolSources:
    """Load tool files and connect to MCP servers (``--tools``, ``--mcp "CMD ARGS"``, ``--mcp-url URL``).

    Tools keep the order given: files first, then stdio servers, then HTTP servers. ``prefix`` namespaces
    MCP tools (default: none for one server, ``{server}__`` for several). ``env`` is added to the
    environment of stdio servers.
    """
    lists: list[list[ToolSpec]] = [load_tools_file(f) for f in files]
    mcp = None
    if mcp_commands or mcp_urls:
        from gguftpl.verify.mcp import McpServerSpec, open_mcp_tools

        specs = [McpServerSpec.stdio(c, env=dict(env or {})) for c in mcp_commands]
        specs += [McpServerSpec.http(u) for u in mcp_urls]
        mcp = open_mcp_tools(specs, prefix=prefix, timeout=timeout)
        lists.append(mcp.tools)
    try:
        tools = merge_tool_lists(lists)
    except ToolSourceError:
        if mcp is not None:
            mcp.close()
        raise
    return ToolSources(tools, mcp)
