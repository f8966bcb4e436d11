"""gguftpl diff: templates, special tokens and behaviour against an upstream served over real HTTP
(tests/hubserver.py) or given as a folder, with real rendering (transformers) and real GGUFs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.gguf.reader import read_header
from gguftpl.gguf.templateset import load_templateset
from gguftpl.templates.probes import CANARY_PARAM_TOKEN
from gguftpl.upstream.catalog import load_catalog
from gguftpl.upstream.diff import diff_templateset
from gguftpl.upstream.hub import load_upstream_dir
from tests.conftest import CHATML
from tests.hubserver import HubServer, tokenizer_config

HERMES = "NousResearch/Hermes-2-Pro-Mistral-7B"


def hermes() -> dict[str, str]:
    e = load_catalog().get(HERMES)
    assert e is not None
    return {n: e.text(n) for n in e.templates}


def upstream_files_for(gguf: Path, templates: dict[str, str] | str, **tc_extra: Any) -> dict[str, str]:
    """tokenizer_config.json + generation_config.json that agree with the GGUF's own special tokens
    (ids and texts read back from the file, not assumed)."""
    ts = load_templateset(read_header(gguf))
    added = {}
    for role in ("bos", "eos"):
        tok = ts.special_tokens[role]
        added[str(tok.id)] = {"content": tok.text, "special": True}
    for text in ("<tool_call>", "</tool_call>"):
        tid = ts.token_id(text)
        if tid is not None:
            added[str(tid)] = {"content": text, "special": ts.token_type(tid) == 3}
    tc = json.loads(
        tokenizer_config(
            templates,
            bos_token=ts.special_tokens["bos"].text,
            eos_token=ts.special_tokens["eos"].text,
            added_tokens_decoder=added,
            **tc_extra,
        )
    )
    # a different JSON layout than anything the GGUF side saw: escaped, sorted, no indentation
    return {
        "tokenizer_config.json": json.dumps(tc, sort_keys=True, ensure_ascii=True),
        "generation_config.json": json.dumps({"eos_token_id": ts.special_tokens["eos"].id}),
    }


def cli_subprocess(args: list[str], hub: HubServer, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HF_ENDPOINT=hub.url, HF_HOME=str(home), TRANSFORMERS_VERBOSITY="error")
    env.pop("HF_HUB_OFFLINE", None)
    return subprocess.run([sys.executable, "-m", "gguftpl", *args], env=env, capture_output=True, text=True)


def cli(args: list[str]) -> Any:
    return CliRunner().invoke(main_group, args, catch_exceptions=False)


@pytest.fixture
def hub(tmp_path: Path):
    with HubServer(tmp_path / "hub") as server:
        yield server


def test_identical_to_own_upstream_despite_json_layout_and_trailing_newline(make_gguf, hub, tmp_path) -> None:
    tpl = hermes()
    gguf = make_gguf("same.gguf", templates=tpl)
    hub.add_repo(HERMES, upstream_files_for(gguf, tpl))
    r = cli_subprocess(["diff", str(gguf), "--hub", HERMES, "--format", "json"], hub, tmp_path / "hf")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["identical"] is True
    assert [t["status"] for t in out["templates"]] == ["identical", "identical"]
    assert all(b["identical"] for b in out["behaviour"])
    assert out["special_tokens"]["compared"] is True and out["special_tokens"]["differences"] == []
    assert out["upstream"]["commit_sha"] == hub.commit_sha(HERMES)

    # chat_template.jinja with a trailing newline (kept byte for byte by converter and by us)
    jin = {"default": CHATML + "\n", "tool_use": tpl["tool_use"] + "\n"}
    gguf2 = make_gguf("jinja.gguf", templates=jin)
    d = tmp_path / "up"
    (d / "additional_chat_templates").mkdir(parents=True)
    files = upstream_files_for(gguf2, {})
    (d / "tokenizer_config.json").write_text(files["tokenizer_config.json"])
    (d / "chat_template.jinja").write_text(jin["default"])
    (d / "additional_chat_templates" / "tool_use.jinja").write_text(jin["tool_use"])
    res = cli(["diff", str(gguf2), "--upstream", str(d)])
    assert res.exit_code == 0, res.output
    assert "identical to upstream" in res.output


def test_seed_case_tool_use_lost_in_conversion(make_gguf, hub, tmp_path, samples_dir) -> None:
    sample = samples_dir / "hermes-2-pro-mistral-7b.chatml.gguf"
    gguf = sample if sample.exists() else make_gguf("bartowski.gguf", templates={"default": CHATML})
    tpl = hermes()
    hub.add_repo(HERMES, upstream_files_for(gguf, tpl))
    r = cli_subprocess(["diff", str(gguf), "--hub", HERMES, "--format", "json"], hub, tmp_path / "hf")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    by_name = {t["name"]: t for t in out["templates"]}
    assert by_name["tool_use"]["status"] == "upstream_only"
    assert by_name["tool_use"]["reads_tools"] == {"upstream": True}
    assert by_name["default"]["status"] == "changed" and by_name["default"]["unified_diff"].startswith("--- gguf:")
    assert out["summary"]["lost_templates"] == ["tool_use"]
    tools = next(b for b in out["behaviour"] if b["probe"] == "tools")
    assert (tools["gguf_template"], tools["upstream_template"]) == ("default", "tool_use")
    assert tools["identical"] is False
    assert tools["tools_in_prompt"] == {"gguf": False, "upstream": True}
    codes = {(f["code"], f["severity"], f["template"]) for f in out["findings"]}
    assert ("GT501", "error", "tool_use") in codes and ("GT502", "warning", "default") in codes

    text = cli_subprocess(["diff", str(gguf), "--hub", HERMES], hub, tmp_path / "hf")
    assert text.returncode == 1
    assert "only upstream" in text.stdout and "lost in conversion" in text.stdout
    assert f"--from-hub {HERMES}" in text.stdout


def test_remote_gguf_header_only(samples_dir, hub, tmp_path) -> None:
    """diff reads a GGUF on the Hub by its header (HTTP Range), never the whole file."""
    sample = samples_dir / "hermes-2-pro-mistral-7b.chatml.gguf"
    quant_repo = "bartowski/Hermes-2-Pro-Mistral-7B-GGUF"
    hub.add_file(quant_repo, "Hermes-2-Pro-Mistral-7B-Q4_K_M.gguf", sample)
    hub.add_repo(HERMES, upstream_files_for(sample, hermes()))
    url = f"hf://{quant_repo}/Hermes-2-Pro-Mistral-7B-Q4_K_M.gguf"
    r = cli_subprocess(["diff", url, "--hub", HERMES, "--format", "json", "--no-behaviour"], hub, tmp_path / "hf")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["file"].startswith(url) and out["summary"]["lost_templates"] == ["tool_use"]
    gguf_reads = [r for r in hub.log if r.path.endswith(".gguf") and r.method == "GET"]
    assert gguf_reads and all(r.range for r in gguf_reads)


def test_behaviour_first_difference_is_located(make_gguf) -> None:
    tpl = hermes()
    changed = tpl["tool_use"].replace("You are a function calling AI model.", "You are a helpful model.")
    assert changed != tpl["tool_use"]
    ts = load_templateset(read_header(make_gguf(templates={"default": tpl["default"], "tool_use": changed})))
    up = load_catalog().get(HERMES).to_upstream()  # type: ignore[union-attr]
    res = diff_templateset(ts, up)
    tools = next(b for b in res.behaviour if b.probe == "tools")
    assert tools.identical is False
    # derive the expected offset independently: render upstream's prompt and find where the texts part
    from gguftpl.engines.transformers import render_hf
    from gguftpl.templates import probes

    bos = ts.special_tokens["bos"].text or ""
    eos = ts.special_tokens["eos"].text or ""
    prompt = render_hf(
        tpl["tool_use"], probes.tools_conversation(), tools=probes.canary_tools(), bos_token=bos, eos_token=eos
    )
    at = prompt.index("function calling AI model")
    assert tools.first_difference == at
    line = prompt.count("\n", 0, at) + 1
    assert tools.gguf_position == tools.upstream_position == f"{line}:{at - prompt.rfind(chr(10), 0, at)}"
    assert "helpful" in tools.gguf_excerpt and "function calling" in tools.upstream_excerpt
    plain = next(b for b in res.behaviour if b.probe == "plain")
    assert plain.identical is True
    assert res.tokens_compared is False  # the catalog has no token data
    assert CANARY_PARAM_TOKEN  # the probes' canary is what tools_in_prompt looks for
    assert tools.tools_in_prompt == {"gguf": True, "upstream": True}


def test_whitespace_only_and_ignore_whitespace(make_gguf, tmp_path) -> None:
    tpl = hermes()
    gguf = make_gguf(templates={"default": tpl["default"], "tool_use": tpl["tool_use"].replace("\n", "\n  ", 3)})
    d = tmp_path / "up"
    d.mkdir()
    (d / "tokenizer_config.json").write_text(tokenizer_config(tpl))
    res = cli(["diff", str(gguf), "--upstream", str(d), "--no-behaviour", "--format", "json"])
    out = json.loads(res.output)
    tu = next(t for t in out["templates"] if t["name"] == "tool_use")
    assert res.exit_code == 1 and tu["status"] == "changed" and tu["whitespace_only"] is True
    res2 = cli(["diff", str(gguf), "--upstream", str(d), "--no-behaviour", "--ignore-whitespace"])
    assert res2.exit_code == 0, res2.output


def test_special_token_differences(make_gguf, tmp_path) -> None:
    gguf = make_gguf(templates={"default": CHATML}, eos="<|im_start|>")  # wrong eos in the GGUF
    ts = load_templateset(read_header(gguf))
    im_end, tool_call = ts.token_id("<|im_end|>"), ts.token_id("<tool_call>")
    assert ts.token_type(tool_call) == 3  # CONTROL in this GGUF
    d = tmp_path / "up"
    d.mkdir()
    (d / "tokenizer_config.json").write_text(
        tokenizer_config(
            CHATML,
            bos_token="<|im_start|>",
            eos_token="<|im_end|>",
            added_tokens_decoder={
                str(im_end): {"content": "<|im_end|>", "special": True},
                str(tool_call): {"content": "<tool_call>", "special": False},
                str(ts.vocab_size + 5): {"content": "<beyond>", "special": True},
            },
        )
    )
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": im_end}))
    res = diff_templateset(ts, load_upstream_dir(d), behaviour=False)
    paths = {t.path: t for t in res.tokens}
    assert paths["eos.id"].gguf == ts.special_tokens["eos"].id and paths["eos.id"].upstream == im_end
    assert paths["eos.text"].upstream == "<|im_end|>"
    assert paths[f"added[{tool_call}].control"].severity == "note"  # converter marks it CONTROL on purpose
    assert paths[f"added[{ts.vocab_size + 5}].text"].gguf is None
    assert any(t.kind == "generation_eos" for t in res.token_differences)
    assert not res.identical


def test_discovery_and_errors_in_the_cli(make_gguf, hub, tmp_path) -> None:
    tpl = hermes()
    gguf = make_gguf(
        templates=tpl,
        extra_kv={"general.base_model.count": 1, "general.base_model.0.repo_url": f"https://huggingface.co/{HERMES}"},
    )
    hub.add_repo(HERMES, upstream_files_for(gguf, tpl))
    r = cli_subprocess(["diff", str(gguf)], hub, tmp_path / "hf")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "discovered from general.base_model.0.repo_url" in r.stdout

    r = cli_subprocess(["diff", str(gguf), "--hub", "org/missing"], hub, tmp_path / "hf")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "repository not found" in r.stderr

    nameless = make_gguf("nameless.gguf", templates={"default": "{{ messages }}"})
    res = cli(["diff", str(nameless)])
    assert res.exit_code == 2 and "pass --hub" in res.output

    res = cli(["diff", str(gguf), "--hub", HERMES, "--upstream", str(tmp_path)])
    assert res.exit_code == 2 and "cannot be used together" in res.output


def test_offline_cli_warm_and_cold(make_gguf, hub, tmp_path) -> None:
    """HF_HUB_OFFLINE in the environment of a fresh process: the warm cache answers, a cold one is exit 2."""
    tpl = hermes()
    gguf = make_gguf(templates=tpl)
    hub.add_repo(HERMES, upstream_files_for(gguf, tpl))
    home = tmp_path / "hf"
    assert cli_subprocess(["diff", str(gguf), "--hub", HERMES, "--no-behaviour"], hub, home).returncode == 0
    hub.clear_log()
    env = dict(os.environ, HF_ENDPOINT=hub.url, HF_HOME=str(home), HF_HUB_OFFLINE="1")
    run = [sys.executable, "-m", "gguftpl", "diff", str(gguf), "--no-behaviour", "--no-fallback", "--hub"]
    warm = subprocess.run([*run, HERMES], env=env, capture_output=True, text=True)
    assert warm.returncode == 0, warm.stderr
    assert "offline" in warm.stderr and "local cache (offline)" in warm.stdout
    cold = subprocess.run([*run, "org/other"], env=env, capture_output=True, text=True)
    assert cold.returncode == 2 and "HF_HUB_OFFLINE" in cold.stderr and cold.stderr.count("\n") == 1
    assert hub.log == []


def test_upstream_sample_matches_the_catalog(samples_dir) -> None:
    res = cli(["diff", str(samples_dir / "hermes-2-pro-mistral-7b.upstream.gguf"), "--catalog", HERMES])
    assert res.exit_code == 0, res.output


def test_catalog_source_in_the_cli(make_gguf) -> None:
    gguf = make_gguf(templates={"default": CHATML})
    res = cli(["diff", str(gguf), "--catalog", HERMES, "--no-behaviour"])
    assert res.exit_code == 1
    assert "bundled catalog" in res.output and "catalog text EXACT (byte-verified" in res.output
    assert f"--from-catalog {HERMES}" in res.output


def test_real_smollm2_against_an_upstream_with_tool_use(corpus_file, tmp_path) -> None:
    gguf = corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf")
    ts = load_templateset(read_header(gguf))
    own = ts.templates["default"].text
    d = tmp_path / "up"
    d.mkdir()
    (d / "tokenizer_config.json").write_text(tokenizer_config(own, eos_token=ts.special_tokens["eos"].text))
    assert diff_templateset(ts, load_upstream_dir(d)).identical

    (d / "tokenizer_config.json").write_text(
        tokenizer_config({"default": own, "tool_use": hermes()["tool_use"]}, eos_token=ts.special_tokens["eos"].text)
    )
    res = diff_templateset(ts, load_upstream_dir(d))
    assert [t.name for t in res.lost_templates] == ["tool_use"]
    tools = next(b for b in res.behaviour if b.probe == "tools")
    assert tools.tools_in_prompt == {"gguf": False, "upstream": True}


def test_diff_is_a_library_call(samples_dir, capsys) -> None:
    """diff from Python: one call returns a typed, frozen DiffResult; the CLI prints the library's text."""
    import dataclasses

    import gguftpl
    from gguftpl.upstream.difftext import diff_data, diff_text
    from gguftpl.upstream.resolve import UpstreamSource

    sample = samples_dir / "hermes-2-pro-mistral-7b.chatml.gguf"
    res = gguftpl.diff(sample, UpstreamSource(catalog=HERMES), gguftpl.DiffOptions(behaviour=False, context=0))
    assert isinstance(res, gguftpl.DiffResult) and not res.identical
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.file = "x"  # type: ignore[misc]
    assert [t.name for t in res.lost_templates] == ["tool_use"] and res.behaviour == []
    changed = next(t for t in res.templates if t.name == "default")
    assert changed.status == "changed" and changed.unified_diff.startswith("--- gguf:default")
    # -U 0: no context lines, only the changed ones
    body = [ln for ln in changed.unified_diff.splitlines()[2:] if not ln.startswith("@@")]
    assert body and all(ln[0] in "+-\\" for ln in body)
    assert res.how_found == "bundled catalog"
    assert any(w.startswith(f"catalog entry {HERMES}: exact upstream") for w in res.upstream.warnings)
    assert capsys.readouterr() == ("", "")
    assert {f["code"] for f in diff_data(res)["findings"]} >= {"GT501"}
    out = cli(["diff", str(sample), "--catalog", HERMES, "--no-behaviour", "-U", "0"])
    assert out.exit_code == 1 and out.stdout == diff_text(res)
    # discovered when no source is named: the sample's name matches a catalog entry
    found = gguftpl.diff(sample, options=gguftpl.DiffOptions(behaviour=False))
    assert found.upstream.repo_id == HERMES


def test_sentencepiece_unk_is_not_a_difference(corpus_file, tmp_path) -> None:
    """A SentencePiece GGUF stores `<unk>` as UNKNOWN (llama.cpp's converter always does) while upstream's
    tokenizer_config marks it special: with every token equal, diff finds nothing and exits 0."""
    from gguftpl.patching import patch_templates

    gguf = tmp_path / "spm.gguf"
    patch_templates(corpus_file("ggml-vocab-llama-spm.gguf"), gguf, {"default": CHATML}, provenance=False)
    ts = load_templateset(read_header(gguf))
    assert (ts.token_text(0), ts.token_type(0)) == ("<unk>", 2)  # UNKNOWN
    added = {str(i): {"content": ts.token_text(i), "special": True} for i in (0, 1, 2)}
    folder = tmp_path / "upstream"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(
        tokenizer_config(CHATML, bos_token="<s>", eos_token="</s>", added_tokens_decoder=added), encoding="utf-8"
    )
    res = cli(["diff", str(gguf), "--upstream", str(folder), "--no-behaviour", "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert not [d for d in data["special_tokens"]["differences"] if d["severity"] == "difference"]


def test_diff_json_carries_the_fix_every_format_prints(make_gguf) -> None:
    """diff's findings carry findings.fix_text, as the audit's formats do: never null where the rule says a fix."""
    from gguftpl.findings import get_rule

    gguf = make_gguf(templates={"default": CHATML})
    res = CliRunner().invoke(main_group, ["diff", str(gguf), "--catalog", HERMES, "--no-behaviour", "--format", "json"])
    assert res.exit_code == 1, res.output
    findings = json.loads(res.stdout)["findings"]
    assert findings
    for f in findings:
        assert f["fix"] is not None or not get_rule(f["code"]).fix, f
