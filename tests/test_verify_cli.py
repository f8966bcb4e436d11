"""``gguftpl verify`` end to end through a real llama.cpp: exit codes, text and JSON traces, tool sources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.verify.result import CORE_STAGES

pytest.importorskip("xllamacpp")

ROOT = Path(__file__).resolve().parent.parent
CHATML_SAMPLE = ROOT / "samples/hermes-2-pro-mistral-7b.chatml.gguf"
UPSTREAM_SAMPLE = ROOT / "samples/hermes-2-pro-mistral-7b.upstream.gguf"
NO_TEMPLATE_SAMPLE = ROOT / "samples/no-template.gguf"


def run(*args: Any) -> Any:
    res = CliRunner().invoke(main_group, ["verify", *map(str, args)])
    # an exception escaping the command (not SystemExit) must fail the test with its traceback
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res


def test_json_trace_and_exit_codes() -> None:
    bad = run(CHATML_SAMPLE, "--format", "json")
    assert bad.exit_code == 1, bad.output
    doc = json.loads(bad.output)
    assert set(doc) >= {"path", "stages", "ok"}
    assert doc["ok"] is False and doc["path"] == str(CHATML_SAMPLE)
    assert [s["name"] for s in doc["stages"]] == list(CORE_STAGES)
    assert all(set(s) == {"name", "status", "evidence"} and s["evidence"] for s in doc["stages"])
    assert {s["name"]: s["status"] for s in doc["stages"]}["schema in prompt"] == "fail"

    good = run(UPSTREAM_SAMPLE, "--format", "json")
    assert good.exit_code == 0, good.output
    assert json.loads(good.output)["ok"] is True


def test_text_trace_names_each_stage() -> None:
    res = run(NO_TEMPLATE_SAMPLE)
    assert res.exit_code == 1
    lines = res.output.splitlines()
    assert lines[0].startswith(str(NO_TEMPLATE_SAMPLE))
    for i, name in enumerate(CORE_STAGES, 1):
        assert any(f"{i}. {name}" in ln for ln in lines), name
    assert "FAIL 1. template selection" in res.output
    assert "falls back to its built-in ChatML" in res.output
    assert res.output.rstrip().splitlines()[-2].startswith("failed: template selection")
    # no template and no upstream gguftpl can name: a base model, for which no template file is a repair
    assert res.output.rstrip().splitlines()[-1].startswith("repair: no template repair gives this model tools")


def test_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    missing = run(tmp_path / "nope.gguf")
    assert missing.exit_code == 2
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf at all")
    res = run(bad)
    assert res.exit_code == 2
    assert res.output.startswith("gguftpl: error:") and len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("opts", [["--call", "get_weather"], ["--args", "{}"]])
def test_call_or_args_without_tools_is_a_usage_error(opts: list[str]) -> None:
    """Without the user's tools, the canary is called: the option would be ignored silently."""
    res = run(UPSTREAM_SAMPLE, *opts)
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "--tools, --mcp or --mcp-url" in lines[0], lines


def test_tools_file_adds_tool_checks() -> None:
    res = run(UPSTREAM_SAMPLE, "--tools", ROOT / "samples/tools.json", "--format", "json")
    doc = json.loads(res.output)
    names = [s["name"] for s in doc["stages"]]
    assert names[:5] == list(CORE_STAGES)
    extra = {s["name"]: s for s in doc["stages"][5:]}
    assert extra, names
    assert all(n.startswith("tools: ") for n in extra)
    assert extra["tools: schema in prompt"]["status"] == "pass"
    assert extra["tools: call parsed"]["status"] == "pass", extra["tools: call parsed"]["evidence"]
    assert res.exit_code == (0 if doc["ok"] else 1)

    dropped = run(CHATML_SAMPLE, "--tools", ROOT / "samples/tools.json", "--format", "json")
    ddoc = json.loads(dropped.output)
    st = {s["name"]: s for s in ddoc["stages"]}
    assert st["tools: schema in prompt"]["status"] == "fail"
    assert "get_current_weather" in st["tools: schema in prompt"]["evidence"]


def test_load_weights_gives_the_same_trace_as_the_standin() -> None:
    with_standin = json.loads(run(UPSTREAM_SAMPLE, "--format", "json").output)
    real = run(UPSTREAM_SAMPLE, "--format", "json", "--load-weights")
    assert real.exit_code == 0, real.output
    doc = json.loads(real.output)
    assert "standin" not in doc and "standin" in with_standin
    assert [(s["name"], s["status"]) for s in doc["stages"]] == [
        (s["name"], s["status"]) for s in with_standin["stages"]
    ]


def test_the_canary_strings_are_explained_once() -> None:
    """The probe data (qz7canary…, gguftpl_canary_lookup) is quoted in the stages' evidence: one line says what it
    is, under the first stage that quotes it (issue 26 item 6)."""
    from gguftpl.templates.probes import CANARY_LEGEND

    res = run(UPSTREAM_SAMPLE)
    assert res.exit_code == 0, res.output
    assert res.output.count(CANARY_LEGEND) == 1
    lines = res.output.splitlines()
    first = next(i for i, ln in enumerate(lines) if "qz7canary" in ln or "gguftpl_canary" in ln)
    legend = next(i for i, ln in enumerate(lines) if CANARY_LEGEND in ln)
    assert first < legend  # under the stage that first quotes it, before the next stage starts
    assert not [ln for ln in lines[first + 1 : legend] if ln.lstrip().startswith(("PASS", "FAIL", "SKIP"))]
