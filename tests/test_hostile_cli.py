"""Hostile inputs through the real command line: every bad input is one line on stderr starting
``gguftpl: error:`` and exit 2 (or a finding, for a readable GGUF that is bad in a way the audit reports),
never a traceback, a hang, a crashed process, or an output file that destroys or replaces what it names.

Hangs are bounded by the tool's own limits (non-blocking opens, the render worker's time and size limits);
the subprocess timeouts below are only a safety net so a regression fails instead of stalling the suite.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gguftpl.cli import main_group
from gguftpl.gguf.reader import ValueType, read_header
from gguftpl.gguf.writer import Typed, encode_kv
from tests.conftest import CHATML

MakeGGUF = Callable[..., Path]
SAFETY_TIMEOUT = 600  # seconds; a safety net only, the tool must bound itself long before


def cli(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main_group, [str(a) for a in args], env=env)


@dataclass
class Proc:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def cli_proc(*args: str | Path) -> Proc:
    """The CLI in a fresh process: for inputs whose regression would block (a FIFO) or crash the process."""
    p = run_gguftpl(*args)
    return Proc(p.returncode, p.stdout, p.stderr)


def assert_one_line_error(res: Result | Proc, *needles: str) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("gguftpl: error:"), lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert "Traceback" not in res.output
    return lines[0]


def run_gguftpl(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gguftpl", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=SAFETY_TIMEOUT,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.gguf"
    os.mkfifo(path)
    return path


@pytest.fixture
def model(make_gguf: MakeGGUF) -> Path:
    return make_gguf("model.gguf", templates={"default": CHATML, "tool_use": CHATML})


# --- files that are not regular files ----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "{f}"],
        ["inspect", "--template", "default", "--raw", "{f}"],
        ["render", "--no-tools", "{f}"],
        ["diff", "--catalog", "auto", "{f}"],
    ],
)
def test_a_fifo_as_the_gguf_fails_at_once(fifo: Path, argv: list[str]) -> None:
    # a blocking open() of a FIFO with no writer never returns: the reader opens non-blocking and refuses it
    res = cli_proc(*[a.format(f=fifo) for a in argv])
    assert_one_line_error(res, "FIFO")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_audit_reports_fifo_and_symlink_loop_as_unreadable(tmp_path: Path, model: Path, fifo: Path) -> None:
    folder = tmp_path / "quants"
    folder.mkdir()
    (folder / "a.gguf").write_bytes(model.read_bytes())
    os.mkfifo(folder / "b.gguf")
    os.symlink("loop.gguf", folder / "loop.gguf")  # ELOOP when opened
    os.symlink(tmp_path / "absent", folder / "dangling.gguf")
    for extra in ([], ["--repo-check", "--no-upstream"]):
        res = cli_proc("audit", "--format", "json", *extra, folder)
        assert res.exit_code == 2, res.output
        findings = {
            Path(f["location"]["file"]).name: f for fa in json.loads(res.stdout)["files"] for f in fa["findings"]
        }
        for name in ("b.gguf", "loop.gguf", "dangling.gguf"):
            assert findings[name]["code"] == "GT001", (extra, name)
        assert "FIFO" in findings["b.gguf"]["message"]


def test_a_directory_as_file_is_one_line(tmp_path: Path) -> None:
    # click's own usage errors are one line too (not usage + blank line + "Error:")
    for cmd in ("render", "inspect"):
        assert_one_line_error(cli(cmd, tmp_path), "directory")
    assert_one_line_error(cli("patch", tmp_path), "-o OUTDIR")  # patch takes folders: it asks where to write
    assert_one_line_error(cli("audit", "--format", "xml", tmp_path), "xml", "--help")
    assert_one_line_error(cli("no-such-command"), "no-such-command")


# --- corrupted headers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fraction", [0.0001, 0.01, 0.3, 0.5, 0.999])
def test_truncated_real_file_is_one_line_everywhere(
    tmp_path: Path, corpus_file: Callable[[str], Path], fraction: float
):
    src = corpus_file("ggml-vocab-command-r.gguf").read_bytes()
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(src[: max(8, int(len(src) * fraction))])
    before = bad.read_bytes()
    for argv in (["inspect"], ["inspect", "--format", "json"], ["render", "--no-tools"], ["diff", "--catalog", "auto"]):
        assert_one_line_error(cli(*argv, bad))
    out = tmp_path / "out.gguf"
    assert_one_line_error(cli("patch", bad, "--remove", "tool_use", "-o", out))
    assert not out.exists() and bad.read_bytes() == before
    res = cli("audit", "--format", "json", bad)
    assert res.exit_code == 2 and [f["code"] for f in json.loads(res.stdout)["files"][0]["findings"]] == ["GT001"]


def test_duplicate_and_invalid_keys_are_one_line(tmp_path: Path) -> None:
    def raw(name: str, kvs: list[bytes]) -> Path:
        p = tmp_path / name
        p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs))
        return p

    tpl = encode_kv("tokenizer.chat_template", CHATML)
    dup = raw("dup.gguf", [encode_kv("general.architecture", "llama"), tpl, tpl])
    badkey = raw("badkey.gguf", [struct.pack("<Q", 3) + b"\xff\xfez" + struct.pack("<I", 4) + struct.pack("<I", 1)])
    # a UTF-16 surrogate encoded as UTF-8 (CESU-8) is not valid UTF-8
    cesu = raw("cesu.gguf", [struct.pack("<Q", 1) + b"t" + struct.pack("<IQ", 8, 3) + b"\xed\xa0\x80"])
    assert_one_line_error(cli("inspect", dup), "duplicate key")
    assert_one_line_error(cli("inspect", badkey), "UTF-8")
    assert_one_line_error(cli("render", "--no-tools", cesu))


# --- metadata of the wrong type: findings, not silence -----------------------------------------------------


def test_wrongly_typed_keys_are_gt003(make_gguf: MakeGGUF) -> None:
    T = ValueType
    cases = {
        "tokenizer.ggml.eos_token_id": Typed(T.INT32, -1),
        "tokenizer.ggml.add_bos_token": "yes",
        "llama.context_length": Typed(T.UINT64, 2**40),
        "tokenizer.chat_template.tool_use": Typed(T.INT32, 7),
        "tokenizer.ggml.tokens": Typed(T.ARRAY, list(range(300)), T.INT32),
    }
    for key, value in cases.items():
        path = make_gguf(f"{key}.gguf", templates={"default": CHATML}, extra_kv={key: value})
        assert read_header(path).kv[key].type == (value.type if isinstance(value, Typed) else ValueType.STRING)
        res = cli("audit", "--format", "json", path)
        assert res.exit_code == 1, res.output
        findings = json.loads(res.stdout)["files"][0]["findings"]
        codes = {f["code"] for f in findings}
        assert "GT002" not in codes, findings  # the analysis did not crash on it
        gt003 = [f for f in findings if f["code"] == "GT003"]
        assert [f["location"]["key"] for f in gt003] == [key]
    clean = make_gguf("clean.gguf", templates={"default": CHATML})
    assert "GT003" not in cli("audit", "--format", "json", clean).stdout


def test_a_default_template_that_is_no_string_is_no_usable_template(make_gguf: MakeGGUF) -> None:
    path = make_gguf("int.gguf", templates={}, extra_kv={"tokenizer.chat_template": Typed(ValueType.INT32, 7)})
    res = cli("audit", "--format", "json", path)
    findings = json.loads(res.stdout)["files"][0]["findings"]
    gt101 = [f for f in findings if f["code"] == "GT101"]
    assert len(gt101) == 1 and "has no usable tokenizer.chat_template" in gt101[0]["message"], gt101
    assert any(f["code"] == "GT003" for f in findings)


def test_truncated_tensor_data_is_gt004(tmp_path: Path, model: Path) -> None:
    header = read_header(model)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(model.read_bytes()[: header.data_offset + 10])
    res = cli("audit", "--format", "json", "--select", "GT004", cut)
    assert res.exit_code == 1
    (finding,) = json.loads(res.stdout)["files"][0]["findings"]
    assert f"{header.data_end:,}" in finding["message"]
    assert cli("audit", "--select", "GT004", model).exit_code == 0


# --- tool, conversation and upstream files ---------------------------------------------------------------


def _tool(parameters: dict) -> dict:
    return {"type": "function", "function": {"name": "f", "description": "d", "parameters": parameters}}


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (json.dumps([_tool({"type": "object"})]).replace('"d"', '"\\ud800"'), "unpaired surrogate"),
        ('[{"type": "function", "function": {"name": "f", "parameters": {"minimum": NaN}}}]', "NaN"),
        ('[{"type": "function", "function": {"name": "f", "parameters": {"minimum": 1' + "0" * 5000 + "}}}]", "JSON"),
        ("{not json", "not JSON"),
    ],
)
def test_hostile_tools_and_conversation_files(tmp_path: Path, model: Path, content: str, needle: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    assert_one_line_error(cli("render", model, "--tools", bad), needle)
    assert_one_line_error(cli("render", model, "--no-tools", "--messages", bad), needle)
    assert_one_line_error(cli("diff", model, "--upstream", bad))


def test_fifo_and_oversized_tool_files(tmp_path: Path, model: Path, fifo: Path) -> None:
    assert_one_line_error(cli_proc("render", model, "--tools", fifo), "FIFO")
    assert_one_line_error(cli_proc("render", model, "--no-tools", "--messages", fifo), "FIFO")
    big = tmp_path / "big.json"
    with big.open("wb") as fh:  # sparse: 65 MiB of NULs, never meant to be parsed
        fh.truncate(65 * 1024 * 1024)
    assert_one_line_error(cli("render", model, "--tools", big), "larger than 64 MiB")


def test_recursive_ref_schema_renders_and_is_bounded(tmp_path: Path, model: Path) -> None:
    from gguftpl.errors import ToolSourceError
    from gguftpl.verify.schema import MAX_SCHEMA_ITEMS, example_arguments, schema_items
    from gguftpl.verify.tools import tools_from_json

    node = {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}, "required": ["child"]}
    params = {"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}}, "required": ["root"]}
    params["$defs"] = {"Node": node}
    tools = tmp_path / "tree.json"
    tools.write_text(json.dumps([_tool(params)]), encoding="utf-8")
    res = cli("render", model, "--tools", tools)
    assert res.exit_code == 0, res.output
    (tool,) = tools_from_json([_tool(params)])
    assert [i.path for i in schema_items(tool) if i.kind == "property"] == ["root", "root.child"]
    assert example_arguments(params) == {"root": {"child": None}}
    # a DAG of $refs: 4 children per level, 30 levels, 4**30 paths; refused in one line, quickly
    defs = {
        f"L{i}": {"type": "object", "properties": {k: {"$ref": f"#/$defs/L{i + 1}"} for k in "abcd"}} for i in range(30)
    }
    defs["L30"] = {"type": "string"}
    for d in defs.values():
        d["required"] = list(d.get("properties", {}))
    dag = {"type": "object", "properties": {"x": {"$ref": "#/$defs/L0"}}, "required": ["x"], "$defs": defs}
    (big,) = tools_from_json([_tool(dag)])
    with pytest.raises(ToolSourceError, match=str(MAX_SCHEMA_ITEMS)):
        schema_items(big)
    assert len(json.dumps(example_arguments(dag))) < 2_000_000
    hostile = {"type": "array", "minItems": 10**12, "items": {"type": "string", "minLength": 1e300, "maxLength": "x"}}
    value = example_arguments({"type": "object", "properties": {"a": hostile}, "required": ["a"]})
    assert 1 <= len(value["a"]) <= 1000 and len(value["a"][0]) <= 1000


# --- outputs ---------------------------------------------------------------------------------------------


def test_report_output_never_destroys_what_it_names(tmp_path: Path, model: Path, fifo: Path) -> None:
    before = model.read_bytes()
    assert_one_line_error(cli("audit", model, "-o", model), "GGUF")
    assert model.read_bytes() == before
    assert_one_line_error(cli("audit", model, "-o", tmp_path / "missing" / "r.txt"), "does not exist")
    assert not (tmp_path / "missing").exists()
    # a FIFO nobody reads: an error at once, and it stays a FIFO (renaming over it would replace it)
    assert_one_line_error(cli_proc("audit", model, "-o", fifo), "cannot write the report")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".gguftpl-")]


def test_patch_outputs_are_refused_cleanly(tmp_path: Path, model: Path) -> None:
    before = model.read_bytes()
    tpl = tmp_path / "t.jinja"
    tpl.write_text(CHATML, encoding="utf-8")
    for out in (tmp_path / "missing" / "x.gguf", model):
        assert_one_line_error(cli("patch", model, "--template", f"default={tpl}", "-o", out))
    assert_one_line_error(cli("patch", model, "--template", f"../x={tpl}", "-o", tmp_path / "o.gguf"))
    assert model.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf", "t.jinja"]


# --- text that the terminal must not obey ---------------------------------------------------------------


def test_control_characters_in_names_are_escaped(make_gguf: MakeGGUF) -> None:
    path = make_gguf(
        "names.gguf", templates={"default": CHATML, "a\nforged": CHATML, "\u202eevil": CHATML, "x\x1b[2J": CHATML}
    )
    out = cli("inspect", path).stdout
    assert "a\\x0aforged" in out and "\\u202eevil" in out and "x\\x1b[2J" in out
    assert not any(line.startswith("forged") for line in out.splitlines())
    assert "\u202e" not in out and "\x1b" not in out
    audit_out = cli("audit", "--no-color", path).stdout
    assert "\u202e" not in audit_out and "\x1b" not in audit_out


def test_unencodable_output_is_escaped_not_a_crash(make_gguf: MakeGGUF) -> None:
    path = make_gguf("bidi.gguf", templates={"default": CHATML + "{# \u2026 \u202e #}"})
    for argv in (["audit", path], ["inspect", "--template", "default", "--raw", path], ["inspect", path]):
        proc = run_gguftpl(*argv, env={"PYTHONIOENCODING": "latin-1"})
        assert proc.returncode in (0, 1), proc.stderr
        assert "Traceback" not in proc.stderr


# --- templates llama.cpp must never run ------------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        "{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}",  # llama.cpp: stack overflow, SIGSEGV
        "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",  # llama.cpp: renders 10 GB
    ],
)
def test_render_bombs_never_reach_llamacpp(make_gguf: MakeGGUF, template: str) -> None:
    pytest.importorskip("xllamacpp")
    path = make_gguf("bomb.gguf", templates={"default": template})
    proc = run_gguftpl("verify", "--format", "json", path)
    assert proc.returncode == 1, proc.stderr  # a finding about the file, not a crash (-11) or a hang
    stages = json.loads(proc.stdout)["stages"]
    assert stages[0]["status"] == "fail" and "not run through llama.cpp" in stages[0]["evidence"]
    proc = run_gguftpl("render", "--engine", "llamacpp", path)
    assert proc.returncode == 2 and proc.stderr.startswith("gguftpl: error: not rendered in llama.cpp")
    assert proc.stderr.count("\n") == 1
    res = cli("audit", "--engine", "llamacpp", "--format", "json", "--select", "GT607", path)
    assert res.exit_code == 1 and json.loads(res.stdout)["files"][0]["findings"][0]["code"] == "GT607"


def test_huge_template_is_reported_not_analysed(make_gguf: MakeGGUF) -> None:
    from gguftpl.limits import MAX_TEMPLATE_BYTES

    path = make_gguf("huge.gguf", templates={"default": CHATML + "{# " + "a" * MAX_TEMPLATE_BYTES + " #}"})
    res = cli("audit", "--format", "json", path)
    assert res.exit_code == 1
    findings = json.loads(res.stdout)["files"][0]["findings"]
    assert [f["code"] for f in findings if f["code"] == "GT404"] == ["GT404"]
    assert "not parsed or rendered" in next(f["message"] for f in findings if f["code"] == "GT404")


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "http://[::1"],
        ["audit", "https://[::1/x.gguf"],
        ["audit", "--repo", "https://[::1/org/repo"],
        ["render", "--mcp-url", "http://[::1", "{model}"],
    ],
)
def test_malformed_urls_are_one_line(model: Path, argv: list[str]) -> None:
    assert_one_line_error(cli(*[a.format(model=model) for a in argv]), "[::1")


def test_engine_llamacpp_goes_on_after_a_file_llamacpp_refuses(make_gguf: MakeGGUF, model: Path) -> None:
    pytest.importorskip("xllamacpp")
    wrong_type = {"tokenizer.ggml.eos_token_id": Typed(ValueType.INT32, 1)}
    refused = make_gguf("refused.gguf", templates={"default": CHATML}, extra_kv=wrong_type)
    res = cli("audit", "--engine", "llamacpp", "--format", "json", refused, model)
    assert res.exit_code == 1, res.output
    files = {Path(fa["path"]).name: {f["code"] for f in fa["findings"]} for fa in json.loads(res.stdout)["files"]}
    assert {"GT003", "GT608"} <= files["refused.gguf"]
    assert "GT601" in files["model.gguf"]  # the next file was still run through llama.cpp


def test_absurd_key_and_tensor_counts_are_refused_before_parsing(tmp_path: Path) -> None:
    from gguftpl.gguf.reader import MAX_KV_COUNT, MAX_TENSOR_COUNT

    cases = ((0, MAX_KV_COUNT + 1, "key/value count"), (MAX_TENSOR_COUNT + 1, 0, "tensor count"))
    for n_tensors, n_kv, needle in cases:
        path = tmp_path / f"{n_tensors}-{n_kv}.gguf"
        with path.open("wb") as fh:  # enough (sparse) bytes that the count is not refused as truncation
            fh.write(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv))
            fh.truncate(64 * (n_kv + n_tensors))
        assert_one_line_error(cli("inspect", path), needle, "exceeds the bound")


# --------------------------------------------------------------------------- patch: what OUT and --template name


def test_patch_template_from_a_fifo_is_one_line(make_gguf: MakeGGUF, tmp_path: Path) -> None:
    src = make_gguf("m.gguf", templates={"default": CHATML})
    fifo = tmp_path / "t.jinja"
    os.mkfifo(fifo)
    out = tmp_path / "o.gguf"
    res = cli_proc("patch", src, "-o", out, "--template", f"tool_use={fifo}")
    assert_one_line_error(res, "FIFO")
    assert not out.exists()


def test_patch_never_renames_over_a_fifo(make_gguf: MakeGGUF, tmp_path: Path) -> None:
    src = make_gguf("m.gguf", templates={"default": CHATML})
    tpl = tmp_path / "t.jinja"
    tpl.write_text("{{ 'x' }}", encoding="utf-8")
    fifo = tmp_path / "o.gguf"
    os.mkfifo(fifo)
    res = cli_proc("patch", src, "-o", fifo, "--force", "--template", f"tool_use={tpl}", "--no-audit")
    assert_one_line_error(res, "not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_patch_in_place_through_a_symlink_patches_the_file_it_points_at(make_gguf: MakeGGUF, tmp_path: Path) -> None:
    """A Hugging Face cache snapshot is a symlink to a blob: --in-place must patch the blob, keep the link."""
    blob = make_gguf("blob.gguf", templates={"default": CHATML})
    link = tmp_path / "snapshot.gguf"
    link.symlink_to(blob.name)
    tpl = tmp_path / "t.jinja"
    tpl.write_text("{{ 'y' }}", encoding="utf-8")
    res = cli("patch", link, "--in-place", "--template", f"tool_use={tpl}", "--no-audit")
    assert res.exit_code == 0, res.output
    assert link.is_symlink() and os.readlink(link) == blob.name
    assert "tokenizer.chat_template.tool_use" in read_header(blob).kv
    # and -o onto an existing link with --force writes the file behind it too
    out_blob = tmp_path / "out-blob.gguf"
    out_blob.write_bytes(b"old")
    out_link = tmp_path / "out.gguf"
    out_link.symlink_to(out_blob.name)
    res = cli("patch", blob, "-o", out_link, "--force", "--template", f"extra={tpl}", "--no-audit")
    assert res.exit_code == 0, res.output
    assert out_link.is_symlink()
    assert "tokenizer.chat_template.extra" in read_header(out_blob).kv


def test_diff_upstream_that_is_a_fifo_says_so(tmp_path: Path) -> None:
    fifo = tmp_path / "tokenizer_config.json"
    os.mkfifo(fifo)
    sample = Path(__file__).resolve().parent.parent / "samples" / "hermes-2-pro-mistral-7b.chatml.gguf"
    assert_one_line_error(cli_proc("diff", sample, "--upstream", fifo), "FIFO")
    assert_one_line_error(cli("diff", sample, "--upstream", tmp_path / "missing.json"), "no such file or folder")


# --- one answer for a missing or non-GGUF file (issue 26 item 5) -------------------------------------------

FILE_COMMANDS = [
    ["inspect"],
    ["render", "--no-tools"],
    ["diff", "--no-behaviour"],
    ["verify"],
    ["patch", "--remove", "tool_use", "-o", "{out}"],
    ["audit"],
]


@pytest.mark.parametrize("argv", FILE_COMMANDS, ids=[a[0] for a in FILE_COMMANDS])
def test_a_missing_file_has_one_wording_in_every_command(tmp_path: Path, argv: list[str]) -> None:
    missing = tmp_path / "missing.gguf"
    args = [a.format(out=tmp_path / "out.gguf") for a in argv]
    line = assert_one_line_error(cli(*args, missing))
    assert line == f"gguftpl: error: GGUF file not found: {missing}"


@pytest.mark.parametrize("content", [b"", b"definitely not GGUF"], ids=["empty", "not-gguf"])
def test_an_empty_or_non_gguf_file_is_exit_2_in_every_command(
    tmp_path: Path, make_gguf: MakeGGUF, content: bytes
) -> None:
    """Every command: one line, exit 2. audit (a linter over many files, README "Usage") also reports it as GT001,
    and a folder with one bad file goes on and reports the good one too, then exits 2."""
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    for argv in FILE_COMMANDS[:-1]:
        assert_one_line_error(cli(*[a.format(out=tmp_path / "out.gguf") for a in argv], bad), "not a GGUF")
    assert not (tmp_path / "out.gguf").exists()
    res = cli("audit", "--format", "json", bad)
    assert res.exit_code == 2 and res.stderr.startswith("gguftpl: error: ") and len(res.stderr.splitlines()) == 1
    assert [f["code"] for f in json.loads(res.stdout)["files"][0]["findings"]] == ["GT001"]
    folder = tmp_path / "models"
    folder.mkdir()
    bad.rename(folder / "bad.gguf")
    make_gguf("models/good.gguf", templates={"default": CHATML})
    res = cli("audit", "--format", "json", folder)
    assert res.exit_code == 2
    files = {Path(fa["path"]).name: fa for fa in json.loads(res.stdout)["files"]}
    assert set(files) == {"bad.gguf", "good.gguf"}
    assert [f["code"] for f in files["bad.gguf"]["findings"]] == ["GT001"]
    assert "GT001" not in {f["code"] for f in files["good.gguf"]["findings"]}
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "reported as GT001 beside every other file" in readme and "exits 2" in readme  # the README says so
