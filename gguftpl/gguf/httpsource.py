"""A GGUF's bytes over HTTP: ``RemoteSource`` serves the header reader from Range requests.

A quant is gigabytes; its header is kilobytes to a few MB (a 262k-token vocabulary is ~15 MB with its
merges). ``RemoteSource`` is a ``ByteSource`` for the header reader that starts with a small range and
grows it only as far as the parser asks, each request sized to the need and growing geometrically (256 KiB,
512 KiB, … capped at 8 MiB per request), so the bytes fetched are the header plus at most one read-ahead
chunk, in a handful of requests.

Requests go through huggingface_hub's HTTP layer (its shared session: proxies, offline switch, request
ids); the caller passes the headers (``gguftpl.hubenv.headers``). A server that ignores ``Range`` answers
200 with the whole file: the body is then streamed and read only as far as the parser needs, and the
connection is closed, so a misbehaving mirror never costs a download.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gguftpl import hubenv, limits
from gguftpl.errors import GGUFFormatError, HubError

__all__ = [
    "DEFAULT_INITIAL_CHUNK",
    "DEFAULT_MAX_CHUNK",
    "MAX_HEADER_BYTES",
    "Describe",
    "RemoteSource",
    "RemoteStats",
    "failed_host",
]

DEFAULT_INITIAL_CHUNK = 256 * 1024
DEFAULT_MAX_CHUNK = 8 * 1024 * 1024
# No real header comes close (262k vocab + merges ~ 16 MB); a hostile length with no known file size
# must not turn a header read into a download (the local reader's bound too).
MAX_HEADER_BYTES = limits.MAX_HEADER_BYTES
_STREAM_READ = 64 * 1024
_RETRY_STATUS = (429, 500, 502, 503, 504)

Describe = Callable[[BaseException, int | None], HubError | None]
"""``describe(exc, status)``: a Hub-aware message for a failed request, or None for the generic one."""


@dataclass
class RemoteStats:
    """What a remote header read cost; ``to_dict()`` is the ``"remote"`` object in JSON reports."""

    url: str
    bytes_fetched: int = 0
    requests: int = 0
    revision: str | None = None
    """Commit sha the Hub resolved the revision to (``X-Repo-Commit``), when it said."""
    etag: str | None = None
    size: int | None = None
    range_ignored: bool = False
    """The server answered 200 with the whole body to a Range request; the stream was cut short."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "bytes_fetched": self.bytes_fetched,
            "requests": self.requests,
            "revision": self.revision,
            "etag": self.etag,
            "size": self.size,
            "range_ignored": self.range_ignored,
        }


def _transport_errors(session: Any) -> tuple[type[BaseException], ...]:
    # huggingface_hub 1.x uses httpx, 2.x httpx2: take the error bases from the session's own module
    try:
        mod = importlib.import_module(type(session).__module__.split(".")[0])
    except ImportError:  # pragma: no cover
        return (OSError,)
    found = tuple(getattr(mod, n) for n in ("TransportError", "StreamError", "DecodingError") if hasattr(mod, n))
    return found + (OSError,)


class RemoteSource:
    """A ``ByteSource`` over HTTP: bytes [0, available) of the file, fetched on demand by Range requests.

    ``pin_url(commit) -> url`` lets a Hub source pin later requests to the commit the first answer named,
    so a push between two range reads cannot mix two files; ``describe(exc, status)`` turns Hub errors
    into messages that name the repo, file and revision.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        headers: dict[str, str] | None = None,
        initial_chunk: int = DEFAULT_INITIAL_CHUNK,
        max_chunk: int = DEFAULT_MAX_CHUNK,
        timeout: float = 60.0,
        retries: int = 2,
        retry_wait: float = 0.5,
        pin_url: Callable[[str], str] | None = None,
        describe: Describe | None = None,
    ) -> None:
        if initial_chunk < 16 or max_chunk < initial_chunk:
            raise ValueError("need 16 <= initial_chunk <= max_chunk")
        self.name = name or url
        self.size: int | None = None
        self.stats = RemoteStats(url=url)
        self._url = url
        self._headers = dict(headers or {})
        self._initial = initial_chunk
        self._max = max_chunk
        self._timeout = timeout
        self._retries = retries
        self._retry_wait = retry_wait
        self._pin_url = pin_url
        self._describe = describe
        self._buf = bytearray()
        self._stream: Any = None  # open 200 response when the server ignored Range
        self._stream_iter: Iterator[bytes] | None = None
        self._stream_pos = 0
        self._closed = False

    # -- ByteSource ---------------------------------------------------------------------------------------
    @property
    def data(self) -> bytearray:
        return self._buf

    @property
    def available(self) -> int:
        return len(self._buf)

    def ensure(self, end: int) -> None:
        avail = len(self._buf)
        if end <= avail:
            return
        if self.size is not None and end > self.size:
            raise GGUFFormatError(f"truncated file: needs {end} bytes, has {self.size}", self.size)
        if end > MAX_HEADER_BYTES:
            raise GGUFFormatError(f"header would be larger than {MAX_HEADER_BYTES} bytes; refusing to fetch it")
        # geometric read-ahead: each request about doubles what we hold, capped per request
        chunk = min(self._max, max(self._initial, avail))
        target = max(end, avail + chunk)
        if self.size is not None:
            target = min(target, self.size)
        self._fetch_to(target, need=end)

    def read_range(self, start: int, end: int) -> bytes:
        if end <= len(self._buf):
            return bytes(self._buf[start:end])
        if start <= len(self._buf) and not self._closed:
            self.ensure(end)
            return bytes(self._buf[start:end])
        return self._get_range(start, end)

    def close(self) -> None:
        self._closed = True
        self._close_stream()

    # -- HTTP ---------------------------------------------------------------------------------------------
    def _session(self) -> Any:
        if hubenv.offline():
            raise HubError(f"{hubenv.OFFLINE_IS_SET}: cannot read {self.name} from the Hub")
        from huggingface_hub.utils import get_session

        return get_session()

    def _close_stream(self) -> None:
        if self._stream is not None:
            try:
                self._stream.close()
            except Exception:  # noqa: BLE001 - closing a cut-short stream may complain; we are done with it
                pass
            self._stream = None
            self._stream_iter = None

    def _fetch_to(self, target: int, need: int) -> None:
        if self._stream is not None:
            self._read_stream(target, need)
            return
        for attempt in range(self._retries + 1):
            try:
                self._request(len(self._buf), target, need)
                return
            except _Retry as exc:
                if attempt >= self._retries:
                    raise exc.error from None
                time.sleep(self._retry_wait * (2**attempt))

    def _send(self, start: int, end: int) -> Any:
        """One streamed GET for bytes [start, end); returns the open response (caller closes)."""
        session = self._session()
        headers = dict(self._headers)
        headers["Range"] = f"bytes={start}-{end - 1}"
        headers["Accept-Encoding"] = "identity"  # ranges are over the stored bytes
        from huggingface_hub.errors import OfflineModeIsEnabled

        errors = _transport_errors(session)
        try:
            request = session.build_request("GET", self._url, headers=headers, timeout=self._timeout)
            response = session.send(request, stream=True)
        except Exception as exc:  # noqa: BLE001 - mapped to HubError; transport failures are retried
            if isinstance(exc, errors) and not isinstance(exc, OfflineModeIsEnabled):
                raise _Retry(self._hub_error(exc)) from None
            raise self._hub_error(exc) from None
        self.stats.requests += 1 + len(getattr(response, "history", []) or [])
        self._note_headers(response)
        return response

    def _note_headers(self, response: Any) -> None:
        for r in [*(getattr(response, "history", []) or []), response]:
            commit = r.headers.get("X-Repo-Commit")
            if commit and self.stats.revision is None:
                self.stats.revision = commit
                if self._pin_url is not None:  # every later range comes from this very commit
                    self._url = self._pin_url(commit)
            etag = r.headers.get("X-Linked-Etag") or r.headers.get("ETag")
            if etag and self.stats.etag is None:
                self.stats.etag = etag.strip('"').removeprefix("W/").strip('"')

    def _check_status(self, response: Any) -> None:
        status = response.status_code
        if status in (200, 206):
            return
        length = _int(response.headers.get("Content-Length"))
        if length is not None and length < 1_000_000:  # small error bodies carry the message; never a big one
            try:
                response.read()
            except Exception:  # noqa: BLE001 - the status code is enough to report
                pass
        response.close()
        if status == 416:
            raise GGUFFormatError(f"truncated file: the server has no bytes at {self.available}", self.available)
        err: Exception
        try:
            from huggingface_hub.utils import hf_raise_for_status

            hf_raise_for_status(response)
            err = RuntimeError(f"HTTP {status}")
        except Exception as exc:  # noqa: BLE001 - typed hub errors, mapped below
            err = exc
        hub_err = self._hub_error(err, status)
        if status in _RETRY_STATUS:
            raise _Retry(hub_err)
        raise hub_err

    def _request(self, start: int, target: int, need: int) -> None:
        response = self._send(start, target)
        self._check_status(response)
        if response.status_code == 200:
            # Range ignored: the body is the whole file from byte 0. Keep the stream and read on demand.
            self.stats.range_ignored = True
            self._stream = response
            self._stream_iter = _body(response)
            self._stream_pos = 0
            length = _int(response.headers.get("Content-Length"))
            if length is not None and self.size is None and not response.headers.get("Content-Encoding"):
                self.size = length
                self.stats.size = length
            self._read_stream(target, need)
            return
        total, first = _content_range(response.headers.get("Content-Range"))
        if first is not None and first != start:
            response.close()
            raise HubError(f"{self.name}: server answered bytes from {first}, asked for {start}")
        if total is not None:
            self.size = total
            self.stats.size = total
        want = target - start
        got = 0
        errors = _transport_errors(self._session())
        try:
            for piece in _body(response):
                take = piece[: want - got]
                self._buf += take
                got += len(take)
                self.stats.bytes_fetched += len(piece)
                if got >= want:
                    break
        except errors as exc:
            raise _Retry(self._hub_error(exc, dropped=True)) from None
        finally:
            response.close()
        if len(self._buf) < need:
            if self.size is not None and need > self.size:
                raise GGUFFormatError(f"truncated file: needs {need} bytes, has {self.size}", self.size)
            raise _Retry(HubError(f"{self.name}: connection ended after {len(self._buf)} of {need} bytes"))

    def _read_stream(self, target: int, need: int) -> None:
        assert self._stream_iter is not None
        errors = _transport_errors(self._session())
        try:
            while self._stream_pos < target:
                piece = next(self._stream_iter, b"")
                if not piece:
                    break
                self.stats.bytes_fetched += len(piece)
                pos = self._stream_pos
                self._stream_pos += len(piece)
                have = len(self._buf)
                if self._stream_pos > have:  # skip what we already hold (a 200 after earlier 206s)
                    self._buf += piece[max(0, have - pos) :]
        except errors as exc:
            self._close_stream()
            raise self._hub_error(exc, dropped=True) from None
        if self._stream_pos < target:
            self._close_stream()
        if len(self._buf) < need:
            if (self.size is not None and need > self.size) or self._stream is None:
                raise GGUFFormatError(f"truncated file: needs {need} bytes, has {len(self._buf)}", len(self._buf))

    def _get_range(self, start: int, end: int) -> bytes:
        """A one-off range outside the buffer (a lazy array decoded after close)."""
        response = self._send(start, end)
        try:
            self._check_status(response)
            if response.status_code == 200:
                out = bytearray()
                pos = 0
                for piece in _body(response):
                    self.stats.bytes_fetched += len(piece)
                    lo, hi = max(start - pos, 0), min(end - pos, len(piece))
                    if lo < hi:
                        out += piece[lo:hi]
                    pos += len(piece)
                    if pos >= end:
                        break
                return bytes(out)
            raw = response.read()
            self.stats.bytes_fetched += len(raw)
            return bytes(raw[: end - start])
        except _Retry as exc:
            raise exc.error from None
        finally:
            response.close()

    def _hub_error(self, exc: BaseException, status: int | None = None, dropped: bool = False) -> HubError:
        if self._describe is not None:
            described: HubError | None = self._describe(exc, status)
            if described is not None:
                return described
        return _generic_hub_error(self.name, self._url, exc, status, dropped)


class _Retry(Exception):
    def __init__(self, error: HubError) -> None:
        super().__init__(str(error))
        self.error = error


def _body(response: Any) -> Iterator[bytes]:
    """The body as stored bytes. We ask for ``identity``; a server that compresses anyway is decoded."""
    enc = (response.headers.get("Content-Encoding") or "identity").strip().lower()
    if enc == "identity":
        return iter(response.iter_raw(_STREAM_READ))
    return iter(response.iter_bytes(_STREAM_READ))


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def _content_range(value: str | None) -> tuple[int | None, int | None]:
    """(total size, first byte) from ``bytes a-b/total``."""
    if not value:
        return None, None
    m = re.match(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", value)
    if not m:
        return None, None
    total = None if m.group(3) == "*" else int(m.group(3))
    return total, int(m.group(1))


def failed_host(exc: BaseException, url: str) -> str:
    """The host that failed: where a redirect led (the request or response an error in ``exc``'s chain
    carries), said with the host first asked when they differ; else the host of ``url``."""
    asked = urlsplit(url).netloc
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        for attr in ("request", "response"):
            try:  # httpx raises RuntimeError for an error built without its request
                target = getattr(getattr(cur, attr, None), "url", None)
            except RuntimeError:
                target = None
            failed = urlsplit(str(target)).netloc if target is not None else ""
            if failed:
                return f"{failed} (redirected from {asked})" if failed != asked else asked
        cur = cur.__cause__ or cur.__context__
    return asked


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _generic_hub_error(
    name: str, url: str, exc: BaseException, status: int | None = None, dropped: bool = False
) -> HubError:
    from huggingface_hub.errors import OfflineModeIsEnabled

    if isinstance(exc, OfflineModeIsEnabled):
        return HubError(f"{hubenv.OFFLINE_IS_SET}: cannot read {name}")
    if isinstance(exc, HubError):
        return exc
    host = failed_host(exc, url)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    if status is not None:
        if status in (401, 403):
            return HubError(f"access denied (HTTP {status}) to {name}: {hubenv.SET_TOKEN} to a token with access")
        if status == 404:
            return HubError(f"not found (HTTP 404): {name}")
        if status >= 500:
            return HubError(f"server error HTTP {status} from {host} while reading {name}")
        return HubError(f"HTTP {status} from {host} while reading {name}")
    what = "connection dropped" if dropped else "cannot reach"
    detail = _one_line(str(exc)) or type(exc).__name__
    return HubError(f"{what} {host} while reading {name}: {detail}")
