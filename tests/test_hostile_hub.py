"""Issue 14, item 7: a hostile Hub on 127.0.0.1 (``tests/hostile_hub.py``), met by the real command line.

(a) a server that answers one byte at a time, each inside any read timeout; (b) a 500 MB
``tokenizer_config.json``; (c) an upstream whose ``tool_use`` is a sandbox escape; (d) a listing that names
``../../x.gguf``; (e) a redirect that fails somewhere else than the Hub.
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import CHATML
from tests.hostile_hub import HostileHub
from tests.hubserver import tokenizer_config
from tests.test_hostile_cli import run_gguftpl

MakeGGUF = Callable[..., Path]

SANDBOX_ESCAPE = "{{ cycler.__init__.__globals__.os.popen('id').read() }}" + CHATML
MIB = 1024 * 1024


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[HostileHub]:
    with HostileHub(tmp_path / "hub") as hub:
        yield hub


def gguftpl(hub: HostileHub, tmp_path: Path, *args: str | Path, timeout: str | None = None, **env: str) -> Proc:
    """The CLI in a fresh process pointed at the hostile Hub, with its own HF_HOME."""
    extra = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf-home"), **env}
    if timeout is not None:
        extra["GGUFTPL_REMOTE_TIMEOUT"] = timeout
    return Proc(run_gguftpl(*args, env=extra))


class Proc:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.code, self.stdout, self.stderr = proc.returncode, proc.stdout, proc.stderr

    def error(self, *needles: str) -> str:
        """The one ``gguftpl: error:`` line, exit 2, holding every needle."""
        assert self.code == 2, (self.code, self.stdout[-2000:], self.stderr[-2000:])
        lines = [ln for ln in self.stderr.splitlines() if ln.startswith("gguftpl: error:")]
        assert len(lines) == 1 and "Traceback" not in self.stderr, self.stderr
        for n in needles:
            assert n in lines[0], (n, lines[0])
        return lines[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- (a) an overall deadline on every remote operation -----------------------------------------------------


def test_a_header_read_one_byte_at_a_time_ends_at_the_deadline(
    hostile: HostileHub, make_gguf: MakeGGUF, tmp_path: Path
) -> None:
    """Each byte came well inside the read timeout, and there was no overall deadline: `inspect hf://…` of a
    server answering a Range request one byte per second ran for hours."""
    hostile.add_file("org/slow", "m.gguf", make_gguf("m.gguf", templates={"default": CHATML}))
    hostile.drip = 0.2
    res = gguftpl(hostile, tmp_path, "inspect", "hf://org/slow/m.gguf", timeout="3")
    res.error("reading hf://org/slow/m.gguf: gave up after 3 s", "GGUFTPL_REMOTE_TIMEOUT")
    hostile.drip, hostile.drip_head = None, 0.2  # the status line and headers themselves, one byte at a time
    res = gguftpl(hostile, tmp_path, "inspect", "hf://org/slow/m.gguf", timeout="3")
    res.error("reading hf://org/slow/m.gguf: gave up after 3 s")
    bad = gguftpl(hostile, tmp_path, "inspect", "hf://org/slow/m.gguf", timeout="soon")
    bad.error("GGUFTPL_REMOTE_TIMEOUT='soon'")


def test_a_repo_listing_and_an_upstream_one_byte_at_a_time_end_at_the_deadline(
    hostile: HostileHub, make_gguf: MakeGGUF, tmp_path: Path
) -> None:
    model = make_gguf("m.gguf", templates={"default": CHATML})
    hostile.add_file("org/slow", "m.gguf", model)
    hostile.add_repo("org/up", {"tokenizer_config.json": tokenizer_config(CHATML)})
    hostile.drip_api = 0.2
    listing = gguftpl(hostile, tmp_path, "audit", "--repo", "org/slow", "--no-upstream", timeout="3")
    listing.error("listing org/slow: gave up after 3 s")
    hostile.drip_api, hostile.drip = None, 0.2
    upstream = gguftpl(hostile, tmp_path, "diff", model, "--hub", "org/up", "--no-fallback", timeout="3")
    upstream.error("reading org/up@main: gave up after 3 s")


# --- (b) size bounds on upstream files, checked before downloading ------------------------------------------


def _sparse(path: Path, size: int, head: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(size)  # a hole: 500 MB on the wire, nothing on disk
    return path


def test_a_500_mb_tokenizer_config_is_refused_before_any_byte_is_downloaded(
    hostile: HostileHub, make_gguf: MakeGGUF, tmp_path: Path
) -> None:
    """It was downloaded whole into HF_HOME and parsed: 2.6 GB RSS, killed after 150 s."""
    sha = hostile.add_repo("org/big", {"chat_template.jinja": CHATML})
    _sparse(hostile.root / "org/big/main/tokenizer_config.json", 500 * MIB, b'{"chat_template": "')
    model = make_gguf("m.gguf", templates={"default": CHATML})
    res = gguftpl(hostile, tmp_path, "diff", model, "--hub", "org/big", "--no-fallback")
    res.error("tokenizer_config.json is 524,288,000 bytes, over the 16,777,216-byte bound", "not downloaded")
    got = [r for r in hostile.log if r.path.endswith("/tokenizer_config.json")]
    assert got and all(r.method == "HEAD" or r.bytes_sent == 0 for r in got), got
    assert f"GET /org/big/resolve/{sha}/tokenizer_config.json" not in [f"{r.method} {r.path}" for r in got]
    cached = [p for p in (tmp_path / "hf-home").rglob("*") if p.is_file() and p.stat().st_size > MIB]
    assert cached == []


def test_an_oversized_tokenizer_json_is_a_warning_and_the_diff_goes_on(
    hostile: HostileHub, make_gguf: MakeGGUF, tmp_path: Path
) -> None:
    """tokenizer.json is optional (read only for added tokens): too big, it is skipped with a warning."""
    hostile.add_repo("org/tok", {"tokenizer_config.json": tokenizer_config(CHATML, bos_token="<|im_start|>")})
    _sparse(hostile.root / "org/tok/main/tokenizer.json", 100 * MIB, b'{"added_tokens": [')
    model = make_gguf("m.gguf", templates={"default": CHATML})
    res = gguftpl(hostile, tmp_path, "diff", model, "--hub", "org/tok", "--no-fallback")
    assert res.code in (0, 1), res.stderr
    assert "could not read tokenizer.json" in res.stderr and "over the 67,108,864-byte bound" in res.stderr
    assert not [r for r in hostile.log if r.method == "GET" and r.path.endswith("/tokenizer.json")]


def test_tokenizer_json_is_read_for_its_added_tokens_only() -> None:
    """The vocabulary and merges around ``added_tokens`` are never decoded (bounded parsing)."""
    import tracemalloc

    from gguftpl.upstream.config import added_tokens_json

    added = [{"id": 5, "content": "<|im_end|>", "special": True}, {"id": 6, "content": '"added_tokens"'}]
    vocab = {f"tok{i}\u0120x": i for i in range(200_000)}
    doc = {"version": "1.0", "truncation": None, "added_tokens": added, "model": {"vocab": vocab}}
    raw = json.dumps(doc).encode()
    tracemalloc.start()
    try:
        assert added_tokens_json(raw) == added
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(raw), (peak, len(raw))  # the text once, not 200,000 decoded entries
    assert added_tokens_json(b'{"model": {"added_tokens": [1]}}') == []  # only the top-level key counts


# --- (c) a patch that would add error findings is refused before anything is written --------------------


def test_patch_from_a_hub_whose_tool_use_is_a_sandbox_escape_is_refused(
    hostile: HostileHub, make_gguf: MakeGGUF, tmp_path: Path
) -> None:
    """It was written, exit 0, while its own summary said "1 error -> 6 error"."""
    hostile.add_repo(
        "org/evil", {"tokenizer_config.json": tokenizer_config({"default": CHATML, "tool_use": SANDBOX_ESCAPE})}
    )
    model = make_gguf("m.gguf", templates={"default": CHATML})
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    out = tmp_path / "out.gguf"
    res = gguftpl(hostile, tmp_path, "patch", model, "--from-hub", "org/evil", "--no-fallback", "-o", out)
    res.error("refusing to write", "GT401 sandbox-escape-construct in tool_use", "nothing was written")
    assert not out.exists()
    inplace = gguftpl(hostile, tmp_path, "patch", model, "--from-hub", "org/evil", "--no-fallback", "--in-place")
    inplace.error("refusing to write")
    assert hashlib.sha256(model.read_bytes()).hexdigest() == digest
    allowed = gguftpl(
        hostile, tmp_path, "patch", model, "--from-hub", "org/evil", "--no-fallback", "-o", out, "--allow-new-errors"
    )
    assert allowed.code == 0 and out.exists(), allowed.stderr
    assert "GT401" in allowed.stdout  # the before/after says what was let in


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("\x1b]0;pwned\x07" + CHATML, "GT406 control-characters in tool_use"),
        # jinja2 parses it; llama.cpp's lexer stops at "unknown escape character": llama-server would not start
        (CHATML.replace("{% endif %}", "{{ 'Reply.\\\nThanks.' }}{% endif %}"), "GT606"),
    ],
    ids=["terminal-escape", "llamacpp-refuses"],
)
def test_patch_with_a_template_that_is_unsafe_or_llamacpp_refuses_is_refused(
    make_gguf: MakeGGUF, tmp_path: Path, text: str, needle: str
) -> None:
    if needle == "GT606":
        pytest.importorskip("xllamacpp")
    model = make_gguf("m.gguf", templates={"default": CHATML})
    new = tmp_path / "new.jinja"
    new.write_text(text, encoding="utf-8")
    out = tmp_path / "out.gguf"
    # --no-audit skips the before/after report, not this check
    res = Proc(run_gguftpl("patch", model, "--template", f"tool_use={new}", "-o", out, "--no-audit"))
    res.error("refusing to write", needle)
    assert not out.exists()


# --- (d) unsafe names in a listing become findings; the rest is audited ------------------------------------

UNSAFE = [
    "../../x.gguf",
    "../../../../y.gguf",
    "/abs.gguf",
    "a//b.gguf",
    "sub/./c.gguf",
    "..\\w.gguf",
    "t\x1b]0;t\x07.gguf",
]


def test_a_listing_that_names_paths_outside_the_repo_is_audited_without_them(
    hostile: HostileHub, make_gguf: MakeGGUF, tmp_path: Path
) -> None:
    """`../../x.gguf` made `audit --repo` request `GET /x.gguf` outside the repo (with the user's token), and
    the one bad name aborted the whole repo's audit."""
    hostile.add_file("org/repo", "good.gguf", make_gguf("good.gguf", templates={"default": CHATML}))
    hostile.extra_tree["org/repo"] = UNSAFE
    res = gguftpl(
        hostile, tmp_path, "audit", "--repo", "org/repo", "--no-upstream", "--format", "json", HF_TOKEN="hf_secret"
    )
    assert res.code == 1, res.stderr
    report = json.loads(res.stdout)
    unsafe = [f for fa in report["files"] for f in fa["findings"] if f["code"] == "GT557"]
    assert sorted(f["extra"]["name"] for f in unsafe) == sorted(UNSAFE)
    assert any(fa["path"].startswith("hf://org/repo/good.gguf@") for fa in report["files"])  # the rest: audited
    outside = [r.path for r in hostile.log if not r.path.startswith(("/api/models/org/repo/", "/org/repo/resolve/"))]
    assert outside == [], outside
    assert [r.path.rsplit("/", 1)[-1] for r in hostile.log if "/resolve/" in r.path] == ["good.gguf"]
    listed = gguftpl(hostile, tmp_path, "inspect", "--repo", "org/repo")
    assert listed.code == 0 and "good.gguf" in listed.stdout, listed.stderr
    assert listed.stderr.count("gguftpl: warning: not reading") == len(UNSAFE)
    assert "\x1b" not in listed.stderr


# --- (e) a failed redirect names the host that failed -------------------------------------------------------


class _Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def failing_host() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_failed_redirect_names_the_host_that_failed(
    hostile: HostileHub, make_gguf: MakeGGUF, tmp_path: Path, failing_host: str
) -> None:
    """It was reported as a failure of the Hub's own host."""
    model = make_gguf("m.gguf", templates={"default": CHATML})
    hostile.add_file("org/cdn", "m.gguf", model)
    hostile.add_repo("org/up", {"tokenizer_config.json": tokenizer_config(CHATML)})
    hub_host = hostile.url.removeprefix("http://")
    dead = f"127.0.0.1:{_free_port()}"
    for target, needle in ((dead, f"cannot reach {dead}"), (failing_host, f"HTTP 500 from {failing_host}")):
        hostile.redirects["m.gguf"] = f"http://{target}/blob/m.gguf"
        res = gguftpl(hostile, tmp_path, "inspect", "hf://org/cdn/m.gguf")
        res.error(needle, f"(redirected from {hub_host})")
    hostile.redirects["tokenizer_config.json"] = f"http://{dead}/blob/tokenizer_config.json"
    res = gguftpl(hostile, tmp_path, "diff", model, "--hub", "org/up", "--no-fallback", timeout="60")
    res.error(f"{dead} (redirected from {hub_host})")
