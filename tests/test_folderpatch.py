"""``gguftpl patch DIR…`` (issue 23 item 1): a converter's folder of quants repaired with one command, in real
processes, with the real rewriter, audits and catalog; the local Hub server; a real SIGINT; a loop XFS."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gguftpl.folderpatch import ALREADY, COPIED, FAILED, PATCHED, UNCHANGED, FolderFile, FolderPatch, patch_folder
from gguftpl.gguf.reader import read_header
from gguftpl.gguf.templateset import load_templateset
from gguftpl.upstream.catalog import load_catalog
from tests.conftest import ROOT
from tests.hubserver import HubServer, tokenizer_config
from tests.quantfolder import BROKEN, SPLIT, UPSTREAM, make_quant_folder

SHARD2 = f"{SPLIT}-00002-of-00002.gguf"
SHARD1 = f"{SPLIT}-00001-of-00002.gguf"


def gguftpl(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TRANSFORMERS_VERBOSITY="error")
    return subprocess.run([sys.executable, "-m", "gguftpl", *args], env=env, capture_output=True, text=True, **kw)


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.gguf"))}


def data_digest(path: Path) -> str:
    """sha256 of everything after the header, read independently of the writer."""
    with read_header(path) as h:
        start = h.data_offset
    with open(path, "rb") as fh:
        fh.seek(start)
        return hashlib.sha256(fh.read()).hexdigest()


def templates(path: Path) -> dict[str, str]:
    with read_header(path) as h:
        return {n: t.text for n, t in load_templateset(h).templates.items()}


def repo_check_codes(folder: Path) -> list[str]:
    res = gguftpl("audit", "--repo-check", str(folder), "--format", "json")
    assert res.returncode in (0, 1, 2), res.stderr  # 2: an unreadable file in the folder (GT001) is bad input
    report = json.loads(res.stdout)
    return sorted(f["code"] for fa in report["files"] for f in fa.get("findings", []))


# ------------------------------------------------------------------------------------------ the acceptance


def test_folder_of_24_quants_repaired_in_place_then_nothing_to_change(tmp_path: Path) -> None:
    """The issue's acceptance: 24 quants lacking tool_use (a split set, one truncated); one command repairs the
    23 readable ones and reports the unreadable one (exit 1); a second run changes nothing and says so;
    ``audit --repo-check`` is then clean of GT201/GT205/GT55x."""
    folder = tmp_path / "release"
    made = make_quant_folder(folder)
    assert len(made) == 24
    assert "GT201" in repo_check_codes(folder)  # the failure being repaired
    data_before = {p.name: data_digest(p) for p in made if p.name != BROKEN}
    shard2_before = hashlib.sha256((folder / SHARD2).read_bytes()).hexdigest()
    cmd = ["patch", str(folder), "--from-catalog", UPSTREAM, "--tools-in-default", "--in-place"]
    first = gguftpl(*cmd)
    assert first.returncode == 1, first.stdout + first.stderr
    rows = {line.split()[0]: line for line in first.stdout.splitlines() if line.startswith("Hermes-2-Pro")}
    assert len(rows) == 24
    assert "FAILED" in rows[BROKEN] and "remain at byte" in rows[BROKEN]  # cut short inside its vocabulary
    assert "unchanged" in rows[SHARD2] and "same inode, size and mtime" in rows[SHARD2]
    patched = [n for n, row in rows.items() if "replace default, add tool_use" in row]
    assert len(patched) == 22 and SHARD1 in patched  # + the untouched later shard: the 23 readable files
    assert all("byte for byte" in rows[n] or "shared extents" in rows[n] for n in patched)
    assert all(re.search(r"1 error.* -> (?!.*error)", rows[n]) for n in patched), first.stdout
    assert "24 GGUF files: 22 patched, 1 unchanged, 1 failed" in first.stdout
    assert "folder checks (GT55x) on the result" in first.stdout
    hermes = load_catalog().get(UPSTREAM)
    assert hermes is not None
    for name in patched:  # the templates as planned, the tensor bytes as they were (read independently)
        got = templates(folder / name)
        assert got["tool_use"] == hermes.text("tool_use") and got["default"].startswith("{% if tools %}")
        assert data_digest(folder / name) == data_before[name]
    assert hashlib.sha256((folder / SHARD2).read_bytes()).hexdigest() == shard2_before
    assert sorted(os.listdir(folder)) == sorted(p.name for p in made)  # no temp file left behind

    after_first = digests(folder)
    inodes = {p.name: p.stat().st_ino for p in folder.glob("*.gguf")}
    second = gguftpl(*cmd)
    assert second.returncode == 1, second.stdout + second.stderr  # the truncated file is still unreadable
    assert "22 already patched, 1 unchanged, 1 failed; nothing changed" in second.stdout
    assert digests(folder) == after_first and inodes == {p.name: p.stat().st_ino for p in folder.glob("*.gguf")}

    codes = repo_check_codes(folder)
    assert not [c for c in codes if c in ("GT201", "GT205") or c.startswith("GT55")], codes
    assert codes.count("GT001") == 1  # the truncated file, still reported


def test_patch_folder_from_python_to_an_outdir_returns_typed_results(tmp_path: Path) -> None:
    """``patch_folder`` from Python: -o OUTDIR keeps the layout, the later shard is copied with its proof, the
    input folder is untouched; without --tools-in-default GT201 and GT55x are gone, GT205 (upstream's own
    default ignores tools) stays; a second call finds every output already patched."""
    folder, out = tmp_path / "in", tmp_path / "out"
    make_quant_folder(folder, quants=("Q4_K_M", "Q8_0"))
    before = digests(folder)
    result = patch_folder(folder, out, catalog=UPSTREAM, jobs=3)
    assert isinstance(result, FolderPatch) and all(isinstance(f, FolderFile) for f in result.files)
    by = {f.name: f for f in result.files}
    assert {n: f.status for n, f in by.items()} == {
        "Hermes-2-Pro-Mistral-7B-Q4_K_M.gguf": PATCHED,
        "Hermes-2-Pro-Mistral-7B-Q8_0.gguf": PATCHED,
        SHARD1: PATCHED,
        SHARD2: COPIED,
        BROKEN: FAILED,
    }
    assert by[SHARD2].set_of == SHARD1 and by[SHARD2].proof.endswith("byte for byte")
    assert (out / SHARD2).read_bytes() == (folder / SHARD2).read_bytes()
    assert by[SHARD1].changes == ("replace default", "add tool_use")
    assert by[SHARD1].before == {"error": 1, "warning": 1, "info": 1} and by[SHARD1].after["error"] == 0
    assert by[BROKEN].error and not (out / BROKEN).exists() and result.exit_code() == 1
    assert digests(folder) == before  # -o never touches the input
    assert not result.checks
    codes = repo_check_codes(out)
    assert "GT201" not in codes and not [c for c in codes if c.startswith("GT55")], codes
    assert "GT205" in codes

    again = patch_folder(folder, out, catalog=UPSTREAM)
    assert {f.name: f.status for f in again.files if f.ok} == {
        "Hermes-2-Pro-Mistral-7B-Q4_K_M.gguf": ALREADY,
        "Hermes-2-Pro-Mistral-7B-Q8_0.gguf": ALREADY,
        SHARD1: ALREADY,
        SHARD2: ALREADY,
    }
    assert again.nothing_changed


def test_the_hub_upstream_is_fetched_once_for_the_folder(hub: HubServer, tmp_path: Path) -> None:
    e = load_catalog().get(UPSTREAM)
    assert e is not None
    hub.add_repo(UPSTREAM, {"tokenizer_config.json": tokenizer_config({n: e.text(n) for n in e.templates})})
    folder = tmp_path / "in"
    make_quant_folder(folder, quants=("Q4_K_M", "Q5_K_M", "Q8_0"))
    hub.clear_log()
    result = patch_folder(folder, tmp_path / "out", repo=UPSTREAM, checks=False)
    assert result.count(PATCHED) == 4 and result.count(FAILED) == 1
    # as for one file: the revision, the file list, then tokenizer_config.json (HEAD, GET), once for 4 files
    fetched = [r.method for r in hub.log if r.path.endswith("tokenizer_config.json")]
    assert fetched == ["HEAD", "GET"] and len(hub.log) == 4, [(r.method, r.path) for r in hub.log]


def test_the_folder_checks_compare_with_the_upstream_the_patch_read(hub: HubServer, tmp_path: Path) -> None:
    """Facts gathered once: the folder checks (GT55x) compare the result with the upstream the patch resolved,
    not a second read of the Hub: --from-hub asks the Hub nothing twice, --from-catalog never asks it (the local
    Hub serves the repo, so a check that read it again would show in the log)."""
    e = load_catalog().get(UPSTREAM)
    assert e is not None
    hub.add_repo(UPSTREAM, {"tokenizer_config.json": tokenizer_config({n: e.text(n) for n in e.templates})})
    folder = tmp_path / "in"
    make_quant_folder(folder, quants=("Q4_K_M", "Q8_0"))
    hub.clear_log()
    from_hub = patch_folder(folder, tmp_path / "out-hub", repo=UPSTREAM)
    assert from_hub.count(PATCHED) == 3 and not [f.code for f in from_hub.checks], from_hub.checks
    asked = [(r.method, r.path) for r in hub.log]  # tokenizer_config.json may come from the HF cache by now
    assert len(asked) == len(set(asked)) and sum("/revision/" in p for _, p in asked) == 1, asked
    hub.clear_log()
    from_catalog = patch_folder(folder, tmp_path / "out-catalog", catalog=UPSTREAM)
    assert from_catalog.count(PATCHED) == 3 and not [f.code for f in from_catalog.checks], from_catalog.checks
    assert hub.log == [], [(r.method, r.path) for r in hub.log]


def test_a_folder_without_ggufs_and_bad_combinations_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    res = gguftpl("patch", str(tmp_path / "empty"), "--from-catalog", UPSTREAM, "--in-place")
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        f"gguftpl: error: no GGUF files (*.gguf) in {tmp_path / 'empty'}"
    ]
    both = gguftpl("patch", str(tmp_path / "empty"), "--from-catalog", UPSTREAM, "--in-place", "-o", str(tmp_path))
    assert both.returncode == 2 and len(both.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------ interrupted


def test_sigint_mid_folder_leaves_each_file_old_or_new_and_the_rerun_completes(tmp_path: Path) -> None:
    """A real SIGINT to a real process part way through: every file is byte for byte its old self or a
    complete patched file (templates as planned, tensor bytes as before); the re-run finishes the rest."""
    folder = tmp_path / "release"
    made = make_quant_folder(folder, data_bytes=24 << 20)
    old = digests(folder)
    data_before = {p.name: data_digest(p) for p in made if p.name != BROKEN}
    inodes = {p.name: p.stat().st_ino for p in made}
    env = dict(os.environ, TRANSFORMERS_VERBOSITY="error")
    cmd = [sys.executable, "-m", "gguftpl", "patch", str(folder), "--from-catalog", UPSTREAM, "--in-place"]
    proc = subprocess.Popen([*cmd, "--jobs", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while proc.poll() is None:  # wait until some files are replaced (a rename gives a new inode)
            if sum(1 for p in made if p.exists() and p.stat().st_ino != inodes[p.name]) >= 3:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the folder was patched before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    assert err.strip().splitlines()[-1] == "gguftpl: interrupted"
    now = digests(folder)
    assert sorted(os.listdir(folder)) == sorted(old)  # no temp file, nothing missing
    new = [n for n in now if now[n] != old[n]]
    assert 3 <= len(new) < 22, new
    for name in new:
        assert "tool_use" in templates(folder / name) and data_digest(folder / name) == data_before[name]
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr  # the truncated file only
    assert f"{len(new)} already patched" in rerun.stdout and f"{22 - len(new)} patched" in rerun.stdout
    assert all("tool_use" in templates(p) for p in made if p.name not in (BROKEN, SHARD2))


# ------------------------------------------------------------------------------------------ reflinks


def test_folder_patch_on_xfs_adds_under_1_mib_per_file(xfs_dir: Path) -> None:
    """On a reflink filesystem the tensor data of every quant is shared with its source: the whole folder
    patch (-o OUTDIR, and --in-place) adds less than 1 MiB per file, counted by the filesystem."""
    from tests.xfsloop import used_bytes

    folder, out = xfs_dir / "fp-in", xfs_dir / "fp-out"
    try:
        made = make_quant_folder(folder, data_bytes=4 << 20)
        used = used_bytes(xfs_dir)
        result = patch_folder(folder, out, catalog=UPSTREAM, checks=False)
        grew = used_bytes(xfs_dir) - used
        assert result.count(PATCHED) == 22 and result.count(COPIED) == 1
        shared = [f for f in result.files if f.ok and f.name != SHARD1]  # SHARD1: no tensor data to share
        assert all("shared extents" in f.proof for f in shared), [f.proof for f in result.files]
        assert grew < len(made) * (1 << 20), grew
        used = used_bytes(xfs_dir)
        in_place = patch_folder(folder, catalog=UPSTREAM, in_place=True, checks=False)
        grew_in_place = used_bytes(xfs_dir) - used
        assert in_place.count(PATCHED) == 22 and in_place.count(UNCHANGED) == 1
        assert grew_in_place < len(made) * (1 << 20), grew_in_place
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


# ------------------------------------------------------------------------------------------ the README


def test_readme_folder_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's converter workflow from Python, run as written on a folder made here."""
    (code,) = re.findall(r"```py\n(.*?)\n```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    make_quant_folder(tmp_path / "out", quants=("Q4_K_M",))
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the project's own documentation
    result = namespace["result"]
    assert isinstance(result, FolderPatch) and result.count(PATCHED) == 2 and result.count(FAILED) == 1
