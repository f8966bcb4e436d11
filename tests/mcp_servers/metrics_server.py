"""A small deterministic MCP server for tests, written with the official SDK (v2 ``MCPServer``).

One tool, ``lookup_metric(project)``, with a described parameter. Each call is appended as one JSON
line ``{"tool": ..., "args": {...}}`` to the file named by ``GGUFTPL_TEST_MCP_LOG`` (or ``--log PATH``;
tests read it independently of gguftpl), and the result is this process's marker (``METRIC-RESULT-`` and eight
fresh random hex digits, new in every process, so a model cannot have learnt it and a value it states can be
compared with the one really returned) plus the project. The marker is logged when the server starts, as one
line ``{"marker": ..., "pid": ...}`` (``harness.markers`` reads them; ``harness.read_log`` only the calls).

Run: ``python metrics_server.py`` (stdio) or ``python metrics_server.py --http PORT`` (streamable HTTP on
127.0.0.1). ``GGUFTPL_TEST_MCP_CRASH=1`` makes the tool kill the process mid-call.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

MARKER_PREFIX = "METRIC-RESULT-"
_MARKER = MARKER_PREFIX + secrets.token_hex(4)
"""This process's marker: fresh per process, logged at start."""
PARAM_DESCRIPTION = "Slug of the project whose nightly build health metric is wanted"
UNKNOWN_PROJECT = "no-such-project"
TOOL_DESCRIPTION = "Look up the current build health metric of a project."

server = MCPServer("metrics", log_level="WARNING")


_LOG_PATH: str | None = None


def _log(tool: str, args: dict[str, object]) -> None:
    _write({"tool": tool, "args": args})


def _write(record: dict[str, object]) -> None:
    path = _LOG_PATH or os.environ.get("GGUFTPL_TEST_MCP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


@server.tool(description=TOOL_DESCRIPTION)
def lookup_metric(project: Annotated[str, Field(description=PARAM_DESCRIPTION)]) -> str:
    _log("lookup_metric", {"project": project})
    if os.environ.get("GGUFTPL_TEST_MCP_CRASH"):
        os._exit(3)
    if project == UNKNOWN_PROJECT:
        raise ToolError(f"no such project: {project}")  # the SDK answers with isError and this text
    return f"{_MARKER} project={project} health=0.93"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", type=int, default=None, help="serve streamable HTTP on 127.0.0.1:PORT")
    ap.add_argument("--log", default=None, help="call log file (else $GGUFTPL_TEST_MCP_LOG)")
    ap.add_argument("--crash", action="store_true", help="die in the middle of every tools/call")
    args = ap.parse_args()
    global _LOG_PATH
    _LOG_PATH = args.log
    if args.crash:
        os.environ["GGUFTPL_TEST_MCP_CRASH"] = "1"
    _write({"marker": _MARKER, "pid": os.getpid()})
    if args.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
