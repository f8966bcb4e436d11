"""Issue 27, items 10 and 12: files that change underneath and patches that race, with real processes.

10. A file rewritten in place by a concurrent ``cp`` while it is read killed the process with SIGBUS (exit 135,
    no line) in 62 of 153 tries (the header reader memory-mapped it), and one such file ended a folder audit.
    Now every run is an exit code with a line about the file, and the folder audit goes on to the next one.
12. Two concurrent ``patch --in-place`` of one file both exited 0 with one change lost; an output name of 232
    bytes or more failed (the temporary name added ~24 bytes).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gguftpl.gguf.reader import read_header
from gguftpl.gguf.templateset import load_templateset
from tests.conftest import CHATML
from tests.procwatch import SAFETY_TIMEOUT, Watched, run_watched

SAMPLE = Path(__file__).parent.parent / "samples" / "hermes-2-pro-mistral-7b.chatml.gguf"
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"
TRIES = 16
SIGBUS_EXIT = (-7, 135)  # killed by the signal (subprocess) or through a shell


@pytest.fixture
def rewritten(tmp_path: Path, corpus_file: Callable[[str], Path]) -> Iterator[tuple[Path, Path]]:
    """A folder holding a real GGUF that another process rewrites in place for ever (``cp`` over it in a loop:
    truncated, then written again) and, after it, a file nobody touches."""
    src = corpus_file(SMOLLM2)
    folder = tmp_path / "models"
    folder.mkdir()
    target = folder / "a-rewritten.gguf"
    shutil.copyfile(src, target)
    shutil.copyfile(SAMPLE, folder / "z-quiet.gguf")
    loop = 'while :; do cp "$0" "$1"; done'
    writer = subprocess.Popen(["sh", "-c", loop, str(src), str(target)], start_new_session=True)
    try:
        yield folder, target
    finally:
        os.killpg(writer.pid, signal.SIGKILL)  # the shell and the cp it is running
        writer.wait()


def _changed(w: Watched, target: Path) -> bool:
    """Whether this run met the file mid-rewrite (an unreadable or cut-short file, not the whole model)."""
    text = w.stdout + w.stderr
    return any(s in text for s in ("shrank while being read", "GT001", "GT004", "GT002", "truncated"))


def test_a_folder_audit_meets_a_file_being_rewritten_with_a_line_never_a_signal(
    rewritten: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, target = rewritten
    env = {"GGUFTPL_CACHE_DIR": str(tmp_path / "cache")}
    runs = [run_watched("audit", "--engine", "hf-only", "--no-color", folder, env=env) for _ in range(TRIES)]
    for w in runs:
        assert w.returncode not in SIGBUS_EXIT, "killed by SIGBUS: " + w.stderr[-500:]
        assert w.returncode in (0, 1, 2), (w.returncode, w.stderr[-500:])
        assert "unexpected" not in w.stderr and "Traceback" not in w.stderr, w.stderr[-1000:]
        # a line about the file being rewritten, and the folder audit went on to the next file
        assert str(target) in w.stdout, w.stdout[-1000:]
        assert str(folder / "z-quiet.gguf") in w.stdout, w.stdout[-1000:]
        assert "GT201" in w.stdout.split(str(folder / "z-quiet.gguf"), 1)[1]  # and audited it in full
    # the attack was real: some runs found the file cut short or unreadable
    assert any(_changed(w, target) for w in runs), [w.stdout[-300:] for w in runs]


def test_inspect_and_patch_of_a_file_being_rewritten_end_with_a_line(
    rewritten: tuple[Path, Path], tmp_path: Path
) -> None:
    """``inspect`` reads the header and ``patch`` copies and compares the tensor data (copy_file_range, pread):
    neither touches a mapping of the file, so a rewrite underneath is an exit code and a line."""
    _, target = rewritten
    tpl = tmp_path / "tool_use.jinja"
    tpl.write_text(CHATML)
    runs = [run_watched("inspect", target) for _ in range(TRIES // 2)]
    runs += [
        run_watched("patch", target, "--template", f"tool_use={tpl}", "--no-audit", "-o", tmp_path / f"out{i}.gguf")
        for i in range(TRIES // 2)
    ]
    for w in runs:
        assert w.returncode not in SIGBUS_EXIT, "killed by SIGBUS: " + w.stderr[-500:]
        assert w.returncode in (0, 1, 2), (w.returncode, w.stderr[-500:])
        assert "unexpected" not in w.stderr and "Traceback" not in w.stderr, w.stderr[-1000:]
        if w.returncode == 2:
            (line,) = w.stderr.splitlines()[-1:]
            assert line.startswith("gguftpl: error: "), w.stderr
        else:
            assert w.stdout.strip()


# --------------------------------------------------------------------------------------------- item 12


def _templates(path: Path) -> dict[str, str]:
    with read_header(path) as header:
        return {n: t.text for n, t in load_templateset(header).templates.items()}


def _patch_in_place(model: Path, name: str, tpl: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gguftpl",
            "patch",
            str(model),
            "--template",
            f"{name}={tpl}",
            "--in-place",
            "--no-audit",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _waits_on_a_lock(pid: int, path: Path) -> bool:
    """Whether process ``pid`` is blocked on a lock of ``path`` (the kernel's own table, /proc/locks)."""
    ino = f":{path.stat().st_ino} "
    with open("/proc/locks") as fh:
        return any("->" in line and f" {pid} " in line and ino in line for line in fh)


def test_a_patch_in_place_waits_for_the_one_writing_and_then_writes_nothing(make_gguf: Callable[..., Path]) -> None:
    """The lost update, made certain: while "another patch" (this test) holds the file's lock, a real
    ``patch --in-place`` plans from the file and waits; the other one renames its output over the file and lets go;
    the waiting patch then finds another file and stops with one line. Its change is not written over the
    other's (before the lock it wrote at once, exit 0, and a real second patch renamed over it: one lost)."""
    model = make_gguf("m.gguf", templates={"default": CHATML})
    tpl = model.parent / "tool_use.jinja"
    tpl.write_text(CHATML.replace("<|im_start|>", "<|im_start|>T "))
    other = CHATML.replace("assistant", "assistant2")
    holder = os.open(model, os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        proc = _patch_in_place(model, "tool_use", tpl)
        deadline = time.monotonic() + SAFETY_TIMEOUT
        while proc.poll() is None and not _waits_on_a_lock(proc.pid, model) and time.monotonic() < deadline:
            time.sleep(0.05)
        waited = proc.poll() is None
        # the other patch's write: its output renamed over the file, as patch --in-place does
        import gguftpl

        gguftpl.patch_templates(model, model.parent / "other.gguf", {"default": other})
        os.replace(model.parent / "other.gguf", model)
    finally:
        os.close(holder)
    out, err = proc.communicate(timeout=SAFETY_TIMEOUT)
    assert waited, f"the patch did not wait for the lock: exit {proc.returncode}\n{out}{err}"
    assert proc.returncode == 2, (proc.returncode, out, err)
    (line,) = err.splitlines()
    assert line.startswith("gguftpl: error: ") and "changed while this patch was being planned" in line, line
    assert _templates(model) == {"default": other}  # the other's change stands; nothing of this one


def test_two_real_patches_in_place_never_both_report_success_with_a_change_lost(
    make_gguf: Callable[..., Path],
) -> None:
    rounds = 6
    for r in range(rounds):
        model = make_gguf(f"m{r}.gguf", templates={"default": CHATML})
        texts = {name: CHATML.replace("<|im_start|>", f"<|im_start|>{name} ") for name in ("tool_use", "rag")}
        tpls = {}
        for name, text in texts.items():
            tpls[name] = model.parent / f"{name}{r}.jinja"
            tpls[name].write_text(text)
        procs = {name: _patch_in_place(model, name, tpl) for name, tpl in tpls.items()}
        done = {name: (p, *p.communicate(timeout=SAFETY_TIMEOUT)) for name, p in procs.items()}
        ok = {name for name, (p, _, _) in done.items() if p.returncode == 0}
        for name, (p, out, err) in done.items():
            assert p.returncode in (0, 2), (name, p.returncode, out, err)
            if p.returncode == 2:
                (line,) = err.splitlines()
                assert "changed while this patch was being planned" in line, line
        assert ok, done  # one of them always writes
        got = _templates(model)
        # every patch that said it wrote has its template in the file: no change lost behind an exit 0
        assert {n for n in got if n != "default"} == ok, (r, done, sorted(got))
        assert all(got[n] == texts[n] for n in ok)
