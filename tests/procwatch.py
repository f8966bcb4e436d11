"""Run gguftpl in a real process and watch it: peak memory of the process itself and of its children, the
signals it catches, its children. For the attack tests (issue 14), which must show the main process stays
small while a hostile template is dealt with elsewhere.

Peak memory is the kernel's own high-water mark (``VmHWM``), sampled until the process exits. A process that
grows past ``kill_above`` bytes is killed with its whole group, so a regression fails its test instead of
taking the machine's memory; the timeout is a safety net only (the tool bounds itself long before).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

SAFETY_TIMEOUT = 600.0
GGUFTPL = [sys.executable, "-m", "gguftpl"]


@dataclass
class Watched:
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    peak_main: int
    """Bytes: the largest resident size the main process reached (VmHWM)."""
    peak_child: int
    """Bytes: the largest resident size any child reached (its own VmHWM)."""
    killed: str | None = None
    """Why the watcher killed it (``memory``, ``timeout``), or None."""
    children: set[int] = field(default_factory=set)

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def status_field(pid: int, name: str) -> str | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def kib(pid: int, name: str) -> int:
    value = status_field(pid, name)
    return int(value.split()[0]) * 1024 if value else 0


def children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def catches(pid: int, signum: int) -> bool:
    """Whether ``pid`` has a handler installed for ``signum`` (``SigCgt`` in /proc)."""
    mask = status_field(pid, "SigCgt")
    return mask is not None and bool(int(mask, 16) & (1 << (signum - 1)))


def gone(pid: int) -> bool:
    """Exited (a zombie nobody reaps yet counts as gone)."""
    state = status_field(pid, "State")
    return state is None or state.startswith("Z")


def start(args: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        start_new_session=True,  # its own group: the watcher can kill it with its children
    )


def watch(proc: subprocess.Popen[str], *, kill_above: int = 3 << 30, timeout: float = SAFETY_TIMEOUT) -> Watched:
    """Sample ``proc`` until it exits; see the module docstring."""
    t0 = time.monotonic()
    out: dict[str, str] = {}
    readers = [
        threading.Thread(target=lambda n=n, s=s: out.__setitem__(n, s.read()))
        for n, s in (("stdout", proc.stdout), ("stderr", proc.stderr))
    ]
    for r in readers:
        r.start()
    peak_main = peak_child = 0
    seen: set[int] = set()
    killed = None
    while proc.poll() is None:
        peak_main = max(peak_main, kib(proc.pid, "VmHWM"))
        for child in children(proc.pid):
            seen.add(child)
            peak_child = max(peak_child, kib(child, "VmHWM"))
        if killed is None and (peak_main > kill_above or time.monotonic() - t0 > timeout):
            killed = "memory" if peak_main > kill_above else "timeout"
            os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.02)
    for r in readers:
        r.join()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return Watched(
        proc.returncode,
        out.get("stdout", ""),
        out.get("stderr", ""),
        time.monotonic() - t0,
        peak_main,
        peak_child,
        killed,
        seen,
    )


def run_watched(*args: str | os.PathLike[str], **kw: object) -> Watched:
    """``python -m gguftpl ARGS`` watched to its end."""
    env, cwd = kw.pop("env", None), kw.pop("cwd", None)
    return watch(start([*GGUFTPL, *map(str, args)], env=env, cwd=cwd), **kw)  # type: ignore[arg-type]
