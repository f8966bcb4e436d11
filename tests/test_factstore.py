"""The on-disk facts cache: facts read back equal, a second run renders nothing, a damaged or unwritable
cache is a miss and never an error, entries are private to their owner."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from gguftpl.audit import AuditOptions, audit_paths
from gguftpl.auditcache import AnalysisCache
from gguftpl.templates import factstore
from gguftpl.templates.factstore import FactsStore
from gguftpl.templates.gather import gather_facts
from tests.conftest import CHATML


def _key(text: str) -> factstore.FactsKey:
    from gguftpl.gguf.templateset import sha256_text

    return (sha256_text(text), "<s>", "</s>", False, ())


def test_facts_read_back_equal(tmp_path: Path) -> None:
    facts = gather_facts(CHATML, bos_token="<s>", eos_token="</s>")
    FactsStore(tmp_path)[_key(CHATML)] = facts
    again = FactsStore(tmp_path)  # a new process: nothing in memory
    assert again[_key(CHATML)] == facts
    assert again.disk_hits == 1
    (entry,) = [p for p in tmp_path.rglob("*.json")]
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


def test_a_second_audit_renders_nothing(tmp_path: Path, make_gguf, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_gguf("m.gguf", templates={"default": CHATML + "{# store #}"})
    store_dir = tmp_path / "cache"
    first = audit_paths([path], AuditOptions(engine="hf-only"), cache=AnalysisCache(FactsStore(store_dir)))

    from gguftpl import analysis

    def no_render(*args: object, **kwargs: object) -> None:
        raise AssertionError("gathered again although the facts were on disk")

    monkeypatch.setattr(analysis, "gather_facts", no_render)
    store = FactsStore(store_dir)
    second = audit_paths([path], AuditOptions(engine="hf-only"), cache=AnalysisCache(store))
    assert store.disk_hits == 1
    assert [f.to_dict() for f in second.findings] == [f.to_dict() for f in first.findings]
    assert second.files[0].templates == first.files[0].templates


def test_a_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    facts = gather_facts(CHATML)
    FactsStore(tmp_path)[_key(CHATML)] = facts
    for entry in tmp_path.rglob("*.json"):
        entry.write_text('{"name": 1, "truncated', encoding="utf-8")
    store = FactsStore(tmp_path)
    assert store.get(_key(CHATML)) is None
    with pytest.raises(KeyError):
        store[_key(CHATML)]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_an_unwritable_folder_is_only_a_miss(tmp_path: Path) -> None:
    tmp_path.chmod(0o500)
    try:
        store = FactsStore(tmp_path / "facts")
        store[_key(CHATML)] = gather_facts(CHATML)  # no error
        assert store.disk_writes == 0
    finally:
        tmp_path.chmod(0o700)


def test_a_file_in_the_way_is_only_a_miss(tmp_path: Path) -> None:
    blocker = tmp_path / "facts"
    blocker.write_text("not a folder", encoding="utf-8")
    store = FactsStore(blocker)
    store[_key(CHATML)] = gather_facts(CHATML)
    assert store.disk_writes == 0 and blocker.read_text(encoding="utf-8") == "not a folder"
    assert store[_key(CHATML)].name == "default"  # still served from memory


def test_the_key_covers_the_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FactsStore(tmp_path)[_key(CHATML)] = gather_facts(CHATML)
    monkeypatch.setattr(factstore, "_CODE", "another version of gguftpl")
    assert FactsStore(tmp_path).get(_key(CHATML)) is None


def test_cache_folder_honours_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GGUFTPL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert factstore.cache_folder() == tmp_path / "gguftpl" / "facts"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # the spec says: ignore a relative one
    assert factstore.cache_folder() == Path.home() / ".cache" / "gguftpl" / "facts"
    monkeypatch.setenv("GGUFTPL_CACHE_DIR", str(tmp_path / "own"))
    assert factstore.cache_folder() == tmp_path / "own" / "facts"


def test_the_key_covers_the_special_tokens_passed_to_templates(make_gguf) -> None:
    """Two files with the same template and bos/eos but another separator token are two gatherings: transformers
    passes ``sep_token`` (and unk/pad/cls/mask) to the template."""
    from gguftpl.analysis import gather_set
    from gguftpl.gguf.reader import ValueType, read_header
    from gguftpl.gguf.templateset import load_templateset, template_special_tokens
    from gguftpl.gguf.tinymodel import byte_level_vocab
    from gguftpl.gguf.writer import Typed
    from gguftpl.templates import probes

    specials = ("<|im_start|>", "<|im_end|>", "<sep>", "<cls>")
    toks, _types, _merges = byte_level_vocab(specials)
    template = "{% for m in messages %}{{ m.content + sep_token }}{% endfor %}"
    memo: dict[factstore.FactsKey, Any] = {}
    for sep in ("<sep>", "<cls>"):
        kv = {
            "tokenizer.ggml.seperator_token_id": Typed(ValueType.UINT32, toks.index(sep)),
            "tokenizer.ggml.cls_token_id": Typed(ValueType.UINT32, toks.index("<cls>")),
        }
        path = make_gguf(f"{sep[1:-1]}.gguf", templates={"default": template}, specials=specials, extra_kv=kv)
        tset = load_templateset(read_header(path))
        assert template_special_tokens(tset) == {"sep_token": sep, "cls_token": "<cls>"}
        facts = gather_set(tset, memo=memo)
        assert facts.gathered == 1
        (t,) = facts.templates
        assert t.special_tokens == {"sep_token": sep, "cls_token": "<cls>"}
        assert t.prompts["plain"] == probes.CANARY_USER + sep
    assert len(memo) == 2


def test_file_facts_are_kept_per_metadata_and_read_back_exactly(tmp_path: Path, make_gguf) -> None:
    """Upstream discovery and the vocabulary's UTF-8 check are kept per file's raw metadata: a second run
    reads them back (same upstream, same GT001 offset), and a file whose vocabulary bytes differ is judged
    afresh, never given another file's answer."""
    good = make_gguf("Hermes-2-Pro-Mistral-7B.gguf", templates={"default": CHATML})
    bad = make_gguf("spoiled.gguf", templates={"default": CHATML})
    data = bad.read_bytes()
    at = data.index(b"<tool_call>") + 1
    bad.write_bytes(data[:at] + b"\xff" + data[at + 1 :])
    store_dir = tmp_path / "cache"

    def run() -> list[Any]:
        return audit_paths(
            [good, bad], AuditOptions(engine="hf-only"), cache=AnalysisCache(FactsStore(store_dir))
        ).files

    first, second = run(), run()
    assert len(list((store_dir / "files").rglob("*.json"))) == 2
    for a, b in zip(first, second, strict=True):
        assert (a.upstream_repo, a.upstream_how) == (b.upstream_repo, b.upstream_how)
        assert [(f.code, f.message) for f in a.findings] == [(f.code, f.message) for f in b.findings]
    assert first[0].upstream_repo == "NousResearch/Hermes-2-Pro-Mistral-7B"
    assert any(f.code == "GT001" and f"at byte {at}" in f.message for f in second[1].findings)
    assert not any(f.code == "GT001" for f in second[0].findings)
