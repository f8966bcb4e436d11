"""The test Hub server itself: Range answers, the request log and the failure switches other tests rely on."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.hubserver import HubServer, git_blob_sha1

BODY = bytes(range(256)) * 40  # 10,240 bytes


@pytest.fixture
def hub(tmp_path: Path):
    with HubServer(tmp_path / "hub") as server:
        server.add_repo("org/r", {"f.bin": BODY, "sub/g.txt": "g"})
        yield server


def get(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


@pytest.mark.parametrize(
    ("rng", "start", "end"),
    [
        ("bytes=0-99", 0, 100),
        ("bytes=10000-", 10000, 10240),
        ("bytes=-40", 10200, 10240),
        ("bytes=10200-99999", 10200, 10240),
    ],
)
def test_range_requests(hub: HubServer, rng: str, start: int, end: int) -> None:
    status, headers, body = get(hub.file_url("org/r", "f.bin"), {"Range": rng})
    assert status == 206 and body == BODY[start:end]
    assert headers["Content-Range"] == f"bytes {start}-{end - 1}/{len(BODY)}"
    assert hub.log[-1].range == rng and hub.log[-1].bytes_sent == end - start


def test_head_headers_and_errors(hub: HubServer) -> None:
    status, headers, body = get(hub.file_url("org/r", "f.bin"), method="HEAD")
    assert status == 200 and body == b""
    assert headers["X-Repo-Commit"] == hub.commit_sha("org/r")
    assert headers["ETag"] == f'"{git_blob_sha1(BODY)}"' and headers["Content-Length"] == str(len(BODY))
    assert get(hub.file_url("org/r", "f.bin"), {"Range": "bytes=99999-"})[0] == 416
    for url, code in (
        (hub.file_url("org/none", "f.bin"), "RepoNotFound"),
        (hub.file_url("org/r", "f.bin", revision="v9"), "RevisionNotFound"),
        (hub.file_url("org/r", "nope.bin"), "EntryNotFound"),
    ):
        status, headers, _ = get(url)
        assert status == 404 and headers["X-Error-Code"] == code


def test_api_revision_and_recursive_tree(hub: HubServer) -> None:
    sha = hub.commit_sha("org/r")
    info = json.loads(get(f"{hub.url}/api/models/org/r/revision/main")[2])
    assert info["sha"] == sha and sorted(s["rfilename"] for s in info["siblings"]) == ["f.bin", "sub/g.txt"]
    tree = json.loads(get(f"{hub.url}/api/models/org/r/tree/{sha}?recursive=true")[2])
    assert {(e["type"], e["path"]) for e in tree} == {("file", "f.bin"), ("directory", "sub"), ("file", "sub/g.txt")}
    flat = json.loads(get(f"{hub.url}/api/models/org/r/tree/main")[2])
    assert {e["path"] for e in flat} == {"f.bin", "sub"}


def test_ignore_range_and_drop_switches(hub: HubServer) -> None:
    hub.ignore_range = True
    status, _, body = get(hub.file_url("org/r", "f.bin"), {"Range": "bytes=0-9"})
    assert status == 200 and body == BODY
    hub.ignore_range = False
    hub.drop_after_bytes = 100
    with pytest.raises(http.client.IncompleteRead):
        get(hub.file_url("org/r", "f.bin"))
    # the request without a Range: the one before may be logged after it (its handler logs once the body is out)
    assert [r for r in hub.log if r.range is None][-1].bytes_sent == 100
    hub.drop_after_bytes = None
    hub.drop_connection = 1
    with pytest.raises((urllib.error.URLError, http.client.RemoteDisconnected, ConnectionError)):
        get(hub.file_url("org/r", "f.bin"))
    assert get(hub.file_url("org/r", "f.bin"))[0] == 200  # only the next request was dropped
