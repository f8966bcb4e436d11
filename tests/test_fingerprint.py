"""Tokenizer fingerprints: every family in upstream_templates/tokenizers.json is measured again on the file its
provenance names, and a GGUF whose name and templates say nothing is still led to its family."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gguftpl.gguf.reader import read_header
from gguftpl.gguf.templateset import load_templateset
from gguftpl.upstream.catalog import catalog_dir, load_catalog, match_catalog
from gguftpl.upstream.discover import discover_upstream
from gguftpl.upstream.fingerprint import TOKENIZERS_FILE, fingerprint, match_family

QWEN = "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf"
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>'"
    " + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _families() -> list[dict[str, Any]]:
    doc = json.loads((catalog_dir() / TOKENIZERS_FILE).read_text(encoding="utf-8"))
    return list(doc["families"])


@pytest.mark.parametrize("family", _families(), ids=lambda f: f["family"])
def test_each_family_is_measured_again_on_its_provenance_file(family: dict[str, Any], corpus_file: Any) -> None:
    from fetch_corpus import FILES

    prov = family["provenance"]
    assert FILES[prov["measured_on"]][1] == prov["sha256"]  # the file named is the one fetched and pinned
    ts = load_templateset(read_header(corpus_file(prov["measured_on"])))
    fp = fingerprint(ts)
    assert fp is not None and fp.to_dict() == family["fingerprint"]
    assert match_family(fp, load_catalog().families)[0].family == family["family"]  # type: ignore[union-attr]


def test_families_are_distinct_and_entries_name_known_families() -> None:
    cat = load_catalog()
    parts = [(f.fingerprint.lineage(), f.fingerprint.added) for f in cat.families]
    assert len(set(parts)) == len(parts)
    known = {f.family for f in cat.families}
    assert {e.family for e in cat.entries if e.family} <= known
    assert [e.repo_id for e in cat.by_family("Qwen2.5")] == ["Qwen/Qwen2.5-7B-Instruct"]


def test_a_renamed_qwen_with_a_replaced_template_is_matched_by_tokenizer(corpus_file: Any, tmp_path: Any) -> None:
    from gguftpl.patching import PatchOptions, patch_templates

    src = corpus_file(QWEN)
    broken = tmp_path / "renamed.gguf"
    patch_templates(src, broken, set_templates={"default": CHATML}, options=PatchOptions(audit=False))
    ts = load_templateset(read_header(broken))
    # the name is no catalog repo's and the ChatML default is no catalog template
    entry, how = match_catalog(ts, load_catalog())
    assert entry is not None and entry.repo_id == "Qwen/Qwen2.5-7B-Instruct"
    assert how.startswith("matched by tokenizer: Qwen2.5")
    found = discover_upstream(ts)
    assert found.entry is entry and found.repo == "Qwen/Qwen2.5-7B-Instruct"


def test_the_original_is_matched_by_template_and_named_by_family(corpus_file: Any) -> None:
    repo_and_how = discover_upstream(load_templateset(read_header(corpus_file(QWEN))))
    assert repo_and_how.repo == "Qwen/Qwen2.5-7B-Instruct"
    assert "sha256" in repo_and_how.how and "Qwen2.5 family" in repo_and_how.how


def test_same_lineage_other_release_is_not_matched(corpus_file: Any) -> None:
    # llama-cpp-python's qwen35 vocab: Qwen's vocabulary and merges, 3 added tokens, pre-tokenizer 'qwen35'
    ts = load_templateset(read_header(corpus_file("ggml-vocab-qwen35.gguf")))
    family, how = match_family(fingerprint(ts), load_catalog().families)
    assert family is None and "another release" in how and "Qwen2.5" in how


def test_a_family_without_catalog_templates_is_named_but_offers_nothing(corpus_file: Any) -> None:
    ts = load_templateset(read_header(corpus_file("ggml-vocab-llama-bpe.gguf")))
    entry, how = match_catalog(ts, load_catalog())
    assert entry is None and "matched by tokenizer: Llama 3" in how and "no templates" in how


def test_no_vocabulary_no_fingerprint(make_gguf: Any) -> None:
    ts = load_templateset(read_header(make_gguf("m.gguf", templates={"default": CHATML})))
    fp = fingerprint(ts)
    assert fp is not None and fp.vocab.count > 0  # the tiny byte-level vocabulary has one
    entry, how = match_catalog(ts, load_catalog())
    assert entry is None and "tokenizer" not in how  # too small for any family: not fingerprinted, not mentioned


def test_a_vocabulary_is_fingerprinted_once_and_another_is_not_taken_for_it(tmp_path: Any) -> None:
    """The fingerprint is kept by the stored bytes of the vocabulary: a file before and after a patch (other
    templates, the same vocabulary) is answered from the first computation, and a vocabulary one token apart
    is computed afresh, as it would be without the memo."""
    from gguftpl.upstream import fingerprint as fpmod
    from tests.conftest import build_gguf

    before = build_gguf(tmp_path / "before.gguf", templates={"default": CHATML})
    after = build_gguf(tmp_path / "after.gguf", templates={"default": CHATML, "tool_use": CHATML + "{{ tools }}"})
    other = build_gguf(
        tmp_path / "other.gguf", templates={"default": CHATML}, specials=("<|im_start|>", "<|im_end|>", "<x>")
    )

    def fp_of(path: Any) -> Any:
        return fingerprint(load_templateset(read_header(path)))

    first = fp_of(before)
    assert first is not None and fpmod._stored_key(read_header(before)) in fpmod._MEMO
    fpmod._MEMO[fpmod._stored_key(read_header(after))] = None  # a planted answer shows the memo is read
    assert fp_of(after) is None
    del fpmod._MEMO[fpmod._stored_key(read_header(after))]
    assert fp_of(after) == first  # the same stored vocabulary, whatever the templates
    h = read_header(other)
    assert fp_of(other) != first and fp_of(other) == fpmod._fingerprint(load_templateset(h), h)
