"""Ctrl-C and SIGTERM end the command with one line and the shell's exit code, from the first moment
gguftpl's own code runs (``gguftpl.__main__`` installs the handlers before it imports click or anything
heavy), never with a traceback.

SIGINT raises KeyboardInterrupt and SIGTERM raises :class:`Terminated` (a KeyboardInterrupt), so every
``with`` and ``finally`` runs: the worker processes are stopped and a half-written output is removed. The
CLI turns either into ``gguftpl: interrupted`` (exit 130) or ``gguftpl: terminated`` (exit 143).

Two things a Python-level handler cannot do alone, done here:

* A second signal while the first is unwinding, or one after the command has finished, would raise inside
  cleanup code and print a traceback; it ends the process at once instead, with the same line.
* A handler runs only between bytecodes of the main thread: a main thread waiting in a C call that does not
  return (a library call that releases the GIL), or cleanup that hangs, would ignore SIGTERM. The C handler
  also writes the signal's number to a pipe (``signal.set_wakeup_fd``); a watchdog thread reading it ends
  the process ``limits.INTERRUPT_GRACE`` seconds later if it is still running. (C code that holds the GIL
  starves every thread: that is why no template is ever compiled in this process, see issue 14's 15 GB
  string that ignored SIGTERM for 75 s.)
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any, NoReturn

from gguftpl import limits

INTERRUPTED = 130
"""Exit status after SIGINT (128 + 2), as a shell reports a process killed by it."""
TERMINATED = 143
"""Exit status after SIGTERM (128 + 15)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (`timeout`, a CI job cancelled), raised like a Ctrl-C so every `with` and `finally` runs: killed
    outright, verify left its stand-in model behind in the temp folder."""


def outcome(exc: BaseException) -> tuple[int, str]:
    """The exit status and the one line for an interrupt."""
    if isinstance(exc, Terminated):
        return TERMINATED, "gguftpl: terminated"
    return INTERRUPTED, "gguftpl: interrupted"


def _outcome_of(signum: int) -> tuple[int, str]:
    return outcome(Terminated() if signum == signal.SIGTERM else KeyboardInterrupt())


class _State:
    installed = False
    raised = False
    """A signal has been turned into an exception: the next one ends the process at once."""
    reported = False
    """The line has been written."""


def install() -> None:
    """Turn SIGINT and SIGTERM into exceptions and start the watchdog. Main thread only (elsewhere a no-op:
    Python runs handlers in the main thread); idempotent."""
    if _State.installed or threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    # a mask inherited blocked (a parent's thread that blocks them, as test runners' can) would hold them pending
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    _State.installed = True
    _start_watchdog()


def report(exc: BaseException) -> int:
    """Write the interrupt's line once; its exit status. From here on a further signal ends the process at
    once (cleanup that follows must not print a traceback)."""
    code, line = outcome(exc)
    _State.raised = True
    _write_line(line)
    return code


def wrapped_interrupt(exc: BaseException) -> KeyboardInterrupt | None:
    """The interrupt behind ``exc`` when Python re-raised it as another error: a signal that lands while a class
    is being built (a dataclass field's ``__set_name__``, Python 3.11) comes out as RuntimeError from it."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


def finished() -> None:
    """The command is done (its output written): a signal from now on ends the process at once, with its line,
    instead of raising inside exit-time cleanup."""
    _State.raised = True


def _on_signal(signum: int, frame: Any) -> None:
    if _State.raised:
        _exit_now(signum)
    _State.raised = True
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def _write_line(line: str) -> None:
    if _State.reported:
        return
    _State.reported = True
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - a closed or broken stdout must not stop the message
        pass
    try:
        os.write(2, (line + "\n").encode())
    except OSError:
        pass


def _exit_now(signum: int) -> NoReturn:
    code, line = _outcome_of(signum)
    _write_line(line)
    os._exit(code)


def _start_watchdog() -> None:
    try:
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (OSError, ValueError):  # no pipes, or not the main thread: the Python handlers alone
        return
    threading.Thread(target=_watch, args=(r,), name="gguftpl-signals", daemon=True).start()


def _watch(fd: int) -> None:
    """Wait for SIGINT/SIGTERM; if the process still runs ``limits.INTERRUPT_GRACE`` seconds later (its main
    thread stuck in C code, or cleanup that hangs), end it."""
    import time

    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        wanted = [n for n in data if n in (signal.SIGINT, signal.SIGTERM)]
        if wanted:
            time.sleep(limits.INTERRUPT_GRACE)
            _exit_now(wanted[0])
