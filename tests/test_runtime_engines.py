"""Every runtime judged by its own engine (issue 21).

For each engine, every template of the project's corpus is rendered by the real engine, and the verdict the
runtime view shows for the runtimes on that engine equals what that engine's own prompt contains (no hand
labels: the expectation is the engine's render, asked directly). The 11 templates that fail in LM Studio's or
TGI's engine while jinja2 renders them are named regression cases, wrapped as a GGUF's default and audited
through the CLI. Engines not installed here are skipped locally; CI installs every one (``.ci/run``) and fails
instead of skipping.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
CORPUS = sorted([*(DATA / "templates").glob("*.jinja"), *(DATA / "real_templates").glob("*.jinja")])

HFJS_FAILS = [
    "real_templates/vllm033-tool_chat_template_llama3.2_json.jinja",
    "real_templates/vllm033-tool_chat_template_llama4_pythonic.jinja",
    "templates/meetkai-functionary-medium-v3.2.jinja",
    "templates/ByteDance-Seed-OSS.jinja",
    "templates/Apriel-1.6-15b-Thinker-fixed.jinja",
    "templates/unsloth-Apriel-1.5.jinja",
]
"""jinja2 puts the tools in the prompt; @huggingface/jinja raises (issue 21's measurements)."""
TGI_FAILS = [
    "templates/GLM-4.6.jinja",
    "templates/Kimi-K3.jinja",
    "templates/MiniMax-M3.jinja",
    "templates/StepFun3.5-Flash.jinja",
    # the issue's GLM-4-MoE is not in the corpus; its sibling uses the same tojson(ensure_ascii=False)
    "real_templates/llamacpp-GLM-4.7-Flash.jinja",
]
"""``tojson(ensure_ascii=False)``: stock minijinja (TGI) rejects the keyword."""


def _need(engine_id: str) -> None:
    from gguftpl.engines import registry

    available = registry.availability(engine_id)
    if not available.installed:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs every engine, but {available.unknown_reason()}")
        pytest.skip(available.unknown_reason())


def _direct(engine_id: str, text: str):
    """The engine's own answer for the tools request, asked directly (not through the facts or the view)."""
    from gguftpl.engines import registry
    from gguftpl.engines.base import RenderRequest
    from gguftpl.templates import probes

    msgs, tools = probes.tools_conversation(), probes.canary_tools()
    req = RenderRequest(msgs, tools, True, {"bos_token": "<s>", "eos_token": "</s>"})
    (out,) = registry.get(engine_id).render(text, [req])
    return out


def _gguf(make_gguf, template: Path) -> Path:
    return make_gguf(template.stem + ".gguf", templates={"default": template.read_text(encoding="utf-8")})


def _audit(path: Path, *extra: str) -> dict:
    res = CliRunner().invoke(main_group, ["audit", "--format", "json", "--exit-zero", *extra, str(path)])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["files"][0]


@pytest.mark.parametrize("rel", HFJS_FAILS)
def test_lm_studio_row_says_its_engine_fails_and_vllm_still_gets_the_tools(make_gguf, rel: str) -> None:
    _need("hfjs")
    template = DATA / rel
    direct = _direct("hfjs", template.read_text(encoding="utf-8"))
    assert direct.error is not None  # the engine itself raises on it
    fd = _audit(_gguf(make_gguf, template), "--runtime", "lmstudio,vllm")
    rows = {r["id"]: r for r in fd["runtimes"]}
    assert set(rows) == {"lmstudio", "vllm"}
    assert rows["lmstudio"]["outcome"] == "fails" and rows["lmstudio"]["engine"] == "hfjs"
    assert direct.error.message in rows["lmstudio"]["error"]
    assert rows["vllm"]["tools_reach_prompt"] is True and rows["vllm"]["outcome"] == "prompt"
    (gt107,) = [f for f in fd["findings"] if f["code"] == "GT107"]
    assert gt107["extra"]["runtimes"] == ["LM Studio"] and gt107["extra"]["engine"] == "hfjs"
    assert "LM Studio" in gt107["message"] and direct.error.message in gt107["message"]


@pytest.mark.parametrize("rel", TGI_FAILS)
def test_tgi_row_says_stock_minijinja_fails_and_vllm_still_gets_the_tools(make_gguf, rel: str) -> None:
    _need("minijinja/tgi")
    template = DATA / rel
    direct = _direct("minijinja/tgi", template.read_text(encoding="utf-8"))
    assert direct.error is not None and "ensure_ascii" in direct.error.message
    fd = _audit(_gguf(make_gguf, template))
    rows = {r["id"]: r for r in fd["runtimes"]}
    assert rows["tgi"]["outcome"] == "fails" and direct.error.message in rows["tgi"]["error"]
    assert rows["vllm"]["tools_reach_prompt"] is True
    # mistral.rs registers its own tojson, which takes ensure_ascii: not a failure there
    assert rows["mistral.rs"]["outcome"] != "fails"
    gt107 = [f for f in fd["findings"] if f["code"] == "GT107" and "TGI" in f["extra"]["runtimes"]]
    assert len(gt107) == 1 and "minijinja/tgi" in gt107[0]["message"]


def _engine_ids() -> list[str]:
    return ["transformers", "llamacpp", "hfjs", "minijinja/tgi", "minijinja/mistralrs", "minijinja/dynamo"]


@pytest.fixture(scope="module")
def corpus_facts():
    """Each corpus template's facts, gathered once per kind: with llama.cpp (its verdicts decide then, so only the
    llama.cpp case reads those), and without it but with every other installed Jinja engine asked at once (asking
    one engine adds its facts and changes nothing of transformers' or another engine's). Each case of the test
    below used to gather the whole corpus again under transformers (six times in all)."""
    from gguftpl.analysis import analyze_template_text
    from gguftpl.engines import registry

    others = [e for e in registry.OTHER_JINJA_ENGINES if registry.availability(e).installed]
    memo: dict[tuple[Path, bool], object] = {}

    def facts(path: Path, llamacpp: bool):
        if (path, llamacpp) not in memo:
            memo[(path, llamacpp)] = analyze_template_text(
                path.read_text(encoding="utf-8"),
                bos_token="<s>",
                eos_token="</s>",
                llamacpp=llamacpp,
                engines=[] if llamacpp else others,
            )
        return memo[(path, llamacpp)]

    return facts


@pytest.mark.parametrize("engine_id", _engine_ids())
def test_every_corpus_template_verdict_is_the_engines_own_prompt(corpus_facts, engine_id: str) -> None:
    """Per engine, over the whole corpus: the row of each runtime on that engine says the template fails exactly
    when the engine raises on the tools request, and that the schemas are in the prompt exactly when the
    engine's own prompt carries the canary tool's name and parameter."""
    _need(engine_id)
    from gguftpl.runtimes.profiles import PROFILES
    from gguftpl.runtimes.view import runtime_view
    from gguftpl.templates import probes

    runtimes = [p for p in PROFILES if p.engine == engine_id and p.template_choice != "ollama"]
    checked = 0
    for path in CORPUS:
        text = path.read_text(encoding="utf-8")
        facts = corpus_facts(path, engine_id == "llamacpp")
        if engine_id not in ("transformers", "llamacpp"):
            assert engine_id in facts.engines, (path.name, engine_id)  # asked, as it was when asked alone
        view = runtime_view([facts], {"default": text})
        direct = _direct(engine_id, text)
        for p in runtimes:
            row = view.row(p.id)
            if row.template != "default":
                continue
            if direct.error is not None:
                assert row.outcome == "fails", (path.name, p.id, row)
            elif facts.tools_static is not False:  # never read: a proof no engine's prompt can contradict
                has = probes.CANARY_TOOL_NAME in direct.text and probes.CANARY_PARAM_TOKEN in direct.text
                assert (row.outcome == "prompt") == has, (path.name, p.id, row)
            checked += 1
    assert checked >= len(CORPUS)  # every template, for at least one runtime on this engine
