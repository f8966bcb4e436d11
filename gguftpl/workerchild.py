"""The Python side of a :mod:`gguftpl.worker` child: what runs inside the process that renders untrusted
templates. It imports only what its ops need (not the parent's machinery), caps its own address space after
setup, answers one frame per item and ends with its parent. The frame format is defined here, once, for the
parent and every child.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

OK = "ok"
MEMORY = "memory"
"""The op raised MemoryError under the address-space cap, or grew the child's peak memory past the op's
``peak_growth_limit`` (the child then ends itself and the next item gets a fresh one)."""
ERROR = "error"
"""The op raised (``Outcome.error_type``), or the request or answer was not JSON data; the child lives on."""


def encode(obj: Any) -> bytes:
    """One frame: a 4-byte big-endian length, then UTF-8 JSON."""
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    return struct.pack(">I", len(data)) + data


def _read_frame(stream: Any) -> Any:
    head = stream.read(4)
    if len(head) < 4:
        raise EOFError
    (n,) = struct.unpack(">I", head)
    data = stream.read(n)
    if len(data) < n:
        raise EOFError
    return json.loads(data.decode("utf-8"))


def cap_address_space(headroom: int) -> None:
    """Let this process grow by at most ``headroom`` bytes of address space from where it stands now (Linux
    RLIMIT_AS, never above an existing hard limit): a worker that renders an untrusted template fails an
    allocation instead of taking the machine's memory. Elsewhere a no-op: the caller's time bound still holds."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            current = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        want = current + headroom if hard == resource.RLIM_INFINITY else min(current + headroom, hard)
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    except (OSError, ValueError, ImportError):
        pass


def _resolve(target: str) -> Callable[..., Any]:
    import importlib

    module, _, name = target.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


def _peak_rss() -> int:
    """This process's own peak resident memory. Not getrusage's ru_maxrss: Linux carries the parent's peak
    across fork and exec into it, so a child of a 600 MB process could grow by 500 MB unseen."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _answer(fn: Callable[[Any], Any], peak_limit: int | None, item: Any) -> dict[str, Any]:
    before = _peak_rss() if peak_limit is not None else 0
    try:
        value = fn(item)
    except MemoryError:
        return {"kind": MEMORY, "type": "MemoryError", "message": "out of memory"}
    except Exception as exc:  # noqa: BLE001 - the op's failure is the caller's answer, not the child's end
        return {"kind": ERROR, "type": type(exc).__name__, "message": str(exc)[:2000]}
    if peak_limit is not None and _peak_rss() - before > peak_limit:
        # the peak stays where it is: only a fresh child can measure the next item
        return {"kind": MEMORY, "message": f"grew by more than {peak_limit >> 20} MiB", "exit": True}
    return {"kind": OK, "value": value}


def main() -> None:
    """The child: ``argv[1]`` is its configuration (ops, setup, headroom); frames on stdin, answers on a copy
    of the original stdout. Ends when stdin closes (the parent finished or died)."""
    config = json.loads(sys.argv[1])
    private = config.get("private_tmp")
    _die_with_parent(private)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer
    try:
        for target in config["setup"]:
            _resolve(target)()
        ops = {name: (_resolve(target), peak) for name, (target, peak) in config["ops"].items()}
    except Exception as exc:  # noqa: BLE001 - reported as the start's failure rather than a silent death
        _write(out, {"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    if config["headroom"] is not None:
        cap_address_space(int(config["headroom"]))
    _write(out, {"ready": True})
    while True:
        try:
            req = _read_frame(inp)
        except EOFError:  # the parent closed the pipe or died: a dead parent removes nothing
            _remove_private(private)
            return
        fn, peak = ops.get(req.get("op"), (None, None))
        for item in req.get("items", []):
            if fn is None:
                answer: dict[str, Any] = {"kind": ERROR, "message": f"unknown op {req.get('op')!r}"}
            else:
                answer = _answer(fn, peak, item)
            _write(out, answer)
            if answer.get("exit"):
                return


PARENT_POLL = 0.25
"""Seconds between a worker's looks at whether its parent still lives."""


def _remove_private(folder: str | None) -> None:
    """Remove this child's private TMPDIR (the parent removes it too when it can: whoever is last wins)."""
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def _die_with_parent(private: str | None = None) -> None:
    """End this child when its parent dies. A parent killed outright (SIGKILL, the OOM killer) runs no
    cleanup: an idle child ends at the EOF on its stdin, but one busy rendering a template that loops for
    ever would run on for hours. A thread notices the new parent (init or a subreaper) and exits; it gets the
    GIL within milliseconds of a Python-level loop, and C code that holds the GIL is bounded by the memory cap."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL)
        _remove_private(private)  # a parent killed outright left its folder to us (stand-ins of 300 KB each)
        os._exit(1)

    threading.Thread(target=watch, name="gguftpl-parent-watch", daemon=True).start()


def _write(out: Any, answer: dict[str, Any]) -> None:
    try:
        data = encode(answer)
    except (TypeError, ValueError) as exc:  # an answer that is no JSON data (a lone surrogate in a string)
        data = encode({"kind": ERROR, "type": type(exc).__name__, "message": f"unserialisable answer: {exc}"})
    out.write(data)
    out.flush()
