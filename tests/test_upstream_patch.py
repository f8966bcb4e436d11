"""gguftpl patch --from-hub / --from-catalog, end to end: the local Hub server, the real rewriter, the real
audit, and the committed bartowski-like sample and the real SmolLM2 GGUF."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gguftpl.audit import audit_file
from gguftpl.cli import main_group
from gguftpl.gguf.reader import read_header
from gguftpl.templates.templateset import load_templateset
from gguftpl.upstream.catalog import load_catalog
from gguftpl.upstream.patchplan import read_provenance
from tests.conftest import CHATML
from tests.hubserver import HubServer, tokenizer_config

HERMES = "NousResearch/Hermes-2-Pro-Mistral-7B"
SAMPLE = "hermes-2-pro-mistral-7b.chatml.gguf"


def hermes() -> dict[str, str]:
    e = load_catalog().get(HERMES)
    assert e is not None
    return {n: e.text(n) for n in e.templates}


def gguftpl(args: list[str], hub: HubServer | None, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HF_HOME=str(home), TRANSFORMERS_VERBOSITY="error")
    env.pop("HF_HUB_OFFLINE", None)
    if hub is not None:
        env["HF_ENDPOINT"] = hub.url
    return subprocess.run([sys.executable, "-m", "gguftpl", *args], env=env, capture_output=True, text=True)


def data_digest(path: Path) -> tuple[str, list[tuple[str, tuple[int, ...], int, int]]]:
    """sha256 of everything after the data offset, and the tensor infos, read independently of the writer."""
    with read_header(path) as h:
        infos = [(t.name, t.shape, t.ggml_type, t.offset) for t in h.tensors]
        start = h.data_offset
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        fh.seek(start)
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest(), infos


def tool_errors(path: Path) -> list[str]:
    return [
        f"{f.code}:{f.template}"
        for f in audit_file(path).findings
        if f.code.startswith("GT2") and f.severity.value == "error"
    ]


@pytest.fixture
def hub(tmp_path: Path):
    with HubServer(tmp_path / "hub") as server:
        yield server


def test_seed_case_end_to_end(samples_dir: Path, hub: HubServer, tmp_path: Path) -> None:
    src = samples_dir / SAMPLE
    sha = hub.add_repo(
        HERMES, {"tokenizer_config.json": tokenizer_config(hermes(), bos_token="<s>", eos_token="<|im_end|>")}
    )
    home = tmp_path / "hf"
    before_errors = tool_errors(src)
    assert before_errors, "the sample must fail the tool audit before the patch"

    d = gguftpl(["diff", str(src), "--hub", HERMES, "--format", "json"], hub, home)
    assert d.returncode == 1, d.stderr
    assert json.loads(d.stdout)["summary"]["lost_templates"] == ["tool_use"]

    out = tmp_path / "patched.gguf"
    p = gguftpl(["patch", str(src), "--from-hub", HERMES, "-o", str(out)], hub, home)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "add" in p.stdout and "tool_use" in p.stdout and "replace" in p.stdout
    assert "tool-calling findings (audit before -> after)" in p.stdout
    assert tool_errors(out) == []
    assert data_digest(out) == data_digest(src)

    ts = load_templateset(read_header(out))
    up = hermes()
    assert {n: t.text for n, t in ts.templates.items()} == up
    assert ts.listed_names == ["tool_use"]

    # provenance, through `inspect --format json` (what a user would read)
    i = gguftpl(["inspect", str(out), "--format", "json"], None, home)
    prov = json.loads(i.stdout)["files"][0]["provenance"]
    assert prov["gguftpl.patch.source_repo"] == HERMES
    assert prov["gguftpl.patch.revision"] == sha
    assert prov["gguftpl.patch.source"] == "hub"
    for name, text in up.items():
        assert prov[f"gguftpl.patch.template.{name}.sha256"] == hashlib.sha256(text.encode()).hexdigest()
    old = load_templateset(read_header(src)).templates["default"]
    assert prov["gguftpl.patch.template.default.replaced_sha256"] == old.sha256
    assert "gguftpl.patch.template.tool_use.replaced_sha256" not in prov

    # the patched file now agrees with upstream
    again = gguftpl(["diff", str(out), "--hub", HERMES, "--no-behaviour"], hub, home)
    assert again.returncode == 0, again.stdout + again.stderr


def test_dry_run_only_and_no_provenance(samples_dir: Path, hub: HubServer, tmp_path: Path) -> None:
    src = samples_dir / SAMPLE
    hub.add_repo(HERMES, {"tokenizer_config.json": tokenizer_config(hermes())})
    home = tmp_path / "hf"
    out = tmp_path / "o.gguf"
    dry = gguftpl(["patch", str(src), "--from-hub", HERMES, "--dry-run"], hub, home)
    assert dry.returncode == 0 and "dry run" in dry.stdout and "+++ upstream:" in dry.stdout
    assert not out.exists() and list(tmp_path.glob("*.gguf")) == []

    only = gguftpl(
        ["patch", str(src), "--from-hub", HERMES, "--only", "tool_use", "--no-provenance", "-o", str(out)], hub, home
    )
    assert only.returncode == 0, only.stderr
    ts = load_templateset(read_header(out))
    assert ts.templates["default"].text == load_templateset(read_header(src)).templates["default"].text
    assert ts.templates["tool_use"].text == hermes()["tool_use"]
    assert read_provenance(ts) == {}
    assert tool_errors(out) == []

    bad = gguftpl(["patch", str(src), "--from-hub", HERMES, "--only", "rag", "-o", str(tmp_path / "x.gguf")], hub, home)
    assert bad.returncode == 2 and "not among" in bad.stderr and not (tmp_path / "x.gguf").exists()


def test_unsafe_output_refused_before_any_request(samples_dir: Path, hub: HubServer, tmp_path: Path) -> None:
    src = samples_dir / SAMPLE
    hub.add_repo(HERMES, {"tokenizer_config.json": tokenizer_config(hermes())})
    r = gguftpl(["patch", str(src), "--from-hub", HERMES], hub, tmp_path / "hf")
    assert r.returncode == 2 and "-o" in r.stderr
    r = gguftpl(
        ["patch", str(src), "--from-hub", HERMES, "--from-catalog", "-o", str(tmp_path / "o.gguf")],
        hub,
        tmp_path / "hf",
    )
    assert r.returncode == 2 and "cannot be used together" in r.stderr
    assert hub.log == []


def test_unreachable_hub_falls_back_loudly_and_restamps_provenance(
    samples_dir: Path, hub: HubServer, tmp_path: Path
) -> None:
    src = samples_dir / SAMPLE
    hub.drop_connection = True
    out = tmp_path / "o.gguf"
    r = gguftpl(["patch", str(src), "--from-hub", HERMES, "-o", str(out)], hub, tmp_path / "hf")
    assert r.returncode == 0, r.stderr
    assert "WARNING: the Hub could not be reached" in r.stderr and "PROXY" in r.stderr
    prov = read_provenance(load_templateset(read_header(out)))
    entry = load_catalog().get(HERMES)
    assert prov["gguftpl.patch.source"] == "catalog" and prov["gguftpl.patch.revision"] == entry.revision  # type: ignore[union-attr]
    assert prov["gguftpl.patch.template.tool_use.status"] == "PROXY"

    r2 = gguftpl(
        ["patch", str(src), "--from-hub", HERMES, "--no-fallback", "-o", str(tmp_path / "n.gguf")], hub, tmp_path / "hf"
    )
    assert r2.returncode == 2 and r2.stderr.count("\n") == 1 and not (tmp_path / "n.gguf").exists()

    # a second patch from another source: the old provenance keys must not survive next to the new ones
    hub.drop_connection = False
    qwen = load_catalog().get("Qwen/Qwen2.5-7B-Instruct")
    res = CliRunner().invoke(
        main_group,
        ["patch", str(out), "--from-catalog", qwen.repo_id, "--no-audit", "-o", str(tmp_path / "q.gguf")],  # type: ignore[union-attr]
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    prov2 = read_provenance(load_templateset(read_header(tmp_path / "q.gguf")))
    assert prov2["gguftpl.patch.source_repo"] == qwen.repo_id  # type: ignore[union-attr]
    assert prov2["gguftpl.patch.templates"] == "default"
    assert not any(".tool_use." in k for k in prov2)


def test_remove_with_from_catalog(make_gguf, tmp_path: Path) -> None:
    src = make_gguf("r.gguf", templates={"default": CHATML, "rag": "{{ documents }}"})
    out = tmp_path / "o.gguf"
    res = CliRunner().invoke(
        main_group,
        [
            "patch",
            str(src),
            "--from-catalog",
            HERMES,
            "--only",
            "tool_use",
            "--remove",
            "rag",
            "--no-audit",
            "-o",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "remove" in res.output
    ts = load_templateset(read_header(out))
    assert sorted(ts.templates) == ["default", "tool_use"] and ts.listed_names == ["tool_use"]
    prov = read_provenance(ts)
    assert prov["gguftpl.patch.removed"] == "rag" and prov["gguftpl.patch.source"] == "catalog"
    bad = CliRunner().invoke(
        main_group, ["patch", str(src), "--from-catalog", HERMES, "--remove", "nope", "-o", str(tmp_path / "x.gguf")]
    )
    assert bad.exit_code == 2 and not (tmp_path / "x.gguf").exists()


def test_from_catalog_auto_matches_by_name(make_gguf, tmp_path: Path) -> None:
    src = make_gguf("m.gguf", templates={"default": CHATML}, extra_kv={"general.name": "Hermes-3-Llama-3.1-8B"})
    out = tmp_path / "o.gguf"
    res = CliRunner().invoke(main_group, ["patch", str(src), "--from-catalog", "--only", "tool_use", "-o", str(out)])
    assert res.exit_code == 0, res.output
    ts = load_templateset(read_header(out))
    assert ts.templates["tool_use"].text == load_catalog().get("NousResearch/Hermes-3-Llama-3.1-8B").text("tool_use")  # type: ignore[union-attr]
    assert read_provenance(ts)["gguftpl.patch.template.tool_use.status"] == "EXACT"


def test_real_smollm2_gets_the_hermes_tool_use_template(corpus_file, hub: HubServer, tmp_path: Path) -> None:
    src = corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf")
    ts = load_templateset(read_header(src))
    repo = "HuggingFaceTB/SmolLM2-135M-Instruct"
    own = ts.templates["default"].text
    hub.add_repo(repo, {"tokenizer_config.json": tokenizer_config({"default": own, "tool_use": hermes()["tool_use"]})})
    before = tool_errors(src)
    assert before
    out = tmp_path / "smol.gguf"
    home = tmp_path / "hf"
    d = gguftpl(["diff", str(src), "--hub", repo, "--format", "json", "--no-behaviour"], hub, home)
    assert d.returncode == 1 and json.loads(d.stdout)["summary"]["lost_templates"] == ["tool_use"]
    p = gguftpl(["patch", str(src), "--from-hub", repo, "-o", str(out)], hub, home)
    assert p.returncode == 0, p.stdout + p.stderr
    # the default is already upstream's: a keep row with the file's own sha256
    own_sha = hashlib.sha256(own.encode()).hexdigest()[:12]
    assert re.search(rf"^  keep +default +tokenizer\.chat_template +{own_sha} \(identical\)$", p.stdout, re.M), p.stdout
    assert tool_errors(out) == []
    assert data_digest(out) == data_digest(src)
    after = load_templateset(read_header(out))
    assert after.templates["default"].text == own
    prov = read_provenance(after)
    assert prov["gguftpl.patch.templates"] == "tool_use" and prov["gguftpl.patch.source_repo"] == repo


def test_upstream_that_agrees_writes_nothing(samples_dir: Path, tmp_path: Path) -> None:
    """The upstream sample already has the catalog's templates: the plan says so, exit 0, no file."""
    src = samples_dir / "hermes-2-pro-mistral-7b.upstream.gguf"
    out = tmp_path / "o.gguf"
    res = CliRunner().invoke(main_group, ["patch", str(src), "--from-catalog", HERMES, "-o", str(out)])
    assert res.exit_code == 0, res.output
    ts = load_templateset(read_header(src))
    for name, t in ts.templates.items():
        assert re.search(rf"^  keep +{name} +{re.escape(t.key)} +{t.sha256[:12]} \(identical\)$", res.output, re.M)
    assert "no template changes" in res.output and res.output.endswith("nothing written\n")
    assert "other keys:" not in res.output  # no provenance for a patch that changes nothing
    assert not out.exists()


def test_plan_from_upstream_is_the_patching_plan(make_gguf, tmp_path: Path) -> None:
    """One plan type: the upstream plan is ``patching.PatchPlan`` with provenance in ``extra_kv``, and the
    one formatter prints its source, provenance and the keys of an earlier patch it removes."""
    from gguftpl.cli.patch_cmd import plan_text
    from gguftpl.patching import PatchPlan
    from gguftpl.upstream.catalog import catalog_upstream
    from gguftpl.upstream.patchplan import plan_from_upstream

    stale = "gguftpl.patch.template.rag.sha256"
    src = make_gguf("m.gguf", templates={"default": CHATML}, extra_kv={stale: "0" * 64})
    tset = load_templateset(read_header(src))
    up = catalog_upstream(HERMES)
    plan = plan_from_upstream(tset, up, only=["tool_use"])
    assert isinstance(plan, PatchPlan) and plan.upstream is up
    assert [(i.name, i.action) for i in plan.items] == [("tool_use", "add")]
    assert plan.set_kv["tokenizer.chat_template.tool_use"] == up.templates["tool_use"]
    assert (
        plan.extra_kv["gguftpl.patch.template.tool_use.sha256"]
        == hashlib.sha256(up.templates["tool_use"].encode()).hexdigest()
    )
    assert all(plan.set_kv[k] == v for k, v in plan.extra_kv.items())
    assert stale in plan.remove_keys
    text = plan_text(plan)
    assert text.startswith(f"plan for {src}: templates from {up.label} (catalog)\n")
    assert f"+++ upstream:{up.label}:tool_use" in text
    assert f"  remove    {stale}\n" in text
    assert "  set       gguftpl.patch.source = catalog\n" in text
    # without provenance: no extra keys, and the earlier patch's keys stay
    bare = plan_from_upstream(tset, up, only=["tool_use"], provenance=False)
    assert bare.extra_kv == {} and stale not in bare.remove_keys
