"""Start the test MCP server over stdio or streamable HTTP (a real process on 127.0.0.1), for tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
METRICS_SERVER = HERE / "metrics_server.py"
LOG_ENV = "GGUFTPL_TEST_MCP_LOG"


def stdio_command(server: Path = METRICS_SERVER) -> list[str]:
    return [sys.executable, str(server)]


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_log(path: Path) -> list[dict[str, Any]]:
    """The calls the server saw, in order: ``{"tool": ..., "args": {...}}``."""
    return [r for r in _records(path) if "tool" in r]


def markers(path: Path) -> list[str]:
    """The fresh markers of the server processes that logged into ``path``, in start order."""
    return [str(r["marker"]) for r in _records(path) if "marker" in r]


def returned_marker(path: Path, text: str) -> str | None:
    """The marker a server logging into ``path`` returned, when ``text`` names it (else None)."""
    return next((m for m in markers(path) if m in text), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(log: Path, server: Path = METRICS_SERVER) -> Iterator[str]:
    """Run the server on a free port until it accepts connections; yield its /mcp URL; kill it after."""
    port = free_port()
    env = {**os.environ, LOG_ENV: str(log)}
    # the server's stderr goes to a file: a pipe nobody reads would block it once full
    errfile = log.with_name(log.name + f".{port}.stderr")
    with errfile.open("w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            [sys.executable, str(server), "--http", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=err
        )
    try:
        deadline = time.monotonic() + 60  # a guard against hanging, not an assertion on speed
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"test MCP server exited: {errfile.read_text(encoding='utf-8')[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("test MCP server did not start listening") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
