"""Issue 26: progress on stderr for long work, drawn by tqdm, only when stderr is a terminal.

Each command runs as a real process whose stderr is a real pseudo-terminal (``pty.openpty``) and whose stdout
is a pipe: the bar names the current item on the terminal, the report on stdout holds none of it. The same
command with stderr piped writes nothing there at all. Also: scripts/fetch_corpus.py draws its bar the same
way, honours XDG_CACHE_HOME and links what an older run fetched instead of fetching it again.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CHATML, ROOT

MakeGGUF = Callable[..., Path]
FETCH = str(ROOT / "scripts" / "fetch_corpus.py")
HAS_LLAMACPP = importlib.util.find_spec("xllamacpp") is not None


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(extra or {})}
    env.pop("COLUMNS", None)  # the terminal says how wide it is
    return env


def on_terminal(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``python ARGS`` with stderr on a 100x24 pseudo-terminal: (exit code, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=_env(env)
    )
    os.close(slave)
    got: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal has closed it
                return
            if not data:
                return
            got.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    raw, _ = proc.communicate()
    code = proc.returncode
    reader.join()
    os.close(master)
    return code, raw.decode("utf-8"), b"".join(got).decode("utf-8", "replace")


def piped(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=_env(env))


@pytest.fixture
def folder(make_gguf: MakeGGUF, tmp_path: Path) -> Path:
    (tmp_path / "quants").mkdir()
    for i in range(3):
        make_gguf(f"quants/model-Q{i}.gguf", templates={"default": CHATML + "{# " + str(i) + " #}"})
    return tmp_path / "quants"


def _assert_bar(stderr: str, unit: str, name: str) -> None:
    assert "\r" in stderr and unit in stderr and name in stderr, stderr


def _assert_clean_report(stdout: str) -> None:
    assert "\r" not in stdout and "\x1b[" not in stdout and "/s]" not in stdout


@pytest.mark.parametrize("extra", [[], ["--repo-check", "--no-upstream"]])
def test_a_multi_file_audit_shows_a_bar_on_a_terminal_and_nothing_in_a_pipe(folder: Path, extra: list[str]) -> None:
    code, out, err = on_terminal("-m", "gguftpl", "audit", *extra, str(folder))
    assert code in (0, 1) and "3 files" in out, (out, err)
    _assert_bar(err, "3/3", "model-Q")  # the count and the file
    _assert_clean_report(out)
    quiet = piped("-m", "gguftpl", "audit", *extra, str(folder))
    assert quiet.returncode == code and quiet.stderr == ""
    assert quiet.stdout == out  # the report is the same with or without the bar


def test_a_folder_patch_and_a_scan_show_a_bar_on_a_terminal_and_nothing_in_a_pipe(folder: Path, tmp_path: Path) -> None:
    """`patch DIR -o OUT` drew a hand-written `[n] name: status` line per file on a terminal, and `scan` nothing:
    both now draw tqdm's bar with the current file or model, and write nothing to stderr in a pipe."""
    template = tmp_path / "new.jinja"
    template.write_text(CHATML + "{# new #}", encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "HF_HOME": str(home / "hf"), "GGUFTPL_CACHE_DIR": str(tmp_path / "facts")}
    for i, (args, unit) in enumerate(
        (
            (["patch", str(folder), "--template", f"default={template}", "-o"], "3/3"),
            (["scan", "--path", str(folder)], "3/3"),
        )
    ):
        argv = [*args, str(tmp_path / f"out{i}")] if args[0] == "patch" else args
        code, out, err = on_terminal("-m", "gguftpl", *argv, env=env)
        assert code in (0, 1), (out, err)
        _assert_bar(err, unit, "model-Q")
        assert "[1]" not in err  # no hand-drawn counter beside the bar
        _assert_clean_report(out)
        again = [*args, str(tmp_path / f"again{i}")] if args[0] == "patch" else args
        quiet = piped("-m", "gguftpl", *again, env=env)
        assert quiet.returncode == code and quiet.stderr == "", quiet.stderr


@pytest.mark.skipif(not HAS_LLAMACPP, reason="xllamacpp is not installed")
def test_verify_live_shows_its_steps_on_a_terminal_and_nothing_in_a_pipe(make_gguf: MakeGGUF) -> None:
    """The live stage's steps (`live: loading …`, `live: the model answers …`) are progress: a status line on
    a terminal, and in a pipe nothing (what happened is in the report: the outcome, the budget, a retry)."""
    from tests.test_live import _qwen_template

    src = make_gguf("tiny.gguf", templates={"default": _qwen_template()}, specials=["<|im_start|>", "<|im_end|>"])
    args = ("-m", "gguftpl", "verify", str(src), "--live", "--max-tokens", "4", "--threads", "1")
    code, out, err = on_terminal(*args)
    assert code in (0, 1), (out, err)
    _assert_bar(err, "live: loading tiny.gguf", "live: the model answers")
    _assert_clean_report(out)
    assert "live" in out  # the stage is in the report
    quiet = piped(*args)
    assert quiet.returncode == code and "live:" not in quiet.stderr and quiet.stderr == "", quiet.stderr


def _fetched() -> bool:
    sys.path.insert(0, str(ROOT / "scripts"))
    from fetch_corpus import FILES, corpus_path

    return all(corpus_path(name).exists() for name in FILES)


@pytest.mark.skipif(not _fetched(), reason="the corpus is not fetched: run scripts/fetch_corpus.py")
def test_fetch_corpus_shows_a_bar_on_a_terminal_and_nothing_in_a_pipe() -> None:
    """A warm run only re-checks the sha256 of 600 MB: a second or two, with the file being checked shown."""
    code, out, err = on_terminal(FETCH)
    assert code == 0 and "files verified" in out, (out, err)
    _assert_bar(err, "corpus: checking", "SmolLM2-135M-Instruct.Q4_1.gguf")
    quiet = piped(FETCH)
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == out


@pytest.mark.skipif(not _fetched(), reason="the corpus is not fetched: run scripts/fetch_corpus.py")
def test_fetch_corpus_honours_xdg_cache_home_and_fetches_nothing_again(tmp_path: Path) -> None:
    """With XDG_CACHE_HOME set, the corpus goes to $XDG_CACHE_HOME/gguftpl/corpus; what an older run put in
    ~/.cache/gguftpl/corpus is linked from there (same file system) after its sha256 is checked, not fetched
    (pip is not on this run's PATH, and PIP_INDEX_URL points at the discard port: a download would fail)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from fetch_corpus import FILES, legacy_dir

    old = legacy_dir()
    if not all((old / name).exists() for name in FILES):
        pytest.skip(f"the corpus is not in {old}")
    if os.stat(old).st_dev != os.stat(tmp_path).st_dev:
        pytest.skip("the test folder is on another file system: the migration would copy 600 MB")
    env = {"XDG_CACHE_HOME": str(tmp_path), "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_NO_INDEX": "1"}
    run = piped(FETCH, env={**env, "GGUFTPL_CORPUS_DIR": ""})
    new = tmp_path / "gguftpl" / "corpus"
    assert run.returncode == 0 and str(new) in run.stdout, run.stdout + run.stderr
    for name in FILES:
        assert os.path.samefile(new / name, old / name), name  # a link, not a second download
    code = (
        "import sys; sys.path.insert(0, 'scripts'); from fetch_corpus import corpus_path; "
        "print(corpus_path('SmolLM2-135M-Instruct.Q4_1.gguf'))"
    )
    where = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env({**env, "GGUFTPL_CORPUS_DIR": ""}),
    )
    assert where.stdout.strip() == str(new / "SmolLM2-135M-Instruct.Q4_1.gguf")
