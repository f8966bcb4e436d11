"""minijinja as each runtime configures it (gguftpl.engines.minijinja), with the real binding in its real
bounded worker: every real template of the project under every configuration, the ``tojson(ensure_ascii=False)``
templates of issue 21 as named cases, each runtime's settings against an independent oracle (jinja2 with the same
whitespace options, ``json.dumps`` with the separators the Rust code writes), and the worker killed, hung and
memory-bombed.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gguftpl.engines.base import CRASHED, OVERRUN, RENDER, SYNTAX, Engine, RenderRequest
from gguftpl.engines.minijinja import MinijinjaEngine, engine, engines, get_worker
from gguftpl.engines.minijinja_profiles import (
    CONFIGS,
    TGI_DEFAULT_TOOL_PROMPT,
    TOJSON_BUILTIN,
    tgi_tool_prompt_applied,
    tgi_tools,
)
from gguftpl.templates import probes

pytest.importorskip("minijinja")

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = sorted(
    [
        *(ROOT / "tests" / "data" / "templates").glob("*.jinja"),
        *(ROOT / "tests" / "data" / "real_templates").rglob("*.jinja"),
    ]
)
SPECIALS = {"bos_token": "<s>", "eos_token": "</s>"}
ENSURE_ASCII = ("GLM-4.6", "Kimi-K3", "MiniMax-M3", "StepFun3.5-Flash")
"""Issue 21's templates that call ``tojson(ensure_ascii=False)`` and are in tests/data/templates (GLM-4-MoE, its
fifth, is not among the project's templates)."""
UNKNOWN_KWARG = "unknown keyword argument 'ensure_ascii'"


def _canary_request(**kwargs: Any) -> RenderRequest:
    return RenderRequest(probes.tools_conversation(), probes.canary_tools(), True, {**SPECIALS, **kwargs})


def _plain(**variables: Any) -> RenderRequest:
    return RenderRequest([{"role": "user", "content": "hi"}], None, True, variables)


def _template(name: str) -> str:
    return (ROOT / "tests" / "data" / "templates" / f"{name}.jinja").read_text(encoding="utf-8")


def _lines_with(text: str, needle: str) -> set[int]:
    return {n for n, line in enumerate(text.split("\n"), 1) if needle in line}


def _render_one(eng: MinijinjaEngine, template: str, request: RenderRequest | None = None) -> Any:
    return eng.render(template, [request or _plain()])[0]


# ---------------------------------------------------------------------------------------------- configurations


@pytest.mark.parametrize("config_id", sorted(CONFIGS))
def test_each_configuration_is_an_engine_with_its_sources(config_id: str) -> None:
    eng = engine(config_id)
    assert isinstance(eng, Engine)
    assert eng.name == f"minijinja/{config_id}"
    # every setting names the file and commit it was read at (or says the index did not name the commit)
    assert eng.config.sources and all("@" in s or "commit not named" in s for s in eng.config.sources)
    available = eng.availability()
    assert available.installed and available.version.startswith("minijinja ")
    binding = available.version.split()[1]
    # a runtime that pins another minijinja says so, since behaviour may differ
    assert (eng.config.minijinja_version in available.detail) == (binding != eng.config.minijinja_version)
    # the builtin tojson's change of separators concerns only runtimes that keep the builtin
    if binding.startswith("3.") and eng.config.minijinja_version.startswith("2."):
        assert ("builtin tojson" in available.detail) == (eng.config.tojson == TOJSON_BUILTIN)


@pytest.mark.parametrize("config_id", sorted(CONFIGS))
def test_every_real_template_renders_or_fails_in_the_engines_own_words(config_id: str) -> None:
    """Each template with the canary tool: a prompt, or minijinja's syntax/render error with the template's line;
    never a bound hit, a crash or a missing engine. ``load`` refuses exactly the templates ``render`` calls
    syntax errors."""
    eng = engine(config_id)
    request = _canary_request()
    rendered = 0
    for path in TEMPLATES:
        text = path.read_text(encoding="utf-8")
        answer = eng.render(text, [request])[0]
        if answer.ok:
            rendered += 1
            continue
        assert answer.error.kind in (SYNTAX, RENDER), (path.name, answer.error)
        assert answer.error.message and answer.error.line is not None, (path.name, answer.error)
        assert 1 <= answer.error.line <= text.count("\n") + 1
        loaded = eng.load(text)
        assert (loaded is not None and loaded.kind == SYNTAX) == (answer.error.kind == SYNTAX), path.name
    assert rendered > len(TEMPLATES) // 2


# ---------------------------------------------------------------------------------------------- issue 21's templates


@pytest.mark.parametrize("name", ENSURE_ASCII)
def test_ensure_ascii_templates_fail_under_stock_tojson_and_render_under_custom_ones(name: str) -> None:
    text = _template(name)
    assert "tojson(ensure_ascii=" in text.replace(" ", "")
    request = _canary_request()
    for config_id in ("tgi", "nobodywho"):  # minijinja's builtin tojson
        error = engine(config_id).render(text, [request])[0].error
        assert error is not None and error.kind == RENDER
        assert UNKNOWN_KWARG in error.message
        assert f"(in {CONFIGS[config_id].template_name}:{error.line})" in error.message
        assert error.line in _lines_with(text, "ensure_ascii")
    for config_id in ("mistralrs", "dynamo", "candle-vllm"):  # their own tojson, or the keyword stripped
        answer = engine(config_id).render(text, [request])[0]
        assert answer.ok, (config_id, answer.error)
        assert probes.CANARY_TOOL_NAME in answer.text and probes.CANARY_PARAM_TOKEN in answer.text


# ---------------------------------------------------------------------------------------------- the runtimes' settings


def _tojson_of(config_id: str, expression: str, tools: list[dict[str, Any]]) -> str:
    answer = _render_one(engine(config_id), "{{ " + expression + " }}", RenderRequest([], tools, True, {}))
    assert answer.ok, answer.error
    return str(answer.text)


def test_mistralrs_tojson_writes_python_separators_without_html_escape() -> None:
    tools = [{**probes.CANARY_TOOL, "x": "<b> & 'q' é"}]
    oracle = json.dumps(tools, separators=(", ", ": "), ensure_ascii=False)
    assert _tojson_of("mistralrs", "tools|tojson", tools) == oracle
    assert _tojson_of("mistralrs", "tools|tojson(ensure_ascii=False)", tools) == oracle
    assert _tojson_of("mistralrs", "tools|tojson(indent=2)", tools) == json.dumps(tools, indent=2, ensure_ascii=False)
    error = _render_one(engine("mistralrs"), "{{ [1]|tojson(indent=100000) }}").error
    assert error is not None and "exceeds the maximum of 256" in error.message


def test_dynamo_tojson_is_compact_and_html_escaped() -> None:
    tools = [{**probes.CANARY_TOOL, "x": "<b> & 'q' é"}]
    compact = json.dumps(tools, separators=(",", ":"), ensure_ascii=False)
    out = _tojson_of("dynamo", "tools|tojson(ensure_ascii=False)", tools)
    assert "<" not in out and "&" not in out and "'" not in out and "é" in out
    assert json.loads(out) == tools
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
        compact = compact.replace(char, escaped)
    assert out == compact


def test_runtimes_without_preserve_order_iterate_maps_in_key_order() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2, "m": 3}}}
    for config_id, cfg in CONFIGS.items():
        # TGI hands the template the schema already serialized, as ``arguments`` (minijinja_profiles.tgi_tools)
        field = "arguments" if cfg.tgi_tool_shape else "parameters|tojson"
        out = json.loads(_tojson_of(config_id, f"tools[0].function.{field}", [tool]))
        keys = list(out)
        assert keys == (["z", "a", "m"] if cfg.preserve_order else sorted(keys)), config_id


def test_whitespace_options_match_jinja2_with_the_same_options() -> None:
    import jinja2

    template = "  {% if true %}\n  one\n  {% endif %}\n{% for m in messages %}\n    {{ m.content }}\n{% endfor %}x"
    leading_newline = "\n" + template
    for config_id, cfg in CONFIGS.items():
        oracle = jinja2.Environment(trim_blocks=cfg.trim_blocks, lstrip_blocks=cfg.lstrip_blocks)
        for text in (template, leading_newline):
            want = oracle.from_string(text).render(messages=[{"content": "hi"}])
            assert _render_one(engine(config_id), text).text == want, config_id


def test_raise_exception_is_each_runtimes_error_at_the_calling_line() -> None:
    text = "first\n{% if messages %}\n{{ raise_exception('roles must alternate') }}\n{% endif %}"
    tgi = _render_one(engine("tgi"), text).error
    assert tgi is not None and tgi.line == 3
    assert tgi.message == "syntax error: roles must alternate (in <string>:3)"
    mistral = _render_one(engine("mistralrs"), text).error
    assert mistral is not None and mistral.message == "invalid operation: roles must alternate (in chat_template:3)"
    dynamo = _render_one(engine("dynamo"), text, _canary_request()).error  # with tools: its tool_use template
    assert dynamo is not None and dynamo.message == "invalid operation: roles must alternate (in tool_use:3)"
    candle = _render_one(engine("candle-vllm"), text).error  # candle-vllm registers no raise_exception
    assert candle is not None and "raise_exception is unknown" in candle.message and candle.line == 3


def test_generation_tags_are_rewritten_only_in_the_forms_each_runtime_rewrites() -> None:
    exact = "{% generation %}x{% endgeneration %}"
    trimmed = "{%- generation %}x{%- endgeneration %}"
    assert _render_one(engine("tgi"), exact).text == "x"
    error = _render_one(engine("tgi"), trimmed).error  # TGI replaces the exact strings only
    assert error is not None and error.kind == SYNTAX and "generation" in error.message
    for config_id in ("mistralrs", "nobodywho"):
        assert _render_one(engine(config_id), trimmed).text == "x", config_id
    assert _render_one(engine("candle-vllm"), exact).error is not None  # it does not rewrite them at all


def test_passed_values_are_native_minijinja_values_not_python_objects() -> None:
    """The runtimes pass serde values: a Python list's ``append`` must not exist (the binding would allow it)."""
    error = _render_one(engine("mistralrs"), "{{ messages.append(1) }}").error
    assert error is not None and "has no method named append" in error.message
    text = "{% for k, v in messages[0].items() %}{{ k }}={{ v }};{% endfor %}{{ messages[0].get('role') }}"
    assert _render_one(engine("tgi"), text).text == "content=hi;role=user;user"  # TGI's maps are key-ordered


def test_variables_are_the_ones_each_runtime_passes() -> None:
    # booleans printed as letters: minijinja prints them "true" before 2.22 and "True" after
    probe = "|".join(
        "{{ 'y' if " + test + " else 'n' }}"
        for test in ("tools is defined", "tools is none", "tools", "enable_thinking", "add_generation_prompt")
    )
    request = RenderRequest([{"role": "user", "content": "hi"}], None, False, {"enable_thinking": True})
    outs = {c: _render_one(engine(c), probe, request).text for c in CONFIGS}
    assert outs["mistralrs"] == "n|n|n|y|n"  # no tools: not passed; enable_thinking forwarded
    assert outs["tgi"] == "y|y|n|n|y"  # tools none, enable_thinking not passed, add_generation_prompt always on
    assert outs["dynamo"] == "y|y|n|y|n"  # chat_template_args all merged
    assert outs["candle-vllm"] == "y|n|n|y|n"  # an empty list
    dated = _render_one(engine("mistralrs"), "{{ date_string }}|{{ xml_tools|length }}", _canary_request()).text
    assert dated.endswith("|1") and time.strftime("%Y", time.gmtime()) in dated


def test_tgi_appends_its_tool_prompt_as_its_code_does() -> None:
    ignores = (ROOT / "tests" / "data" / "templates" / "google-gemma-2-2b-it.jinja").read_text(encoding="utf-8")
    uses = _template("Qwen-Qwen2.5-7B-Instruct")
    tgi = engine("tgi")
    assert "tools" not in tgi.undeclared_variables(ignores)
    assert "tools" in tgi.undeclared_variables(uses)
    tools = tgi_tools(probes.canary_tools())
    assert [t["function"]["name"] for t in tools] == [probes.CANARY_TOOL_NAME, "no_tool"]
    assert isinstance(tools[0]["function"]["arguments"], str)  # serialize_as_string
    for text, uses_tools in ((ignores, False), (uses, True)):
        messages = tgi_tool_prompt_applied(probes.tools_conversation(), tools, uses_tools)
        last = messages[-1]["content"]
        assert last.endswith("\n---\n" + TGI_DEFAULT_TOOL_PROMPT) == uses_tools
        assert (probes.CANARY_PARAM_TOKEN in last) == (not uses_tools)
        answer = tgi.render(text, [RenderRequest(messages, tools, True, SPECIALS)])[0]
        assert answer.ok and probes.CANARY_PARAM_TOKEN in answer.text  # the schema reaches the prompt either way


# ---------------------------------------------------------------------------------------------- bounds


HUNG = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
BOMB = "{% set ns = namespace(s='x') %}{% for i in range(45) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"


def _works_after(eng: MinijinjaEngine) -> None:
    answer = _render_one(eng, "{{ messages[0].content }}")
    assert answer.ok and answer.text == "hi"


def test_hung_template_runs_out_of_fuel_and_the_next_render_works() -> None:
    # the default fuel is ~1.5 s of CPU: on a busy machine that is more than the default 5 s of wall time, and
    # this test is about the fuel bound, so the time limit is set out of its way
    eng = engine("tgi", timeout=120.0)
    error = _render_one(eng, HUNG).error
    assert error is not None and error.kind == OVERRUN and "fuel" in error.message
    _works_after(eng)


def test_hung_template_without_fuel_is_stopped_at_the_time_limit() -> None:
    eng = engine("mistralrs", fuel=None, timeout=1.0)
    restarts = get_worker().stats.restarts
    error = _render_one(eng, HUNG).error
    assert error is not None and error.kind == OVERRUN and "longer than" in error.message
    assert get_worker().stats.restarts == restarts + 1
    _works_after(eng)


def test_memory_bomb_ends_the_worker_not_the_caller() -> None:
    eng = engine("dynamo", fuel=None, timeout=60.0)
    error = _render_one(eng, BOMB).error
    assert error is not None and error.kind in (CRASHED, OVERRUN)
    _works_after(eng)


def test_output_cap_is_an_overrun() -> None:
    error = _render_one(engine("tgi", max_output=1000), "{{ 'x' * 5000 }}").error
    assert error is not None and error.kind == OVERRUN and "1000" in error.message


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmHWM:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the worker's peak memory in /proc")
@pytest.mark.parametrize(
    "bomb",
    [
        "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",  # 10 GB of output
        "{% macro f() %}{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}{% endmacro %}{{ f() }}",
    ],
    ids=["loop", "macro"],
)
def test_an_output_bomb_stops_within_megabytes_and_the_rest_are_not_tried(bomb: str) -> None:
    """The binding builds the whole output before the cap is checked: this ran to the worker's 1 GiB cap and
    aborted it (SIGABRT), once for each of a template's conversations and each runtime's configuration."""
    eng = engine("tgi")
    _works_after(eng)
    pid, restarts = get_worker().pid, get_worker().stats.restarts
    first, rest = eng.render(bomb, [_plain(), _plain()])
    assert first.error is not None and first.error.kind == OVERRUN and "exceeded" in first.error.message
    assert rest.error is not None and rest.error.kind == OVERRUN and "earlier conversation" in rest.error.message
    assert get_worker().pid == pid and get_worker().stats.restarts == restarts  # stopped, not aborted
    assert pid is not None and _peak_rss(pid) < 256 << 20
    _works_after(eng)


def test_counting_what_a_render_emits_changes_no_output() -> None:
    """The emission count is a finalizer that hands every value back to minijinja's own formatter."""
    text = (
        "{% set m = {'a': 1, 'b': [1, none, true]} %}{{ m }}|{{ none }}|{{ [1, 'x'] }}|{{ 1.5 }}|{{ m.b }}"
        "{% macro f(x) %}[{{ x }}]{% endmacro %}{{ f(3) }}{% set c %}c{{ 'x' }}{% endset %}{{ c }}"
    )
    for config_id in sorted(CONFIGS):
        bounded = _render_one(engine(config_id), text)
        unbounded = _render_one(engine(config_id, max_output=0), text)
        assert bounded.ok and bounded.text == unbounded.text, config_id


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc to see the worker busy")
def test_worker_killed_mid_render_is_a_crash_and_the_next_render_works() -> None:
    eng = engine("nobodywho", fuel=None, timeout=120.0)
    _works_after(eng)
    pid = get_worker().pid
    assert pid is not None
    before = _cpu_ticks(pid)
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(_render_one(eng, HUNG)))
    thread.start()
    for _ in range(400):  # until the worker is busy rendering (bounded: 400 x 50 ms)
        if _cpu_ticks(pid) > before + 5:
            break
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout=120)
    assert answers and answers[0].error is not None and answers[0].error.kind == CRASHED
    assert "SIGKILL" in answers[0].error.message
    _works_after(eng)


def test_every_engine_listed_once() -> None:
    assert sorted(e.name for e in engines()) == sorted(f"minijinja/{c}" for c in CONFIGS)


@pytest.mark.parametrize("config_id", [c for c, cfg in sorted(CONFIGS.items()) if cfg.preserve_order])
def test_native_values_render_as_the_bindings_own_context_does(config_id: str) -> None:
    """The conversation set as literals on the template's first line renders byte for byte what the binding
    renders from the same data passed as its context, for every real template and probe conversation (the
    templates do not mutate their inputs, and these runtimes keep map order): the prelude shifts no line and no
    whitespace."""
    import minijinja

    from gguftpl.engines import minijinja_render

    eng = engine(config_id)
    cfg = eng.config.to_dict()
    env = minijinja_render.environment(cfg)
    requests = [RenderRequest(m, t, agp, SPECIALS) for _, m, t, agp in probes.engine_probes()]
    for path in TEMPLATES:
        text = path.read_text(encoding="utf-8")
        source = minijinja_render.compile_source(cfg, eng.config.rewrite(text))
        for request, answer in zip(requests, eng.render(text, requests), strict=True):
            try:
                direct: str | None = env.render_str(source, cfg["template_name"], **eng.variables(request))
            except (minijinja.TemplateError, minijinja_render.RuntimeTemplateError, AttributeError):
                direct = None  # AttributeError: a Python list's own method reached (``content.replace``)
            assert answer.text == direct, (path.name, answer.error)
