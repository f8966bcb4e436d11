"""A real HTTP stand-in for the Hugging Face Hub, on 127.0.0.1, for tests (stdlib only).

huggingface_hub (hf_hub_download, snapshot_download, HfApi.repo_info/list_repo_tree) talks to it through
``endpoint=server.url`` (or ``HF_ENDPOINT`` in a subprocess). It is also a plain HTTP file server with
Range support, for remote GGUF header reads.

Fixture API
-----------
    from hubserver import HubServer

    with HubServer(tmp_path / "hub") as hub:          # starts a thread, stops on exit
        sha = hub.add_repo("org/name", {"tokenizer_config.json": "{...}", "a/b.jinja": b"..."},
                           revision="main")          # -> 40-hex commit sha of that revision
        hub.add_repo("org/name", {...}, revision="v2")  # another branch/tag, its own commit
        hub.add_file("org/name", "model.gguf", src_path, revision="main")  # copy (or hardlink) a big file
        hub.set_gated("org/name")                    # every request answers 403 X-Error-Code: GatedRepo
        hub.set_gated("org/name", token="hf_x")      # ... unless it carries "Authorization: Bearer hf_x"
        hub.url                                      # "http://127.0.0.1:PORT"
        hub.file_url("org/name", "model.gguf")       # .../org/name/resolve/main/model.gguf
        hub.log                                      # list[Request(method, path, range, status, bytes_sent)]
        hub.clear_log()
        hub.ignore_range = True                      # answer 200 + whole body even when Range is asked
        hub.drop_connection = True                   # close the socket without answering (every request)
        hub.drop_connection = 2                      # ... only the next 2 requests
        hub.drop_after_bytes = 100                   # send headers + 100 body bytes, then close
        hub.latency = 0.05                           # seconds to wait before answering (a far-away Hub)
        hub.fail_status = 503                        # answer every request with this HTTP error status
        hub.slow_repos["org/name"] = 30.0            # every request about that repo waits 30 s (cut short at stop)
        hub.held                                     # requests being held now (a slow repo's, an endless page)
        hub.models_page_size = 7                     # /api/models pages of 7 (the real Hub: 1000)
        hub.extra_models.append({"id": "org/gone", "sha": "0" * 40})  # listed, but no such repo (404)
        hub.models_endless_page = True               # an /api/models page whose body never ends
        hub.models_loop = True                       # every /api/models page links to a next one, for ever
        hub.new_commit("org/name")                   # the same files at a new commit sha (a push)
        hub.header_reads()                           # Counter of (repo, rev, path) -> Range reads from byte 0
    tokenizer_config({"default": A, "tool_use": B}, bos_token="<s>")  # -> tokenizer_config.json text

Directory layout on disk (``root``): ``<org>/<repo>/<rev>/<files>``; ``<org>/<repo>/refs.json`` maps
revision names (branches, tags) to commit shas, and each commit sha can be used as a revision too.

Endpoints (what huggingface_hub 1.x/2.x sends, see RESEARCH §6):
  GET /api/models?author=&search=&filter=gguf&expand=sha&limit=   the model listing, as the real Hub pages it:
                                             a JSON list per page, the next page in ``Link: <URL>; rel="next"``
                                             (``cursor=``); ``filter=gguf``: repos with a *.gguf file; with
                                             ``expand``: ``id``, ``_id`` and the fields asked for only
  HEAD|GET /{repo}/resolve/{rev}/{path}       headers X-Repo-Commit, ETag (quoted git blob sha1),
                                             Content-Length, Accept-Ranges; Range -> 206 + Content-Range
  GET /api/models/{repo}[/revision/{rev}]     {"id", "sha", "siblings": [{"rfilename"}], ...}
  GET /api/models/{repo}/tree/{rev}[/{path}]  [{"type": "file"|"directory", "path", "oid", "size"}]
                                             (``?recursive=true`` lists everything below)
Errors are 404 with ``X-Error-Code: RepoNotFound | RevisionNotFound | EntryNotFound`` (and
``X-Error-Message``), 403 ``GatedRepo`` for gated repos, 416 for an unsatisfiable range.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    range: str | None
    status: int
    bytes_sent: int


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-answer (gguftpl giving up at its deadline) is not a server error: socketserver's
    default prints a traceback to this process's stderr, which the CLI tests capture as the command's own."""

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


class HubServer:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._log: list[Request] = []
        self._in_flight = 0
        self._held_now = 0
        self._idle = threading.Condition()
        self.ignore_range = False
        self.drop_connection: bool | int = False
        self.drop_after_bytes: int | None = None
        self.latency = 0.0
        self.fail_status: int | None = None
        self.slow_repos: dict[str, float] = {}
        self.models_page_size = 1000
        self.extra_models: list[Any] = []
        self.models_endless_page = False
        self.models_loop = False
        self._stopped = threading.Event()
        self._gated: dict[str, str | None] = {}  # repo -> token that opens it (None: nothing does)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- repo contents -------------------------------------------------------------------------------
    def add_repo(self, repo_id: str, files: dict[str, str | bytes], revision: str = "main") -> str:
        """Create (or replace) one revision of a repo; returns its commit sha."""
        rev_dir = self.root / repo_id / revision
        if rev_dir.exists():
            shutil.rmtree(rev_dir)
        rev_dir.mkdir(parents=True)
        for rel, content in files.items():
            p = rev_dir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        return self._set_ref(repo_id, revision)

    def add_file(self, repo_id: str, rel: str, src: str | os.PathLike[str], revision: str = "main") -> str:
        """Add one file (hard-linked when possible, so big GGUFs cost no copy)."""
        p = self.root / repo_id / revision / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists():
            p.unlink()
        try:
            os.link(src, p)
        except OSError:
            shutil.copyfile(src, p)
        return self._set_ref(repo_id, revision)

    def set_gated(self, repo_id: str, gated: bool = True, token: str | None = None) -> None:
        if gated:
            self._gated[repo_id] = token
        else:
            self._gated.pop(repo_id, None)

    def new_commit(self, repo_id: str, revision: str = "main") -> str:
        """A new commit sha for the revision (the files as they are): what a push does to the listing."""
        refs = self._refs(repo_id)
        refs[revision] = hashlib.sha1(f"{refs[revision]}+".encode()).hexdigest()
        (self.root / repo_id / "refs.json").write_text(json.dumps(refs, indent=1))
        return refs[revision]

    def commit_sha(self, repo_id: str, revision: str = "main") -> str:
        return self._refs(repo_id)[revision]

    def _set_ref(self, repo_id: str, revision: str) -> str:
        refs = self._refs(repo_id)
        sha = refs.get(revision) or (
            revision if _SHA_RE.match(revision) else hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()
        )
        refs[revision] = sha
        (self.root / repo_id / "refs.json").write_text(json.dumps(refs, indent=1))
        return sha

    def _refs(self, repo_id: str) -> dict[str, str]:
        p = self.root / repo_id / "refs.json"
        return json.loads(p.read_text()) if p.is_file() else {}

    # ---- lifecycle -------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def file_url(self, repo_id: str, rel: str, revision: str = "main") -> str:
        return f"{self.url}/{repo_id}/resolve/{revision}/{rel}"

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    def start(self) -> HubServer:
        server = self
        self._stopped.clear()

        class Handler(_Handler):
            hub = server

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="hubserver", daemon=True
        )
        self._thread.start()
        return self

    def header_reads(self) -> Counter[tuple[str, str, str]]:
        """(repo, revision, path) -> GETs of /resolve/ with a Range from byte 0: the header reads of each file."""
        out: Counter[tuple[str, str, str]] = Counter()
        for r in self.log:
            m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", unquote(urlsplit(r.path).path))
            if m and r.method == "GET" and (r.range or "").startswith("bytes=0-"):
                out[(m.group(1), m.group(2), m.group(3))] += 1
        return out

    def stop(self) -> None:
        self._stopped.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- used by the handler ----------------------------------------------------------------------------
    @property
    def log(self) -> list[Request]:
        """Every request answered so far. Waits (up to 5 s) for requests still being answered: a client
        can hold the last byte of a response before the handler thread has recorded it."""
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=5)
        return self._log

    @property
    def held(self) -> int:
        """Requests held on purpose right now (a slow repo's, an endless page's)."""
        with self._idle:
            return self._held_now

    def _enter(self) -> None:
        with self._idle:
            self._in_flight += 1

    def _leave(self) -> None:
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()

    @contextmanager
    def _held(self) -> Iterator[None]:
        """A request held on purpose (a slow repo, an endless page) is not one being answered: ``log`` does not
        wait for it (it waited its full 5 s on every read while a slow repo was asked)."""
        self._leave()
        with self._idle:
            self._held_now += 1
        try:
            yield
        finally:
            with self._idle:
                self._held_now -= 1
            self._enter()

    def _record(self, req: Request) -> None:
        with self._lock:
            self._log.append(req)

    def _take_drop(self) -> bool:
        with self._lock:
            d = self.drop_connection
            if d is True:
                return True
            if isinstance(d, int) and d > 0:
                self.drop_connection = d - 1
                return True
            return False

    def _resolve(self, repo_id: str, revision: str) -> tuple[Path, str] | tuple[None, str]:
        """(revision directory, commit sha) or (None, error code)."""
        repo_dir = self.root / repo_id
        if not (repo_dir / "refs.json").is_file():
            return None, "RepoNotFound"
        refs = self._refs(repo_id)
        if revision in refs:
            return repo_dir / revision, refs[revision]
        for name, sha in refs.items():
            if sha == revision:
                return repo_dir / name, sha
        return None, "RevisionNotFound"


class _Handler(BaseHTTPRequestHandler):
    hub: HubServer
    protocol_version = "HTTP/1.1"  # keep-alive, like the real Hub; every answer sets Content-Length

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the request log is in hub.log
        pass

    def do_HEAD(self) -> None:
        self.hub._enter()
        try:
            self._handle(head=True)
        finally:
            self.hub._leave()

    def do_GET(self) -> None:
        self.hub._enter()
        try:
            self._handle(head=False)
        finally:
            self.hub._leave()

    # ---- dispatch ----------------------------------------------------------------------------------------
    def _handle(self, head: bool) -> None:
        rng = self.headers.get("Range")
        if self.hub.latency > 0:
            time.sleep(self.hub.latency)
        if self.hub.fail_status is not None:
            self._error(self.hub.fail_status, "ServerError", f"HTTP {self.hub.fail_status} (test switch)", head)
            return
        if self.hub._take_drop():
            self.hub._record(Request(self.command, self.path, rng, 0, 0))
            self._drop()
            return
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = parts.query
        slow = re.match(r"^/(?:api/models/)?([^/]+/[^/]+)/", path)
        if slow and slow.group(1) in self.hub.slow_repos:
            with self.hub._held():
                self.hub._stopped.wait(self.hub.slow_repos[slow.group(1)])
        if path == "/api/models":
            self._api_models(parse_qs(query), head)
            return
        m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/(revision|tree)/(.*))?$", path)
        if m:
            repo_id, kind, rest = m.group(1), m.group(2), m.group(3) or ""
            if kind == "tree":
                rev, _, sub = self._split_rev(repo_id, rest)
                self._api_tree(repo_id, rev, sub, "recursive=true" in query.lower(), head)
            else:
                self._api_info(repo_id, rest or "main", head)
            return
        m = re.match(r"^/([^/]+/[^/]+)/resolve/(.+)$", path)
        if m:
            rev, _, rel = self._split_rev(m.group(1), m.group(2))
            self._resolve_file(m.group(1), rev, rel, head, rng)
            return
        self._error(404, "RepoNotFound", f"no route for {path}", head)

    def _split_rev(self, repo_id: str, rest: str) -> tuple[str, str, str]:
        # revisions may contain "/" (refs/pr/1): take the longest known ref that prefixes the path
        refs = self.hub._refs(repo_id)
        for name in sorted(list(refs) + list(refs.values()), key=len, reverse=True):
            if rest == name or rest.startswith(name + "/"):
                return name, "/", rest[len(name) + 1 :]
        rev, sep, sub = rest.partition("/")
        return rev, sep, sub

    # ---- endpoints ---------------------------------------------------------------------------------------
    def _api_info(self, repo_id: str, revision: str, head: bool) -> None:
        if self._gated_reply(repo_id, head):
            return
        rev_dir, sha = self.hub._resolve(repo_id, revision)
        if rev_dir is None:
            self._error(404, sha, f"{repo_id}@{revision}: {sha}", head)
            return
        files = sorted(_walk(rev_dir))
        body = {
            "_id": hashlib.md5(repo_id.encode()).hexdigest()[:24],
            "id": repo_id,
            "modelId": repo_id,
            "author": repo_id.split("/")[0],
            "sha": sha,
            "private": False,
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "lastModified": "2026-01-01T00:00:00.000Z",
            "createdAt": "2026-01-01T00:00:00.000Z",
            "siblings": [{"rfilename": f} for f in files],
        }
        self._json(body, sha, head)

    def _api_models(self, q: dict[str, list[str]], head: bool) -> None:
        hub = self.hub
        models = []
        for refs in sorted(hub.root.glob("*/*/refs.json")):
            repo_id = refs.parent.relative_to(hub.root).as_posix()
            if q.get("author") and repo_id.split("/")[0] != q["author"][0]:
                continue
            if q.get("search") and q["search"][0].lower() not in repo_id.lower():
                continue
            sha = hub._refs(repo_id).get("main")
            rev_dir = refs.parent / "main"
            if sha is None or ("gguf" in q.get("filter", []) and not any(rev_dir.rglob("*.gguf"))):
                continue
            models.append({"id": repo_id, "sha": sha})
        for m in hub.extra_models:  # filtered by author like the others when they name one
            rid = m.get("id") if isinstance(m, dict) else None
            if not (q.get("author") and isinstance(rid, str) and rid.split("/")[0] != q["author"][0]):
                models.append(m)
        start = int(q.get("cursor", ["0"])[0])
        size = min(int(q.get("limit", [hub.models_page_size])[0]), hub.models_page_size)
        page = models[start : start + size]
        expand = q.get("expand")
        body = [self._model_entry(m, expand) if isinstance(m, dict) else m for m in page]
        nxt = start + size if start + size < len(models) else (start if hub.models_loop else None)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if nxt is not None:
            rest = {k: v for k, v in q.items() if k != "cursor"}
            url = f"{hub.url}/api/models?{urlencode({**rest, 'cursor': [str(nxt)]}, doseq=True)}"
            self.send_header("Link", f'<{url}>; rel="next"')
        if hub.models_endless_page:  # chunked: "[" then a space every 20 ms, until the client or the server stops
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            sent = 0
            with hub._held():
                try:
                    self.wfile.write(b"1\r\n[\r\n")
                    while not hub._stopped.wait(0.02):
                        self.wfile.write(b"1\r\n \r\n")
                        self.wfile.flush()
                        sent += 1
                except OSError:
                    pass
            self.close_connection = True
            hub._record(Request(self.command, self.path, None, 200, sent))
            return
        data = json.dumps(body).encode()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)
        hub._record(Request(self.command, self.path, None, 200, len(data)))

    @staticmethod
    def _model_entry(m: dict[str, Any], expand: list[str] | None) -> dict[str, Any]:
        rid = m.get("id")
        base = {"_id": hashlib.md5(str(rid).encode()).hexdigest()[:24], "id": rid}
        if expand:
            return {**base, **{k: m[k] for k in expand if k in m}}
        return {
            **base,
            "modelId": rid,
            "likes": 0,
            "downloads": 0,
            "private": False,
            "tags": ["gguf"],
            "createdAt": "2026-01-01T00:00:00.000Z",
            **{k: v for k, v in m.items() if k != "sha"},
        }

    def _api_tree(self, repo_id: str, revision: str, sub: str, recursive: bool, head: bool) -> None:
        if self._gated_reply(repo_id, head):
            return
        rev_dir, sha = self.hub._resolve(repo_id, revision)
        if rev_dir is None:
            self._error(404, sha, f"{repo_id}@{revision}: {sha}", head)
            return
        base = rev_dir / sub if sub else rev_dir
        if not base.is_dir():
            self._error(404, "EntryNotFound", f"{sub} is not a folder", head)
            return
        entries: list[dict[str, Any]] = []
        walker = sorted(base.rglob("*")) if recursive else sorted(base.iterdir())
        for p in walker:
            rel = p.relative_to(rev_dir).as_posix()
            if p.is_dir():
                oid = hashlib.sha1(rel.encode()).hexdigest()
                entries.append({"type": "directory", "oid": oid, "size": 0, "path": rel})
            else:
                data = p.read_bytes() if p.stat().st_size <= 10 * _CHUNK else b""
                oid = git_blob_sha1(data) if data else hashlib.sha1(rel.encode()).hexdigest()
                entries.append({"type": "file", "oid": oid, "size": p.stat().st_size, "path": rel})
        self._json(entries, sha, head)

    def _resolve_file(self, repo_id: str, revision: str, rel: str, head: bool, rng: str | None) -> None:
        if self._gated_reply(repo_id, head):
            return
        rev_dir, sha = self.hub._resolve(repo_id, revision)
        if rev_dir is None:
            self._error(404, sha, f"{repo_id}@{revision}: {sha}", head)
            return
        p = rev_dir / rel
        if not rel or not p.is_file() or ".." in Path(rel).parts:
            self._error(404, "EntryNotFound", f"{rel} does not exist at {revision}", head, commit=sha)
            return
        size = p.stat().st_size
        etag = _etag(p)
        start, end = 0, size  # [start, end)
        status = 200
        if rng and not self.hub.ignore_range:
            parsed = _parse_range(rng, size)
            if parsed is None:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.hub._record(Request(self.command, self.path, rng, 416, 0))
                return
            start, end = parsed
            status = 206
        length = end - start
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{etag}"')
        self.send_header("X-Repo-Commit", sha)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        sent = 0
        if not head:
            limit = self.hub.drop_after_bytes
            with open(p, "rb") as fh:
                fh.seek(start)
                while sent < length:
                    n = min(_CHUNK, length - sent)
                    if limit is not None:
                        n = min(n, limit - sent)
                        if n <= 0:
                            self.hub._record(Request(self.command, self.path, rng, status, sent))
                            self._drop()
                            return
                    chunk = fh.read(n)
                    if not chunk:
                        break
                    try:
                        self.wfile.write(chunk)
                    except OSError:  # client went away mid-body
                        break
                    sent += len(chunk)
        self.hub._record(Request(self.command, self.path, rng, status, sent))

    # ---- helpers -----------------------------------------------------------------------------------------
    def _gated_reply(self, repo_id: str, head: bool) -> bool:
        if repo_id in self.hub._gated:
            token = self.hub._gated[repo_id]
            if token is not None and self.headers.get("Authorization") == f"Bearer {token}":
                return False
            self._error(403, "GatedRepo", f"Access to model {repo_id} is restricted.", head)
            return True
        return False

    def _json(self, obj: Any, sha: str, head: bool) -> None:
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Repo-Commit", sha)
        self.end_headers()
        if not head:
            self.wfile.write(data)
        self.hub._record(Request(self.command, self.path, None, 200, 0 if head else len(data)))

    def _error(self, status: int, code: str, message: str, head: bool, commit: str | None = None) -> None:
        data = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        if commit:
            self.send_header("X-Repo-Commit", commit)
        self.end_headers()
        if not head:
            self.wfile.write(data)
        self.hub._record(Request(self.command, self.path, self.headers.get("Range"), status, 0))

    def _drop(self) -> None:
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True


def _walk(rev_dir: Path) -> list[str]:
    return [p.relative_to(rev_dir).as_posix() for p in rev_dir.rglob("*") if p.is_file()]


_LFS_SHA256: dict[tuple[str, int, int], str] = {}


def _etag(p: Path) -> str:
    st = p.stat()
    if st.st_size <= 10 * _CHUNK:
        return git_blob_sha1(p.read_bytes())
    # big files: the LFS etag, the content's sha256 as the Hub gives it (huggingface_hub names the cache blob by
    # it), hashed once per file version
    key = (str(p), st.st_size, st.st_mtime_ns)
    if key not in _LFS_SHA256:
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        _LFS_SHA256[key] = h.hexdigest()
    return _LFS_SHA256[key]


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if not m or (not m.group(1) and not m.group(2)):
        return None
    a, b = m.group(1), m.group(2)
    if not a:  # suffix: last n bytes
        n = int(b)
        if n == 0:
            return None
        return max(0, size - n), size
    start = int(a)
    end = min(int(b) + 1, size) if b else size
    if start >= size or end <= start:
        return None
    return start, end


def tokenizer_config(templates: dict[str, str] | str | None, **extra: Any) -> str:
    """A ``tokenizer_config.json`` text: ``chat_template`` as a string, or a list of {name, template}
    when given a dict (the HF layout for named templates), plus any other keys."""
    obj: dict[str, Any] = dict(extra)
    if isinstance(templates, str):
        obj["chat_template"] = templates
    elif templates:
        obj["chat_template"] = [{"name": n, "template": t} for n, t in templates.items()]
    return json.dumps(obj, indent=2)
