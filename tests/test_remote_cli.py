"""The command line on remote GGUFs: ``inspect``/``audit`` of ``hf://`` files and ``audit --repo``, against
the local Hub server (HF_ENDPOINT points at it; nothing leaves 127.0.0.1)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.gguf.httpsource import DEFAULT_MAX_CHUNK
from tests.conftest import CHATML
from tests.hubserver import HubServer

SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"


def run(*args: str) -> Any:
    return CliRunner().invoke(main_group, list(args), catch_exceptions=False)


def served(hub: HubServer) -> list[Any]:
    return [r for r in hub.log if "/resolve/" in r.path]


def test_remote_inspect_equals_local_inspect(hub: HubServer, corpus_file: Any) -> None:
    path = corpus_file(SMOL)
    hub.add_file("org/smol-GGUF", SMOL, path)
    remote = run("inspect", "--format", "json", f"hf://org/smol-GGUF/{SMOL}")
    local = run("inspect", "--format", "json", str(path))
    assert remote.exit_code == 0 and local.exit_code == 0
    (r,) = json.loads(remote.output)["files"]
    (lo,) = json.loads(local.output)["files"]
    info = r.pop("remote")
    sha = hub.commit_sha("org/smol-GGUF")
    assert r.pop("path") == f"hf://org/smol-GGUF/{SMOL}@{sha}"
    lo.pop("path")
    assert r == lo
    # the "remote" object tells what it cost, and agrees with the server's log
    log = served(hub)
    assert info["bytes_fetched"] == sum(x.bytes_sent for x in log)
    assert info["requests"] == len(log)
    assert info["revision"] == sha
    assert lo["data_offset"] <= info["bytes_fetched"] <= lo["data_offset"] + DEFAULT_MAX_CHUNK
    assert info["bytes_fetched"] < lo["file_size"] / 10


def test_remote_inspect_by_resolve_url(hub: HubServer, make_gguf: Any) -> None:
    p = make_gguf("m.gguf", templates={"default": CHATML})
    hub.add_file("org/m", "m.gguf", p)
    res = run("inspect", "--format", "json", hub.file_url("org/m", "m.gguf"))
    assert res.exit_code == 0
    (info,) = json.loads(res.output)["files"]
    assert [t["name"] for t in info["templates"]] == ["default"]
    assert info["remote"]["repo_id"] == "org/m"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("hf://org/nope/m.gguf", "repository org/nope not found"),
        ("hf://org/m/other.gguf", "other.gguf not found in org/m@main"),
        ("hf://org/m/m.gguf@nobranch", "revision 'nobranch' not found"),
    ],
)
def test_remote_inspect_errors_are_one_line_exit_2(hub: HubServer, make_gguf: Any, spec: str, message: str) -> None:
    hub.add_file("org/m", "m.gguf", make_gguf("m.gguf"))
    res = CliRunner().invoke(main_group, ["inspect", spec])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and message in res.output and "Traceback" not in res.output


def test_remote_inspect_offline(hub: HubServer, make_gguf: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add_file("org/m", "m.gguf", make_gguf("m.gguf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    res = CliRunner().invoke(main_group, ["inspect", "hf://org/m/m.gguf"])
    assert res.exit_code == 2 and "HF_HUB_OFFLINE" in res.output
    assert served(hub) == []
