"""The one place gguftpl starts child processes: persistent workers bounded in time and memory.

Untrusted templates are rendered (jinja2 under transformers) and loaded (llama.cpp) in child processes: a
template can loop for ever, print gigabytes, take the machine's memory or overflow the C stack, and none of
that may reach the caller. A :class:`Worker` runs one persistent child that imports what its ops need once
(``setup``), caps its own address space after those imports, and then answers requests. A request names an
op and carries a batch of items; the child streams one answer per item, each under its own time limit, so
the parent knows which item overran. Whatever goes wrong is an :class:`Outcome` the caller reads (``kind``
and ``message``), never an exception or a hang: the child is killed, and the next request starts a fresh one.

Protocol: length-framed JSON (4-byte big-endian length, then UTF-8 JSON) on the child's stdin and on a copy of
its stdout; the child's own fd 1 points at stderr (discarded), so what a library prints never enters it.
One worker may serve several ops (``WorkerSpec.ops``): a single warm child can render with jinja2 and load
templates into llama.cpp alike.

A child need not be Python: ``WorkerSpec.command`` starts any program that speaks the same frames (the Node.js
worker of ``@huggingface/jinja``, the Go worker of Ollama's templates). It writes ``{"ready": true}`` first and then
one ``{"kind": "ok", "value": ...}`` or ``{"kind": "error", "message": ...}`` frame per item; its memory is capped
from outside (``WorkerSpec.data_limit``, RLIMIT_DATA, which Node's and Go's large address-space reservations do not
count against) and its time by the parent, as for a Python child.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gguftpl.workerchild import ERROR, MEMORY, OK, encode

TIMEOUT = "timeout"
"""The item took longer than its time limit: the child was killed."""
CRASHED = "crashed"
"""The child died from a signal (``Outcome.signal``: ``SIGSEGV``, ``SIGKILL`` from the OOM killer, ...)."""
EXITED = "exited"
"""The child exited (``Outcome.exit_code``) before answering."""
GARBAGE = "garbage"
"""The child wrote something that is not a frame of JSON: it was killed."""
START = "start"
"""The child did not start: its setup failed, it died, or it was not ready within ``startup_timeout``."""
SKIPPED = "skipped"
"""Not run: an earlier item of the batch overran and the caller asked to skip the rest."""

_MAX_FRAME = 256 << 20
"""A length past this is garbage, not a frame (renders are capped at a few MB)."""
_FAILED_CHILD = (TIMEOUT, CRASHED, EXITED, GARBAGE, START)


@dataclass(frozen=True)
class Op:
    """One kind of request a worker answers."""

    target: str
    """``module:function`` run in the child with one item (JSON data); returns the answer (JSON data)."""
    peak_growth_limit: int | None = None
    """Bytes the child's peak memory may grow by while answering one item: past it the answer is ``memory``
    and the child ends itself. For code that swallows a failed allocation under the cap and goes on (llama.cpp
    loads a template whose load-time render hit std::bad_alloc)."""


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker runs and how it is bounded."""

    name: str
    """How messages name it, e.g. ``render worker``."""
    ops: Mapping[str, Op]
    setup: tuple[str, ...] = ()
    """``module:function`` callables run once in the child before the cap: imports that count as its start,
    not as growth. One that raises makes the start fail with its message."""
    memory_headroom: int | None = None
    """Bytes of address space the child may grow by after ``setup`` (:func:`gguftpl.workerchild.cap_address_space`)."""
    startup_timeout: float = 120.0
    """Seconds the child may take to import and run ``setup`` (slow on a busy 2-core machine)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Added to this process's environment for the child."""
    private_tmp: str | None = None
    """Prefix of a private TMPDIR for the child, removed whenever the child exits or is killed: a killed child
    cannot remove its own temporary files."""
    exit_grace: float = 0.0
    """Seconds :meth:`Worker.close` lets the child end on its own (stdin closed) before killing it."""
    command: tuple[str, ...] | None = None
    """A program that is not gguftpl's Python child but speaks its frames (see the module docs); ``ops`` then only
    name the requests it accepts and ``setup``/``memory_headroom`` are not used."""
    data_limit: int | None = None
    """Bytes of writable private memory (RLIMIT_DATA) a :attr:`command` child may hold, set as it starts."""


@dataclass(frozen=True)
class Outcome:
    """The answer to one item: ``kind`` is :data:`OK` with ``value``, or one of the failure kinds above."""

    kind: str
    value: Any = None
    message: str = ""
    error_type: str | None = None
    """The exception type for :data:`ERROR` and a MemoryError."""
    signal: str | None = None
    """:data:`CRASHED`: the signal's name."""
    exit_code: int | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.kind == OK


@dataclass
class WorkerStats:
    requests: int = 0
    """Items answered (failures included)."""
    restarts: int = 0
    """Children stopped because one overran, crashed or ended itself."""
    seconds: float = 0.0


class Worker:
    """One persistent child process for ``spec``, started on first use (or :meth:`prestart`), restarted after
    a failure, closed by :meth:`close`. Thread-safe: one request at a time."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.stats = WorkerStats()
        self._proc: Any = None
        self._ready = False
        self._buf = bytearray()
        self._tmp: str | None = None
        self._lock = threading.Lock()
        self._start_error = ""

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def prestart(self) -> None:
        """Start the child now without waiting for it, so its imports overlap the caller's own work."""
        with self._lock:
            if not self._alive():
                self._spawn()

    def ask(self, op: str, item: Any, timeout: float) -> Outcome:
        """One item; see :meth:`ask_many`."""
        return self.ask_many(op, [item], timeout)[0]

    def ask_many(self, op: str, items: Sequence[Any], timeout: float, *, skip_rest: bool = False) -> list[Outcome]:
        """One outcome per item, in order, each item under ``timeout`` seconds (counted from the previous
        answer). After an item that cost the child, the rest go to a fresh one, or with ``skip_rest`` are
        :data:`SKIPPED`. A Ctrl-C while waiting kills the child and is raised."""
        with self._lock:
            out: list[Outcome] = []
            try:
                while len(out) < len(items):
                    done = self._batch(op, items[len(out) :], timeout)
                    out.extend(done)
                    if done[-1].kind in (START, ERROR) and len(out) < len(items):
                        # it would not start for the next item either; or the request was no JSON data
                        out.extend([done[-1]] * (len(items) - len(out)))
                    elif skip_rest:
                        out.extend(Outcome(SKIPPED, message="an earlier item overran") for _ in items[len(out) :])
            except BaseException:
                self._stop(count=False)
                raise
            return out

    def close(self) -> None:
        """End the child (given ``exit_grace`` seconds to exit on its own) and remove its private folder.
        Never raises: a Ctrl-C meanwhile only makes the kill immediate."""
        proc, self._proc = self._proc, None
        self._ready = False
        try:
            if proc is not None and proc.poll() is None and self.spec.exit_grace > 0:
                try:
                    proc.stdin.close()  # the child's loop ends on EOF
                    proc.wait(timeout=self.spec.exit_grace)
                except BaseException:  # noqa: BLE001 - at exit, anything (a Ctrl-C): kill below, no traceback
                    pass
        finally:
            if proc is not None:
                _reap(proc)
            self._remove_tmp()

    # ---------------------------------------------------------------------------------------------- parent

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _spawn(self) -> None:
        import subprocess

        self._stop(count=self._proc is not None)  # a child that died since the last request
        env = {**os.environ, **self.spec.env}
        if self.spec.private_tmp is not None:
            self._tmp = tempfile.mkdtemp(prefix=self.spec.private_tmp)
            env["TMPDIR"] = self._tmp
        config = {
            "ops": {name: [o.target, o.peak_growth_limit] for name, o in self.spec.ops.items()},
            "setup": list(self.spec.setup),
            "headroom": self.spec.memory_headroom,
            "private_tmp": self._tmp,
        }
        argv = (
            list(self.spec.command)
            if self.spec.command is not None
            else [sys.executable, *_CHILD_FLAGS, "-c", _child_code(), json.dumps(config)]
        )
        try:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
            )
        except OSError as exc:  # a foreign program missing or not executable: the start's failure, read below
            self._proc = None
            self._start_error = f"{argv[0]}: {exc.strerror or exc}"
            self._remove_tmp()
            return
        if self.spec.data_limit is not None:
            _limit_data(self._proc.pid, self.spec.data_limit)
        os.set_blocking(self._proc.stdin.fileno(), False)  # requests are written under the time limit too
        self._buf = bytearray()
        self._ready = False

    def _stop(self, *, count: bool) -> None:
        """Kill and reap the child (if any) and remove its folder; ``count`` it as a restart."""
        proc, self._proc = self._proc, None
        self._ready = False
        if proc is not None:
            _reap(proc)
            if count:
                self.stats.restarts += 1
        self._remove_tmp()

    def _remove_tmp(self) -> None:
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    def _ensure_ready(self) -> Outcome | None:
        """None when a child is up and ready; else the :data:`START` outcome (the child is gone)."""
        if not self._alive():
            self._start_error = ""
            self._spawn()
        if self._proc is None:
            return Outcome(START, message=f"the {self.spec.name} did not start: {self._start_error}")
        if self._ready:
            return None
        frame, failure = self._read(time.monotonic() + self.spec.startup_timeout)
        if isinstance(frame, dict) and frame.get("ready") is True:
            self._ready = True
            return None
        if isinstance(frame, dict) and frame.get("error"):
            why = str(frame["error"])
        elif failure is not None and failure.kind == TIMEOUT:
            why = f"not ready within {self.spec.startup_timeout:g} s"
        else:
            why = failure.message if failure is not None else "it answered garbage"
        self._stop(count=False)
        return Outcome(START, message=f"the {self.spec.name} did not start: {why}")

    def _batch(self, op: str, items: Sequence[Any], timeout: float) -> list[Outcome]:
        """Send ``items`` and read answers until all came or one failed (the last outcome then)."""
        not_started = self._ensure_ready()
        if not_started is not None:
            return [not_started]
        try:
            data = encode({"op": op, "items": list(items)})
        except (TypeError, ValueError) as exc:
            return [Outcome(ERROR, message=f"the request is not JSON data: {exc}", error_type=type(exc).__name__)]
        not_taken = self._send(data, time.monotonic() + timeout)
        if not_taken is not None:
            self.stats.requests += 1
            return [not_taken]
        out: list[Outcome] = []
        for _ in items:
            t0 = time.monotonic()
            frame, failure = self._read(t0 + timeout)
            outcome = failure or _outcome(frame)
            outcome = dataclasses.replace(outcome, seconds=time.monotonic() - t0)
            self.stats.requests += 1
            self.stats.seconds += outcome.seconds
            out.append(outcome)
            if outcome.kind in _FAILED_CHILD:
                return out
            if isinstance(frame, dict) and frame.get("exit"):
                self._stop(count=True)  # it ends itself: the next item gets a fresh child
                return out
        return out

    def _send(self, data: bytes, deadline: float) -> Outcome | None:
        """Write a request; a child that does not take it in time (stopped, stuck) is a :data:`TIMEOUT`."""
        import select

        fd = self._proc.stdin.fileno()
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                return self._fail(Outcome(TIMEOUT, message=f"the {self.spec.name} did not take the request in time"))
            _, ready, _ = select.select([], [fd], [], left)
            if ready:
                try:
                    view = view[os.write(fd, view[: 1 << 16]) :]
                except BlockingIOError:
                    continue
                except OSError:
                    return None  # a dead child: the read that follows sees the end of its output
        return None

    def _read(self, deadline: float) -> tuple[Any, Outcome | None]:
        """The next frame, or a failure outcome (the child is then stopped and counted as a restart)."""
        import select

        fd = self._proc.stdout.fileno()
        while True:
            if len(self._buf) >= 4:
                (n,) = struct.unpack(">I", self._buf[:4])
                if n > _MAX_FRAME:
                    return None, self._fail(Outcome(GARBAGE, message=f"the {self.spec.name} answered garbage"))
                if len(self._buf) >= 4 + n:
                    raw = bytes(self._buf[4 : 4 + n])
                    del self._buf[: 4 + n]
                    try:
                        return json.loads(raw.decode("utf-8")), None
                    except ValueError:
                        return None, self._fail(Outcome(GARBAGE, message=f"the {self.spec.name} answered garbage"))
            left = deadline - time.monotonic()
            if left <= 0:
                return None, self._fail(Outcome(TIMEOUT, message=f"the {self.spec.name} did not answer in time"))
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return None, self._fail(self._death())
                self._buf.extend(chunk)

    def _death(self) -> Outcome:
        """Why the child's output ended: the signal that killed it, or its exit status."""
        try:
            code = self._proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - it closed its output but lives on: it is killed below
            code = None
        if code is not None and code < 0:
            name = signal_name(-code)
            return Outcome(CRASHED, message=f"the {self.spec.name} crashed ({name})", signal=name, exit_code=code)
        return Outcome(EXITED, message=f"the {self.spec.name} exited ({code})", exit_code=code)

    def _fail(self, outcome: Outcome) -> Outcome:
        self._stop(count=True)
        return outcome


def _limit_data(pid: int, limit: int) -> None:
    """Cap a just-started child's writable private memory (Linux ``prlimit``); elsewhere the time bound holds."""
    try:
        import resource

        resource.prlimit(pid, resource.RLIMIT_DATA, (limit, limit))
    except (OSError, ValueError, ImportError, AttributeError):
        pass


def _reap(proc: Any) -> None:
    import subprocess

    if proc.poll() is None:
        try:
            proc.kill()
        except OSError:
            # not ours to kill any more (the parent dropped its privileges after starting it): EOF asks it to
            # end, and it dies with its parent in any case; never wait for ever
            with contextlib.suppress(OSError):
                proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        else:
            proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass


def _outcome(frame: Any) -> Outcome:
    if not isinstance(frame, dict) or frame.get("kind") not in (OK, ERROR, MEMORY):
        return Outcome(GARBAGE, message="the worker answered garbage")
    if frame["kind"] == OK:
        return Outcome(OK, value=frame.get("value"))
    return Outcome(frame["kind"], message=str(frame.get("message") or ""), error_type=frame.get("type"))


def signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass(frozen=True)
class Ran:
    """A one-off command's end (:func:`run`)."""

    returncode: int | None
    """None when it was killed at its deadline."""
    output: str
    """Its stdout and stderr together, the last ``keep`` characters."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    keep: int = 4000,
) -> Ran:
    """Run a one-off command (an engine's installer or build) to its end or its deadline, output captured.
    A program that is missing is a returncode of 127 with the reason, not an exception."""
    import subprocess

    full_env = {**os.environ, **(env or {})}
    try:
        done = subprocess.run(
            list(argv),
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.output.decode("utf-8", "replace") if isinstance(exc.output, bytes) else ""
        return Ran(None, (out + f"\n(stopped after {timeout:g} s)")[-keep:])
    except OSError as exc:
        return Ran(127, f"{argv[0]}: {exc.strerror or exc}")
    return Ran(done.returncode, done.stdout.decode("utf-8", "replace")[-keep:])


_CHILD_FLAGS = ("-S",)
"""No ``site``: its ``.pth`` hooks cost ~40 ms per child; the paths it found here are passed instead."""


@functools.lru_cache(maxsize=1)
def _child_code() -> str:
    """The child's program: this process's import path (``site`` ran here; gguftpl, which an editable install finds
    through an import hook, by its folder), never the current folder (a ``jinja2.py`` where gguftpl runs is not
    imported by a child), then the worker loop."""
    import gguftpl

    root = os.path.dirname(os.path.dirname(os.path.abspath(gguftpl.__file__)))
    paths = [root, *(p for p in sys.path if p and os.path.isabs(p) and p != root)]
    return f"import sys; sys.path[:] = {paths!r}; from gguftpl.workerchild import main; main()"


_SHARED: dict[str, Worker] = {}
_SHARED_LOCK = threading.Lock()


def shared(spec: WorkerSpec) -> Worker:
    """This process's one worker for ``spec`` (by name), closed at exit."""
    with _SHARED_LOCK:
        worker = _SHARED.get(spec.name)
        if worker is None:
            import atexit

            worker = _SHARED[spec.name] = Worker(spec)
            atexit.register(worker.close)
        return worker


# ---------------------------------------------------------------------------------------------- framing
