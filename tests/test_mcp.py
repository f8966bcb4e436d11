"""The MCP client against a real server written with the official SDK, over stdio and streamable HTTP."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gguftpl.errors import ToolSourceError
from gguftpl.verify.mcp import McpConnection, McpServerSpec, open_mcp_tools
from tests.mcp_servers.harness import LOG_ENV, http_server, read_log, returned_marker, stdio_command
from tests.mcp_servers.metrics_server import PARAM_DESCRIPTION


def _stdio(log: Path, **env: str) -> McpServerSpec:
    return McpServerSpec.stdio(stdio_command(), env={LOG_ENV: str(log), **env})


def _check_session(conn: McpConnection, log: Path) -> None:
    assert conn.server_name == "metrics"
    (tool,) = conn.list_tools()
    assert tool["name"] == "lookup_metric"
    assert tool["inputSchema"]["properties"]["project"]["description"] == PARAM_DESCRIPTION
    assert read_log(log) == []
    res = conn.call_tool("lookup_metric", {"project": "gguftpl"})
    assert not res.is_error and returned_marker(log, res.text) and "gguftpl" in res.text
    assert read_log(log) == [{"tool": "lookup_metric", "args": {"project": "gguftpl"}}]
    # a bad call is the server's answer, not a crash of ours
    bad = conn.call_tool("lookup_metric", {"name": 1})
    assert bad.is_error
    assert len(read_log(log)) == 1


def test_stdio_list_and_call(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    with McpConnection(_stdio(log), timeout=30) as conn:
        _check_session(conn, log)


def test_streamable_http_list_and_call(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    with http_server(log) as url, McpConnection(McpServerSpec.http(url), timeout=30) as conn:
        _check_session(conn, log)


def test_one_server_is_not_prefixed_several_are(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    with open_mcp_tools([_stdio(log)]) as src:
        assert [t.name for t in src.tools] == ["lookup_metric"]
    with http_server(log) as url, open_mcp_tools([_stdio(log), McpServerSpec.http(url)]) as src:
        assert [t.name for t in src.tools] == ["metrics__lookup_metric", "metrics_2__lookup_metric"]
        second = src.tools[1]
        conn = src.connection_for(second)
        assert conn is not None and conn.spec.transport == "http"
        assert second.remote_name == "lookup_metric"
        conn.call_tool(second.remote_name, {"project": "p2"})
    assert read_log(log) == [{"tool": "lookup_metric", "args": {"project": "p2"}}]
    with open_mcp_tools([_stdio(log)], prefix="x_{server}.") as src:
        assert [t.name for t in src.tools] == ["x_metrics_lookup_metric"]


@pytest.mark.parametrize(
    ("spec", "expect"),
    [
        (McpServerSpec.stdio("gguftpl-no-such-command --stdio"), "command not found"),
        (
            McpServerSpec.stdio(
                [sys.executable, "-c", "import sys; print('bad config file', file=sys.stderr); sys.exit(3)"]
            ),
            "bad config file",
        ),
        (McpServerSpec.stdio([sys.executable, "-c", "print('hello, not json-rpc')"]), "failed to start"),
    ],
)
def test_a_server_that_cannot_start_is_one_line(spec: McpServerSpec, expect: str) -> None:
    with pytest.raises(ToolSourceError, match=expect) as err:
        McpConnection(spec, timeout=10).__enter__()
    assert "\n" not in str(err.value)


def test_an_unreachable_url_is_one_line(tmp_path: Path) -> None:
    from tests.mcp_servers.harness import free_port

    with pytest.raises(ToolSourceError, match="cannot connect") as err:
        McpConnection(McpServerSpec.http(f"http://127.0.0.1:{free_port()}/mcp"), timeout=10).__enter__()
    assert "\n" not in str(err.value)
    with pytest.raises(ToolSourceError, match="http"):
        McpServerSpec.http("ftp://example/mcp")


def test_a_server_that_dies_mid_call(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    with McpConnection(_stdio(log, GGUFTPL_TEST_MCP_CRASH="1"), timeout=30) as conn:
        with pytest.raises(ToolSourceError, match="tools/call lookup_metric failed") as err:
            conn.call_tool("lookup_metric", {"project": "x"})
        assert "\n" not in str(err.value)
        with pytest.raises(ToolSourceError):
            conn.list_tools()
    # the call did reach the server before it died
    assert read_log(log) == [{"tool": "lookup_metric", "args": {"project": "x"}}]


def test_a_server_that_never_answers_times_out(tmp_path: Path) -> None:
    hang = tmp_path / "hang.py"
    hang.write_text("import time\ntime.sleep(600)\n", encoding="utf-8")
    with pytest.raises(ToolSourceError, match="did not answer|failed to start") as err:
        McpConnection(McpServerSpec.stdio([sys.executable, str(hang)]), timeout=1).__enter__()
    assert "\n" not in str(err.value)


def test_files_and_servers_together(tmp_path: Path) -> None:
    import json

    from gguftpl.verify.tools import parse_arguments_json
    from gguftpl.verify.toolsources import open_tool_sources

    log = tmp_path / "calls.jsonl"
    f = tmp_path / "tools.json"
    f.write_text(json.dumps([{"name": "local_tool", "parameters": {"type": "object", "properties": {}}}]), "utf-8")
    cmd = " ".join(stdio_command())
    with open_tool_sources([f], [cmd], env={LOG_ENV: str(log)}) as src:
        assert [t.name for t in src.tools] == ["local_tool", "lookup_metric"]
        local, remote = src.tools
        assert src.dispatcher_for(local) is None and src.dispatcher_for(remote) is not None
        with pytest.raises(ToolSourceError, match="not from an MCP server"):
            src.dispatch(local, {})
        assert returned_marker(log, src.dispatch(remote, {"project": "x"}).text)
    assert read_log(log) == [{"tool": "lookup_metric", "args": {"project": "x"}}]
    assert parse_arguments_json('{"project": "x"}') == {"project": "x"}
    from gguftpl.errors import UsageError

    for bad in ("[1]", "{nope"):
        with pytest.raises(UsageError, match="--args"):
            parse_arguments_json(bad)
