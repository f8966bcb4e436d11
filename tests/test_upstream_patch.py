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
from gguftpl.gguf.templateset import load_templateset
from gguftpl.patchplan import read_provenance
from gguftpl.upstream.catalog import load_catalog
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
    dry = gguftpl(["patch", str(src), "--from-hub", HERMES, "--dry-run", "--show-diff"], hub, home)
    assert dry.returncode == 0 and "dry run" in dry.stdout and "+++ upstream:" in dry.stdout
    short = gguftpl(["patch", str(src), "--from-hub", HERMES, "--dry-run"], hub, home)
    assert short.returncode == 0 and "dry run" in short.stdout and "+++ upstream:" not in short.stdout
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
    assert "WARNING: the Hub could not be reached" in r.stderr and "using the bundled catalog copy" in r.stderr
    prov = read_provenance(load_templateset(read_header(out)))
    entry = load_catalog().get(HERMES)
    assert prov["gguftpl.patch.source"] == "catalog" and prov["gguftpl.patch.revision"] == entry.revision  # type: ignore[union-attr]
    assert prov["gguftpl.patch.template.tool_use.status"] == "EXACT"

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
    assert re.search(
        rf"^  keep +default +tokenizer\.chat_template +[\d,]+ B +{own_sha} \(identical\)$", p.stdout, re.M
    ), p.stdout
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
        assert re.search(
            rf"^  keep +{name} +{re.escape(t.key)} +{len(t.text.encode()):,} B +{t.sha256[:12]} \(identical\)$",
            res.output,
            re.M,
        )
    assert "no template changes" in res.output and res.output.endswith("nothing written\n")
    assert "other keys:" not in res.output  # no provenance for a patch that changes nothing
    assert not out.exists()


def test_plan_from_upstream_is_the_patching_plan(make_gguf, tmp_path: Path) -> None:
    """One plan type: the upstream plan is ``patchplan.PatchPlan`` with provenance in ``extra_kv``, and the
    one formatter prints its source, provenance and the keys of an earlier patch it removes."""
    from gguftpl.patchplan import PatchPlan, plan_from_upstream
    from gguftpl.patchtext import plan_text
    from gguftpl.upstream.catalog import catalog_upstream

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
    text = plan_text(plan, show_diff=True)
    assert text.startswith(f"plan for {src}: templates from {up.label} (catalog)\n")
    assert f"+++ upstream:{up.label}:tool_use" in text
    assert f"  remove    {stale}\n" in text
    assert "  set       gguftpl.patch.source = catalog\n" in text
    # without provenance: no extra keys, and the earlier patch's keys stay
    bare = plan_from_upstream(tset, up, only=["tool_use"], provenance=False)
    assert bare.extra_kv == {} and stale not in bare.remove_keys


# --------------------------------------------------------------------------------------- from Python: one call


def test_patch_from_upstream_repairs_the_sample_in_one_call(monkeypatch, tmp_path: Path, capsys) -> None:
    """The issue's acceptance call, exactly: one call writes provenance and returns the before/after."""
    import dataclasses

    import gguftpl

    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    out = tmp_path / "fixed.gguf"
    result = gguftpl.patch_from_upstream(
        "samples/hermes-2-pro-mistral-7b.chatml.gguf", out, catalog="NousResearch/Hermes-2-Pro-Mistral-7B"
    )
    assert isinstance(result, gguftpl.PatchResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.output = "elsewhere"  # type: ignore[misc]
    assert result.before is not None and result.after is not None and result.summary is not None
    assert "GT201" in {f.code for f in result.before}
    assert "GT201" not in {f.code for f in result.after}
    assert "GT201" in {f.code for f in result.summary.fixed}
    # every summary counts every finding, not only the tool-calling ones
    for counts, found in ((result.summary.counts_before, result.before), (result.summary.counts_after, result.after)):
        assert sum(counts.values()) == len(found)
        assert counts == {s: sum(f.severity.value == s for f in found) for s in ("error", "warning", "info")}
    assert len(result.before) - len(result.summary.fixed) == len(result.after) - len(result.summary.introduced)
    # the byte proof, the read-back and the provenance
    assert result.output == str(out) and result.proof is not None
    assert result.proof.data_identical and result.proof.tensor_infos_identical and result.readback_ok
    assert data_digest(out) == data_digest(Path("samples/hermes-2-pro-mistral-7b.chatml.gguf"))
    prov = read_provenance(load_templateset(read_header(out)))
    assert prov["gguftpl.patch.source"] == "catalog" and prov["gguftpl.patch.source_repo"] == HERMES
    assert [(i.name, i.action) for i in result.plan.items] == [("default", "replace"), ("tool_use", "add")]
    assert result.plan.how_found == "bundled catalog"
    # the library says nothing: what the user should hear is data
    assert capsys.readouterr() == ("", "")
    assert any(w.startswith(f"catalog entry {HERMES}: exact upstream") for w in result.plan.warnings)


def test_patch_from_upstream_refuses_before_any_work(samples_dir: Path, tmp_path: Path) -> None:
    import gguftpl
    from gguftpl.errors import PatchError, UsageError

    src = samples_dir / SAMPLE
    with pytest.raises(UsageError, match="repo and catalog cannot be used together"):
        gguftpl.patch_from_upstream(src, tmp_path / "o.gguf", repo=HERMES, catalog=HERMES)
    with pytest.raises(UsageError, match="name the upstream"):
        gguftpl.patch_from_upstream(src, tmp_path / "o.gguf")
    with pytest.raises(PatchError, match="give -o OUT"):
        gguftpl.patch_from_upstream(src, catalog=HERMES)
    # an unsafe output is refused before the Hub is asked (HF_ENDPOINT points at the discard port)
    (tmp_path / "exists.gguf").write_bytes(b"keep")
    with pytest.raises(PatchError, match="--force"):
        gguftpl.patch_from_upstream(src, tmp_path / "exists.gguf", repo="org/never-fetched")
    with pytest.raises(UsageError, match="inside options"):
        gguftpl.patch_from_upstream(src, options=gguftpl.PatchOptions(), in_place=True, catalog=HERMES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exists.gguf"]


def test_patch_from_upstream_options_and_agreeing_upstream(samples_dir: Path, tmp_path: Path) -> None:
    import gguftpl

    src = samples_dir / SAMPLE
    out = tmp_path / "o.gguf"
    opts = gguftpl.PatchOptions(provenance=False, audit=False)
    r = gguftpl.patch_from_upstream(src, out, catalog="auto", only=["tool_use"], options=opts)
    assert r.written and r.before is None and r.after is None and r.summary is None
    assert read_provenance(load_templateset(read_header(out))) == {}
    assert [(i.name, i.action) for i in r.plan.items] == [("tool_use", "add")]
    # upstream agrees with the file: nothing written, not an error
    same = gguftpl.patch_from_upstream(
        samples_dir / "hermes-2-pro-mistral-7b.upstream.gguf", tmp_path / "s.gguf", catalog=HERMES
    )
    assert not same.written and same.proof is None and not (tmp_path / "s.gguf").exists()


def test_resolve_upstream_returns_its_warnings_as_data(samples_dir: Path, capsys) -> None:
    from gguftpl.errors import UsageError
    from gguftpl.upstream.resolve import UpstreamSource, resolve_upstream

    tset = load_templateset(read_header(samples_dir / SAMPLE))
    got = resolve_upstream(tset, UpstreamSource(catalog="auto"))
    assert got.config.repo_id == HERMES and got.how == "bundled catalog (matched)"
    assert got.warnings[0].startswith(f"catalog entry {HERMES} chosen by")
    assert capsys.readouterr() == ("", "")
    with pytest.raises(UsageError, match="--hub and --catalog cannot be used together"):
        UpstreamSource(repo=HERMES, catalog=HERMES)


def test_patch_cli_and_library_share_one_plan_text(samples_dir: Path, tmp_path: Path) -> None:
    """The CLI prints the library's plan text and result text, nothing of its own making."""
    import gguftpl
    from gguftpl.patchtext import plan_text, result_text

    src = samples_dir / SAMPLE
    out = tmp_path / "lib.gguf"
    r = gguftpl.patch_from_upstream(src, out, catalog=HERMES)
    res = CliRunner().invoke(
        main_group, ["patch", str(src), "--from-catalog", HERMES, "-o", str(tmp_path / "cli.gguf")]
    )
    assert res.exit_code == 0, res.output
    assert res.stdout == f"{src}: bundled catalog\n" + plan_text(r.plan) + result_text(r).replace(
        str(out), str(tmp_path / "cli.gguf")
    )


def test_patching_and_diffing_from_python_load_no_click(samples_dir: Path, tmp_path: Path) -> None:
    code = f"""
import sys, gguftpl
from gguftpl.patchtext import plan_text, result_text
from gguftpl.upstream.difftext import diff_text
r = gguftpl.patch_from_upstream({str(samples_dir / SAMPLE)!r}, {str(tmp_path / "o.gguf")!r}, catalog={HERMES!r})
plan_text(r.plan), result_text(r)
source, options = gguftpl.UpstreamSource(catalog={HERMES!r}), gguftpl.DiffOptions(behaviour=False)
d = gguftpl.diff({str(samples_dir / SAMPLE)!r}, source, options)
diff_text(d)
from gguftpl.inspect import inspect_file, inspect_text
inspect_text(*inspect_file({str(tmp_path / "o.gguf")!r}))
print(sorted(m for m in sys.modules if m == "click" or m.startswith("click.")))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


# --- refuse or say "nothing" before the plan (issue 26 item 5) ------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--from-catalog"],
        ["--from-catalog", "--tools-in-default"],
        ["--remove", "tool_use"],
        ["--template", "default={template}"],
    ],
    ids=["catalog", "tools-in-default", "remove", "template"],
)
def test_a_missing_output_folder_is_refused_before_the_plan(samples_dir: Path, tmp_path: Path, argv: list[str]) -> None:
    template = tmp_path / "t.jinja"
    template.write_text(CHATML, encoding="utf-8")
    missing = tmp_path / "no" / "such" / "x.gguf"
    args = ["patch", str(samples_dir / SAMPLE), *[a.format(template=template) for a in argv], "-o", str(missing)]
    res = CliRunner().invoke(main_group, args)
    assert res.exit_code == 2
    assert res.stdout == ""  # no plan, no warnings about the source: refused first
    assert res.stderr == f"gguftpl: error: output folder does not exist: {missing.parent}\n"
    report = CliRunner().invoke(main_group, ["audit", str(samples_dir / SAMPLE), "-o", str(missing)])
    assert report.exit_code == 2 and report.stdout == ""
    assert report.stderr == f"gguftpl: error: output folder does not exist: {missing.parent}\n"


def test_a_repatch_says_nothing_to_change_up_front(make_gguf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A file that has upstream's templates already (here without the name list, so a plan would set that key):
    the first line after the source says nothing changes, no "other keys" are planned, nothing is written."""
    entry = load_catalog().get(HERMES)
    assert entry is not None
    texts = {n: entry.text(n) for n in entry.templates}
    path = make_gguf("again.gguf", templates=texts, list_names=False)
    out = tmp_path / "o.gguf"
    res = CliRunner().invoke(main_group, ["patch", str(path), "--from-catalog", HERMES, "-o", str(out)])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[1].startswith(f"nothing to change: {path} already has {HERMES}@"), lines
    assert "other keys:" not in res.stdout and res.stdout.endswith("nothing written\n")
    assert not out.exists()
    # the same templates given as files (to a file whose name list is right): one line, before any plan
    listed = make_gguf("listed.gguf", templates=texts)
    default = tmp_path / "default.jinja"
    default.write_text(texts["default"], encoding="utf-8")
    res = CliRunner().invoke(main_group, ["patch", str(listed), "--template", f"default={default}", "-o", str(out)])
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr == "gguftpl: error: nothing to change: the file already has exactly these templates\n"
