"""A hostile Hugging Face Hub on 127.0.0.1, for tests: ``tests/hubserver.py`` with switches that misbehave.

    with HostileHub(tmp_path / "hub") as hub:
        hub.drip = 0.2                        # /resolve/ bodies one byte every 0.2 s (a Range answer too)
        hub.drip_api = 0.2                    # the same for /api/ answers
        hub.drip_head = 0.2                   # /resolve/ answers: the status line and headers, a byte at a time
        hub.extra_tree["org/name"] = ["../../x.gguf"]   # names the tree listing adds (no such file)
        hub.redirects["model.gguf"] = "http://127.0.0.1:1/blob"   # 302 for /resolve/…/model.gguf
        hub.repo_errors["org/name"] = (400, "<b>no</b>")  # every /api/models/org/name… answer: this error
        hub.stop_dripping()                   # let every drip end at once (done on exit too)

Everything else is the well-behaved stand-in (``HubServer``): the request log, repos on disk, Range answers.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.hubserver import HubServer, Request, _Handler, _parse_range


class HostileHub(HubServer):
    def __init__(self, root: str | Path) -> None:
        super().__init__(root)
        self.drip: float | None = None
        self.drip_api: float | None = None
        self.drip_head: float | None = None
        self.extra_tree: dict[str, list[str]] = {}
        self.redirects: dict[str, str] = {}
        self.repo_errors: dict[str, tuple[int, str]] = {}
        self._stopping = threading.Event()

    def start(self) -> HostileHub:
        server = self

        class Handler(_HostileHandler):
            hub = server

        self._stopping.clear()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="hostilehub", daemon=True
        )
        self._thread.start()
        return self

    def stop_dripping(self) -> None:
        self._stopping.set()

    def stop(self) -> None:
        self.stop_dripping()
        super().stop()

    def __enter__(self) -> HostileHub:
        return self.start()


class _HostileHandler(_Handler):
    hub: HostileHub

    def _handle(self, head: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        if self.hub.drip_head is not None and "/resolve/" in path:
            # headers that never end: no hook sees an answer before its headers are complete
            self._drip_body(b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100_000, self.hub.drip_head, 200)
            return
        m = re.match(r"^/api/models/([^/]+/[^/]+)", path)
        if m and m.group(1) in self.hub.repo_errors:
            status, message = self.hub.repo_errors[m.group(1)]
            self._error(status, "HostileError", message, head)
            return
        target = self.hub.redirects.get(path.rsplit("/", 1)[-1]) if "/resolve/" in path else None
        if target is not None:
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
            rev_dir, sha = self.hub._resolve(m.group(1), m.group(2)) if m else (None, "")
            if rev_dir is not None and m and (rev_dir / m.group(3)).is_file():
                # what the real Hub sends with the redirect of an LFS file to its CDN
                self.send_header("X-Repo-Commit", sha)
                self.send_header("X-Linked-Etag", '"' + "0" * 64 + '"')
                self.send_header("X-Linked-Size", str((rev_dir / m.group(3)).stat().st_size))
            self.end_headers()
            self.hub._record(Request(self.command, self.path, self.headers.get("Range"), 302, 0))
            return
        super()._handle(head)

    def _json(self, obj: Any, sha: str, head: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        for repo, names in self.hub.extra_tree.items():
            if path.startswith(f"/api/models/{repo}/tree/") and isinstance(obj, list):
                obj = obj + [{"type": "file", "oid": "0" * 40, "size": 1000, "path": n} for n in names]
        if self.hub.drip_api is None or head:
            super()._json(obj, sha, head)
            return
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Repo-Commit", sha)
        self.end_headers()
        self._drip_body(data, self.hub.drip_api, 200)

    def _resolve_file(self, repo_id: str, revision: str, rel: str, head: bool, rng: str | None) -> None:
        if self.hub.drip is None or head:
            super()._resolve_file(repo_id, revision, rel, head, rng)
            return
        rev_dir, sha = self.hub._resolve(repo_id, revision)
        p = rev_dir / rel if rev_dir is not None else None
        if p is None or not p.is_file():
            super()._resolve_file(repo_id, revision, rel, head, rng)
            return
        data = p.read_bytes()
        start, end = (_parse_range(rng, len(data)) or (0, len(data))) if rng else (0, len(data))
        self.send_response(206 if rng else 200)
        self.send_header("Content-Length", str(end - start))
        self.send_header("X-Repo-Commit", sha)
        self.send_header("ETag", '"drip"')
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.end_headers()
        self._drip_body(data[start:end], self.hub.drip, 206 if rng else 200)

    def _drip_body(self, body: bytes, every: float, status: int) -> None:
        """One byte every ``every`` seconds: each arrives well inside any read timeout."""
        sent = 0
        try:
            for i in range(len(body)):
                if self.hub._stopping.wait(every):
                    break
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                sent += 1
        except OSError:  # the client gave up: what the test wants
            pass
        self.close_connection = True
        self.hub._record(Request(self.command, self.path, self.headers.get("Range"), status, sent))


def wait_until(predicate: Any, seconds: float = 30.0) -> bool:
    """Poll ``predicate`` (a guard against hanging, not an assertion on speed)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())
