"""Issue 14, items 3, 4, 5 and 10: files that are not what they seem, through the real command line.

3. A tool-capable GGUF cut short (tensor data past its end) passed `verify`: the stand-in never reads the
   data. verify checks the file is complete first, with the GT004 check's own verdict.
4. An empty target passed CI: `audit DIR` without a GGUF printed a warning and exited 0; `--repo-check`
   counted the folder itself as a file.
5. `patch FIFO` and `patch /dev/zero` said "no such file"; every command says what the path is.
10. Invalid UTF-8 inside the token array was GT002 ("could not finish"), not GT001 (not a readable GGUF).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gguftpl.cli import main_group
from tests.conftest import CHATML
from tests.hubserver import HubServer
from tests.procwatch import run_watched

MakeGGUF = Callable[..., Path]


def cli(*args: str | Path) -> Result:
    return CliRunner().invoke(main_group, [str(a) for a in args])


def one_line_error(res: Result) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert res.stdout == "" and "Traceback" not in res.output
    (line,) = res.stderr.splitlines()
    assert line.startswith("gguftpl: error: "), line
    return line.removeprefix("gguftpl: error: ")


# --------------------------------------------------------------------------------------------- item 3


@pytest.fixture
def cut_short(tmp_path: Path, samples_dir: Path) -> Path:
    """The tool-capable Hermes sample with its last 100 bytes of tensor data gone (a download cut short)."""
    path = tmp_path / "cut.gguf"
    shutil.copyfile(samples_dir / "hermes-2-pro-mistral-7b.upstream.gguf", path)
    size = path.stat().st_size
    os.truncate(path, size - 100)
    return path


GT004 = "the tensor data should end at byte 55,776 but the file has 55,676 bytes (100 missing)"


@pytest.mark.parametrize("weights", [[], ["--load-weights"]], ids=["stand-in", "load-weights"])
def test_verify_fails_a_file_cut_short(cut_short: Path, weights: list[str]) -> None:
    pytest.importorskip("xllamacpp")
    res = cli("verify", *weights, "--format", "json", cut_short)
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["template"] == "incomplete"
    first, *rest = doc["stages"]
    assert first["status"] == "fail" and GT004 in first["evidence"] and "GT004" in first["evidence"]
    assert {s["status"] for s in rest} == {"skip"}
    text = cli("verify", *weights, cut_short)
    assert text.exit_code == 1 and text.stdout.splitlines()[-1].startswith("repair: download the file again")


def test_audit_through_llamacpp_reports_gt004_once(cut_short: Path) -> None:
    """The llama.cpp engine adds no GT6xx guess (a ChatML fallback, ...) about a file it could not load."""
    pytest.importorskip("xllamacpp")
    res = cli("audit", "--engine", "llamacpp", "--format", "json", cut_short)
    found = [f["code"] for fa in json.loads(res.stdout)["files"] for f in fa["findings"]]
    from_llamacpp = [
        f["code"]
        for fa in json.loads(res.stdout)["files"]
        for f in fa["findings"]
        if f["code"].startswith("GT6") and (f.get("extra") or {}).get("engine", "llamacpp") == "llamacpp"
    ]
    assert "GT004" in found and not from_llamacpp, found


# --------------------------------------------------------------------------------------------- item 4


def test_audit_of_a_folder_without_gguf_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "README.md").write_text("not a model")
    assert one_line_error(cli("audit", tmp_path)) == f"no GGUF files (*.gguf) in {tmp_path}"
    repo = cli("audit", "--repo-check", "--no-upstream", tmp_path)
    assert one_line_error(repo) == f"no GGUF files (*.gguf) in {tmp_path}"


def test_one_empty_folder_among_good_ones_is_still_an_error(make_gguf: MakeGGUF, tmp_path: Path) -> None:
    good = make_gguf(templates={"default": CHATML})
    empty = tmp_path / "empty"
    empty.mkdir()
    assert one_line_error(cli("audit", good, empty)) == f"no GGUF files (*.gguf) in {empty}"


def test_a_hub_repo_without_gguf_is_an_error(hub: HubServer) -> None:
    hub.add_repo("org/weights-only", {"README.md": "safetensors only", "config.json": "{}"})
    line = one_line_error(cli("audit", "--repo", "org/weights-only", "--no-upstream"))
    assert line.startswith("no GGUF files in hf://org/weights-only@"), line


def test_repo_check_counts_the_files_not_the_folder(make_gguf: MakeGGUF, tmp_path: Path) -> None:
    folder = tmp_path / "quants"
    folder.mkdir()
    for name in ("m-Q4_K_M.gguf", "m-Q8_0.gguf"):
        make_gguf(f"quants/{name}", templates={"default": CHATML})
    text = cli("audit", "--repo-check", "--no-upstream", folder)
    assert text.stdout.rstrip().splitlines()[-1].endswith("in 2 files (2 with findings)"), text.stdout
    doc = json.loads(cli("audit", "--repo-check", "--no-upstream", "--format", "json", folder).stdout)
    assert doc["summary"]["files"] == 2
    assert [fd["path"] for fd in doc["files"]][-1] == str(folder)  # the folder's own findings still have a home


# --------------------------------------------------------------------------------------------- item 5


@pytest.fixture
def not_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.gguf"
    folder.mkdir()
    return {
        "fifo": (fifo, "a FIFO (named pipe)"),
        "device": (Path("/dev/zero"), "a character device"),
        "folder": (folder, "a directory"),
    }


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_patch_says_what_the_input_is(
    not_files: dict[str, tuple[Path, str]], tmp_path: Path, kind: str, samples_dir: Path
) -> None:
    path, what = not_files[kind]
    template = tmp_path / "t.jinja"
    template.write_text(CHATML)
    line = one_line_error(cli("patch", path, "--template", f"default={template}", "-o", tmp_path / "out.gguf"))
    assert line == f"GGUF file {path} is {what}, not a regular file"
    in_place = one_line_error(cli("patch", path, "--template", f"default={template}", "--in-place"))
    assert in_place == line
    # and the output side: a FIFO or a device named as -o is named as what it is, and left alone
    sample = samples_dir / "hermes-2-pro-mistral-7b.chatml.gguf"
    out = one_line_error(cli("patch", sample, "--template", f"default={template}", "-o", path, "--force"))
    assert out == f"{os.path.realpath(path)} exists and is {what}, not a regular file; refusing to replace it"


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
@pytest.mark.parametrize(
    "command",
    [["inspect"], ["audit"], ["diff", "--catalog", "NousResearch/Hermes-2-Pro-Mistral-7B"], ["render"], ["verify"]],
    ids=lambda c: c[0],
)
def test_every_command_says_what_the_path_is(
    not_files: dict[str, tuple[Path, str]], kind: str, command: list[str]
) -> None:
    """In a real process: a FIFO opened the ordinary way would block it for ever."""
    path, what = not_files[kind]
    if command[0] == "verify":
        pytest.importorskip("xllamacpp")
    w = run_watched(*command, path)
    said = w.stdout + w.stderr
    assert w.killed is None and "Traceback" not in said and "no such file" not in said, said
    if command[0] == "audit" and kind == "folder":
        assert w.returncode == 2 and f"no GGUF files (*.gguf) in {path}" in w.stderr
    elif command[0] in ("render", "verify") and kind == "folder":
        assert w.returncode == 2 and f"'{path}' is a directory" in w.stderr  # click's own check, before us
    else:
        assert w.returncode in (1, 2) and f"{path} is {what}, not a regular file" in said, said


def test_verify_with_the_real_weights_says_what_the_path_is(not_files: dict[str, tuple[Path, str]]) -> None:
    pytest.importorskip("xllamacpp")
    path, what = not_files["fifo"]
    assert one_line_error(cli("verify", "--load-weights", path)) == f"GGUF file {path} is {what}, not a regular file"


# --------------------------------------------------------------------------------------------- item 10


def _spoil(path: Path, token: bytes) -> int:
    """Replace ``token``'s second character in the token array with an invalid byte; its offset."""
    data = path.read_bytes()
    at = data.index(token) + 1  # the token array comes before the template in these files
    path.write_bytes(data[:at] + b"\xff" + data[at + 1 :])
    return at


def test_invalid_utf8_in_the_vocabulary_is_gt001_with_its_offset(make_gguf: MakeGGUF) -> None:
    """A token nothing looks up: the reader never decodes it, the GT001 check finds it without decoding all."""
    path = make_gguf(templates={"default": CHATML})
    at = _spoil(path, b"<tool_call>")
    res = cli("audit", "--engine", "hf-only", "--format", "json", path)
    assert res.exit_code == 2  # a vocabulary that is no UTF-8: a file no runtime reads right, bad input
    (finding,) = [f for f in json.loads(res.stdout)["files"][0]["findings"] if f["code"] in ("GT001", "GT002")]
    assert finding["code"] == "GT001", finding
    assert finding["message"].startswith(f"array string is not valid UTF-8 at byte {at}")
    assert finding["location"]["key"] == "tokenizer.ggml.tokens"


def test_invalid_utf8_in_a_token_the_audit_reads_is_gt001_once(make_gguf: MakeGGUF) -> None:
    """The eos token: decoding it stops the analysis (it was GT002, "could not finish")."""
    path = make_gguf(templates={"default": CHATML})
    at = _spoil(path, b"<|im_end|>")
    res = cli("audit", "--engine", "hf-only", "--format", "json", path)
    (finding,) = json.loads(res.stdout)["files"][0]["findings"]
    assert finding["code"] == "GT001" and finding["location"]["key"] == "tokenizer.ggml.tokens", finding
    assert finding["message"] == f"array string is not valid UTF-8 (invalid start byte) at byte {at}"
    assert finding["evidence"] == f"in the value of tokenizer.ggml.tokens (byte {at:,})"
