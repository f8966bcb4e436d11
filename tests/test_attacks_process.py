"""Issue 14, item 2: signals, with real signals sent to real processes.

SIGINT 0.4-1.2 s after `gguftpl patch` started (while modules imported) printed a KeyboardInterrupt traceback
(exit -2) and SIGTERM ended it with -15 and no message. Now the handlers are in from the moment gguftpl's own
code runs: the tests wait until the process has a SIGTERM handler (``SigCgt`` in /proc, set before click or
any library code is imported), then signal it at delays that cover the imports, the plan, the analysis and
the write; every run ends with one line and 130 or 143, leaves no output file and no child process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CHATML, ROOT
from tests.procwatch import SAFETY_TIMEOUT, catches, children, gone, start

MakeGGUF = Callable[..., Path]
SHARES = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8)
"""When to signal, as shares of an uninterrupted cold run's time (0.4-1.5 s here: the imports, the plan, the
analysis, the write), so every phase is hit however fast or slow the machine is."""


def installed_command() -> str:
    path = Path(sys.executable).with_name("gguftpl")
    if not path.exists():
        pytest.skip("the gguftpl console script is not installed in this environment")
    return str(path)


def wait_until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SAFETY_TIMEOUT  # a safety net: each condition comes within seconds
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.001)


@pytest.mark.parametrize(
    ("signum", "to_group", "code", "line"),
    [
        (signal.SIGINT, True, 130, "gguftpl: interrupted"),  # Ctrl-C: the terminal signals the whole group
        (signal.SIGTERM, False, 143, "gguftpl: terminated"),  # kill, timeout(1), a cancelled CI job
    ],
)
def test_a_signal_at_any_moment_is_one_line(
    make_gguf: MakeGGUF, tmp_path: Path, signum: int, to_group: bool, code: int, line: str
) -> None:
    gguf = make_gguf(templates={"default": CHATML})
    template = tmp_path / "t.jinja"
    template.write_text(CHATML + "{{ '' }}")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    command = installed_command()
    reference = tmp_path / "reference.gguf"
    started = time.monotonic()
    done = subprocess.run(
        [command, "patch", str(gguf), "--template", f"default={template}", "-o", str(reference)],
        env={**os.environ, "GGUFTPL_CACHE_DIR": str(tmp_path / "cache-reference")},
    )
    took = time.monotonic() - started
    assert done.returncode == 0
    signalled = 0
    for delay in (share * took for share in SHARES):
        # a fresh cache folder each run: the templates are analysed (rendered, loaded in llama.cpp) every time,
        # so the signal lands in every phase, not in a patch that the facts cache made quick
        cold = {"GGUFTPL_CACHE_DIR": str(tmp_path / f"cache-{delay}")}
        proc = start(
            [command, "patch", str(gguf), "--template", f"default={template}", "-o", str(out_dir / "x")], env=cold
        )
        wait_until(lambda p=proc: catches(p.pid, signal.SIGTERM) or p.poll() is not None, "no handlers installed")
        time.sleep(delay)
        kids = children(proc.pid)
        if proc.poll() is not None:
            proc.communicate()
            continue  # finished first (a fast machine): nothing to interrupt at this delay
        (os.killpg if to_group else os.kill)(proc.pid, signum)
        _, err = proc.communicate(timeout=SAFETY_TIMEOUT)
        signalled += 1
        assert (proc.returncode, err.strip()) == (code, line), (delay, proc.returncode, err[-3000:])
        # no temp file, and no output, or (the signal came after the atomic rename) the whole of it
        left = list(out_dir.iterdir())
        assert left in ([], [out_dir / "x"]), delay
        if left:
            assert left[0].read_bytes() == reference.read_bytes(), delay
            left[0].unlink()
        for kid in kids:  # the render worker went with it
            wait_until(lambda kid=kid: gone(kid), f"child {kid} outlived gguftpl")
    assert signalled >= len(SHARES) - 2, (signalled, took)


def test_the_handlers_go_in_before_click_or_the_library_is_imported() -> None:
    """What made the old window: the handlers were installed after `import click` and the package's reader."""
    code = (
        "import sys\n"
        "from gguftpl import interrupts\n"
        "install = interrupts.install\n"
        "def recorded():\n"
        "    print(sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'gguftpl', 'jinja2')))\n"
        "    install()\n"
        "interrupts.install = recorded\n"
        "from gguftpl.__main__ import main\n"
        "main(['--version'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=SAFETY_TIMEOUT)
    loaded = proc.stdout.splitlines()[0]
    assert loaded == "['gguftpl', 'gguftpl.__main__', 'gguftpl.errors', 'gguftpl.interrupts', 'gguftpl.limits']"


def _python(code: str) -> subprocess.Popen[str]:
    proc = start([sys.executable, "-c", code], env={"PYTHONPATH": str(ROOT)}, cwd=str(ROOT))
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


HANDLERS = "from gguftpl import interrupts, limits\nlimits.INTERRUPT_GRACE = {grace}\ninterrupts.install()\n"


STUCK_IN_C = """import hashlib, threading, time
threading.Thread(target=lambda: (time.sleep(0.2), print('ready', flush=True))).start()
try:  # a C call that releases the GIL and does not return for minutes: Python's handler cannot run
    hashlib.pbkdf2_hmac('sha256', b'x', b'y', 2**31 - 1)
except KeyboardInterrupt as exc:  # had the signal come before it (gguftpl.__main__ does the same)
    raise SystemExit(interrupts.report(exc))
"""
HUNG_CLEANUP = """import time
try:
    print('ready', flush=True)
    time.sleep(600)
finally:
    print('cleaning', flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("stuck", [STUCK_IN_C, HUNG_CLEANUP], ids=["c-call", "cleanup"])
def test_sigterm_ends_a_stuck_process_after_the_grace(stuck: str) -> None:
    proc = _python(HANDLERS.format(grace=0.5) + stuck)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=SAFETY_TIMEOUT)
    assert (proc.returncode, err) == (143, "gguftpl: terminated\n")


def test_a_second_signal_during_cleanup_ends_at_once() -> None:
    proc = _python(HANDLERS.format(grace=600) + HUNG_CLEANUP)
    proc.send_signal(signal.SIGINT)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "cleaning"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=SAFETY_TIMEOUT)
    assert (proc.returncode, err) == (130, "gguftpl: interrupted\n")


def test_a_worker_busy_for_ever_dies_with_its_parent(tmp_path: Path) -> None:
    """A parent killed outright runs no cleanup: its worker, mid-render of a template that loops for ever,
    must not run on for hours."""
    pidfile = tmp_path / "child.pid"
    code = (
        "from gguftpl.worker import Op, Worker, WorkerSpec\n"
        f"w = Worker(WorkerSpec('t', {{'spin': Op('tests.worker_ops:spin')}}, env={{'PYTHONPATH': {str(ROOT)!r}}}))\n"
        "print('ready', flush=True)\n"
        f"w.ask('spin', {{'pidfile': {str(pidfile)!r}}}, 3600)\n"
    )
    parent = _python(code)
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", "the worker never started spinning")
    child = int(pidfile.read_text())
    assert not gone(child)
    parent.kill()
    parent.communicate()
    wait_until(lambda: gone(child), "the spinning worker outlived its killed parent")


def test_a_closed_pipe_ends_quietly() -> None:
    """`gguftpl rules | head -1`: the reader is gone before gguftpl writes; no error line, no traceback."""
    r, w = os.pipe()
    os.close(r)  # the reader exits before the first write: the write fails with EPIPE
    try:
        proc = subprocess.run(
            [installed_command(), "rules"], stdout=w, stderr=subprocess.PIPE, text=True, timeout=SAFETY_TIMEOUT
        )
    finally:
        os.close(w)
    assert proc.stderr == ""
    assert proc.returncode == 1


@pytest.mark.parametrize("module", ["jinja2", "minijinja", "gguftpl"])
def test_a_module_in_the_current_folder_is_never_imported_by_a_worker(
    module: str, tmp_path: Path, make_gguf: Callable[..., Path]
) -> None:
    """``python -c`` puts the current folder first on the path: a worker started that way in a folder holding a
    ``jinja2.py`` would run it. Each worker gets this process's import path instead, never the current folder (the
    console script's own path starts with its folder, not the current one)."""
    path = make_gguf(templates={"default": CHATML})
    marker = tmp_path / "ran"
    (tmp_path / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)  # the checkout under test, as an absolute path (the cwd is the trap folder)
    env["GGUFTPL_CACHE_DIR"] = str(tmp_path / "cache")
    res = subprocess.run(
        [str(Path(sys.executable).parent / "gguftpl"), "audit", "--exit-zero", str(path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=SAFETY_TIMEOUT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "GT201" in res.stdout  # the workers rendered it
    assert not marker.exists()


def test_a_killed_parent_leaves_no_private_folder_of_its_worker(tmp_path: Path) -> None:
    """A parent killed outright cannot remove its worker's private TMPDIR: the worker, which ends with it, does
    (each parse-check child left a folder of llama.cpp stand-ins in /tmp)."""
    info = tmp_path / "tmp.txt"
    code = (
        "from gguftpl.worker import Op, Worker, WorkerSpec\n"
        "w = Worker(WorkerSpec('t', {'spin': Op('tests.worker_ops:spin')}, private_tmp='gguftpl-test-kill-',\n"
        f"    env={{'PYTHONPATH': {str(ROOT)!r}}}))\n"
        "w.prestart(); w._ensure_ready()\n"
        f"open({str(info)!r}, 'w').write(w._tmp)\n"
        "print('ready', flush=True)\n"
        "import time; time.sleep(3600)\n"
    )
    parent = _python(code)
    wait_until(lambda: info.exists() and info.read_text() != "", "the worker never started")
    folder = Path(info.read_text())
    assert folder.is_dir()
    parent.kill()
    parent.communicate()
    wait_until(lambda: not folder.exists(), "the killed parent's worker left its private folder")


def test_a_signal_blocked_by_the_parent_still_ends_a_command(tmp_path: Path) -> None:
    """A process inherits its parent's signal mask: started from a thread that blocks SIGINT (some test runners
    and supervisors), gguftpl would hold a Ctrl-C pending and run to the end. It unblocks what it handles."""
    code = (
        "import signal; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # as if inherited\n"
        + HANDLERS.format(grace=600)
        + "import time\ntry:  # 'ready' inside the try: a SIGINT just after it must still land in the handler\n"
        "    print('ready', flush=True)\n    time.sleep(600)\nexcept KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    proc = _python(code)
    proc.send_signal(signal.SIGINT)
    out, _err = proc.communicate(timeout=SAFETY_TIMEOUT)
    assert out.strip() == "interrupted"


def test_an_interrupt_python_wraps_in_another_error_is_still_the_interrupt() -> None:
    """A SIGTERM that landed while a dataclass was being built came out of Python 3.11 as "RuntimeError: Error
    calling __set_name__ …" and was reported as an unexpected error, exit 2 (CI, 1 run in many)."""
    from gguftpl import interrupts

    class Landing:
        def __set_name__(self, owner: type, name: str) -> None:
            raise interrupts.Terminated  # what the SIGTERM handler raises, at that moment

    try:
        type("Built", (), {"field": Landing()})
    except BaseException as exc:  # noqa: BLE001 - RuntimeError on 3.11, the interrupt itself on 3.12+
        caught: BaseException = exc
    else:
        raise AssertionError("__set_name__ did not raise")
    found = interrupts.wrapped_interrupt(caught)
    assert isinstance(found, interrupts.Terminated)
    assert interrupts.wrapped_interrupt(RuntimeError("a bug")) is None
    assert interrupts.outcome(found)[0] == 143
