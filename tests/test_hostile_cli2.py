"""Hostile inputs, second round: templates that the bounded renderer must catch before llama.cpp runs them,
odd but valid metadata, hostile tool files and MCP servers, and outputs that name the input another way.

Each test is a defect found by running every command over such inputs; ``tests/test_hostile_cli.py`` holds
the first round.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CHATML, ROOT
from tests.test_hostile_cli import SAFETY_TIMEOUT, Proc, assert_one_line_error, run_gguftpl

MakeGGUF = Callable[..., Path]


def one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The first round's check, on a finished process."""
    return assert_one_line_error(Proc(proc.returncode, proc.stdout, proc.stderr), *needles)


def _tool(name: str, parameters: dict | None = None) -> dict:
    params = parameters or {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    return {"type": "function", "function": {"name": name, "description": "d", "parameters": params}}


# --- templates that only llama.cpp would run to the end ---------------------------------------------------


def test_lenient_render_has_llamacpp_range_so_a_billion_step_loop_is_a_bomb() -> None:
    """jinja2's sandbox refuses range(10**9) at once (OverflowError), so the bomb check saw a plain render
    error; llama.cpp has no such bound and ran the loop in-process (7.5 GB, never returned)."""
    from gguftpl.engines.transformers import TemplateRenderError, render_hf

    with pytest.raises(TemplateRenderError) as info:
        render_hf("{% for i in range(1000000000) %}x{% endfor %}", [], lenient=True)
    assert info.value.kind == "too_large", info.value
    # the strict (transformers) renderer keeps jinja2's bound: that is what transformers does
    with pytest.raises(TemplateRenderError, match="MAX_RANGE"):
        render_hf("{% for i in range(1000000000) %}x{% endfor %}", [])


@pytest.mark.parametrize(
    "template",
    [
        "{% for i in range(1000000000) %}x{% endfor %}" + CHATML,  # llama.cpp: 7.5 GB and no end
        "{{ bos_token * 10000000 }}" + CHATML,  # empty without the file's bos text; 120 MB with it
    ],
)
def test_bombs_that_jinja2_refuses_or_that_need_the_files_tokens_never_reach_llamacpp(
    make_gguf: MakeGGUF, template: str
) -> None:
    pytest.importorskip("xllamacpp")
    path = make_gguf("bomb.gguf", templates={"default": template})
    proc = run_gguftpl("verify", "--format", "json", path)
    assert proc.returncode == 1, proc.stderr
    first = json.loads(proc.stdout)["stages"][0]
    assert first["status"] == "fail" and "not run through llama.cpp" in first["evidence"], first
    one_line_error(run_gguftpl("render", "--engine", "llamacpp", path), "not rendered in llama.cpp")


def test_a_template_that_blows_up_only_on_the_users_tools_never_reaches_llamacpp(
    make_gguf: MakeGGUF, tmp_path: Path
) -> None:
    """The bomb check rendered the canary tool only; `verify --tools` then rendered the user's tools in
    llama.cpp, where this template looped a billion times (23 GB before it was killed)."""
    pytest.importorskip("xllamacpp")
    template = (
        "{% for t in tools or [] %}{% if t.function.name == 'boom' %}{% for i in range(1000000000) %}x"
        "{% endfor %}{% endif %}{% endfor %}{% if tools %}{{ tools|tojson }}{% endif %}" + CHATML
    )
    path = make_gguf("bomb.gguf", templates={"default": template})
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([_tool("boom")]), encoding="utf-8")
    proc = run_gguftpl("verify", "--format", "json", "--tools", tools, path)
    assert proc.returncode == 1, proc.stderr
    first = json.loads(proc.stdout)["stages"][0]
    assert first["status"] == "fail" and "not run through llama.cpp" in first["evidence"], first
    # another tool name: the same template is harmless and goes through llama.cpp
    tools.write_text(json.dumps([_tool("calm")]), encoding="utf-8")
    proc = run_gguftpl("verify", "--format", "json", "--tools", tools, path)
    assert "not run through llama.cpp" not in proc.stdout, proc.stdout[:2000]


def test_a_template_that_blows_up_only_on_llamacpps_own_load_probe_never_loads_in_process(
    make_gguf: MakeGGUF,
) -> None:
    """llama.cpp renders the template while loading it, with inputs of its own (two tools): this template
    is harmless on every conversation gguftpl renders, and took 24 GB in-process before the OOM killer came.
    Now its load is tried in the parse-check child first, whose memory is capped and measured."""
    pytest.importorskip("xllamacpp")
    template = (
        "{% if tools and tools|length > 1 %}{% for i in range(1000000000) %}{{ 'x' * 1000000 }}{% endfor %}"
        "{% endif %}{% if tools %}{{ tools|tojson }}{% endif %}" + CHATML
    )
    path = make_gguf("probe-bomb.gguf", templates={"default": template})
    proc = run_gguftpl("verify", "--format", "json", path)
    assert proc.returncode == 1, proc.stderr
    first = json.loads(proc.stdout)["stages"][0]
    assert first["status"] == "fail" and "not run through llama.cpp" in first["evidence"], first
    assert "did not finish loading this template" in first["evidence"], first


def test_a_compile_failure_is_remembered_by_the_render_worker() -> None:
    """transformers caches only templates that compile: one whose compile fails (a 5,000-term sum overflows
    the compiler's recursion) was compiled again for each of an audit's ~30 renders (80 s for one file)."""
    from gguftpl.engines.transformers import _worker_render

    text = "{{ " + " + ".join(["'a'"] * 5000) + " }}"
    for lenient in (False, True):
        req = {"template": text, "messages": [], "tools": None, "add_generation_prompt": True, "lenient": lenient}
        first = _worker_render(req)
        assert first["ok"] is False and first["type"] == "RecursionError", first
        assert _worker_render(dict(req)) is first  # the remembered reply, not a second compile


# --- metadata that is valid GGUF but odd ---------------------------------------------------------------------


def test_verify_with_tokens_that_are_no_string_array_uses_a_byte_level_stand_in(make_gguf: MakeGGUF) -> None:
    """tokenizer.ggml.tokens as a UINT32 was an 'unexpected TypeError' from the stand-in builder."""
    pytest.importorskip("xllamacpp")
    from gguftpl.gguf.reader import ValueType
    from gguftpl.gguf.writer import Typed

    for i, value in enumerate((Typed(ValueType.UINT32, 1), Typed(ValueType.ARRAY, [1, 2, 3], ValueType.INT32))):
        path = make_gguf(f"t{i}.gguf", templates={"default": CHATML}, extra_kv={"tokenizer.ggml.tokens": value})
        proc = run_gguftpl("verify", "--format", "json", path)
        assert proc.returncode in (0, 1), proc.stderr
        assert json.loads(proc.stdout)["stages"][0]["status"] == "pass", proc.stdout[:2000]


def test_many_named_templates_are_analysed_once_per_text_and_within_a_bound(
    make_gguf: MakeGGUF, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10,000 named templates: the audit analysed each one (identical texts too) and ran for minutes."""
    from click.testing import CliRunner

    from gguftpl import limits
    from gguftpl.cli import main_group

    monkeypatch.setattr(limits, "MAX_ANALYSED_TEXTS", 4)  # the real bound is 64; the logic is the same
    same = {f"s{i:03d}": CHATML + "{# same #}" for i in range(300)}
    distinct = {f"t{i}": CHATML + f"{{# {i} #}}" for i in range(6)}
    path = make_gguf("many.gguf", templates={"default": CHATML, **same, **distinct})
    res = CliRunner().invoke(main_group, ["audit", "--engine", "hf-only", "--format", "json", str(path)])
    assert res.exit_code in (0, 1), res.output
    fa = json.loads(res.stdout)["files"][0]
    names = [t["name"] for t in fa["templates"]]
    assert len([n for n in names if n.startswith("s")]) == 300  # one analysis, 300 reports
    assert len({t["sha256"] for t in fa["templates"]}) == 4
    (skip,) = [f for f in fa["findings"] if "were not analysed" in f["message"]]
    assert skip["code"] == "GT404" and skip["severity"] == "warning"
    assert skip["message"].startswith("4 more named templates"), skip["message"]  # t2 to t5


# --- tool files ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parameters", "needle"),
    [
        # 400 nested anyOf: valid JSON, but jsonschema's check overflowed ("unexpected RecursionError")
        (
            {"type": "object", "properties": {"a": json.loads('{"anyOf": [' * 400 + "{}" + "]}" * 400)}},
            "nested more than 64 levels deep",
        ),
        # 100,000 $defs: the metaschema check ran for minutes
        (
            {"type": "object", "properties": {}, "$defs": {f"d{i}": {"type": "string"} for i in range(100_000)}},
            "more than 5,000 objects and arrays",
        ),
    ],
)
def test_oversized_tool_schemas_are_one_line_at_once(
    make_gguf: MakeGGUF, tmp_path: Path, parameters: dict, needle: str
) -> None:
    from click.testing import CliRunner

    from gguftpl.cli import main_group

    model = make_gguf("m.gguf", templates={"default": CHATML})
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([_tool("f", parameters)]), encoding="utf-8")
    res = CliRunner().invoke(main_group, ["render", str(model), "--tools", str(tools)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gguftpl: error:") and needle in lines[0], res.stderr
    # a schema of real size with a 100,000-value enum (one array) is still accepted
    big_enum = {"type": "object", "properties": {"a": {"enum": [f"v{i}" for i in range(100_000)]}}, "required": ["a"]}
    tools.write_text(json.dumps([_tool("f", big_enum)]), encoding="utf-8")
    res = CliRunner().invoke(main_group, ["render", "--no-color", str(model), "--tools", str(tools)])
    assert res.exit_code == 0, res.output


def test_a_tools_file_of_100k_tools_is_one_line_at_once(tmp_path: Path) -> None:
    """Each schema is checked at ~1.5 ms: 100,000 tools ran past a minute before anything was rendered."""
    from gguftpl.errors import ToolSourceError
    from gguftpl.limits import MAX_TOOLS
    from gguftpl.verify.tools import load_tools_file

    path = tmp_path / "tools.json"
    path.write_text(json.dumps([_tool(f"t{i}") for i in range(100_000)]), encoding="utf-8")
    with pytest.raises(ToolSourceError, match=f"100,000 tools, more than the {MAX_TOOLS:,}"):
        load_tools_file(path)
    path.write_text(json.dumps({"tools": [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(3)]}))
    assert [t.name for t in load_tools_file(path)] == ["t0", "t1", "t2"]


# --- outputs ---------------------------------------------------------------------------------------------------


def test_an_empty_output_path_is_one_line_and_writes_nothing(make_gguf: MakeGGUF, tmp_path: Path) -> None:
    """`-o ''`: patch said 'error: exists; use --force' (no path); audit made its temp file in the folder
    above the working one and failed with 'No such file or directory (…/.gguftpl-….tmp)'."""
    work = tmp_path / "work"
    work.mkdir()
    model = make_gguf("work/m.gguf", templates={"default": CHATML})
    tpl = work / "t.jinja"
    tpl.write_text("{{ 'x' }}", encoding="utf-8")
    before = {p.name for p in tmp_path.iterdir()}, {p.name for p in work.iterdir()}
    for argv in (
        ["patch", model, "--template", f"tool_use={tpl}", "-o", ""],
        ["patch", model, "--template", f"tool_use={tpl}", "-o", "", "--force", "--no-audit"],
        ["audit", "--engine", "hf-only", model, "-o", ""],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "gguftpl", *map(str, argv)], capture_output=True, text=True, cwd=work, timeout=600
        )
        one_line_error(proc, "the output path is empty")
    assert ({p.name for p in tmp_path.iterdir()}, {p.name for p in work.iterdir()}) == before


# --- Ctrl-C ------------------------------------------------------------------------------------------------------


def test_ctrl_c_while_a_worker_shuts_down_leaves_no_traceback_and_no_worker() -> None:
    """A Ctrl-C in the last moments of a command, while a worker given seconds to exit at atexit is waited for,
    printed a KeyboardInterrupt traceback and could leave the worker running (the parse-check worker was such a
    worker; it is killed at close now, so a worker with an exit grace stands in for it)."""
    script = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)  # even if the runner ignores SIGINT\n"
        "import os, signal, sys, threading\n"
        "from gguftpl.worker import Op, Worker, WorkerSpec\n"
        "w = Worker(WorkerSpec('t', {'echo': Op('tests.worker_ops:echo')}, exit_grace=30.0,\n"
        f"    env={{'PYTHONPATH': {str(ROOT)!r}}}))\n"
        "assert w.ask('echo', 1, 60).ok\n"
        "pid = w.pid\n"
        "os.kill(pid, signal.SIGSTOP)  # a worker slow to exit: close() waits for it\n"
        "threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "w.close()\n"
        "print('closed', pid)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=SAFETY_TIMEOUT, cwd=ROOT
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    pid = int(proc.stdout.split()[-1])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped, not left stopped


def test_a_stopped_parse_check_worker_is_killed_at_close_not_waited_for() -> None:
    """The parse-check worker's stand-ins live in its private folder, which the parent removes: close() kills it
    at once, even when it is stopped and could never exit on its own."""
    pytest.importorskip("xllamacpp")
    script = (
        "import os, signal\n"
        "from gguftpl.engines.llamacpp import parse_check, parse_check_worker\n"
        f"parse_check([{CHATML!r}])\n"
        "checker = parse_check_worker()\n"
        "pid, folder = checker.pid, checker._tmp\n"
        "os.kill(pid, signal.SIGSTOP)\n"
        "checker.close()\n"
        "print(os.path.exists(folder), pid)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=SAFETY_TIMEOUT)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    exists, pid = proc.stdout.split()[-2:]
    assert exists == "False"
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)


@pytest.mark.parametrize("second", ["<|im_start|>", "<|im_start|>\x00tail"])
def test_a_vocabulary_with_two_equal_token_texts_is_refused_before_llamacpp_aborts(
    make_gguf: MakeGGUF, second: str
) -> None:
    """llama.cpp keys its token map by C string: two equal texts (or equal up to a NUL byte) fail a GGML_ASSERT
    that aborts the whole process (exit 134 from verify, render --engine llamacpp and the audit itself)."""
    pytest.importorskip("xllamacpp")
    from gguftpl.gguf.reader import ValueType
    from gguftpl.gguf.tinymodel import byte_level_vocab
    from gguftpl.gguf.writer import Typed

    tokens, _types, _merges = byte_level_vocab(("<|im_start|>", "<|im_end|>"))
    tokens[-1] = second  # <|im_end|> becomes a second <|im_start|>
    bad = {"tokenizer.ggml.tokens": Typed(ValueType.ARRAY, tokens, ValueType.STRING)}
    path = make_gguf("dup.gguf", templates={"default": CHATML}, extra_kv=bad, eos=None)
    for argv in (["verify", path], ["verify", "--load-weights", path], ["render", "--engine", "llamacpp", path]):
        one_line_error(run_gguftpl(*argv), "have the same text '<|im_start|>'", "aborts the whole process")
    proc = run_gguftpl("audit", "--engine", "llamacpp", "--format", "json", path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    codes = [f["code"] for f in json.loads(proc.stdout)["files"][0]["findings"]]
    assert "GT608" in codes, codes


# --- diff ---------------------------------------------------------------------------------------------------------


def test_diff_renders_a_template_that_overran_once_no_more() -> None:
    """An upstream template that loops past the render bound was rendered (5 s each) for every probe."""
    from gguftpl.engines.transformers import get_worker
    from gguftpl.upstream.diff import PROBES, compare_behaviour

    bomb = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}" + CHATML
    stats = get_worker().stats
    before = stats.requests
    result = compare_behaviour({"default": CHATML}, {"default": bomb})
    assert [bd.probe for bd in result] == list(PROBES)
    assert all("longer than" in (bd.upstream_error or "") for bd in result), [bd.upstream_error for bd in result]
    assert all(bd.gguf_error is None and bd.identical is False for bd in result)
    assert stats.requests - before == len(PROBES) + 1  # each probe on the GGUF side, the bomb once


def test_a_nul_in_a_template_is_an_error_because_llamacpp_never_sees_what_follows(make_gguf: MakeGGUF) -> None:
    """`patch --template` accepted a template with a NUL and the audit said nothing, while llama.cpp (a C
    string) renders only the text before it and transformers renders all of it."""
    from click.testing import CliRunner

    from gguftpl.cli import main_group

    path = make_gguf("nul.gguf", templates={"default": CHATML + "\x00{{ 'AFTERNUL' }}"})
    res = CliRunner().invoke(
        main_group, ["audit", "--engine", "hf-only", "--format", "json", "--select", "GT403", str(path)]
    )
    (finding,) = json.loads(res.stdout)["files"][0]["findings"]
    assert finding["severity"] == "error" and "U+0000 NUL" in finding["message"], finding
    hf = CliRunner().invoke(main_group, ["render", "--raw", "--no-tools", str(path)])
    assert hf.exit_code == 0 and "AFTERNUL" in hf.stdout
    if importlib.util.find_spec("xllamacpp") is not None:
        ll = run_gguftpl("render", "--raw", "--no-tools", "--engine", "llamacpp", path)
        assert ll.returncode == 0 and "<|im_start|>assistant" in ll.stdout and "AFTERNUL" not in ll.stdout, ll
    clean = make_gguf("clean.gguf", templates={"default": CHATML})
    res = CliRunner().invoke(main_group, ["audit", "--engine", "hf-only", "--select", "GT403", str(clean)])
    assert res.exit_code == 0, res.output


def test_patch_refuses_the_same_template_name_twice(make_gguf: MakeGGUF, tmp_path: Path) -> None:
    """`--template default=a --template default=b` silently wrote b."""
    from click.testing import CliRunner

    from gguftpl.cli import main_group

    model = make_gguf("m.gguf", templates={"default": CHATML})
    a, b = tmp_path / "a.jinja", tmp_path / "b.jinja"
    a.write_text("{{ 'a' }}", encoding="utf-8")
    b.write_text("{{ 'b' }}", encoding="utf-8")
    out = tmp_path / "out.gguf"
    argv = ["patch", str(model), "--template", f"default={a}", "--template", f"default={b}", "-o", str(out)]
    res = CliRunner().invoke(main_group, argv)
    assert res.exit_code == 2 and res.stderr.strip() == "gguftpl: error: --template default= given twice", res.output
    assert not out.exists()


# --- MCP servers that misbehave ---------------------------------------------------------------------------------

# A raw JSON-RPC stdio server (no SDK), so it can break the protocol's promises on purpose.
_PAGING_SERVER = r"""
import json, sys
per_page = int(sys.argv[1])
for line in sys.stdin:
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "paging", "version": "1"}}
    elif method == "tools/list":
        page = int((msg.get("params") or {}).get("cursor") or 0)
        tools = [{"name": f"t{page}_{i}", "inputSchema": {"type": "object"}} for i in range(per_page)]
        result = {"tools": tools, "nextCursor": str(page + 1)}  # never ends
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
    sys.stdout.flush()
"""


@pytest.mark.parametrize(("per_page", "needle"), [(1, "still had a next page after 1,000 pages"), (400, "1,200 tools")])
def test_an_mcp_server_whose_pagination_never_ends_is_one_line(
    make_gguf: MakeGGUF, tmp_path: Path, per_page: int, needle: str
) -> None:
    """tools/list stopped silently after 1,000 pages and went on with a list cut short; and a server with
    many tools per page was paged up to 1,000 times (a million tools held in memory) before any bound."""
    model = make_gguf("m.gguf", templates={"default": CHATML})
    server = tmp_path / "paging_server.py"
    server.write_text(_PAGING_SERVER, encoding="utf-8")
    proc = run_gguftpl("render", "--no-tools", model, "--mcp", f"{sys.executable} {server} {per_page}")
    one_line_error(proc, needle)


def test_the_bomb_check_renders_each_distinct_text_once(make_gguf: MakeGGUF) -> None:
    """A file whose default template is also its tool_use (common) waited out the render bound twice."""
    from gguftpl.engines.transformers import get_worker
    from gguftpl.verify.preflight import render_bombs

    bomb = "{{ 'x' * 2000000 }}" + CHATML
    path = make_gguf("twice.gguf", templates={"default": bomb, "tool_use": bomb})
    stats = get_worker().stats
    before = stats.requests
    bombs = render_bombs(str(path))
    assert [b.split(":")[0] for b in bombs] == ["default", "tool_use"] and "exceeded" in bombs[1], bombs
    assert stats.requests - before == 1


def test_a_parse_check_worker_killed_for_hanging_leaves_no_stand_in_behind(tmp_path: Path) -> None:
    """The worker makes its stand-in in a temp folder it removes on close; killed for hanging, it cannot,
    and each such template left a 300 KB folder in /tmp (163 after one session of hostile audits)."""
    pytest.importorskip("xllamacpp")
    hang = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}" + CHATML
    script = (
        "from gguftpl.engines.llamacpp import parse_check, parse_check_stats\n"
        f"first = parse_check([{hang!r}], timeout=3)\n"
        f"second = parse_check([{CHATML!r}])\n"
        "print(list(first.values())[0][:40], list(second.values()), parse_check_stats()['restarts'])\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=SAFETY_TIMEOUT
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("llama.cpp did not finish loading") and "[None] 1" in proc.stdout, proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []


_SILENT_CALL_SERVER = r"""
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if mid is None or method == "tools/call":
        continue  # a tool that never returns: the caller waits with the llama.cpp session open
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "silent", "version": "1"}}
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
        result = {"tools": [{"name": "lookup", "description": "Look it up.", "inputSchema": schema}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
    sys.stdout.flush()
"""


def test_sigterm_during_verify_cleans_up_like_ctrl_c(samples_dir: Path, tmp_path: Path) -> None:
    """`timeout`/a cancelled CI job send SIGTERM: the process died without cleanup and left its stand-in."""
    pytest.importorskip("xllamacpp")
    import signal
    import time

    server = tmp_path / "silent.py"
    server.write_text(_SILENT_CALL_SERVER, encoding="utf-8")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    argv = ["verify", samples_dir / "hermes-2-pro-mistral-7b.upstream.gguf", "--mcp", f"{sys.executable} {server}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gguftpl", *map(str, argv), "--mcp-timeout", "120"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    try:
        deadline = time.monotonic() + SAFETY_TIMEOUT
        while not any(p.name.startswith("gguftpl-standin-") for p in tmp.iterdir()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        time.sleep(1.0)  # inside the session, waiting for the tool that never answers
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=SAFETY_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143 and err.strip() == "gguftpl: terminated", (proc.returncode, err[-2000:])
    assert not [p.name for p in tmp.iterdir() if p.name.startswith("gguftpl-standin-")]
