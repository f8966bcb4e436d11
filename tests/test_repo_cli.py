"""``gguftpl audit`` on the Hub: ``hf://`` files, ``--repo``, and ``--repo-check`` on a local folder, against
the local Hub server (HF_ENDPOINT points at it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from tests.conftest import CHATML
from tests.hubserver import HubServer

TOOL_USE = "{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}" + CHATML
SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"


@pytest.fixture
def quants(tmp_path: Path, make_gguf: Any) -> Path:
    """A converter's output folder: four quants, Q6_K lost its tool_use template."""
    out = tmp_path / "out"
    out.mkdir()
    for q in ("Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"):
        templates = {"default": CHATML} if q == "Q6_K" else {"default": CHATML, "tool_use": TOOL_USE}
        make_gguf(f"out/model-{q}.gguf", templates=templates, tensors=False)
    return out


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main_group, list(args))


def gt55(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted(
        (f["code"], f["location"]["file"])
        for fd in doc["files"]
        for f in fd["findings"]
        if f["code"].startswith("GT55")
    )


def test_audit_repo_json(hub: HubServer, quants: Path) -> None:
    for p in sorted(quants.iterdir()):
        sha = hub.add_file("conv/Model-GGUF", p.name, p)
    res = invoke("audit", "--repo", "conv/Model-GGUF", "--format", "json", "--no-upstream", "-j", "2")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.output)
    assert gt55(doc) == [("GT550", f"hf://conv/Model-GGUF/model-Q6_K.gguf@{sha}")]
    (repo,) = doc["repos"]
    assert repo["target"] == f"hf://conv/Model-GGUF@{sha}" and repo["jobs"] == 2
    served = [r for r in hub.log if "/resolve/" in r.path]
    assert doc["remote"] == {
        "files": 4,
        "bytes_fetched": sum(r.bytes_sent for r in served),
        "requests": len(served),
    }
    per_file = [fd["remote"]["bytes_fetched"] for fd in doc["files"] if "remote" in fd]
    assert len(per_file) == 4 and sum(per_file) == doc["remote"]["bytes_fetched"]


def test_audit_repo_sarif_validates(hub: HubServer, quants: Path) -> None:
    for p in sorted(quants.iterdir()):
        hub.add_file("conv/Model-GGUF", p.name, p)
    res = invoke("audit", "--repo", "conv/Model-GGUF@main", "--format", "sarif", "--no-upstream")
    assert res.exit_code == 1
    log = json.loads(res.output)
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    results = [r for r in log["runs"][0]["results"] if r["ruleId"] == "GT550"]
    assert len(results) == 1
    uri = results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("hf://conv/Model-GGUF/model-Q6_K.gguf@")


def test_audit_remote_file_has_remote_object(hub: HubServer, make_gguf: Any) -> None:
    p = make_gguf("m.gguf", templates={"default": CHATML, "tool_use": TOOL_USE})
    sha = hub.add_file("org/m", "m.gguf", p)
    res = invoke("audit", "hf://org/m/m.gguf", "--format", "json", "--exit-zero")
    assert res.exit_code == 0, res.output
    (fd,) = json.loads(res.output)["files"]
    assert fd["path"] == f"hf://org/m/m.gguf@{sha}"
    assert fd["remote"]["revision"] == sha and fd["remote"]["requests"] == 1
    assert fd["remote"]["bytes_fetched"] == p.stat().st_size  # a tiny file fits the first range
    # the same file audited locally has the same findings
    local = json.loads(invoke("audit", str(p), "--format", "json", "--exit-zero").output)["files"][0]
    assert [f["code"] for f in fd["findings"]] == [f["code"] for f in local["findings"]]


def test_audit_text_footer_and_hub_errors(hub: HubServer, make_gguf: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add_file("org/m", "m.gguf", make_gguf("m.gguf", templates={"default": CHATML}))
    res = invoke("audit", "hf://org/m/m.gguf", "--exit-zero", "--no-color")
    assert res.exit_code == 0 and "remote: 1 header(s) read over HTTP" in res.output
    res = invoke("audit", "--repo", "org/missing")
    assert res.exit_code == 2
    assert res.output.strip() == "gguftpl: error: repository org/missing not found (or private: set HF_TOKEN)"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    res = invoke("audit", "--repo", "org/m")
    assert res.exit_code == 2 and "HF_HUB_OFFLINE" in res.output and res.output.count("\n") == 1


def test_repo_check_on_a_local_folder(quants: Path) -> None:
    plain = invoke("audit", str(quants), "--format", "json", "--exit-zero")
    checked = invoke("audit", "--repo-check", str(quants), "--format", "json", "--no-upstream")
    assert gt55(json.loads(plain.output)) == []
    assert gt55(json.loads(checked.output)) == [("GT550", str(quants / "model-Q6_K.gguf"))]
    assert checked.exit_code == 1


def test_audit_needs_a_target() -> None:
    res = invoke("audit")
    assert res.exit_code == 2 and "--repo" in res.output


def test_inspect_repo(hub: HubServer, quants: Path) -> None:
    for p in sorted(quants.iterdir()):
        sha = hub.add_file("conv/Model-GGUF", p.name, p)
    res = invoke("inspect", "--repo", "conv/Model-GGUF", "--format", "json")
    assert res.exit_code == 0, res.output
    files = json.loads(res.output)["files"]
    assert [f["path"] for f in files] == [
        f"hf://conv/Model-GGUF/model-{q}.gguf@{sha}" for q in ("Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0")
    ]
    names = {f["path"].split("/")[-1].split("@")[0]: [t["name"] for t in f["templates"]] for f in files}
    assert names["model-Q6_K.gguf"] == ["default"] and names["model-Q8_0.gguf"] == ["default", "tool_use"]
    assert all(f["remote"]["revision"] == sha for f in files)
    res = invoke("inspect", "--repo", "conv/Nope")
    assert res.exit_code == 2 and "repository conv/Nope not found" in res.output
