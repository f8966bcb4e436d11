"""gguftpl.worker: every failure of a child is an outcome the caller reads, never a hang or a stray exception."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gguftpl import worker
from gguftpl.worker import Op, Worker, WorkerSpec
from tests.conftest import ROOT

OPS = {
    name: Op(f"tests.worker_ops:{name}") for name in ("echo", "nap", "crash", "leave", "fail", "make_temp", "surrogate")
}


def spec(**kw: object) -> WorkerSpec:
    args: dict[str, object] = {"ops": {**OPS, "grow": Op("tests.worker_ops:grow", peak_growth_limit=64 << 20)}}
    args["env"] = {"PYTHONPATH": str(ROOT)}
    args.update(kw)
    return WorkerSpec("test worker", **args)  # type: ignore[arg-type]


@pytest.fixture
def w() -> Iterator[Worker]:
    wk = Worker(spec())
    yield wk
    wk.close()


def test_answers_and_a_batch_streams_one_outcome_per_item(w: Worker) -> None:
    assert w.ask("echo", {"a": [1, "é"]}, 30).value == {"a": [1, "é"]}
    pid = w.pid
    outs = w.ask_many("echo", [1, 2, 3], 30)
    assert [o.value for o in outs] == [1, 2, 3] and all(o.ok for o in outs)
    assert w.pid == pid and w.stats.requests == 4 and w.stats.restarts == 0


def test_the_item_that_overran_is_named_and_the_rest_run_in_a_fresh_child(w: Worker) -> None:
    outs = w.ask_many("nap", [{"seconds": 0}, {"seconds": 60}, {"seconds": 0}], 2)
    assert [o.kind for o in outs] == ["ok", "timeout", "ok"]
    assert w.stats.restarts == 1
    skipped = w.ask_many("nap", [{"seconds": 60}, {"seconds": 0}], 1, skip_rest=True)
    assert [o.kind for o in skipped] == ["timeout", "skipped"]


def test_a_crash_is_the_signal_and_an_exit_is_its_status(w: Worker) -> None:
    crashed = w.ask("crash", None, 30)
    assert (crashed.kind, crashed.signal) == ("crashed", "SIGSEGV") and "SIGSEGV" in crashed.message
    left = w.ask("leave", None, 30)
    assert (left.kind, left.exit_code) == ("exited", 3)
    assert w.ask("echo", "again", 30).value == "again"
    assert w.stats.restarts == 2


def test_an_op_that_raises_keeps_the_child(w: Worker) -> None:
    w.ask("echo", 0, 30)
    pid = w.pid
    out = w.ask("fail", "x", 30)
    assert (out.kind, out.error_type, out.message) == ("error", "ValueError", "no good: x")
    bad = w.ask("surrogate", None, 30)
    assert bad.kind == "error" and "unserialisable" in bad.message
    assert w.pid == pid


def test_memory_past_the_cap_or_the_peak_limit_is_a_result() -> None:
    capped = Worker(spec(memory_headroom=256 << 20))
    try:
        out = capped.ask("grow", {"mib": 1024}, 60)
        assert (out.kind, out.error_type) == ("memory", "MemoryError")
        pid = capped.pid
        # under the cap but past the op's peak limit: answered, then the child ends itself
        peak = capped.ask("grow", {"mib": 128}, 60)
        assert peak.kind == "memory" and "grew by more than 64 MiB" in peak.message
        assert capped.ask("grow", {"mib": 1}, 60).ok and capped.pid != pid
    finally:
        capped.close()


def test_the_peak_limit_is_the_childs_own_not_its_parents() -> None:
    """Linux carries a parent's peak RSS into its child's ru_maxrss across fork and exec: spawned from a big
    process, a child's growth hid under the parent's peak (the audit runs in one)."""
    script = (
        "from gguftpl.worker import Op, Worker, WorkerSpec\n"
        "ballast = bytearray(400 << 20)\n"
        "ops = {'grow': Op('tests.worker_ops:grow', 64 << 20)}\n"
        f"w = Worker(WorkerSpec('t', ops, env={{'PYTHONPATH': {str(ROOT)!r}}}))\n"
        "print(w.ask('grow', {'mib': 128}, 60).kind)\n"
        "w.close()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert proc.stdout.split() == ["memory"], proc.stderr[-2000:]


def test_a_setup_that_fails_is_a_start_outcome_for_every_item() -> None:
    broken = Worker(spec(setup=("tests.worker_ops:broken_setup",)))
    try:
        outs = broken.ask_many("echo", [1, 2], 30)
        assert [o.kind for o in outs] == ["start", "start"]
        assert "test worker did not start: RuntimeError: cannot import the engine" in outs[0].message
    finally:
        broken.close()


def test_a_request_that_is_no_json_data_is_an_error(w: Worker) -> None:
    outs = w.ask_many("echo", [object(), 1], 30)
    assert [o.kind for o in outs] == ["error", "error"] and "not JSON data" in outs[0].message


def test_the_private_folder_goes_with_the_child(tmp_path: Path) -> None:
    wk = Worker(spec(private_tmp="gguftpl-test-"))
    try:
        path = Path(wk.ask("make_temp", None, 30).value)
        assert path.exists() and path.parent.name.startswith("gguftpl-test-")
        assert wk.ask("nap", {"seconds": 60}, 1).kind == "timeout"
        assert not path.parent.exists()  # killed: removed by the parent
        again = Path(wk.ask("make_temp", None, 30).value)
    finally:
        wk.close()
    assert not again.parent.exists()


def test_prestart_then_close_leaves_no_process() -> None:
    wk = Worker(spec())
    wk.prestart()
    pid = wk.pid
    assert pid is not None and wk.ask("echo", 1, 60).value == 1 and wk.pid == pid
    wk.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_ctrl_c_while_waiting_kills_the_child() -> None:
    script = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)  # even if the runner ignores SIGINT\n"
        "import os, signal, sys, threading\n"
        "from gguftpl.worker import Op, Worker, WorkerSpec\n"
        f"w = Worker(WorkerSpec('t', {{'nap': Op('tests.worker_ops:nap')}}, env={{'PYTHONPATH': {str(ROOT)!r}}}))\n"
        "w.ask('nap', {'seconds': 0}, 60)\n"
        "pid = w.pid\n"
        "threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "try:\n"
        "    w.ask('nap', {'seconds': 600}, 600)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', pid, w.pid)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.startswith("interrupted"), proc.stderr[-2000:]
    _, pid, after = proc.stdout.split()
    assert after == "None"
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)


def test_shared_gives_one_worker_per_spec_name() -> None:
    a = worker.shared(spec())
    assert worker.shared(spec(exit_grace=1.0)) is a


def test_garbage_and_unknown_answers() -> None:
    assert worker._outcome("nonsense").kind == "garbage"
    assert worker._outcome({"kind": "ok", "value": 3}).value == 3
    assert worker.signal_name(signal.SIGSEGV) == "SIGSEGV" and worker.signal_name(999) == "signal 999"


def test_a_child_that_does_not_take_a_large_request_is_a_timeout(w: Worker) -> None:
    assert w.ask("echo", 1, 30).ok
    assert w.pid is not None
    os.kill(w.pid, signal.SIGSTOP)  # stopped: it reads nothing, and a 4 MB request fills the pipe
    out = w.ask("echo", "x" * (4 << 20), 2)
    assert out.kind == "timeout"
    assert w.ask("echo", "big" * 100_000, 30).value == "big" * 100_000
