"""Acceptance: the failure gguftpl exists for, on the committed samples and a real model.

The verdicts are checked against an independent rendering: transformers' own ``render_jinja_template``
with a tool whose name must (or must not) appear in the prompt.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gguftpl.audit import FileAudit, audit_paths
from gguftpl.cli import main_group
from gguftpl.findings import Severity
from gguftpl.gguf.reader import read_header
from gguftpl.rules import tools as rules

UPSTREAM_REPO = "NousResearch/Hermes-2-Pro-Mistral-7B"
BARTOWSKI_LIKE = "hermes-2-pro-mistral-7b.chatml.gguf"
UPSTREAM_PAIR = "hermes-2-pro-mistral-7b.upstream.gguf"
TOOL = {
    "type": "function",
    "function": {
        "name": "acceptance_probe_tool",
        "description": "Look something up",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    },
}


def tool_reaches_prompt(template: str) -> bool:
    """Independent check with transformers itself (not gguftpl's renderer)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[[{"role": "user", "content": "hi"}]],
        tools=[TOOL],
        chat_template=template,
        add_generation_prompt=True,
        bos_token="<s>",
        eos_token="</s>",
    )
    return "acceptance_probe_tool" in rendered[0]


def templates_of(path: Path) -> dict[str, str]:
    header = read_header(path)
    out = {}
    for key in header.kv:
        if key == "tokenizer.chat_template" or key.startswith("tokenizer.chat_template."):
            out[key] = header.get(key)
    return out


def tools_error(fa: FileAudit):  # type: ignore[no-untyped-def]
    return [f for f in fa.findings if f.code == rules.TOOLS_NOT_RENDERED.code and f.severity is Severity.ERROR]


def test_bartowski_like_sample_is_an_error_with_a_hub_fix(samples_dir: Path) -> None:
    path = samples_dir / BARTOWSKI_LIKE
    assert not tool_reaches_prompt(templates_of(path)["tokenizer.chat_template"])
    run = audit_paths([path])
    fa = run.files[0]
    (finding,) = tools_error(fa)
    assert finding.template == "default"
    assert finding.location.key == "tokenizer.chat_template"
    assert finding.evidence.strip()
    assert finding.fix and UPSTREAM_REPO in finding.fix and str(path) in finding.fix
    assert fa.upstream_repo == UPSTREAM_REPO
    (report,) = fa.templates
    assert report.tools_in_prompt is False
    assert run.exit_code("error") == 1


def test_upstream_pair_has_no_error(samples_dir: Path) -> None:
    path = samples_dir / UPSTREAM_PAIR
    texts = templates_of(path)
    assert tool_reaches_prompt(texts["tokenizer.chat_template.tool_use"])
    run = audit_paths([path])
    fa = run.files[0]
    assert not [f for f in fa.findings if f.severity is Severity.ERROR], fa.findings
    by_name = {t.name: t for t in fa.templates}
    assert by_name["tool_use"].tools_in_prompt is True
    assert run.exit_code("error") == 0


def test_real_smollm2_gets_the_same_error(corpus_file) -> None:  # type: ignore[no-untyped-def]
    path = corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert not tool_reaches_prompt(templates_of(path)["tokenizer.chat_template"])
    fa = audit_paths([path]).files[0]
    (finding,) = tools_error(fa)
    assert finding.template == "default" and finding.evidence.strip() and finding.fix


def test_cli_on_the_samples_folder(samples_dir: Path) -> None:
    result = CliRunner().invoke(main_group, ["audit", str(samples_dir), "--format", "json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    by_name = {Path(f["path"]).name: f for f in doc["files"]}
    assert set(by_name) == {p.name for p in samples_dir.glob("*.gguf")}
    errors = {name for name, f in by_name.items() if any(x["severity"] == "error" for x in f["findings"])}
    # no template at all: llama.cpp's ChatML fallback drops the tools, the same verdict as GT201's, with its severity
    assert errors == {BARTOWSKI_LIKE, "no-template.gguf"}
    # only the good pair: exit 0
    ok = CliRunner().invoke(main_group, ["audit", str(samples_dir / UPSTREAM_PAIR)])
    assert ok.exit_code == 0, ok.stdout
