"""No fix line names a placeholder (``ORG/REPO``, ``REPO``, ``=PATH``) when gguftpl knows the repo or knows that
there is none (issue 25, acceptance): every output format of ``audit`` (both engines' findings), ``diff``
(offline: the catalog entry it matched), ``verify`` and ``patch`` on the real corpus files (SmolLM2, Qwen2.5-Coder,
two embedding models, a base model without a template, llama.cpp's Llama-3 vocabulary carrying the catalog's
DeepSeek-R1-Distill template) and the ChatML sample. Only a file whose upstream gguftpl cannot name (its repair's
source ``unknown``) may ask for a template file the user trusts."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

import gguftpl
from gguftpl.cli import main_group
from tests.conftest import ROOT, SAMPLES

pytest.importorskip("xllamacpp")

PLACEHOLDER = re.compile(r"ORG/REPO|ORG/NAME|\bREPO\b|=PATH")
NO_REPO_KNOWN = "gguftpl: error: cannot tell which repo this GGUF came from"
"""``diff``'s usage error when discovery names no repo: it asks for one (not a fix line)."""
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
R1 = ROOT / "upstream_templates" / "deepseek-ai" / "DeepSeek-R1-Distill-Llama-8B" / "default.jinja"


@pytest.fixture(scope="module")
def r1_distill(corpus_file: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """llama.cpp's real Llama-3 vocabulary (DeepSeek-R1-Distill-Llama-8B's tokenizer) with that model's template,
    written by ``gguftpl patch`` itself: a reasoning family whose upstream has no tool template."""
    out = tmp_path_factory.mktemp("r1") / "r1.gguf"
    vocab = corpus_file("ggml-vocab-llama-bpe.gguf")
    res = CliRunner().invoke(main_group, ["patch", str(vocab), "--template", f"default={R1}", "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _outputs(path: Path, tmp: Path) -> dict[str, str]:
    """Every output format of audit, diff, verify and patch on ``path``: command -> stdout and stderr."""
    runner = CliRunner(env={**OFFLINE, "HF_HOME": str(tmp / "hf")})
    out = tmp / "fixed.gguf"
    commands: list[list[str]] = [
        *(["audit", "--exit-zero", "--engine", "llamacpp", "--format", f] for f in ("text", "json", "sarif", "github")),
        ["audit", "--exit-zero", "--format", "html"],
        *(["diff", "--no-behaviour", "--format", f] for f in ("text", "json")),
        *(["verify", "--format", f] for f in ("text", "json")),
        ["patch", "--tools-in-default", "-o", str(out)],
        ["patch", "--from-catalog", "--dry-run"],
        ["patch", "--from-catalog", "--tools-in-default", "--dry-run"],
    ]
    said = {}
    for cmd in commands:
        res = runner.invoke(main_group, [cmd[0], str(path), *cmd[1:]])
        assert res.exit_code in (0, 1, 2), (cmd, res.output)
        assert res.exception is None or isinstance(res.exception, SystemExit), (cmd, res.exception)
        said[" ".join(cmd[:1] + cmd[-2:])] = res.stdout + res.stderr
        out.unlink(missing_ok=True)
    return said


def _sarif_results_only(text: str) -> str:
    """A SARIF log less its rules' documentation (``gguftpl rules`` text: it describes every file, not this one)."""
    import json

    doc = json.loads(text)
    for run in doc["runs"]:
        run["tool"]["driver"].pop("rules", None)
    return json.dumps(doc, ensure_ascii=False)


CORPUS = [
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
    "ggml-vocab-nomic-bert-moe.gguf",
    "ggml-vocab-bert-bge.gguf",
    "ggml-vocab-llama-spm.gguf",
]


@pytest.mark.parametrize("name", [*CORPUS, "r1-distill", "chatml-sample"])
def test_no_placeholder_in_any_output_when_the_repo_is_known_or_none_exists(
    name: str, corpus_file: Callable[[str], Path], r1_distill: Path, tmp_path: Path
) -> None:
    path = {"r1-distill": r1_distill, "chatml-sample": SAMPLES / "hermes-2-pro-mistral-7b.chatml.gguf"}.get(name)
    path = path or corpus_file(name)
    repair = gguftpl.audit_paths([path]).files[0].repair
    if repair is not None and repair.source == "unknown":
        pytest.skip(f"gguftpl cannot name {name}'s upstream ({repair.advice[:80]}…): a template file may be asked for")
    bad = {}
    for cmd, text in _outputs(path, tmp_path).items():
        if "--format sarif" in cmd:
            text = _sarif_results_only(text)
        lines = [ln for ln in text.splitlines() if PLACEHOLDER.search(ln) and not ln.startswith(NO_REPO_KNOWN)]
        if lines:
            bad[cmd] = lines[:3]
    assert not bad, bad
