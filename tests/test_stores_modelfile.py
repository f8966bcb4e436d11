"""The Ollama fix: `gguftpl patch ollama://NAME --ollama-modelfile DIR` writes a Modelfile whose TEMPLATE renders
the tools (proven by Ollama's Go engine), never touching the store; created in a scratch store the way `ollama
create` writes one, the model's Ollama row puts the canary schema in the prompt."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CHATML, DATA, build_gguf
from tests.ollama_store import CHATML_GO, CHATML_PARAMS, ollama_model, read_modelfile

HERMES = DATA / "hermes"


@pytest.fixture(autouse=True)
def _go_engine() -> None:
    from gguftpl.engines import registry

    if not registry.availability("ollama").installed:
        pytest.skip("Ollama's Go engine is not built: gguftpl engines install ollama")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    templates = {
        "default": (HERMES / "NousResearch-Hermes-2-Pro-Mistral-7B.default.jinja").read_text(encoding="utf-8"),
        "tool_use": (HERMES / "NousResearch-Hermes-2-Pro-Mistral-7B.tool_use.jinja").read_text(encoding="utf-8"),
    }
    hermes = build_gguf(tmp_path / "hermes.gguf", templates=templates)
    root = tmp_path / "ollama"
    ollama_model(root, "hermes-test", hermes, template=CHATML_GO, params=CHATML_PARAMS, system="Be brief.")
    ollama_model(root, "plain", build_gguf(tmp_path / "plain.gguf", templates={"default": CHATML}), template=CHATML_GO)
    return root


def run(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OLLAMA_GO_TEMPLATE"}
    env["OLLAMA_MODELS"] = str(store)
    cmd = [sys.executable, "-m", "gguftpl", "patch", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def _tree(root: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_modelfile_created_in_a_scratch_store_renders_the_tools(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _tree(store)
    out = tmp_path / "fix"
    r = run(store, "ollama://hermes-test", "--ollama-modelfile", str(out))
    assert r.returncode == 0, r.stderr
    assert f"run: ollama create hermes-test:latest -f {out / 'Modelfile'}" in r.stdout
    assert "proven: Go engine: a chat without tools renders byte for byte as with the current TEMPLATE" in r.stdout
    assert _tree(store) == before  # nothing in the store was written
    mf = read_modelfile((out / "Modelfile").read_text(encoding="utf-8"))
    assert mf["params"]["stop"] == ["<|im_start|>", "<|im_end|>"] and mf["system"] == "Be brief."
    assert ".Tools" in mf["template"] and Path(mf["from"]).parent == (store / "blobs").resolve()
    # `ollama create` in a scratch store: FROM's GGUF as the model layer, the TEMPLATE, SYSTEM and params layers
    scratch = tmp_path / "scratch"
    ollama_model(scratch, "hermes-test", Path(mf["from"]), template=mf["template"], system=mf["system"],
                 params=mf["params"])  # fmt: skip
    monkeypatch.setenv("OLLAMA_MODELS", str(scratch))
    monkeypatch.delenv("OLLAMA_GO_TEMPLATE", raising=False)
    from gguftpl.audit import AuditOptions, audit_paths
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.templates import probes
    from gguftpl.templates.enginefacts import go_template_facts

    (fa,) = audit_paths(["ollama://hermes-test"], AuditOptions(), cache=AnalysisCache()).files
    row = fa.runtimes.row("ollama")
    assert row.outcome == "prompt" and row.tools_reach_prompt is True
    assert not [f for f in fa.findings if f.code == "GT703"]
    prompt = go_template_facts(mf["template"]).text(probes.TOOLS) or ""
    assert probes.CANARY_TOOL_NAME in prompt and probes.CANARY_PARAM_TOKEN in prompt


def test_a_model_without_a_tool_template_is_refused_with_the_reason(store: Path, tmp_path: Path) -> None:
    r = run(store, "ollama://plain", "--ollama-modelfile", str(tmp_path / "x"))
    assert r.returncode == 2 and "no template of the GGUF renders tools" in r.stderr
    assert not (tmp_path / "x" / "Modelfile").exists()


def test_modelfile_never_goes_into_the_store(store: Path) -> None:
    r = run(store, "ollama://hermes-test", "--ollama-modelfile", str(store / "fix"))
    assert r.returncode == 2 and "inside Ollama's store" in r.stderr and not (store / "fix").exists()
    r = run(store, "ollama://hermes-test", "--ollama-modelfile", "x", "--in-place")
    assert r.returncode == 2 and "Modelfile only" in r.stderr


def test_a_template_ollama_would_not_render_is_refused_with_the_reason(store: Path, tmp_path: Path) -> None:
    # OLLAMA_GO_TEMPLATE=false: Ollama runs the GGUF's own Jinja, whatever TEMPLATE the Modelfile gives
    env = {k: v for k, v in os.environ.items() if k != "OLLAMA_GO_TEMPLATE"}
    env.update(OLLAMA_MODELS=str(store), OLLAMA_GO_TEMPLATE="false")
    out = tmp_path / "fix"
    cmd = [sys.executable, "-m", "gguftpl", "patch", "ollama://hermes-test", "--ollama-modelfile", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 2 and not (out / "Modelfile").exists(), r.stdout
    (line,) = r.stderr.splitlines()
    assert "Ollama would not render the new TEMPLATE" in line and "OLLAMA_GO_TEMPLATE" in line, line
    # a GGUF FROM names whose own Jinja shows more capabilities than the new TEMPLATE (PreferChatTemplate) is
    # decided on that GGUF's template, not the blob's: here both read tools and the TEMPLATE has the round trip
    tool_use = (HERMES / "NousResearch-Hermes-2-Pro-Mistral-7B.tool_use.jinja").read_text(encoding="utf-8")
    fixed = build_gguf(tmp_path / "fixed.gguf", templates={"default": tool_use})
    r = run(store, "ollama://hermes-test", "--ollama-modelfile", str(out), "--ollama-from", str(fixed))
    assert r.returncode == 0, r.stderr
    assert f"FROM {fixed}" in (out / "Modelfile").read_text(encoding="utf-8")


def test_the_modelfile_s_proof_never_comes_from_the_cache(store: Path, tmp_path: Path) -> None:
    """Issue 27 (a fix line or a patch gate never comes from the cache alone): a model whose current TEMPLATE is
    in another turn format than the GGUF's tool template; the proof refuses the Modelfile. Its cached Go facts
    then sealed to say the current TEMPLATE renders a plain chat just as the new one does: still refused,
    nothing written (it was "proven: ... byte for byte" and written before)."""
    import json

    from tests.test_attacks_cache import read_entry, sealed_write

    other = "{{ range .Messages }}[{{ .Role }}] {{ .Content }}\n{{ end }}"
    ollama_model(store, "other-format", tmp_path / "hermes.gguf", template=other, params=CHATML_PARAMS)
    cache = tmp_path / "cache"
    env = {"GGUFTPL_CACHE_DIR": str(cache)}
    out = tmp_path / "fix"

    def patch() -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "gguftpl", "patch", "ollama://other-format", "--ollama-modelfile", str(out)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, **env,
                              "OLLAMA_MODELS": str(store)})  # fmt: skip

    first = patch()
    assert first.returncode == 2 and "not in this dialect's turn format" in first.stderr, first.stderr
    go = {p: read_entry(p) for p in cache.rglob("*.json") if "gotemplates" in p.parts}
    plain = {p: json.dumps(d["renders"]["plain"]["text"]) for p, d in go.items()}
    (old,) = [p for p, text in plain.items() if "[user]" in text]
    (new,) = [p for p in go if p != old]
    sealed_write(old, {**go[old], "renders": {**go[old]["renders"], "plain": go[new]["renders"]["plain"]}})
    again = patch()
    assert again.returncode == 2 and "not in this dialect's turn format" in again.stderr, again.stdout
    assert not (out / "Modelfile").exists()
