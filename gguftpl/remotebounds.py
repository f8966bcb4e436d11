"""Bounds on every remote operation: an overall deadline, and the largest body a download may have.

huggingface_hub's HTTP client has no timeout of its own (``timeout=None``) and httpx's timeouts are per
socket operation: a server that answers one byte per second keeps a header read alive for hours, and a
500 MB ``tokenizer_config.json`` is downloaded whole. Each remote operation of gguftpl (reading a header,
listing a repo, fetching an upstream's files) runs inside :func:`bounded`, which

- gives every request of the operation at most the time left (connect, read, write and pool timeouts), and
  checks the deadline again at every chunk of every body, so a trickle ends at the deadline too;
- refuses a body larger than the operation allows (``max_bytes(url)``) from its headers (``Content-Length``,
  or the Hub's ``X-Linked-Size`` on a HEAD or a redirect) before any byte of it is read, and stops a body
  that runs past it anyway.

The checks are httpx event hooks on huggingface_hub's shared session (its request and response hooks are
public), added once and idle when no operation is running. A request made in the thread that runs an
operation obeys that operation's bounds only, so operations run side by side (a survey's repos) do not end
each other; a request from any other thread (huggingface_hub downloads a snapshot's files in its own worker
threads) obeys the earliest deadline and the smallest size bound of every operation in progress.

The deadline is ``limits.REMOTE_DEADLINE``, or ``GGUFTPL_REMOTE_TIMEOUT`` (seconds) when set.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from gguftpl import limits
from gguftpl.errors import HubError, UsageError

__all__ = [
    "DEADLINE_ENV",
    "Bounds",
    "RemoteCancelled",
    "RemoteLimitError",
    "bounded",
    "cancelled_by",
    "deadline_seconds",
    "run_bounded",
]

DEADLINE_ENV = "GGUFTPL_REMOTE_TIMEOUT"

MaxBytes = Callable[[str], int | None]
"""``max_bytes(url)``: the largest body allowed from ``url``, or None for no bound."""


class RemoteLimitError(HubError):
    """A remote operation ran past its deadline, or a server offered a body larger than allowed."""

    def __init__(self, message: str, *, deadline: bool = False) -> None:
        super().__init__(message)
        self.deadline = deadline
        """True for the deadline, False for a size bound."""


class RemoteCancelled(HubError):
    """The caller stopped waiting for a remote operation (``cancelled_by``): a Ctrl-C, not the server's fault."""


_local = threading.local()


@contextmanager
def cancelled_by(event: threading.Event) -> Iterator[None]:
    """Operations of :func:`run_bounded` in this thread stop being waited for once ``event`` is set: a survey's
    Ctrl-C no longer waits out a stuck listing's deadline (300 s by default). The operation's own thread is left
    to end with its connection, as at the deadline; the wait raises :class:`RemoteCancelled`."""
    before = getattr(_local, "cancel", None)
    _local.cancel = event
    try:
        yield
    finally:
        _local.cancel = before


def _wait(done: threading.Event, seconds: float, cancel: threading.Event | None) -> bool:
    """``done.wait(seconds)``, ended early (False) once ``cancel`` is set."""
    if cancel is None:
        return done.wait(seconds)
    end = time.monotonic() + seconds
    while not cancel.is_set():
        left = end - time.monotonic()
        if left <= 0:
            return False
        if done.wait(min(left, 0.1)):
            return True
    return done.is_set()


def deadline_seconds() -> float:
    """The overall deadline of one remote operation: ``GGUFTPL_REMOTE_TIMEOUT`` when set, else the bound."""
    raw = os.environ.get(DEADLINE_ENV, "").strip()
    if not raw:
        return float(limits.REMOTE_DEADLINE)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise UsageError(f"{DEADLINE_ENV}={raw!r}: expected a number of seconds greater than 0")
    return seconds


@dataclass(eq=False)
class Bounds:
    """One remote operation in progress."""

    what: str
    """What is being done, for messages: ``reading hf://ORG/REPO/FILE.gguf``."""
    seconds: float
    deadline: float
    """``time.monotonic()`` value after which every request of the operation fails."""
    max_bytes: MaxBytes | None = None
    thread: int = 0
    """``threading.get_ident()`` of the thread that runs the operation."""

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def expired(self) -> bool:
        return self.left() <= 0

    def deadline_error(self) -> RemoteLimitError:
        return RemoteLimitError(
            f"{self.what}: gave up after {self.seconds:g} s, the deadline of one remote operation "
            f"(set {DEADLINE_ENV}=SECONDS to change it)",
            deadline=True,
        )


_lock = threading.Lock()
_active: list[Bounds] = []


@contextmanager
def bounded(what: str, *, seconds: float | None = None, max_bytes: MaxBytes | None = None) -> Iterator[Bounds]:
    """Run one remote operation within its deadline (and size bounds). An error that ends the operation after
    its deadline passed is reported as the deadline (a timeout deep inside huggingface_hub, a retry given up)."""
    secs = deadline_seconds() if seconds is None else seconds
    bounds = Bounds(what, secs, time.monotonic() + secs, max_bytes, threading.get_ident())
    _install()
    with _lock:
        _active.append(bounds)
    try:
        yield bounds
    except RemoteLimitError:
        raise
    except Exception:
        if bounds.expired():
            raise bounds.deadline_error() from None
        raise
    finally:
        with _lock:
            if bounds in _active:  # run_bounded may have let it go already
                _active.remove(bounds)


T = TypeVar("T")

_GRACE = 2.0
"""Seconds past the deadline the operation's thread gets to end with its own, more precise error."""


def run_bounded(what: str, fn: Callable[[], T], *, max_bytes: MaxBytes | None = None) -> T:
    """``fn()``, one remote operation, under :func:`bounded`, in a thread the caller stops waiting for at the
    deadline. The hooks see a request start and its body arrive, not its status line and headers: a server
    that drips those would hold a read past any deadline. Left behind, that thread ends with its connection
    (its bounds no longer count for anyone else's requests)."""
    secs = deadline_seconds()
    box: dict[str, Any] = {}
    done = threading.Event()
    started: list[Bounds] = []

    def work() -> None:
        try:
            with bounded(what, seconds=secs, max_bytes=max_bytes) as b:
                started.append(b)
                box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    cancel = getattr(_local, "cancel", None)
    threading.Thread(target=work, name="gguftpl-remote", daemon=True).start()
    if not _wait(done, secs + _GRACE, cancel):
        with _lock:
            for b in started:
                if b in _active:
                    _active.remove(b)
        if cancel is not None and cancel.is_set():
            raise RemoteCancelled(f"{what}: interrupted")
        raise Bounds(what, secs, 0.0).deadline_error()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def _current() -> tuple[Bounds | None, list[Bounds]]:
    with _lock:
        active = list(_active)
    me = threading.get_ident()
    own = [b for b in active if b.thread == me]
    active = own or active
    return (min(active, key=lambda b: b.deadline) if active else None), active


def _cap(active: list[Bounds], url: str) -> tuple[int, Bounds] | None:
    caps = [(c, b) for b in active if b.max_bytes is not None for c in [b.max_bytes(url)] if c is not None]
    return min(caps, key=lambda cb: cb[0]) if caps else None


# --------------------------------------------------------------------------------------------- the hooks


def _on_request(request: Any) -> None:
    first, _ = _current()
    if first is None:
        return
    left = first.left()
    if left <= 0:
        raise first.deadline_error()
    asked = request.extensions.get("timeout") or {}
    request.extensions["timeout"] = {
        k: left if asked.get(k) is None else min(float(asked[k]), left) for k in ("connect", "read", "write", "pool")
    }


def _on_response(response: Any) -> None:
    first, active = _current()
    if first is None:
        return
    url = str(response.request.url)
    cap = _cap(active, url)
    if cap is not None:
        limit, owner = cap
        size = _size(response)
        if size is not None and size > limit:
            name = url.split("?", 1)[0].rsplit("/", 1)[-1]
            raise RemoteLimitError(
                f"{owner.what}: {name} is {size:,} bytes, over the {limit:,}-byte bound for such a file; not downloaded"
            )
    response.stream = _checked_stream(response, url, cap)


def _size(response: Any) -> int | None:
    """The size of the file behind the answer: the Hub's ``X-Linked-Size`` (LFS files, on a HEAD or a
    redirect), else the ``Content-Length`` of a successful answer."""
    headers = response.headers
    for name, ok in (("X-Linked-Size", True), ("Content-Length", 200 <= response.status_code < 300)):
        value = headers.get(name)
        if value is not None and ok:
            try:
                return int(value)
            except ValueError:
                continue
    return None


_STREAM_TYPES: dict[str, type] = {}


def _checked_stream(response: Any, url: str, cap: tuple[int, Bounds] | None) -> Any:
    """The response body, checked at every chunk against the deadline and the size bound."""
    package = type(response).__module__.split(".")[0]  # httpx (huggingface_hub 1.x) or httpx2 (2.x)
    cls = _STREAM_TYPES.get(package)
    if cls is None:
        base = importlib.import_module(package).SyncByteStream

        class _Checked(base):  # type: ignore[misc, valid-type]
            def __init__(self, inner: Any, check: Callable[[int], None]) -> None:
                self._inner = inner
                self._check = check

            def __iter__(self) -> Iterator[bytes]:
                for chunk in self._inner:
                    self._check(len(chunk))
                    yield chunk

            def close(self) -> None:
                self._inner.close()

        cls = _STREAM_TYPES[package] = _Checked
    seen = [0]

    def check(n: int) -> None:
        seen[0] += n
        first, _ = _current()
        if first is not None and first.expired():
            raise first.deadline_error()
        if cap is not None and seen[0] > cap[0]:
            name = url.split("?", 1)[0].rsplit("/", 1)[-1]
            raise RemoteLimitError(
                f"{cap[1].what}: {name} sent more than {cap[0]:,} bytes, the bound for such a file; stopped"
            )

    return cls(response.stream, check)


_installed: set[int] = set()


def _install() -> None:
    """Add the hooks to huggingface_hub's shared session (once per session object: it may be recreated)."""
    from huggingface_hub.utils import get_session

    session = get_session()
    if id(session) in _installed and _on_request in session.event_hooks.get("request", ()):
        return
    with _lock:
        hooks = session.event_hooks
        if _on_request not in hooks.get("request", ()):
            session.event_hooks = {
                "request": [*hooks.get("request", ()), _on_request],
                "response": [*hooks.get("response", ()), _on_response],
            }
        _installed.add(id(session))
