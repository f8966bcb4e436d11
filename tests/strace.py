"""A real command under ``strace -f`` (tests only): which processes it starts and which files it opens, read from
the kernel's own record of its system calls, not from the code's word for it."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

_EXEC = re.compile(r'^(\d+)\s+execve\("([^"]*)"')
_OPEN = re.compile(r'^\d+\s+(?:open|openat|openat2|creat)\((?:AT_FDCWD|\d+), "([^"]*)"|^\d+\s+open\("([^"]*)"')
_CLONE = re.compile(r"^\d+\s+(?:clone3?|fork|vfork)\((.*)")


@dataclass
class Trace:
    result: subprocess.CompletedProcess[str]
    execs: list[str]
    """Every program executed, the traced command first."""
    processes: int
    """Child processes started (forks and clones that are not threads)."""
    opened: list[str]
    """Every path passed to open/openat, in order."""


def strace(cmd: list[str], log: Path, **kw: object) -> Trace:
    """Run ``cmd`` under ``strace -f`` (skipped where there is no strace) and read what it did."""
    tool = shutil.which("strace")
    if tool is None:
        pytest.skip("strace is not installed")
    calls = "execve,clone,clone3,fork,vfork,open,openat,openat2,creat"
    wrapped = [tool, "-f", "-qq", "-s", "4096", "-e", f"trace={calls}", "-o", str(log), *cmd]
    r = subprocess.run(wrapped, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    execs, opened, processes = [], [], 0
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if m := _EXEC.match(line):
            execs.append(m.group(2))
        elif m := _OPEN.match(line):
            opened.append(m.group(1) or m.group(2))
        elif (m := _CLONE.match(line)) and "CLONE_THREAD" not in m.group(1):
            processes += 1
    return Trace(r, execs, processes, opened)
