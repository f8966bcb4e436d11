"""`gguftpl inspect` and the CLI's error contract (one line, exit 2), through the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import CHATML, SAMPLES


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gguftpl", *args], capture_output=True, text=True, timeout=300)


def test_inspect_json_shape(make_gguf):
    path = make_gguf("m.gguf", templates={"default": CHATML, "tool_use": "{{ tools }}"})
    r = run("inspect", "--format", "json", str(path))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    f = doc["files"][0]
    for key in ("path", "gguf_version", "tensor_count", "data_offset", "alignment", "templates", "special_tokens"):
        assert key in f
    assert [t["name"] for t in f["templates"]] == ["default", "tool_use"]
    assert f["templates"][1]["key"] == "tokenizer.chat_template.tool_use"
    import hashlib

    assert f["templates"][0]["sha256"] == hashlib.sha256(CHATML.encode()).hexdigest()
    assert f["templates"][0]["length"] == len(CHATML.encode())
    import gguf

    reader = gguf.GGUFReader(str(path))
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    bos_id = reader.fields["tokenizer.ggml.bos_token_id"].contents()
    assert f["special_tokens"]["bos"] == {"id": bos_id, "text": tokens[bos_id], "type": "CONTROL"}
    assert tokens[bos_id] == "<|im_start|>"
    assert f["tensor_count"] == 12 and f["data_offset"] % f["alignment"] == 0


def test_inspect_raw_is_exact_bytes(make_gguf):
    text = "{{ 'é' }}\n\n"  # non-ASCII and trailing newlines survive
    path = make_gguf("m.gguf", templates={"default": CHATML, "tool_use": text})
    r = subprocess.run(
        [sys.executable, "-m", "gguftpl", "inspect", str(path), "--template", "tool_use", "--raw"],
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 0
    assert r.stdout == text.encode("utf-8")


def test_inspect_text_on_real_file(corpus_file):
    r = run("inspect", str(corpus_file("ggml-vocab-command-r.gguf")))
    assert r.returncode == 0, r.stderr
    assert "template tool_use (tokenizer.chat_template.tool_use)" in r.stdout
    assert "template rag" in r.stdout and "256000 tokens" in r.stdout


def test_list_disagreement_is_shown(make_gguf):
    path = make_gguf(
        "m.gguf",
        templates={"default": CHATML, "tool_use": "x"},
        list_names=False,
        extra_kv={"tokenizer.chat_templates": ["rag"]},
    )
    r = run("inspect", "--format", "json", str(path))
    tl = json.loads(r.stdout)["files"][0]["template_list"]
    assert tl == {"names": ["rag"], "agrees": False, "unlisted": ["tool_use"], "listed_without_key": ["rag"]}


def test_bad_inputs_one_line_exit_2(tmp_path):
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a gguf at all")
    cases = [
        ("inspect", str(tmp_path / "missing.gguf")),
        ("inspect", str(garbage)),
        ("inspect", str(SAMPLES / "no-template.gguf"), "--template", "tool_use", "--raw"),
        ("patch", str(garbage), "-o", str(tmp_path / "o.gguf"), "--template", f"default={garbage}"),
        ("patch", str(SAMPLES / "no-template.gguf"), "-o", str(tmp_path / "o.gguf"), "--template", "default=/nope"),
        ("patch", str(SAMPLES / "no-template.gguf"), "-o", str(tmp_path / "o.gguf")),
    ]
    for args in cases:
        r = run(*args)
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gguftpl: error: "), (args, r.stderr)
        assert "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["garbage.gguf"]


def test_patch_cli_prints_plan_and_proof(tmp_path):
    tpl = tmp_path / "t.jinja"
    tpl.write_text(CHATML)
    out = tmp_path / "o.gguf"
    r = run("patch", str(SAMPLES / "no-template.gguf"), "-o", str(out), "--template", f"default={tpl}")
    assert r.returncode == 0, r.stderr
    assert "add       default" in r.stdout
    assert "compared byte for byte with the source: identical" in r.stdout
    dry = run(
        "patch",
        str(SAMPLES / "no-template.gguf"),
        "-o",
        str(tmp_path / "d.gguf"),
        "--template",
        f"default={tpl}",
        "--dry-run",
    )
    assert dry.returncode == 0 and not (tmp_path / "d.gguf").exists()


def test_patch_template_prints_before_after_and_writes_provenance(tmp_path):
    """`gguftpl patch FILE --template tool_use=T -o OUT` goes through the same pipeline as --from-hub: the
    audit before -> after, and gguftpl.patch.* provenance naming the template file."""
    import hashlib

    tpl = SAMPLES.parent / "upstream_templates" / "NousResearch" / "Hermes-2-Pro-Mistral-7B" / "tool_use.jinja"
    src = SAMPLES / "hermes-2-pro-mistral-7b.chatml.gguf"
    out = tmp_path / "o.gguf"
    r = run("patch", str(src), "--template", f"tool_use={tpl}", "-o", str(out), "--show-diff")
    assert r.returncode == 0, r.stderr
    assert "tool-calling findings (audit before -> after):" in r.stdout
    before, after = r.stdout.split("  before: ", 1)[1].split("  after:  ", 1)
    assert "GT201 error   default" in before.split("\n  after")[0] and "GT201" not in after.split("all findings")[0]
    assert "all findings (audit before -> after): 1 error, 1 warning, 1 info -> " in r.stdout
    assert "  fixed:      1 error\n    GT201 error   default" in r.stdout
    assert "  set       gguftpl.patch.source = file\n" in r.stdout  # the plan shows the provenance it writes
    prov = json.loads(run("inspect", "--format", "json", str(out)).stdout)["files"][0]["provenance"]
    sha = hashlib.sha256(tpl.read_bytes()).hexdigest()
    assert prov["gguftpl.patch.source"] == "file" and prov["gguftpl.patch.templates"] == "tool_use"
    assert prov["gguftpl.patch.template.tool_use.source"] == str(tpl)
    assert prov["gguftpl.patch.template.tool_use.sha256"] == sha
    assert "gguftpl.patch.source_repo" not in prov and "gguftpl.patch.revision" not in prov

    # --no-provenance and --no-audit work on this path too
    bare = tmp_path / "bare.gguf"
    r = run("patch", str(src), "--template", f"tool_use={tpl}", "-o", str(bare), "--no-provenance", "--no-audit")
    assert r.returncode == 0, r.stderr
    assert "audit before" not in r.stdout and "gguftpl.patch." not in r.stdout
    bare_prov = json.loads(run("inspect", "--format", "json", str(bare)).stdout)["files"][0]["provenance"]
    assert not [k for k in bare_prov if k.startswith("gguftpl.patch.")]

    # patching the patched file from another file restates provenance: no key of the first patch survives
    again = tmp_path / "again.gguf"
    r = run("patch", str(out), "--remove", "tool_use", "-o", str(again))
    assert r.returncode == 0, r.stderr
    prov2 = json.loads(run("inspect", "--format", "json", str(again)).stdout)["files"][0]["provenance"]
    assert prov2["gguftpl.patch.removed"] == "tool_use" and prov2["gguftpl.patch.source"] == "file"
    assert not any(".tool_use." in k for k in prov2)
