"""The runtime view (issue 15): which template llama.cpp, default-only runtimes and Ollama render a tools request
with, Ollama's choice from its own registry, and the GT205/GT7xx findings that name the runtime."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.engines import ollama_registry as ollama
from gguftpl.runtimes.view import LLAMACPP, OLLAMA
from tests.conftest import CHATML, ROOT, SAMPLES

RUNTIME_ROWS = ["llama.cpp", "Goose", "LM Studio", "vLLM", "SGLang", "TGI", "mistral.rs", "Dynamo", "Ollama"]
"""One row per runtime profile (Jan does what llama.cpp does: it is named on llama.cpp's row)."""

CHATML_SAMPLE = SAMPLES / "hermes-2-pro-mistral-7b.chatml.gguf"
UPSTREAM_SAMPLE = SAMPLES / "hermes-2-pro-mistral-7b.upstream.gguf"

# A template Ollama renders as it is (no registry entry within distance 100) that only *mentions* tools: Ollama
# advertises the tools capability, yet no schema reaches the prompt.
MENTIONS_TOOLS = (
    "{#- This model was not trained with tools: do not pass any. -#}\n"
    "{%- for message in messages %}"
    "{{- '### ' + message['role'] | upper + ' ###\\n' + message['content'] + '\\n### END OF TURN ###\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '### ASSISTANT ###\\n' }}{%- endif %}"
)


def _audit_json(*paths: Path) -> dict:
    res = CliRunner().invoke(main_group, ["audit", "--format", "json", "--exit-zero", *map(str, paths)])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _rows(file_dict: dict) -> dict[str, dict]:
    return {r["name"]: r for r in file_dict["runtimes"]}


# --- Ollama's registry, shipped with its provenance -------------------------------------------------------


def test_registry_ships_with_licence_commit_and_sources() -> None:
    data = ROOT / "gguftpl" / "engines" / "ollama_templates"
    assert "MIT License" in (data / "LICENSE").read_text(encoding="utf-8")
    assert ollama.OLLAMA_COMMIT in (data / "SOURCES.md").read_text(encoding="utf-8")
    entries = ollama.registry()
    assert len(entries) == len(json.loads((data / "ollama-index.json").read_text(encoding="utf-8"))) > 30
    for name in {n for n, _ in entries}:  # every entry names a curated template that is shipped
        assert (data / f"{name}.gotmpl").is_file(), name


def test_curated_templates_read_tools_as_go_does() -> None:
    chatml = ollama.curated("chatml")
    assert (chatml.reads_tools, chatml.renders_tools, chatml.round_trip) == (False, False, False)
    command_r = ollama.curated("command-r")  # `range .Tools` printing `.Function.Name`
    assert command_r.reads_tools and command_r.renders_tools
    renders = ollama.go_renders_tools
    assert not renders("{{ if .Tools }}You may call tools.{{ end }}{{ range .Messages }}{{ .Content }}{{ end }}")
    assert renders("{{ range .Tools }}{{ .Function.Name }}{{ end }}")
    assert renders("{{- range $i, $t := $.Tools }}{{ $t.Function.Name }}{{- end }}")
    assert renders("{{ if .Tools }}[AVAILABLE_TOOLS] {{ json .Tools }}{{ end }}")
    assert not renders("{{ range .Tools }}{{ $n := .Function.Name }}{{ end }}")  # assigned, never printed


# --- three templates: replaced, rendered as-is, merely mentioning tools ---------------------------------


def test_ollama_replaces_a_chatml_default_with_its_curated_template() -> None:
    p = ollama.predict(CHATML, False)
    assert p.substituted and p.match == "chatml" and p.distance is not None and p.distance < 100
    assert p.tools_rendered is False and p.advertises_tools is False
    assert ollama.OLLAMA_COMMIT[:7] in p.reason


def test_ollama_renders_a_long_tool_template_as_is() -> None:
    from gguftpl.gguf.reader import read_header
    from gguftpl.gguf.templateset import load_templateset

    tool_use = load_templateset(read_header(UPSTREAM_SAMPLE)).templates["tool_use"].text
    p = ollama.predict(tool_use, True)
    assert p.renders == "jinja" and p.template == "default" and p.match is None
    assert p.tools_rendered is True and p.advertises_tools is True


def test_a_chatml_default_that_mentions_tools_keeps_its_jinja() -> None:
    # within distance 100 of the chatml entry, but the Jinja text has a capability chatml.gotmpl lacks
    text = "{#- tools -#}" + CHATML
    p = ollama.predict(text, False)
    assert p.renders == "jinja" and p.match == "chatml" and p.advertises_tools and p.tools_rendered is False


def test_a_template_that_only_mentions_tools_is_advertised_and_flagged(make_gguf) -> None:
    path = make_gguf("mentions.gguf", templates={"default": MENTIONS_TOOLS})
    fd = _audit_json(path)["files"][0]
    row = _rows(fd)[OLLAMA]
    assert row["template"] == "default" and row["tools_reach_prompt"] is False
    assert row["ollama"]["advertises_tools"] is True and row["ollama"]["curated_template"] is None
    (gt702,) = [f for f in fd["findings"] if f["code"] == "GT702"]
    assert gt702["severity"] == "warning" and "advertise the tools capability" in gt702["message"]
    assert gt702["extra"]["runtime"] == "Ollama" and not [f for f in fd["findings"] if f["code"] == "GT701"]


# --- the audit of the bundled samples ------------------------------------------------------------------


def test_audit_of_the_chatml_sample_names_ollamas_chatml_and_the_default_only_runtimes() -> None:
    fd = _audit_json(CHATML_SAMPLE)["files"][0]
    rows = _rows(fd)
    assert list(rows) == RUNTIME_ROWS
    assert rows[LLAMACPP]["template"] == "default" and rows[LLAMACPP]["tools_reach_prompt"] is False
    # the hosts that render through llama.cpp's chat code answer with its row (the profile names them)
    from gguftpl.runtimes.profiles import profile

    assert rows[LLAMACPP]["examples"] == list(profile(LLAMACPP).hosts) and "Jan" in rows[LLAMACPP]["examples"]
    assert rows[LLAMACPP]["engine"] == "llamacpp"
    for name in ("vLLM", "SGLang"):  # jinja2 renders the ChatML default, which never reads tools
        assert rows[name]["template"] == "default" and rows[name]["tools_reach_prompt"] is False
        assert rows[name]["engine"] == "transformers" and rows[name]["outcome"] == "dropped"
    # LM Studio writes its own tool prompt when the template ignores tools (when its engine is installed)
    assert rows["LM Studio"]["engine"] == "hfjs" and rows["LM Studio"]["outcome"] in ("injected", "unknown")
    ol = rows[OLLAMA]
    assert ol["template"].startswith("chatml") and ol["tools_reach_prompt"] in (False, None)
    assert ol["ollama"]["curated_template"] == "chatml" and ol["ollama"]["distance"] == 0
    assert ol["ollama"]["commit"] == ollama.OLLAMA_COMMIT
    assert "GT701" not in {f["code"] for f in fd["findings"]}  # nothing of the file's is lost there: the view says it
    assert "Levenshtein distance 0 to its 'chatml' entry" in ol["reason"] and "never reads .Tools" in ol["reason"]
    text = CliRunner().invoke(main_group, ["audit", "--exit-zero", str(CHATML_SAMPLE)]).stdout
    assert "runtimes, for a request with tools (each judged by its own engine):" in text
    assert "LM Studio" in text and "vLLM" in text and "chatml (Ollama's curated" in text


def test_gt205_names_the_runtimes_that_drop_the_tools_and_suggests_tools_in_default() -> None:
    fd = _audit_json(UPSTREAM_SAMPLE)["files"][0]
    (gt205,) = [f for f in fd["findings"] if f["code"] == "GT205"]
    assert "fine for llama.cpp" in gt205["message"]
    assert "vLLM" in gt205["message"] and "SGLang" in gt205["message"]
    dropping = gt205["extra"]["runtimes_dropping_tools"]
    assert {"vLLM", "SGLang"} <= set(dropping) and "llama.cpp" not in dropping and "LM Studio" not in dropping
    if _rows(fd)[OLLAMA]["tools_reach_prompt"] is False:  # decided by Ollama's Go engine when it is installed
        assert "Ollama (it renders its curated 'chatml' template)" in gt205["message"] and OLLAMA in dropping
    assert "--tools-in-default" in gt205["fix"] and "Ollama: chatml" in gt205["evidence"]
    assert _rows(fd)[LLAMACPP]["template"] == "tool_use" and _rows(fd)[LLAMACPP]["tools_reach_prompt"] is True
    (gt701,) = [f for f in fd["findings"] if f["code"] == "GT701"]
    assert "invisible to Ollama" in gt701["message"] and "--tools-in-default" in gt701["fix"]


def test_a_file_without_templates_falls_back_in_llamacpp(make_gguf) -> None:
    fd = _audit_json(make_gguf("bare.gguf", templates={}))["files"][0]
    rows = _rows(fd)
    assert rows[LLAMACPP]["template"] == "fallback" and rows[LLAMACPP]["tools_reach_prompt"] is False
    assert rows["vLLM"]["template"] == "none" and rows["LM Studio"]["template"] == "none"
    assert rows[OLLAMA]["template"] == "none"


def test_sarif_carries_the_view_per_file() -> None:
    res = CliRunner().invoke(main_group, ["audit", "--format", "sarif", "--exit-zero", str(CHATML_SAMPLE)])
    props = json.loads(res.stdout)["runs"][0]["properties"]
    (rows,) = props["runtimes"].values()
    assert [r["name"] for r in rows] == RUNTIME_ROWS


def test_the_view_is_computed_once_per_file(monkeypatch: pytest.MonkeyPatch) -> None:
    import gguftpl.runtimes.view as view
    from gguftpl.audit import audit_file

    calls = []
    real = view.runtime_view
    monkeypatch.setattr(view, "runtime_view", lambda *a: calls.append(1) or real(*a))
    fa = audit_file(UPSTREAM_SAMPLE)
    assert len(calls) == 1 and fa.runtimes is not None
    assert {f.code for f in fa.findings} >= {"GT205", "GT701"}


def test_verify_shows_the_view_and_suggests_tools_in_default() -> None:
    pytest.importorskip("xllamacpp")
    res = CliRunner().invoke(main_group, ["verify", str(UPSTREAM_SAMPLE)])
    assert res.exit_code == 0, res.output  # llama.cpp itself is fine: it switches to tool_use
    lines = res.output.rstrip().splitlines()
    assert lines[-2] == "ok: every stage passed"
    assert lines[-3].startswith("verdict: tools reach the prompt in 2 of 9 runtimes") and "vLLM" in lines[-3]
    assert lines[-1].startswith("repair: ") and "--tools-in-default" in lines[-1]
    assert any(ln.strip().startswith("Ollama") and "chatml" in ln for ln in lines)
    js = CliRunner().invoke(main_group, ["verify", "--format", "json", str(UPSTREAM_SAMPLE)])
    rows = {r["name"]: r for r in json.loads(js.stdout)["runtimes"]}
    assert rows[LLAMACPP]["tools_reach_prompt"] is True and rows[OLLAMA]["tools_reach_prompt"] is False
    broken = CliRunner().invoke(main_group, ["verify", str(CHATML_SAMPLE)])
    assert broken.exit_code == 1
    assert (
        broken.output.rstrip()
        .splitlines()[-1]
        .endswith("--tools-in-default -o FIXED.gguf && gguftpl verify FIXED.gguf")
    )
