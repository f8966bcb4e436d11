"""The model-kind fact (chat, base, embedding, reranker) read once from the header, and what it changes: the
chat-only rules are skipped for a model that answers no chat request, with one GT005 info line saying why
(issue 25 item 1), on llama.cpp's own real embedding GGUFs (bert-bge, nomic-bert-moe) and on files made here."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gguftpl.cli import main_group
from tests.conftest import CHATML

BGE = "ggml-vocab-bert-bge.gguf"
"""arch bert, ``bert.attention.causal = false``, no chat template, no pooling key."""
NOMIC = "ggml-vocab-nomic-bert-moe.gguf"
"""arch nomic-bert-moe, ``nomic-bert-moe.pooling_type = 1`` (mean)."""


def cli(*args: str | Path) -> Result:
    return CliRunner().invoke(main_group, [str(a) for a in args])


def kind_of(path: Path) -> object:
    from gguftpl.gguf.reader import read_header
    from gguftpl.gguf.templateset import load_templateset

    with read_header(path) as header:
        return load_templateset(header).kind


def test_real_embedding_files_are_embedding_models(corpus_file: Callable[[str], Path]) -> None:
    bge, nomic = kind_of(corpus_file(BGE)), kind_of(corpus_file(NOMIC))
    assert (bge.kind, bge.key) == ("embedding", "bert.attention.causal")  # type: ignore[attr-defined]
    assert (nomic.kind, nomic.key) == ("embedding", "nomic-bert-moe.pooling_type")  # type: ignore[attr-defined]
    assert "= 1, mean" in nomic.reason  # type: ignore[attr-defined]


def test_real_chat_and_base_files(corpus_file: Callable[[str], Path]) -> None:
    assert kind_of(corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf")).kind == "chat"  # type: ignore[attr-defined]
    assert kind_of(corpus_file("ggml-vocab-llama-spm.gguf")).kind == "base"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("extra", "templates", "kind"),
    [
        ({"llama.pooling_type": 4}, {"rerank": CHATML}, "reranker"),
        ({"llama.pooling_type": 3}, {"default": CHATML}, "embedding"),  # Qwen3-Embedding keeps its chat template
        ({"llama.pooling_type": 0}, {"default": CHATML}, "chat"),  # NONE: token embeddings of a generator
        ({"llama.attention.causal": False}, {"default": CHATML}, "chat"),  # a text-diffusion model chats
        ({"llama.attention.causal": False}, {}, "embedding"),
        ({}, {}, "base"),
        ({}, {"default": CHATML}, "chat"),
    ],
)
def test_kind_from_pooling_causal_and_templates(
    make_gguf: Callable[..., Path], extra: dict[str, object], templates: dict[str, str], kind: str
) -> None:
    path = make_gguf(templates=templates, extra_kv=extra, tensors=False)
    assert kind_of(path).kind == kind  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", [BGE, NOMIC])
def test_audit_engine_llamacpp_on_real_embedding_exits_0_with_one_info_line(
    corpus_file: Callable[[str], Path], name: str
) -> None:
    pytest.importorskip("xllamacpp")
    res = cli("audit", "--engine", "llamacpp", corpus_file(name))
    assert res.exit_code == 0, res.output
    finding_lines = [ln for ln in res.output.splitlines() if ln.lstrip().startswith(("error ", "warning ", "info "))]
    assert len(finding_lines) == 1, res.output
    assert "info GT005 not-a-chat-model: not a chat model: an embedding model" in finding_lines[0]
    assert "GT601" not in res.output and "GT101" not in res.output and "runtimes, for a request" not in res.output


def test_audit_json_says_the_kind(corpus_file: Callable[[str], Path]) -> None:
    res = cli("audit", "--format", "json", corpus_file(NOMIC))
    assert res.exit_code == 0, res.output
    (fa,) = json.loads(res.stdout)["files"]
    assert fa["model"] == {
        "kind": "embedding",
        "reason": "nomic-bert-moe.pooling_type = 1, mean: llama.cpp pools it into embeddings",
        "key": "nomic-bert-moe.pooling_type",
    }
    assert [f["code"] for f in fa["findings"]] == ["GT005"]


def test_embedding_model_with_a_broken_template_still_gets_the_parse_error(make_gguf: Callable[..., Path]) -> None:
    """llama-server parses the file's template at startup whatever the model: GT102 is no chat-only rule."""
    path = make_gguf(templates={"default": "{% for m in messages %}"}, extra_kv={"llama.pooling_type": 1})
    res = cli("audit", "--format", "json", path)
    codes = {f["code"] for f in json.loads(res.stdout)["files"][0]["findings"]}
    assert {"GT005", "GT102"} <= codes and not any(c.startswith("GT2") for c in codes), codes


def test_verify_on_real_embedding_advises_no_repair(corpus_file: Callable[[str], Path]) -> None:
    pytest.importorskip("xllamacpp")
    res = cli("verify", corpus_file(NOMIC))
    assert res.exit_code == 0, res.output
    assert "not a chat model: an embedding model" in res.output
    assert "repair" not in res.output and "--from-hub" not in res.output and "PASS" not in res.output
    assert "nothing verified: every stage was skipped" in res.output


def test_chat_model_audit_unchanged_by_the_kind(corpus_file: Callable[[str], Path]) -> None:
    res = cli("audit", "--format", "json", corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf"))
    fa = json.loads(res.stdout)["files"][0]
    assert "model" not in fa and "GT201" in {f["code"] for f in fa["findings"]}


# --- issue 25 item 11: the ChatML fallback's markers and the file's vocabulary ------------------------------


def test_chatml_fallback_on_real_vocab_without_its_markers(corpus_file: Callable[[str], Path]) -> None:
    """llama's SentencePiece vocabulary has no ``<|im_start|>``: the fallback prompt is plain text to the model."""
    pytest.importorskip("xllamacpp")
    from gguftpl.verify.stages import verify_file

    stage = verify_file(corpus_file("ggml-vocab-llama-spm.gguf")).stages[0]
    assert stage.status == "fail" and stage.data["template"] == "fallback"
    assert stage.data["markers_not_tokens"] == ["<|im_start|>", "<|im_end|>"]
    assert "its markers <|im_start|>, <|im_end|> are not tokens of this file's vocabulary" in stage.evidence
    res = cli("audit", "--engine", "llamacpp", "--format", "json", corpus_file("ggml-vocab-llama-spm.gguf"))
    (gt605,) = [f for f in json.loads(res.stdout)["files"][0]["findings"] if f["code"] == "GT605"]
    assert "are not tokens of this file's vocabulary" in gt605["message"]


def test_chatml_fallback_markers_that_are_tokens_are_not_flagged(make_gguf: Callable[..., Path]) -> None:
    pytest.importorskip("xllamacpp")
    from gguftpl.verify.stages import verify_file

    stage = verify_file(make_gguf(templates={})).stages[0]  # the vocab has <|im_start|> and <|im_end|> as CONTROL
    assert stage.data["template"] == "fallback" and stage.data["markers_not_tokens"] == []
    assert "not tokens" not in stage.evidence
