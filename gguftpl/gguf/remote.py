"""Read a GGUF header from the Hugging Face Hub (or any HTTP server) with Range requests.

A quant is gigabytes; its header is kilobytes to a few MB (a 262k-token vocabulary is ~15 MB with its
merges). ``RemoteSource`` is a ``ByteSource`` for the header reader that starts with a small range and
grows it only as far as the parser asks, each request sized to the need and growing geometrically (256 KiB,
512 KiB, … capped at 8 MiB per request), so the bytes fetched are the header plus at most one read-ahead
chunk, in a handful of requests.

Everything goes through huggingface_hub's HTTP layer: its shared session (``get_session()``: proxies,
offline switch, request ids), ``build_hf_headers`` (``HF_TOKEN``, user agent), ``hf_hub_url`` and
``hf_raise_for_status`` (typed 404s, gated repos). ``HF_ENDPOINT``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE`` are
honoured, and read at call time, not only at import.

A server that ignores ``Range`` answers 200 with the whole file: the body is then streamed and read only as
far as the parser needs, and the connection is closed, so a misbehaving mirror never costs a download.

Split GGUFs (``NAME-00002-of-00005.gguf``, gguf-split's naming) keep their metadata in the first shard:
asking for any shard reads shard 1 and says so.
"""

from __future__ import annotations

import importlib
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from gguftpl.errors import GGUFFormatError, HubError
from gguftpl.gguf.reader import GGUFHeader, read_header

__all__ = [
    "DEFAULT_INITIAL_CHUNK",
    "DEFAULT_MAX_CHUNK",
    "HubFileRef",
    "HubRepoRef",
    "RemoteRead",
    "RemoteSource",
    "RemoteStats",
    "ShardInfo",
    "hub_endpoint",
    "is_remote",
    "open_remote_header",
    "parse_remote",
    "parse_repo_spec",
    "read_remote_header",
    "remote_header_cost",
    "shard_info",
]

DEFAULT_INITIAL_CHUNK = 256 * 1024
DEFAULT_MAX_CHUNK = 8 * 1024 * 1024
# No real header comes close (262k vocab + merges ~ 16 MB); a hostile length with no known file size
# must not turn a header read into a download.
MAX_HEADER_BYTES = 512 * 1024 * 1024
_STREAM_READ = 64 * 1024
_RETRY_STATUS = (429, 500, 502, 503, 504)

# gguf-split names shards "%s-%05d-of-%05d.gguf" (llama.cpp llama_split_path)
_SHARD_RE = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
_REPO_TYPE_PREFIX = {"datasets": "dataset", "spaces": "space"}


# --------------------------------------------------------------------------------------------- references


def hub_endpoint(endpoint: str | None = None) -> str:
    """The Hub base URL: ``endpoint`` if given, else ``HF_ENDPOINT`` now, else huggingface_hub's default."""
    if endpoint:
        return endpoint.rstrip("/")
    env = os.environ.get("HF_ENDPOINT")
    if env:
        return env.rstrip("/")
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def _offline() -> bool:
    raw = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    if raw.strip().upper() in {"1", "ON", "YES", "TRUE"}:
        return True
    from huggingface_hub import constants

    return bool(constants.is_offline_mode())


@dataclass(frozen=True)
class HubFileRef:
    """One file in a Hub repo, at a revision (None = the default branch)."""

    repo_id: str
    filename: str
    revision: str | None = None
    repo_type: str = "model"
    endpoint: str | None = None
    """Set when the reference came from a full URL; otherwise ``hub_endpoint()`` decides."""

    def url(self, revision: str | None = None) -> str:
        from huggingface_hub import hf_hub_url

        rev = revision or self.revision or "main"
        url: str = hf_hub_url(
            self.repo_id,
            self.filename,
            repo_type=None if self.repo_type == "model" else self.repo_type,
            revision=rev,
        )
        # hf_hub_url bakes in the endpoint read at import; swap in the one in effect now
        from huggingface_hub import constants

        base = str(constants.ENDPOINT).rstrip("/")
        if url.startswith(base):
            url = hub_endpoint(self.endpoint) + url[len(base) :]
        return url

    @property
    def spec(self) -> str:
        prefix = "" if self.repo_type == "model" else f"{self.repo_type}s/"
        rev = f"@{self.revision}" if self.revision else ""
        return f"hf://{prefix}{self.repo_id}/{self.filename}{rev}"

    def with_filename(self, filename: str) -> HubFileRef:
        return HubFileRef(self.repo_id, filename, self.revision, self.repo_type, self.endpoint)


@dataclass(frozen=True)
class HubRepoRef:
    """A Hub repo at a revision, as given to ``--repo``."""

    repo_id: str
    revision: str | None = None
    repo_type: str = "model"
    endpoint: str | None = None

    @property
    def spec(self) -> str:
        prefix = "" if self.repo_type == "model" else f"{self.repo_type}s/"
        return f"{prefix}{self.repo_id}" + (f"@{self.revision}" if self.revision else "")

    def file(self, filename: str, revision: str | None = None) -> HubFileRef:
        return HubFileRef(self.repo_id, filename, revision or self.revision, self.repo_type, self.endpoint)


def is_remote(spec: str | os.PathLike[str]) -> bool:
    """True for ``hf://…`` and ``http(s)://…`` specs (local paths are never remote)."""
    if not isinstance(spec, str):
        return False
    low = spec.lower()
    return low.startswith(("hf://", "http://", "https://"))


def _split_repo_type(parts: list[str]) -> tuple[str, list[str]]:
    if parts and parts[0] in _REPO_TYPE_PREFIX:
        return _REPO_TYPE_PREFIX[parts[0]], parts[1:]
    return "model", parts


def _check_repo_id(repo_id: str, spec: str) -> None:
    if not _REPO_ID_RE.match(repo_id) or ".." in repo_id:
        raise HubError(f"not a Hub repo id: {repo_id!r} (in {spec!r}; expected ORG/REPO)")


def parse_remote(spec: str) -> HubFileRef | str:
    """Parse a remote GGUF spec.

    Accepted: ``hf://ORG/REPO/path/FILE.gguf[@REV]``, ``hf://ORG/REPO@REV/path/FILE.gguf`` (HfFileSystem
    style), ``hf://datasets/…``, and Hub URLs ``https://HOST/ORG/REPO/(resolve|blob)/REV/path``. Any other
    http(s) URL is returned unchanged, to be read as a plain file (no token is sent to it).
    """
    if spec.lower().startswith("hf://"):
        body = spec[5:].strip("/")
        rev: str | None = None
        m = re.match(r"^(?P<path>.*?\.gguf)@(?P<rev>[^@]+)$", body, re.IGNORECASE)
        if m:
            body, rev = m.group("path"), m.group("rev")
        repo_type, parts = _split_repo_type(body.split("/"))
        if len(parts) < 3:
            raise HubError(f"{spec!r} names no file: expected hf://ORG/REPO/FILE.gguf[@REVISION]")
        org, name, rest = parts[0], parts[1], parts[2:]
        if "@" in name:  # hf://ORG/REPO@REV/FILE
            if rev is not None:
                raise HubError(f"{spec!r} gives the revision twice")
            name, rev = name.split("@", 1)
            rev = unquote(rev)
        repo_id = f"{org}/{name}"
        _check_repo_id(repo_id, spec)
        filename = "/".join(rest)
        if not filename or ".." in rest:
            raise HubError(f"{spec!r} names no file: expected hf://ORG/REPO/FILE.gguf[@REVISION]")
        return HubFileRef(repo_id, filename, rev or None, repo_type)
    try:
        parts_url = urlsplit(spec)
    except ValueError as exc:  # "Invalid IPv6 URL" and the like
        raise HubError(f"not a valid URL: {spec!r} ({exc})") from None
    if parts_url.scheme not in ("http", "https") or not parts_url.netloc:
        raise HubError(f"not a remote GGUF spec: {spec!r} (use hf://ORG/REPO/FILE.gguf or an https URL)")
    segs = [unquote(s) for s in parts_url.path.strip("/").split("/")]
    repo_type, segs = _split_repo_type(segs)
    for i, kind in enumerate(segs):
        if kind in ("resolve", "blob") and i == 2 and len(segs) >= 5:
            repo_id = f"{segs[0]}/{segs[1]}"
            _check_repo_id(repo_id, spec)
            endpoint = f"{parts_url.scheme}://{parts_url.netloc}"
            return HubFileRef(repo_id, "/".join(segs[4:]), segs[3], repo_type, endpoint)
    return spec


def parse_repo_spec(spec: str) -> HubRepoRef:
    """``ORG/REPO[@REV]``, ``hf://ORG/REPO[@REV]`` or ``https://HOST/ORG/REPO[/tree/REV]``."""
    s = spec.strip()
    endpoint: str | None = None
    rev: str | None = None
    if s.lower().startswith(("http://", "https://")):
        try:
            u = urlsplit(s)
        except ValueError as exc:  # "Invalid IPv6 URL"
            raise HubError(f"not a valid URL: {spec!r} ({exc})") from None
        endpoint = f"{u.scheme}://{u.netloc}"
        segs = [unquote(x) for x in u.path.strip("/").split("/")]
        repo_type, segs = _split_repo_type(segs)
        if len(segs) < 2:
            raise HubError(f"not a Hub repo URL: {spec!r}")
        if len(segs) >= 4 and segs[2] == "tree":
            rev = "/".join(segs[3:])
        s = "/".join(segs[:2])
    else:
        if s.lower().startswith("hf://"):
            s = s[5:]
        s = s.strip("/")
        if "@" in s:
            s, rev = s.split("@", 1)
        repo_type, segs = _split_repo_type(s.split("/"))
        s = "/".join(segs)
    _check_repo_id(s, spec)
    return HubRepoRef(s, rev or None, repo_type, endpoint)


@dataclass(frozen=True)
class ShardInfo:
    """Where a file sits in a gguf-split set."""

    number: int  # 1-based
    count: int
    first: str  # file name (or path) of shard 1

    @property
    def is_first(self) -> bool:
        return self.number == 1


def shard_info(name: str) -> ShardInfo | None:
    """Shard position from gguf-split's file naming, or None for an unsplit file."""
    head, sep, base = name.rpartition("/")
    m = _SHARD_RE.match(base)
    if not m:
        return None
    no, count = int(m.group("no")), int(m.group("count"))
    if no < 1 or count < 1 or no > count:
        return None
    first = f"{m.group('stem')}-{1:05d}-of-{count:05d}.gguf"
    return ShardInfo(no, count, f"{head}{sep}{first}")


# --------------------------------------------------------------------------------------------- the source


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
        pin_url: Any = None,
        describe: Any = None,
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
        self._pin_url = pin_url  # callable(commit) -> url, for Hub files
        self._describe = describe  # callable(exc) -> HubError, for Hub-aware messages
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
        if _offline():
            raise HubError(f"HF_HUB_OFFLINE is set: cannot read {self.name} from the Hub")
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


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _generic_hub_error(
    name: str, url: str, exc: BaseException, status: int | None = None, dropped: bool = False
) -> HubError:
    from huggingface_hub.errors import OfflineModeIsEnabled

    if isinstance(exc, OfflineModeIsEnabled):
        return HubError(f"HF_HUB_OFFLINE is set: cannot read {name}")
    if isinstance(exc, HubError):
        return exc
    host = urlsplit(url).netloc
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    if status is not None:
        if status in (401, 403):
            return HubError(f"access denied (HTTP {status}) to {name}: set HF_TOKEN to a token with access")
        if status == 404:
            return HubError(f"not found (HTTP 404): {name}")
        if status >= 500:
            return HubError(f"server error HTTP {status} from {host} while reading {name}")
        return HubError(f"HTTP {status} from {host} while reading {name}")
    what = "connection dropped" if dropped else "cannot reach"
    detail = _one_line(str(exc)) or type(exc).__name__
    return HubError(f"{what} {host} while reading {name}: {detail}")


def _hub_describer(ref: HubFileRef, asked: str | None = None) -> Any:
    """Map huggingface_hub's typed errors to one line naming the repo, file and revision."""

    def describe(exc: BaseException, status: int | None) -> HubError | None:
        from huggingface_hub.errors import (
            GatedRepoError,
            OfflineModeIsEnabled,
            RemoteEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

        rev = ref.revision or "main"
        if isinstance(exc, OfflineModeIsEnabled):
            return HubError(f"HF_HUB_OFFLINE is set: cannot read {ref.spec} from the Hub")
        if isinstance(exc, GatedRepoError):
            return HubError(
                f"{ref.repo_id} is a gated repo: accept its conditions on the Hub and set HF_TOKEN (HTTP {status})"
            )
        if isinstance(exc, RevisionNotFoundError):
            return HubError(f"revision {rev!r} not found in {ref.repo_id}")
        if isinstance(exc, RemoteEntryNotFoundError):
            why = ""
            if asked and asked != ref.filename:
                why = f" (asked for {asked}; a split GGUF keeps its metadata in the first shard)"
            return HubError(f"{ref.filename} not found in {ref.repo_id}@{rev}{why}")
        if isinstance(exc, RepositoryNotFoundError):
            return HubError(f"repository {ref.repo_id} not found (or private: set HF_TOKEN)")
        return None

    return describe


def hub_headers(token: str | bool | None = None) -> dict[str, str]:
    """huggingface_hub's request headers (user agent; ``HF_TOKEN`` or the saved token unless ``token=False``)."""
    from huggingface_hub.utils import build_hf_headers

    if token is None:
        token = os.environ.get("HF_TOKEN") or None
    try:
        return dict(build_hf_headers(token=token, library_name="gguftpl"))
    except Exception as exc:  # noqa: BLE001 - e.g. OIDC exchange failures
        raise HubError(f"cannot build Hub credentials: {_one_line(str(exc))}") from None


# --------------------------------------------------------------------------------------------- read a header


@dataclass
class RemoteRead:
    """A header read over HTTP, with what it cost and where it came from."""

    header: GGUFHeader
    stats: RemoteStats
    label: str
    """What to show as the file: the hf:// spec (with the resolved revision) or the URL."""
    ref: HubFileRef | None = None
    shard: ShardInfo | None = None
    notes: list[str] = field(default_factory=list)

    def remote_dict(self) -> dict[str, Any]:
        """The ``"remote"`` object for JSON output."""
        d = self.stats.to_dict()
        if self.ref is not None:
            d["repo_id"] = self.ref.repo_id
            d["filename"] = self.ref.filename
            d["requested_revision"] = self.ref.revision or "main"
        if self.shard is not None:
            d["shard"] = {"number": self.shard.number, "count": self.shard.count, "first": self.shard.first}
        if self.notes:
            d["notes"] = list(self.notes)
        return d


def _same_origin(a: str, b: str) -> bool:
    ua, ub = urlsplit(a), urlsplit(b)
    return (ua.scheme, ua.netloc.lower()) == (ub.scheme, ub.netloc.lower())


def open_remote(
    spec: str | HubFileRef,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    initial_chunk: int = DEFAULT_INITIAL_CHUNK,
    max_chunk: int = DEFAULT_MAX_CHUNK,
    retries: int = 2,
    follow_shards: bool = True,
) -> tuple[RemoteSource, HubFileRef | None, ShardInfo | None, list[str]]:
    """A ``RemoteSource`` for a spec (not yet read), plus the Hub reference and shard notes."""
    ref = parse_remote(spec) if isinstance(spec, str) else spec
    if _offline():  # before building headers: huggingface_hub may fetch its agent registry then
        label = ref.spec if isinstance(ref, HubFileRef) else ref
        raise HubError(f"HF_HUB_OFFLINE is set: cannot read {label} from the Hub")
    notes: list[str] = []
    shard: ShardInfo | None = None
    if isinstance(ref, HubFileRef):
        if endpoint and ref.endpoint is None:
            ref = HubFileRef(ref.repo_id, ref.filename, ref.revision, ref.repo_type, endpoint)
        asked = ref.filename
        shard = shard_info(ref.filename)
        if shard is not None and follow_shards:
            if not shard.is_first:
                notes.append(
                    f"{ref.filename} is shard {shard.number} of {shard.count}; a split GGUF keeps its metadata "
                    f"in the first shard, reading {shard.first}"
                )
                ref = ref.with_filename(shard.first)
            else:
                notes.append(f"split GGUF ({shard.count} shards): metadata read from the first shard")
        url = ref.url()
        final_ref = ref

        def pin(commit: str) -> str:
            return final_ref.url(revision=commit)

        headers = hub_headers(token)
        src = RemoteSource(
            url,
            name=ref.spec,
            headers=headers,
            initial_chunk=initial_chunk,
            max_chunk=max_chunk,
            retries=retries,
            pin_url=pin,
            describe=_hub_describer(ref, asked),
        )
        return src, ref, shard, notes
    url = ref
    # credentials go only to the Hub endpoint itself, never to an arbitrary host
    send_token = token if _same_origin(url, hub_endpoint(endpoint)) else False
    name = url
    shard = shard_info(unquote(urlsplit(url).path))
    if shard is not None and follow_shards and not shard.is_first:
        first_name = shard.first.rsplit("/", 1)[-1]
        base = url.split("?", 1)[0]
        url = base.rsplit("/", 1)[0] + "/" + quote(first_name)
        notes.append(
            f"shard {shard.number} of {shard.count}; a split GGUF keeps its metadata in the first shard, "
            f"reading {first_name}"
        )
        name = url
    src = RemoteSource(
        url,
        name=name,
        headers=hub_headers(send_token),
        initial_chunk=initial_chunk,
        max_chunk=max_chunk,
        retries=retries,
    )
    return src, None, shard, notes


def read_remote_header(
    spec: str | HubFileRef,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    initial_chunk: int = DEFAULT_INITIAL_CHUNK,
    max_chunk: int = DEFAULT_MAX_CHUNK,
    retries: int = 2,
    follow_shards: bool = True,
) -> RemoteRead:
    """Read the header of a remote GGUF with Range requests (``GGUFFormatError`` / ``HubError`` on failure).

    Only the header is fetched (plus at most one read-ahead chunk); lazy arrays decode from the buffered
    bytes, so nothing more is fetched after this returns.
    """
    src, ref, shard, notes = open_remote(
        spec,
        endpoint=endpoint,
        token=token,
        initial_chunk=initial_chunk,
        max_chunk=max_chunk,
        retries=retries,
        follow_shards=follow_shards,
    )
    try:
        # keep_open: header._source stays set, so the raw metadata bytes remain readable from the buffer
        # (RemoteSource.read_range serves them after close()); a cut-short stream is closed right here
        header = read_header(src, keep_open=True)
    except BaseException:
        src.close()  # a HubError mid-read: do not leave a streamed body open
        raise
    src.close()
    label = src.name
    if ref is not None:
        label = HubFileRef(ref.repo_id, ref.filename, src.stats.revision or ref.revision, ref.repo_type).spec
        header.path = label
    split_no = header.get("split.no")
    split_count = header.get("split.count")
    if isinstance(split_no, int) and isinstance(split_count, int) and split_count > 1:
        if shard is None:
            shard = ShardInfo(split_no + 1, split_count, label)
        if split_no != 0:
            notes.append(f"split.no is {split_no}: this is not the first shard, its metadata may be incomplete")
        elif not notes:
            notes.append(f"split GGUF ({split_count} shards): metadata read from the first shard")
    return RemoteRead(header=header, stats=src.stats, label=label, ref=ref, shard=shard, notes=notes)


def open_remote_header(spec: str, **kwargs: Any) -> tuple[GGUFHeader, str, dict[str, Any]]:
    """(header, label, ``"remote"`` dict) for ``gguftpl.gguf.open.open_header`` (inspect, diff, …)."""
    rr = read_remote_header(spec, **kwargs)
    return rr.header, rr.label, rr.remote_dict()


def remote_header_cost(spec: str, **kwargs: Any) -> tuple[int, int]:
    """(bytes fetched, requests made) to read one remote header; for scripts/bench.py."""
    rr = read_remote_header(spec, **kwargs)
    return rr.stats.bytes_fetched, rr.stats.requests
