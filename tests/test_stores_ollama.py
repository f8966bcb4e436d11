"""Ollama models audited as Ollama runs them: the runtime view's Ollama row follows the model's manifest (its Go
TEMPLATE rendered by Ollama's Go engine, else the GGUF's Jinja through llama-server), with Ollama's tools
capability test and the stop parameters; GT703 when Ollama's TEMPLATE drops tools the GGUF's own template renders."""

from __future__ import annotations

from pathlib import Path

import pytest

from gguftpl.audit import AuditOptions, audit_paths
from gguftpl.auditcache import AnalysisCache
from tests.conftest import DATA, build_gguf
from tests.ollama_store import CHATML_GO, CHATML_PARAMS, ollama_model

HERMES = DATA / "hermes"
TOOLS_GO = (
    "{{- if .Tools }}<|im_start|>system\n<tools>{{ range .Tools }}{{ json . }}{{ end }}</tools><|im_end|>\n{{ end }}"
    "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n"
)


@pytest.fixture(autouse=True)
def _go_engine() -> None:
    from gguftpl.engines import registry

    if not registry.availability("ollama").installed:
        pytest.skip("Ollama's Go engine is not built: gguftpl engines install ollama")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ollama"
    monkeypatch.setenv("OLLAMA_MODELS", str(root))
    monkeypatch.delenv("OLLAMA_GO_TEMPLATE", raising=False)
    return root


@pytest.fixture
def hermes(tmp_path: Path) -> Path:
    """A real small GGUF with Hermes-2-Pro's ChatML default and its tool_use (tests/data/hermes)."""
    templates = {
        "default": (HERMES / "NousResearch-Hermes-2-Pro-Mistral-7B.default.jinja").read_text(encoding="utf-8"),
        "tool_use": (HERMES / "NousResearch-Hermes-2-Pro-Mistral-7B.tool_use.jinja").read_text(encoding="utf-8"),
    }
    return build_gguf(tmp_path / "hermes.gguf", templates=templates)


def _audit(ref: str):  # type: ignore[no-untyped-def]
    run = audit_paths([ref], AuditOptions(), cache=AnalysisCache())
    (fa,) = run.files
    return fa


def test_hermes_test_ollama_drops_the_tools_its_tool_use_renders(store: Path, hermes: Path) -> None:
    ollama_model(store, "hermes-test", hermes, template=CHATML_GO, params=CHATML_PARAMS)
    fa = _audit("ollama://hermes-test")
    assert fa.path == "ollama://hermes-test:latest"
    row = fa.runtimes.row("ollama")
    assert row.template == "TEMPLATE layer (Go)" and row.outcome == "refused" and row.tools_reach_prompt is False
    assert "never reads .Tools (rendered by the Go engine)" in row.reason
    assert row.error == "hermes-test:latest does not support tools"
    assert "PARAMETER stop '<|im_start|>', '<|im_end|>' (the turn ends at '<|im_end|>')" in row.reason
    assert fa.runtimes.row("llama.cpp").tools_reach_prompt is True  # the GGUF's own tool_use renders them
    (gt703,) = [f for f in fa.findings if f.code == "GT703"]
    assert gt703.location.file == "ollama://hermes-test:latest" and "tool_use" in gt703.message
    assert "sha256-" not in gt703.message and "--ollama-modelfile" in (gt703.fix or "")
    assert gt703.message.count("tool_use") == 1, gt703.message  # the GGUF's side said once


def test_a_template_that_renders_the_tools(store: Path, hermes: Path) -> None:
    ollama_model(store, "good", hermes, template=TOOLS_GO, params=CHATML_PARAMS)
    fa = _audit("ollama://good")
    row = fa.runtimes.row("ollama")
    assert row.outcome == "prompt" and row.tools_reach_prompt is True and "Go engine" in row.reason
    assert not [f for f in fa.findings if f.code == "GT703"]


def test_no_template_layer_is_native_mode(store: Path, tmp_path: Path) -> None:
    # a default that renders the tools and says so: Ollama advertises tools and llama-server renders the GGUF's Jinja
    text = (HERMES / "NousResearch-Hermes-2-Pro-Mistral-7B.tool_use.jinja").read_text(encoding="utf-8")
    gguf = build_gguf(tmp_path / "native.gguf", templates={"default": text})
    ollama_model(store, "native", gguf)
    row = _audit("ollama://native").runtimes.row("ollama")
    assert row.template == "default" and row.tools_reach_prompt is True
    assert "bundled llama-server" in row.reason and "no stop parameters" in row.reason


def test_go_template_env_forces_native(store: Path, hermes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ollama_model(store, "hermes-test", hermes, template=CHATML_GO, params=CHATML_PARAMS)
    monkeypatch.setenv("OLLAMA_GO_TEMPLATE", "false")
    row = _audit("ollama://hermes-test").runtimes.row("ollama")
    # native: the Hermes ChatML default never says 'tools', so Ollama refuses before llama-server sees tool_use
    assert row.template == "default" and row.outcome == "refused" and "never says 'tools'" in row.reason
    assert row.reason.startswith("OLLAMA_GO_TEMPLATE is set false, so Ollama leaves the TEMPLATE layer")


def test_a_renderer_is_not_guessed(store: Path, hermes: Path) -> None:
    config = {"model_format": "gguf", "model_family": "qwen3", "renderer": "qwen3-coder", "parser": "qwen3-coder"}
    ollama_model(store, "coder", hermes, template=CHATML_GO, config=config)
    row = _audit("ollama://coder").runtimes.row("ollama")
    assert row.outcome == "unknown" and "renderer 'qwen3-coder'" in row.reason


def test_the_row_says_whether_ollama_and_the_ggufs_jinja_agree_about_tools(store: Path, hermes: Path) -> None:
    ollama_model(store, "hermes-test", hermes, template=CHATML_GO, params=CHATML_PARAMS)
    ollama_model(store, "good", hermes, template=TOOLS_GO, params=CHATML_PARAMS)
    bad, good = _audit("ollama://hermes-test"), _audit("ollama://good")
    assert bad.runtimes.ollama.jinja_agrees is False and good.runtimes.ollama.jinja_agrees is True
    (bad_row,) = [d for d in bad.runtimes.to_list() if d["id"] == "ollama"]
    (good_row,) = [d for d in good.runtimes.to_list() if d["id"] == "ollama"]
    assert bad_row["ollama"]["jinja_agrees_on_tools"] is False and good_row["ollama"]["jinja_agrees_on_tools"] is True
    assert "the GGUF's own Jinja (its tool_use, by llama.cpp's engine) puts the tool schemas in the prompt" in (
        bad.runtimes.row("ollama").reason
    )
    assert "Ollama and the GGUF's own Jinja disagree about tools" in bad.runtimes.row("ollama").reason
    assert "they agree about tools" in good.runtimes.row("ollama").reason
    # the stop lines and the commit still close the reason
    assert bad.runtimes.row("ollama").reason.endswith(")") and "(ollama@" in bad.runtimes.row("ollama").reason


def test_the_html_prompts_never_show_the_curated_template_for_a_model_ollama_has(store: Path, tmp_path: Path) -> None:
    from gguftpl.report.htmlparts import file_prompts
    from tests.conftest import CHATML

    # ChatML: an import would get Ollama's curated chatml, whose prompt the report has; this model has its own
    gguf = build_gguf(tmp_path / "chatml.gguf", templates={"default": CHATML})
    ollama_model(store, "mine", gguf, template=TOOLS_GO)
    fa = _audit("ollama://mine")
    assert fa.runtimes.row("ollama").template == "TEMPLATE layer (Go)"
    prompts, elsewhere = file_prompts(fa)
    shown = [name for t in prompts for p in t.panels for name, _ in p.runtimes]
    assert "Ollama" not in shown and "Ollama" in [r.name for r in elsewhere]
