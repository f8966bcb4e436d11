"""Rewriting templates: tensors byte-identical (checked independently), atomic, refuses unsafe outputs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.errors import GGUFFormatError, PatchError, TemplateError
from gguftpl.gguf.reader import read_header
from gguftpl.gguf.templateset import load_templateset
from gguftpl.gguf.writer import write_gguf
from gguftpl.patching import patch_templates
from tests.conftest import CHATML, ROOT, gguf_py_reader

HERMES_TOOL_USE = (
    ROOT / "upstream_templates" / "NousResearch" / "Hermes-2-Pro-Mistral-7B" / "tool_use.jinja"
).read_text(encoding="utf-8")


def _tensor_bytes_gguf_py(path) -> dict[str, bytes]:
    """Independent reader: gguf-py parses the file and slices each tensor by its own arithmetic."""
    reader = gguf_py_reader(path)
    return {t.name: t.data.tobytes() for t in reader.tensors}


def _templates_gguf_py(path) -> dict[str, str]:
    reader = gguf_py_reader(path)
    return {k: f.contents() for k, f in reader.fields.items() if k.startswith("tokenizer.chat_template")}


def test_patch_smollm2_with_hermes_tool_use(tmp_path, corpus_file):
    src = corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf")
    out = tmp_path / "smol.tool_use.gguf"
    before = src.stat().st_mtime_ns, src.stat().st_size
    result = patch_templates(src, out, {"tool_use": HERMES_TOOL_USE})
    assert (src.stat().st_mtime_ns, src.stat().st_size) == before
    assert result.proof.data_identical and result.proof.tensor_infos_identical and result.readback_ok
    assert result.proof.data_bytes > 90_000_000

    # an independent reader sees identical tensors and both templates
    a, b = _tensor_bytes_gguf_py(src), _tensor_bytes_gguf_py(out)
    assert list(a) == list(b) and len(a) == 272
    assert all(a[name] == b[name] for name in a)
    tpls = _templates_gguf_py(out)
    assert tpls["tokenizer.chat_template.tool_use"] == HERMES_TOOL_USE
    assert tpls["tokenizer.chat_template"] == load_templateset(read_header(src)).default.text
    assert tpls["tokenizer.chat_templates"] == ["tool_use"]
    # every other key is unchanged
    h_src, h_out = read_header(src), read_header(out)
    for key in h_src.kv:
        assert h_src.get(key) == h_out.get(key), key


def test_llama_cpp_sees_both_templates(tmp_path, corpus_file):
    pytest.importorskip("xllamacpp")
    from gguftpl.engines.llamacpp_session import LlamaCppSession

    out = tmp_path / "smol.tool_use.gguf"
    patch_templates(corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf"), out, {"tool_use": HERMES_TOOL_USE})
    # the real file, real weights: llama.cpp's own loader reads both keys
    with LlamaCppSession(out, load_weights=True) as session:
        props = session.props()
    # llama.cpp drops one trailing newline, as Jinja does by default (keep_trailing_newline=False)
    assert props["chat_template_tool_use"] == HERMES_TOOL_USE.removesuffix("\n")
    assert "<|im_start|>" in props["chat_template"]


def test_set_replace_remove_and_list(make_gguf, tmp_path):
    src = make_gguf("m.gguf", templates={"default": CHATML, "rag": "{{ messages }}"})
    out = tmp_path / "o.gguf"
    r = patch_templates(src, out, {"tool_use": HERMES_TOOL_USE, "default": "{{ 'x' }}"}, ["rag"])
    actions = {i.name: i.action for i in r.plan.items}
    assert actions == {"rag": "remove", "tool_use": "add", "default": "replace"}
    ts = load_templateset(read_header(out))
    assert set(ts.templates) == {"default", "tool_use"}
    assert ts.listed_names == ["tool_use"] and ts.list_mismatch is None
    # removing the last named template removes the list key too
    out2 = tmp_path / "o2.gguf"
    patch_templates(out, out2, {}, ["tool_use"])
    h = read_header(out2)
    assert "tokenizer.chat_templates" not in h and "tokenizer.chat_template.tool_use" not in h


def test_refusals_leave_nothing_behind(make_gguf, tmp_path):
    src = make_gguf("m.gguf", templates={"default": CHATML})
    original = src.read_bytes()
    with pytest.raises(PatchError, match="output is the input"):
        patch_templates(src, src, {"tool_use": HERMES_TOOL_USE})
    existing = tmp_path / "exists.gguf"
    existing.write_bytes(b"keep me")
    with pytest.raises(PatchError, match="--force"):
        patch_templates(src, existing, {"tool_use": HERMES_TOOL_USE})
    assert existing.read_bytes() == b"keep me"
    with pytest.raises(TemplateError, match="line 1"):
        patch_templates(src, tmp_path / "x.gguf", {"default": "{% if %}"})
    with pytest.raises(PatchError, match="must be 'default' or letters"):
        patch_templates(src, tmp_path / "x.gguf", {"bad name": CHATML})
    with pytest.raises(PatchError, match="nothing to change"):
        patch_templates(src, tmp_path / "x.gguf", {"default": CHATML})
    with pytest.raises(PatchError, match="no template named"):
        patch_templates(src, tmp_path / "x.gguf", {}, ["tool_use"])
    assert src.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exists.gguf", "m.gguf"]


def test_in_place_and_force(make_gguf, tmp_path):
    src = make_gguf("m.gguf", templates={"default": CHATML})
    tensors = _tensor_bytes_gguf_py(src)
    inode = src.stat().st_ino
    patch_templates(src, None, {"tool_use": HERMES_TOOL_USE}, in_place=True)
    assert src.stat().st_ino != inode  # replaced by rename, never written in place
    assert _tensor_bytes_gguf_py(src) == tensors
    out = tmp_path / "o.gguf"
    out.write_bytes(b"old")
    patch_templates(src, out, {"default": "{{ 'y' }}"}, force=True)
    assert load_templateset(read_header(out)).default.text == "{{ 'y' }}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf", "o.gguf"]


def test_truncated_tensor_data_is_refused(make_gguf, tmp_path):
    src = make_gguf("m.gguf", templates={"default": CHATML})
    data = src.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) - 100])
    with pytest.raises(GGUFFormatError, match="truncated"):
        patch_templates(cut, tmp_path / "o.gguf", {"tool_use": HERMES_TOOL_USE})
    assert not (tmp_path / "o.gguf").exists()


def _big_sparse_gguf(path, n_floats: int) -> None:
    write_gguf(
        path, {"general.architecture": "llama", "tokenizer.chat_template": CHATML}, [("big", (n_floats,), 0, b"")]
    )
    h = read_header(path)
    with open(path, "r+b") as fh:
        fh.truncate(h.data_offset + 4 * n_floats)
        fh.seek(h.data_offset + 4 * n_floats - 4)
        fh.write(b"\x01\x02\x03\x04")


def test_sigkill_mid_copy_leaves_input_intact_and_no_output(tmp_path):
    src = tmp_path / "big.gguf"
    _big_sparse_gguf(src, 16 * 1024 * 1024)  # 64 MiB of tensor data
    before = src.read_bytes()
    out = tmp_path / "out.gguf"
    child = textwrap.dedent(
        f"""
        import sys, time
        import gguftpl.gguf.regioncopy as w
        w.COPY_CHUNK = 1 << 20
        from gguftpl.patching import patch_templates
        def progress(done, total):
            if done >= 4 << 20:
                print("copying", flush=True)
                time.sleep(60)
        patch_templates({str(src)!r}, {str(out)!r}, {{"tool_use": "{{{{ 'x' }}}}"}}, progress=progress)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"copying"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()
    assert os.listdir(tmp_path) == ["big.gguf"]  # not even a temp file: the output was an unnamed inode
    assert src.read_bytes() == before


def _random_tensor_gguf(path, n_bytes: int, seed: int = 7) -> None:
    """One U8 tensor of random bytes: any shifted or stale block shows up in a comparison."""
    import random

    data = random.Random(seed).randbytes(n_bytes)
    write_gguf(
        path,
        {"general.architecture": "llama", "tokenizer.chat_template": CHATML},
        [("blob", (n_bytes,), 24, data)],  # 24 = GGML_TYPE_I8
    )


@pytest.mark.parametrize("method", ["copy_file_range", "pread/pwrite"])
def test_parallel_copy_across_many_uneven_blocks(tmp_path, monkeypatch, method):
    import gguftpl.gguf.regioncopy as w

    src = tmp_path / "m.gguf"
    _random_tensor_gguf(src, 3 * 1024 * 1024 + 12345)
    # blocks and compare pieces that line up with nothing: every worker boundary and tail is exercised
    monkeypatch.setattr(w, "COPY_CHUNK", 65536 + 7)
    monkeypatch.setattr(w, "COMPARE_PIECE", 4096 + 3)
    monkeypatch.setattr(w, "COPY_METHOD", method)
    out = tmp_path / "o.gguf"
    seen: list[int] = []
    result = patch_templates(src, out, {"tool_use": HERMES_TOOL_USE}, progress=lambda done, total: seen.append(done))
    assert result.proof.copy_method == method
    assert result.proof.data_identical
    assert seen and seen[-1] == result.proof.data_bytes and seen == sorted(seen)
    # independent of the writer: gguf-py slices both files by its own arithmetic
    assert _tensor_bytes_gguf_py(out) == _tensor_bytes_gguf_py(src)
    assert src.stat().st_size - read_header(src).data_offset == out.stat().st_size - read_header(out).data_offset


def test_a_bad_copy_is_caught_and_nothing_is_left(tmp_path, monkeypatch):
    """Fault injection: the kernel copy of one block comes from one byte further on. The proof must fail
    and no output may appear."""
    import gguftpl.gguf.regioncopy as w

    src = tmp_path / "m.gguf"
    _random_tensor_gguf(src, 1024 * 1024)
    monkeypatch.setattr(w, "COPY_CHUNK", 100_000)
    real = os.copy_file_range
    calls = []

    def off_by_one(src_fd, dst_fd, count, offset_src=None, offset_dst=None):
        calls.append(offset_src)
        if len(calls) == 3:
            offset_src += 1
        return real(src_fd, dst_fd, count, offset_src, offset_dst)

    monkeypatch.setattr(os, "copy_file_range", off_by_one)
    before = src.read_bytes()
    with pytest.raises(PatchError, match="verification failed"):
        patch_templates(src, tmp_path / "o.gguf", {"tool_use": HERMES_TOOL_USE})
    assert len(calls) >= 3
    assert os.listdir(tmp_path) == ["m.gguf"]
    assert src.read_bytes() == before


@pytest.mark.parametrize("reserve", [True, False], ids=["fallocate", "mid-copy"])
def test_write_failure_is_one_line_exit_2_and_leaves_nothing(tmp_path, reserve):
    """A real kernel write failure: RLIMIT_FSIZE makes every write past 256 KiB fail with EFBIG, as a full
    disk fails with ENOSPC: at the up-front reservation, or (where the filesystem cannot reserve) in the
    middle of the tensor copy."""
    src = tmp_path / "m.gguf"
    _random_tensor_gguf(src, 2 * 1024 * 1024)
    before = src.read_bytes()
    tpl = tmp_path / "t.jinja"
    tpl.write_text(HERMES_TOOL_USE, encoding="utf-8")
    out = tmp_path / "o.gguf"
    child = textwrap.dedent(
        f"""
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills us instead of failing the write
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.RLIM_INFINITY))
        import gguftpl.gguf.regioncopy as writer
        if not {reserve!r}:
            writer._reserve = lambda fd, size: None  # a filesystem without fallocate
        from gguftpl.cli import main
        main(["patch", {str(src)!r}, "-o", {str(out)!r}, "--template", "tool_use={tpl}"])
        """
    )
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gguftpl: error: writing ") and "File too large" in err[0], err
    assert "no output was left" in err[0]
    assert sorted(os.listdir(tmp_path)) == ["m.gguf", "t.jinja"]
    assert src.read_bytes() == before


def test_plan_and_its_text_for_templates_given_directly(make_gguf, tmp_path):
    """The same plan type and formatter as --from-hub: rows with both sha256s, a diff per change (capped),
    and the keys besides templates (here the name list)."""
    import hashlib

    from gguftpl.patchplan import plan_patch
    from gguftpl.patchtext import plan_text

    src = make_gguf("m.gguf", templates={"default": CHATML, "rag": "{{ documents }}"})
    plan = plan_patch(src, {"default": CHATML, "tool_use": HERMES_TOOL_USE}, ["rag", "rag"])
    assert [(i.name, i.action) for i in plan.items] == [("default", "keep"), ("tool_use", "add"), ("rag", "remove")]
    assert plan.upstream is None and plan.extra_kv == {}
    assert plan.remove_keys == ["tokenizer.chat_template.rag"]  # a name given twice is removed once
    assert "tokenizer.chat_template" not in plan.set_kv  # kept as it is
    sha = {n: hashlib.sha256(t.encode()).hexdigest()[:12] for n, t in [("default", CHATML), ("rag", "{{ documents }}")]}
    tool_sha = hashlib.sha256(HERMES_TOOL_USE.encode()).hexdigest()[:12]
    text = plan_text(plan, show_diff=True, max_diff_lines=10).splitlines()
    assert text[:4] == [
        f"plan for {src}:",
        f"  keep      default      tokenizer.chat_template           {len(CHATML):,} B  {sha['default']} (identical)",
        f"  add       tool_use     tokenizer.chat_template.tool_use  - -> {len(HERMES_TOOL_USE.encode()):,} B  "
        f"- -> {tool_sha}",
        f"  remove    rag          tokenizer.chat_template.rag       15 -> - B  {sha['rag']} -> -",
    ]
    assert text.index("+++ new:tool_use") < text.index("--- gguf:rag")
    n_tool = len(HERMES_TOOL_USE.splitlines())
    assert f"... {n_tool + 3 - 10} more diff lines" in text  # 3 header lines, then one '+' line per line
    assert text[text.index("--- gguf:rag") + 1] == "+++ /dev/null"
    assert text[-2:] == ["other keys:", "  set       tokenizer.chat_templates = ['tool_use']"]


def test_patch_text_by_default_is_one_line_per_template_then_the_findings(samples_dir, tmp_path):
    """Issue 23 item 4: without --show-diff (and not on a terminal) the plan is one line per template (action,
    sizes, sha256 prefixes, catalog status) and a line for the other keys; then the proof and before -> after.
    The diff is there with --show-diff."""
    import hashlib

    src = samples_dir / "hermes-2-pro-mistral-7b.chatml.gguf"
    hermes = "NousResearch/Hermes-2-Pro-Mistral-7B"
    args = ["patch", str(src), "--from-catalog", hermes, "-o"]
    res = CliRunner().invoke(main_group, [*args, str(tmp_path / "a.gguf")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    tool_sha = hashlib.sha256(HERMES_TOOL_USE.encode()).hexdigest()[:12]
    start = next(i for i, line in enumerate(lines) if line.startswith("plan for "))
    rows = lines[start + 1 : start + 4]
    assert rows[0].startswith("  replace   default      tokenizer.chat_template ") and "catalog EXACT" in rows[0]
    assert rows[1].split() == [
        "add",
        "tool_use",
        "tokenizer.chat_template.tool_use",
        "-",
        "->",
        f"{len(HERMES_TOOL_USE.encode()):,}",
        "B",
        "-",
        "->",
        tool_sha,
        "catalog",
        "EXACT",
    ]
    assert rows[2].startswith("  other keys: 13 set, 0 removed (12 of them gguftpl.patch.* provenance;")
    assert lines[start + 4] == f"wrote {tmp_path / 'a.gguf'}"
    assert not any(line.startswith(("+++", "---", "@@")) for line in lines)
    assert "tool-calling findings (audit before -> after):" in lines and len(lines) < 50
    full = CliRunner().invoke(main_group, [*args, str(tmp_path / "b.gguf"), "--show-diff"])
    assert full.exit_code == 0, full.output
    assert f"+++ upstream:{hermes}@" in full.stdout and "other keys:" in full.stdout.splitlines()


# --------------------------------------------------------------------------------------- one pipeline


def test_patch_templates_is_one_call_with_provenance_and_before_after(tmp_path, samples_dir):
    """From Python, templates given as text go through the same pipeline as upstream ones: provenance
    (source "file" with the paths when they are named, "text" otherwise) and the audit before and after."""
    import dataclasses

    from gguftpl.patchplan import read_provenance

    src = samples_dir / "hermes-2-pro-mistral-7b.chatml.gguf"
    out = tmp_path / "o.gguf"
    result = patch_templates(src, out, {"tool_use": HERMES_TOOL_USE}, template_files={"tool_use": "t.jinja"})
    assert result.written and result.readback_ok
    assert "GT201" in {f.code for f in result.before} and "GT201" not in {f.code for f in result.after}
    assert "GT201" in {f.code for f in result.summary.fixed}
    prov = read_provenance(load_templateset(read_header(out)))
    assert prov["gguftpl.patch.source"] == "file" and prov["gguftpl.patch.template.tool_use.source"] == "t.jinja"
    assert result.plan.extra_kv == prov
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.plan.path = "x"  # type: ignore[misc]

    text_only = patch_templates(src, tmp_path / "t.gguf", {"tool_use": HERMES_TOOL_USE}, provenance=False)
    assert text_only.plan.extra_kv == {} and read_provenance(load_templateset(read_header(tmp_path / "t.gguf"))) == {}
    from gguftpl.patching import PatchOptions

    quiet = patch_templates(src, tmp_path / "q.gguf", {"tool_use": HERMES_TOOL_USE}, options=PatchOptions(audit=False))
    assert quiet.before is None and quiet.summary is None
    assert read_provenance(load_templateset(read_header(tmp_path / "q.gguf")))["gguftpl.patch.source"] == "text"


def test_before_after_counts_every_finding(make_gguf):
    """Two findings alike are two findings: fixed and introduced are matched one for one, and the counts
    per severity cover every finding, whatever its code."""
    from gguftpl.findings import Finding, Location, Severity
    from gguftpl.patching import summarize

    def f(code: str, sev: Severity, template: str | None = "default", file: str = "a.gguf") -> Finding:
        return Finding(code, code.lower(), sev, f"in {file}", Location(file, key="k"), template)

    before = [
        f("GT201", Severity.ERROR),
        f("GT304", Severity.WARNING),
        f("GT304", Severity.WARNING),
        f("GT101", Severity.INFO),
    ]
    after = [f("GT304", Severity.WARNING, file="b.gguf"), f("GT205", Severity.WARNING), f("GT101", Severity.INFO, None)]
    s = summarize(before, after)
    assert s.counts_before == {"error": 1, "warning": 2, "info": 1}
    assert s.counts_after == {"error": 0, "warning": 2, "info": 1}
    assert [x.code for x in s.fixed] == ["GT201", "GT304", "GT101"]  # one GT304 of two is gone
    assert [x.code for x in s.introduced] == ["GT205", "GT101"]  # GT101 moved to another template


def test_extra_keys_ride_along_with_provenance(make_gguf, tmp_path):
    """Keys besides templates go in the same rewrite; a float reads back as float32, not as written, and
    that is no read-back failure."""
    from gguftpl.gguf.reader import ValueType
    from gguftpl.gguf.writer import Typed
    from gguftpl.patchplan import read_provenance

    src = make_gguf("m.gguf", templates={"default": CHATML})
    out = tmp_path / "o.gguf"
    extra = {"llama.context_length": Typed(ValueType.UINT32, 8192), "x.scale": Typed(ValueType.FLOAT32, 0.1)}
    r = patch_templates(src, out, {"tool_use": HERMES_TOOL_USE}, extra_kv=extra)
    h = read_header(out)
    assert h.get("llama.context_length") == 8192 and abs(h.get("x.scale") - 0.1) < 1e-6
    assert r.plan.extra_kv.keys() == extra.keys() | read_provenance(load_templateset(h)).keys()
