"""Issue 14, item 9: an MCP server whose answers are too big, over stdio and streamable HTTP (a real server
process, ``tests/mcp_servers/hostile_server.py``), met by the real command line.

50,000 tools or a 20 MB description ended as "no answer to tools/list within 30 s" although the server had
answered (the time went to reading and validating, 430 MB RSS). Now the answer is refused for what it is,
at once, and the memory stays bounded (each run's peak measured from a fresh parent).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import CHATML
from tests.test_hostile_cli import SAFETY_TIMEOUT

MakeGGUF = Callable[..., Path]
SERVER = Path(__file__).resolve().parent / "mcp_servers" / "hostile_server.py"
PEAK_RSS_MIB = 400
"""A bound on gguftpl plus the server, far above what bounded reading costs (under 200 MiB here) and below
what the unbounded read cost (430 MB for gguftpl alone on 50,000 tools)."""


def run(*args: str | Path) -> tuple[int, str, str]:
    p = subprocess.run(
        [sys.executable, "-m", "gguftpl", *map(str, args)], capture_output=True, text=True, timeout=SAFETY_TIMEOUT
    )
    return p.returncode, p.stdout, p.stderr


def one_line_error(code: int, err: str, *needles: str) -> str:
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gguftpl: error:"), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert "within 30 s" not in lines[0]  # the server answered: never "no answer"
    return lines[0]


CASES = [
    (["many", "50000"], "tools/list: an answer larger than 4,194,304 bytes, the bound on one MCP message"),
    (["many", "5000"], "tools/list answered 5,000 tools in one page, more than the 1,000"),
    (["description", "20"], "tools/list: an answer larger than 4,194,304 bytes, the bound on one MCP message"),
    (["description", "1"], "tool 'lookup' has a description of 1,048,576 characters, more than 262,144"),
    (["line", "64"], "tools/list: an answer larger than 4,194,304 bytes"),
]


@pytest.mark.parametrize(("mode", "needle"), CASES, ids=["-".join(m) for m, _ in CASES])
def test_a_stdio_server_with_a_too_big_answer_is_refused_for_what_it_is(
    make_gguf: MakeGGUF, mode: list[str], needle: str
) -> None:
    model = make_gguf("m.gguf", templates={"default": CHATML})
    code, _, err = run("render", "--no-tools", model, "--mcp", f"{sys.executable} {SERVER} {' '.join(mode)}")
    one_line_error(code, err, needle)


def test_memory_stays_bounded_while_a_server_sends_too_much(tmp_path: Path) -> None:
    """Each run in a fresh interpreter, so its peak is its own (RUSAGE_CHILDREN keeps the largest child)."""
    script = tmp_path / "measure.py"
    script.write_text(
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], capture_output=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n",
        encoding="utf-8",
    )
    from tests.conftest import build_gguf

    model = build_gguf(tmp_path / "m.gguf", templates={"default": CHATML})
    for mode, _ in CASES:
        argv = [sys.executable, "-m", "gguftpl", "render", "--no-tools", str(model), "--mcp"]
        argv.append(f"{sys.executable} {SERVER} {' '.join(mode)}")
        done = subprocess.run(
            [sys.executable, str(script), *argv], capture_output=True, text=True, timeout=SAFETY_TIMEOUT
        )
        peak = float(done.stdout.strip())
        assert peak < PEAK_RSS_MIB, (mode, peak)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(*mode: str) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), *mode, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=os.environ.copy(),
    )
    try:
        deadline = time.monotonic() + 60  # a guard against hanging, not an assertion on speed
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the hostile MCP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("mode", "needle"),
    [
        pytest.param(["many", "50000"], "an answer larger than 4,194,304 bytes", id="many-50000"),
        pytest.param(["many", "5000"], "5,000 tools in one page", id="many-5000"),
        pytest.param(["description", "20"], "an answer larger than 4,194,304 bytes", id="description-20"),
        pytest.param(["description", "1"], "a description of 1,048,576 characters", id="description-1"),
    ],
)
def test_a_streamable_http_server_with_a_too_big_answer_is_refused(
    make_gguf: MakeGGUF, mode: list[str], needle: str
) -> None:
    model = make_gguf("m.gguf", templates={"default": CHATML})
    with http_server(*mode) as url:
        code, _, err = run("render", "--no-tools", model, "--mcp-url", url)
    one_line_error(code, err, needle)


def test_a_well_behaved_raw_server_still_works(make_gguf: MakeGGUF) -> None:
    model = make_gguf("m.gguf", templates={"default": CHATML})
    code, out, err = run("render", model, "--mcp", f"{sys.executable} {SERVER} plain")
    assert code == 0, err
    assert "--- tool lookup:" in out
    with http_server("plain") as url:
        code, out, err = run("render", model, "--mcp-url", url)
    assert code == 0, err
    assert "--- tool lookup:" in out
