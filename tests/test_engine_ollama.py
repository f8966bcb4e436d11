"""The ollama engine: the real Go program (built by ``install()`` with the Go found here) on every curated Go
template of Ollama's registry and the engine probes; its worker killed, hung and flooded; not installed."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gguftpl.engines import ollama_registry
from gguftpl.engines.base import CRASHED, OVERRUN, RENDER, SYNTAX, UNAVAILABLE, RenderRequest
from gguftpl.engines.home import ENV as ENGINES_ENV
from gguftpl.engines.ollama import ENGINE, INSTALL_HINT, OllamaEngine, install
from gguftpl.engines.ollama_build import BINARY, STAMP, find_go
from gguftpl.templates import probes
from tests.conftest import DATA

CURATED = sorted(p.stem for p in (Path(ollama_registry.__file__).parent / "ollama_templates").glob("*.gotmpl"))
HANG = (
    '{{ define "a" }}{{ if lt (len .) 60 }}{{ template "a" (printf "%sx" .) }}{{ template "a" (printf "%sx" .) }}'
    '{{ end }}{{ end }}{{ template "a" "" }}{{ range .Messages }}{{ .Content }}{{ end }}'
)
"""2^60 template calls that print nothing: a render that runs for ages without growing."""
FLOOD = (
    '{{ define "a" }}{{ if lt (len .) 30 }}{{ template "a" (printf "%sx" .) }}{{ template "a" (printf "%sx" .) }}'
    '{{ else }}0123456789abcdef{{ end }}{{ end }}{{ template "a" "" }}{{ .Messages }}'
)
"""2^30 times 16 bytes."""
LEGACY = "{{ if .System }}<s>{{ .System }}</s>{{ end }}<u>{{ .Prompt }}</u><a>{{ .Response }}</a>"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OllamaEngine]:
    """The engine built by ``install()`` into a fresh engines folder."""
    if find_go() is None:
        if os.environ.get("CI"):
            pytest.fail("the ollama engine needs Go (go on PATH or $GOROOT/bin/go), and CI must have it")
        pytest.skip("the ollama engine needs Go: neither go on PATH nor $GOROOT/bin/go")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENGINES_ENV, str(tmp_path_factory.mktemp("engines")))
        started = time.monotonic()
        summary = install()
        print(f"\n{summary} ({time.monotonic() - started:.1f} s)")
        yield ENGINE


def _requests() -> list[RenderRequest]:
    return [
        RenderRequest(messages, tools, agp, {"bos_token": "<s>", "eos_token": "</s>"})
        for _, messages, tools, agp in probes.engine_probes()
    ]


def _plain() -> RenderRequest:
    return RenderRequest(probes.plain_conversation())


def test_built_and_current(engine: OllamaEngine) -> None:
    found = engine.availability()
    assert found.installed and found.version.startswith("Go text/template (go1.")
    assert "Ollama template funcs @fb307609" in found.version
    assert engine.version() == {
        "go": found.version.split("(")[1].split(")")[0],
        "ollama": ollama_registry.OLLAMA_COMMIT,
    }
    assert install().startswith("the ollama engine")  # a second install is a no-op


@pytest.mark.parametrize("name", CURATED)
def test_every_curated_template_renders_the_probes(engine: OllamaEngine, name: str) -> None:
    text = ollama_registry.curated(name).text
    assert engine.load(text) is None
    requests = _requests()
    started = time.monotonic()
    outs = engine.render(text, requests)
    per_render_ms = (time.monotonic() - started) * 1000 / len(requests)
    assert per_render_ms < 1000
    for (probe, *_), req, out in zip(probes.engine_probes(), requests, outs, strict=True):
        assert out.ok, (probe, out.error)
        assert out.text is not None and probes.CANARY_USER in out.text, probe
        if req.tools is not None:
            assert (probes.CANARY_TOOL_NAME in out.text) == (".Tools" in text), probe


# template_test.go::TestTemplate's conversations and expected renders (tests/data/ollama_testdata/SOURCES.md)
UPSTREAM = DATA / "ollama_testdata"
_HELLO = {"role": "user", "content": "Hello, how are you?"}
_GREAT = {"role": "assistant", "content": "I'm doing great. How can I help you today?"}
_SHOW = {"role": "user", "content": "I'd like to show off how chat templating works!"}
UPSTREAM_CASES = {
    "user": [_HELLO],
    "user-assistant-user": [_HELLO, _GREAT, _SHOW],
    "system-user-assistant-user": [
        {"role": "system", "content": "You are a helpful assistant."},
        _HELLO,
        _GREAT,
        _SHOW,
    ],
}
_TRAILING_SPACE = ("chatqa", "llama2-chat", "mistral-instruct", "openchat", "vicuna")
"""Templates whose render Ollama's test compares without one trailing space."""


@pytest.mark.parametrize("name", sorted(p.name.removesuffix(".gotmpl") for p in UPSTREAM.glob("*.gotmpl")))
def test_ollamas_own_expected_renders(engine: OllamaEngine, name: str) -> None:
    text = ollama_registry.curated(name).text
    cases = sorted(UPSTREAM_CASES)
    outs = engine.render(text, [RenderRequest(UPSTREAM_CASES[c]) for c in cases])
    for case, out in zip(cases, outs, strict=True):
        assert out.ok and out.text is not None, (case, out.error)
        got = out.text[:-1] if name in _TRAILING_SPACE and out.text.endswith(" ") else out.text
        assert got == (UPSTREAM / f"{name}.gotmpl" / case).read_text(encoding="utf-8"), case


# template_test.go::TestExecuteWithMessages: legacy and messages templates that render the same conversation alike
_MISTRAL_SYSTEM = "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}"
EXECUTE_WITH_MESSAGES = [
    (
        [
            _MISTRAL_SYSTEM + "{{ .Prompt }}[/INST] ",
            _MISTRAL_SYSTEM + "{{ .Prompt }}[/INST] {{ .Response }}",
            _MISTRAL_SYSTEM + '\n{{- range .Messages }}\n{{- if eq .Role "user" }}{{ .Content }}[/INST] '
            '{{ else if eq .Role "assistant" }}{{ .Content }}[INST] {{ end }}\n{{- end }}',
        ],
        [
            {"role": "system", "content": "You are a helpful assistant!"},
            {"role": "user", "content": "Hello friend!"},
            {"role": "assistant", "content": "Hello human!"},
            {"role": "user", "content": "What is your name?"},
        ],
        "[INST] You are a helpful assistant!\n\nHello friend![/INST] Hello human![INST] What is your name?[/INST] ",
    ),
    (
        [
            "[INST] {{ .Prompt }}[/INST] ",
            "[INST] {{ .Prompt }}[/INST] {{ .Response }}",
            '\n{{- range $i, $m := .Messages }}\n{{- if eq .Role "user" }}[INST] {{ .Content }}[/INST] '
            '{{ else if eq .Role "assistant" }}{{ .Content }}{{ end }}\n{{- end }}',
        ],
        [
            {"role": "user", "content": "Hello friend!"},
            {"role": "assistant", "content": "Hello human!"},
            {"role": "user", "content": "What is your name?"},
            {"role": "assistant", "content": "My name is Ollama and I"},
        ],
        "[INST] Hello friend![/INST] Hello human![INST] What is your name?[/INST] My name is Ollama and I",
    ),
]


@pytest.mark.parametrize(("templates", "messages", "expected"), EXECUTE_WITH_MESSAGES, ids=["system", "assistant"])
def test_legacy_and_messages_templates_render_alike(
    engine: OllamaEngine, templates: list[str], messages: list[dict[str, str]], expected: str
) -> None:
    for text in templates:
        (out,) = engine.render(text, [RenderRequest(messages)])
        assert out.text == expected, text


def test_arguments_and_properties_print_as_json_and_range(engine: OllamaEngine) -> None:
    """template_test.go's TestTemplateArguments*/TestTemplateProperties*, through the OpenAI layer."""
    call = probes.tool_call(arguments={"unit": "celsius", "location": "<Tokyo>"}, string_arguments=True)
    msgs = [{"role": "user", "content": "x"}, probes.assistant_call_message(call)]
    args = (
        "{{ range .Messages }}{{ range .ToolCalls }}{{ .Function.Arguments }}|"
        "{{ range $k, $v := .Function.Arguments }}{{ $k }}={{ $v }};{{ end }}{{ end }}{{ end }}"
    )
    (out,) = engine.render(args, [RenderRequest(msgs)])
    assert out.text == '{"location":"\\u003cTokyo\\u003e","unit":"celsius"}|location=<Tokyo>;unit=celsius;'
    props = (
        "{{ range .Messages }}{{ end }}{{ range .Tools }}{{ .Function.Parameters.Properties }}|"
        "{{ range $n, $p := .Function.Parameters.Properties }}{{ $n }}:{{ $p.Type }}:{{ toTypeScriptType $p }};"
        "{{ end }}{{ end }}"
    )
    (out,) = engine.render(props, [RenderRequest(msgs, probes.canary_tools())])
    desc = probes.CANARY_PARAM_DESCRIPTION
    name = probes.CANARY_PARAM_NAME
    assert out.text == f'{{"{name}":{{"type":"string","description":"{desc}"}}}}|{name}:string:string;'
    (tools,) = engine.render(
        "{{ json .Tools }}{{ range .Messages }}{{ end }}", [RenderRequest(msgs[:1], probes.canary_tools())]
    )
    assert tools.text is not None and json.loads(tools.text) == probes.canary_tools()


def test_command_r_renders_the_round_trip_as_ollama_does(engine: OllamaEngine) -> None:
    text = ollama_registry.curated("command-r").text
    req = RenderRequest(probes.tool_round_trip_conversation(probes.tool_call()), probes.canary_tools())
    (out,) = engine.render(text, [req])
    assert out.ok and out.text is not None
    # templateArgs.String(): Go's json.Marshal of the map; the tool message named from the call it answers
    assert json.dumps({probes.CANARY_PARAM_NAME: probes.CANARY_ARG_VALUE}, separators=(",", ":")) in out.text
    assert probes.CANARY_RESULT in out.text and probes.CANARY_PARAM_NAME in out.text


def test_a_legacy_template_collapses_the_turns(engine: OllamaEngine) -> None:
    req = RenderRequest(probes.multi_turn_conversation())
    (out,) = engine.render(LEGACY, [req])
    assert out.ok and out.text is not None
    # one execution per turn; the last one cut at {{ .Response }}
    assert out.text.count("<u>") == sum(m["role"] == "user" for m in req.messages)
    assert out.text.endswith("<a>") and out.text.count("<a>") == out.text.count("</a>") + 1
    (sys_out,) = engine.render(LEGACY, [RenderRequest(probes.plain_conversation(system=True))])
    assert sys_out.text == f"<s>{probes.CANARY_SYSTEM}</s><u>{probes.CANARY_USER}</u><a>"
    (appended,) = engine.render("{{ .Prompt }}", [_plain()])
    assert appended.text == probes.CANARY_USER  # {{ .Response }} appended, then cut


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{{ .Prompt ", "unclosed action"),
        ('{{define "x"}}{{template "x"}}{{end}}{{template "x"}}', "undefined template"),
    ],
)
def test_ollamas_parse_errors(engine: OllamaEngine, text: str, fragment: str) -> None:
    err = engine.load(text)
    assert err is not None and err.kind == SYNTAX and fragment in err.message.lower()


def test_a_syntax_error_has_its_line(engine: OllamaEngine) -> None:
    err = engine.load("ok\n{{ if .Messages }}\n{{ .Foo }\n{{ end }}")
    assert err is not None and err.kind == SYNTAX and err.line == 3 and err.message.startswith("template: :3:")
    (out,) = engine.render("a\n{{ end }}", [_plain()])
    assert out.error is not None and out.error.kind == SYNTAX and out.error.line == 2


def test_an_exec_error_is_a_render_error_with_its_line(engine: OllamaEngine) -> None:
    (out,) = engine.render("{{ range .Messages }}\n{{ index .Content 99 }}{{ end }}", [_plain()])
    assert out.error is not None and out.error.kind == RENDER and out.error.line == 2, out.error
    assert "executing" in out.error.message


def test_a_request_ollama_refuses_is_its_error(engine: OllamaEngine) -> None:
    bad = RenderRequest([{"role": "user", "content": None}])
    broken = RenderRequest(
        [
            {"role": "user", "content": "x"},
            probes.assistant_call_message(
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}
            ),
        ]
    )
    (a, b) = engine.render("{{ range .Messages }}{{ .Content }}{{ end }}", [bad, broken])
    assert a.error is not None and a.error.message == "invalid message content type: <nil>"
    assert b.error is not None and b.error.message == "invalid tool call arguments"


def test_a_killed_worker_is_a_crash_and_the_next_render_works(engine: OllamaEngine) -> None:
    patient = OllamaEngine(timeout=600)
    assert patient.version() is not None
    w = patient.worker()
    assert w is not None and w.pid is not None
    pid = w.pid
    answer: list[object] = []
    t = threading.Thread(target=lambda: answer.extend(patient.render(HANG, [_plain()])))
    t.start()
    _wait_busy(pid)
    os.kill(pid, signal.SIGKILL)
    t.join()
    (out,) = answer
    assert out.error is not None and out.error.kind == CRASHED and "SIGKILL" in out.error.message  # type: ignore[attr-defined]
    (after,) = engine.render(ollama_registry.curated("chatml").text, [_plain()])
    assert after.ok and w.pid != pid


def test_a_hung_render_is_an_overrun_and_the_rest_are_not_tried(engine: OllamaEngine) -> None:
    quick = OllamaEngine(timeout=1.0)
    hung, rest = quick.render(HANG, [_plain(), _plain()])
    assert hung.error is not None and hung.error.kind == OVERRUN and "1 s" in hung.error.message
    assert rest.error is not None and rest.error.kind == OVERRUN and "earlier conversation" in rest.error.message
    assert quick.load(HANG) is None  # parsing it is quick: only rendering loops
    (after,) = engine.render(ollama_registry.curated("chatml").text, [_plain()])
    assert after.ok


def test_output_past_the_cap_is_an_overrun(engine: OllamaEngine) -> None:
    (out,) = engine.render(FLOOD, [_plain()])
    assert out.error is not None and out.error.kind == OVERRUN and str(1 << 20) in out.error.message
    small = OllamaEngine(max_output=1000)
    (legacy,) = small.render("{{ .Prompt }}" + "x" * 1001, [_plain()])
    assert legacy.error is not None and legacy.error.kind == OVERRUN
    (after,) = engine.render(ollama_registry.curated("chatml").text, [_plain()])
    assert after.ok


def test_not_installed_in_an_empty_engines_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENGINES_ENV, str(tmp_path))
    e = OllamaEngine()
    found = e.availability()
    assert not found.installed and found.install_hint == INSTALL_HINT and found.detail
    if find_go() is not None:
        assert "not built" in found.detail and str(tmp_path) in found.detail
    outs = e.render("{{ .Prompt }}", [_plain(), _plain()])
    assert [o.error.kind if o.error else None for o in outs] == [UNAVAILABLE, UNAVAILABLE]
    assert all(o.error is not None and INSTALL_HINT in o.error.message for o in outs)
    assert e.worker() is None and e.version() is None


def test_a_binary_built_from_other_source_is_not_installed(
    engine: OllamaEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENGINES_ENV, str(tmp_path))
    (tmp_path / "ollama").mkdir()
    binary = tmp_path / "ollama" / BINARY
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    (tmp_path / "ollama" / STAMP).write_text(json.dumps({"source_sha256": "0" * 64, "go_version": "go1.19"}))
    found = OllamaEngine().availability()
    assert not found.installed and "other source" in found.detail


def test_no_go_no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENGINES_ENV, str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("GOROOT", raising=False)
    found = OllamaEngine().availability()
    assert not found.installed and "no Go toolchain" in found.detail
    from gguftpl.errors import EngineInstallError

    with pytest.raises(EngineInstallError, match="no go on PATH"):
        install()


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _wait_busy(pid: int, ticks: int = 20, safety: float = 60.0) -> None:
    """Until the process has spent ``ticks`` more clock ticks on the CPU: it is inside the render."""
    start, deadline = _cpu_ticks(pid), time.monotonic() + safety
    while _cpu_ticks(pid) - start < ticks:
        assert time.monotonic() < deadline, "the worker never started rendering"
        time.sleep(0.05)


def test_template_vars_are_ollamas_tools_capability(engine: OllamaEngine) -> None:
    # server/images.go: a Go template has the tools capability when "tools" is among Template.Vars()
    chatml = ollama_registry.curated("chatml").text
    command_r = ollama_registry.curated("command-r").text
    chat_vars, r_vars = engine.template_vars(chatml), engine.template_vars(command_r)
    assert chat_vars is not None and "messages" in chat_vars and "tools" not in chat_vars
    assert r_vars is not None and "tools" in r_vars
    assert engine.template_vars("{{ .Broken") is None


def test_a_curated_template_without_tools_is_a_refused_ollama_row_and_no_engine_difference(
    engine: OllamaEngine,
) -> None:
    from gguftpl.audit import AuditOptions, audit_file
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.engines import registry
    from tests.conftest import SAMPLES

    registry.forget_availability()  # the fixture's engines folder
    fa = audit_file(str(SAMPLES / "hermes-2-pro-mistral-7b.chatml.gguf"), AuditOptions(), cache=AnalysisCache())
    registry.forget_availability()
    assert fa.runtimes is not None
    row = fa.runtimes.row("Ollama")
    assert row.engine == "ollama" and row.outcome == "refused" and row.tools_reach_prompt is False
    # Ollama rendered its curated chatml in place of the file's Jinja: that is GT701's, never an engine difference
    assert not [f for f in fa.findings if f.code == "GT604" and (f.extra or {}).get("engine") == "ollama"]
