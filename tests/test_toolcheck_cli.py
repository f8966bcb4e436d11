"""``verify`` and ``render`` with the tools a user really runs: an MCP server over stdio and streamable HTTP,
tool files; every bad input is one line and exit 2, or a failed stage — never a traceback."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.patching import patch_templates
from tests.mcp_servers.harness import free_port, http_server, read_log, returned_marker, stdio_command
from tests.mcp_servers.metrics_server import PARAM_DESCRIPTION
from tests.test_toolcheck import HERMES_TOOL_USE, generated_tools

pytest.importorskip("xllamacpp")
pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples/hermes-2-pro-mistral-7b.chatml.gguf"


def run(*args: Any) -> Any:
    res = CliRunner().invoke(main_group, [*map(str, args)])
    # an exception that escaped the CLI (a traceback for the user) shows up here as anything but SystemExit
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output and "Traceback" not in res.stderr
    return res


def mcp_cmd(log: Path, *extra: str) -> str:
    return shlex.join([*stdio_command(), "--log", str(log), *extra])


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("patched") / "hermes.tool_use.gguf"
    patch_templates(SAMPLE, out, set_templates={"tool_use": HERMES_TOOL_USE})
    return out


def tool_stages(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"].removeprefix("tools: "): s for s in doc["stages"] if s["name"].startswith("tools: ")}


def test_verify_with_an_mcp_server_before_and_after_patch(patched: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    before = run("verify", SAMPLE, "--mcp", mcp_cmd(log), "--format", "json")
    assert before.exit_code == 1
    st = tool_stages(json.loads(before.stdout))
    assert st["schema in prompt"]["status"] == "fail"
    assert [st[n]["status"] for n in ("call parsed", "arguments valid", "dispatched", "result rendered")] == [
        "skip"
    ] * 4
    assert read_log(log) == []

    after = run("verify", patched, "--mcp", mcp_cmd(log), "--format", "json")
    assert after.exit_code == 0, after.stdout
    st = tool_stages(json.loads(after.stdout))
    assert {s["status"] for s in st.values()} == {"pass"}
    assert len(st) == 7
    (call,) = read_log(log)
    assert call["tool"] == "lookup_metric"
    assert json.dumps(call["args"], ensure_ascii=False) in st["call parsed"]["evidence"]
    assert returned_marker(log, st["result rendered"]["evidence"])


def test_verify_over_streamable_http_and_text_output(patched: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    with http_server(log) as url:
        res = run("verify", patched, "--mcp-url", url)
    assert res.exit_code == 0, res.stdout
    assert "tools: dispatched" in res.stdout and returned_marker(log, res.stdout)
    assert len(read_log(log)) == 1


def test_render_with_an_mcp_server_shows_the_parameter_description(patched: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    res = run("render", patched, "--mcp", mcp_cmd(log))
    assert res.exit_code == 0, res.output
    assert PARAM_DESCRIPTION in res.stdout
    assert read_log(log) == []  # render lists tools, it never calls them


def test_three_hundred_tools_from_a_file(patched: Path, tmp_path: Path) -> None:
    f = tmp_path / "tools.json"
    f.write_text(json.dumps(generated_tools(300)), encoding="utf-8")
    res = run("verify", patched, "--tools", f, "--format", "json", "--call", "tool_007")
    doc = json.loads(res.stdout)
    st = tool_stages(doc)
    assert st["schema in prompt"]["status"] == "pass"
    budget = st["context budget"]
    # the sample's 32768-token context cannot take 300 tools written out byte by byte
    assert budget["status"] == "fail" and "does not fit" in budget["evidence"]
    assert st["call parsed"]["status"] == "pass" and "tool_007" in st["call parsed"]["evidence"]
    assert st["dispatched"]["status"] == "skip"
    assert res.exit_code == 1


def test_share_warning_does_not_fail(patched: Path, tmp_path: Path) -> None:
    f = tmp_path / "tools.json"
    f.write_text(json.dumps(generated_tools(3)), encoding="utf-8")
    res = run("verify", patched, "--tools", f, "--format", "json", "--max-tool-share", "0.01")
    st = tool_stages(json.loads(res.stdout))
    assert st["context budget"]["status"] == "warn" and "--max-tool-share" in st["context budget"]["evidence"]
    assert res.exit_code == 0


def _one_line_error(res: Any, expect: str) -> None:
    assert res.exit_code == 2, res.output
    err = res.stderr.strip()
    assert err.startswith("gguftpl: error:") and "\n" not in err and expect in err, err


def test_bad_tool_sources_are_one_line_and_exit_2(patched: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"functions": [{"name": "x"}]}), encoding="utf-8")
    _one_line_error(run("verify", patched, "--tools", wrong), "not a tools list")
    _one_line_error(run("verify", patched, "--mcp", "gguftpl-no-such-server --stdio"), "command not found")
    _one_line_error(run("verify", patched, "--mcp-url", f"http://127.0.0.1:{free_port()}/mcp"), "cannot connect")
    _one_line_error(run("verify", patched, "--mcp-url", "not a url"), "--mcp-url")
    dies = shlex.join([sys.executable, "-c", "import sys; print('missing API key', file=sys.stderr); sys.exit(1)"])
    _one_line_error(run("verify", patched, "--mcp", dies), "missing API key")
    log = tmp_path / "calls.jsonl"
    _one_line_error(run("verify", patched, "--mcp", mcp_cmd(log), "--call", "nope"), "no such tool")
    _one_line_error(run("verify", patched, "--mcp", mcp_cmd(log), "--args", "{nope"), "--args")
    assert read_log(log) == []


def test_bad_calls_are_failed_stages(patched: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    bad_args = run("verify", patched, "--mcp", mcp_cmd(log), "--args", '{"project": 7}', "--format", "json")
    assert bad_args.exit_code == 1
    st = tool_stages(json.loads(bad_args.stdout))
    assert st["arguments valid"]["status"] == "fail" and "project" in st["arguments valid"]["evidence"]
    assert st["dispatched"]["status"] == "skip"
    assert read_log(log) == []

    crash = run("verify", patched, "--mcp", mcp_cmd(log, "--crash"), "--format", "json")
    assert crash.exit_code == 1
    st = tool_stages(json.loads(crash.stdout))
    assert st["dispatched"]["status"] == "fail" and "tools/call" in st["dispatched"]["evidence"]
    assert st["result rendered"]["status"] == "skip"
    assert len(read_log(log)) == 1  # it got the call, then died


def test_mcp_env_reaches_the_server(patched: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = shlex.join(stdio_command())
    log = tmp_path / "calls.jsonl"
    # the SDK passes only a safe subset of the environment: without --mcp-env the server gets no log path
    monkeypatch.setenv("GGUFTPL_TEST_MCP_LOG", str(log))
    assert run("verify", patched, "--mcp", cmd).exit_code == 0
    assert read_log(log) == []
    assert run("verify", patched, "--mcp", cmd, "--mcp-env", "GGUFTPL_TEST_MCP_LOG").exit_code == 0
    assert len(read_log(log)) == 1
    other = tmp_path / "other.jsonl"
    res = run("verify", patched, "--mcp", cmd, "--mcp-env", f"GGUFTPL_TEST_MCP_LOG={other}")
    assert res.exit_code == 0 and len(read_log(other)) == 1 and len(read_log(log)) == 1
    _one_line_error(run("verify", patched, "--mcp", cmd, "--mcp-env", "=x"), "--mcp-env")


def test_json_with_data_has_the_per_tool_costs(patched: Path, tmp_path: Path) -> None:
    f = tmp_path / "tools.json"
    f.write_text(json.dumps(generated_tools(5)), encoding="utf-8")
    res = run("verify", patched, "--tools", f, "--format", "json", "--with-data")
    assert res.exit_code == 0, res.stdout
    budget = tool_stages(json.loads(res.stdout))["context budget"]["data"]
    costs = budget["per_tool_tokens"]
    assert sorted(costs) == [f"tool_{i:03d}" for i in range(5)] and all(c > 0 for c in costs.values())
    assert budget["tool_tokens"] == budget["prompt_tokens_with_tools"] - budget["prompt_tokens_without_tools"]
    assert "with only that tool" in budget["per_tool_method"]


def test_a_tool_error_still_goes_to_the_next_turn(patched: Path, tmp_path: Path) -> None:
    from tests.mcp_servers.metrics_server import UNKNOWN_PROJECT

    log = tmp_path / "calls.jsonl"
    args = json.dumps({"project": UNKNOWN_PROJECT})
    res = run("verify", patched, "--mcp", mcp_cmd(log), "--args", args, "--format", "json")
    st = tool_stages(json.loads(res.stdout))
    assert st["dispatched"]["status"] == "warn" and "isError" in st["dispatched"]["evidence"]
    assert st["result rendered"]["status"] == "pass"
    assert f"no such project: {UNKNOWN_PROJECT}" in st["result rendered"]["evidence"]
    assert res.exit_code == 0
    assert read_log(log) == [{"tool": "lookup_metric", "args": {"project": UNKNOWN_PROJECT}}]
