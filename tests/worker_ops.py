"""Ops the worker tests run in a child process (imported there by name)."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from typing import Any


def echo(item: Any) -> Any:
    return item


def nap(item: dict[str, Any]) -> str:
    time.sleep(float(item["seconds"]))
    return "awake"


def crash(item: Any) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def leave(item: Any) -> None:
    os._exit(3)


def fail(item: Any) -> None:
    raise ValueError(f"no good: {item}")


def grow(item: dict[str, Any]) -> int:
    block = bytearray(int(item["mib"]) << 20)
    for i in range(0, len(block), 4096):  # touched, so it counts in the peak
        block[i] = 1
    return len(block)


def make_temp(item: Any) -> str:
    fd, path = tempfile.mkstemp(prefix="left-behind-")
    os.close(fd)
    return path


def surrogate(item: Any) -> str:
    return "\ud800"


def broken_setup() -> None:
    raise RuntimeError("cannot import the engine")


def spin(item: dict[str, Any]) -> None:
    """Say it started (its pid in ``item["pidfile"]``), then loop for ever: a render that never ends."""
    with open(item["pidfile"], "w") as f:
        f.write(str(os.getpid()))
    while True:
        pass
