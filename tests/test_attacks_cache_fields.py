"""Issue 27 items 4 and 5, field by field: every field of a real cache entry deleted, or given a value of the wrong
type, in an entry whose tag verifies (what a buggy gguftpl, or anyone holding the secret, would write). Each is
a damaged entry: a miss, removed, and gathered again; never an error and never another verdict or fix line than
``--no-cache`` gives. (A field missing was once read as its default: a dropped ``llamacpp`` read as "llama.cpp
not asked".)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_attacks_cache import (
    SAMPLE,
    _keys_of,
    _wrong,
    entries,
    findings,
    no_cache,
    read_entry,
    run,
    sealed_write,
    verdict,
)

MakeGGUF = Callable[..., Path]
Path_ = tuple[str | int, ...]


@pytest.fixture
def warm(tmp_path: Path) -> Path:
    """A cache folder that has seen the ChatML sample once (its verdict the same as ``--no-cache``)."""
    cache = tmp_path / "cache"
    assert verdict(run(cache, "audit", "--format", "json", SAMPLE)) == no_cache(SAMPLE)
    assert entries(cache, "templates") and entries(cache, "files")
    return cache


def _fields(tp: Any, value: Any, path: Path_ = ()) -> Iterator[tuple[Path_, bool]]:
    """(path, a record's field) of every value under ``value``, read as the annotated type ``tp``: True for the
    fields of a record (a dataclass: deleting one damages it), False for an item of a list or a mapping (one
    fewer is another value, which only the tag can tell)."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        for f in dataclasses.fields(tp):
            if f.name in value:
                yield (*path, f.name), True
                yield from _fields(hints[f.name], value[f.name], (*path, f.name))
        return
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is not None:
            (arm,) = [a for a in args if a is not type(None)]
            yield from _fields(arm, value, path)
    elif origin is tuple:
        for i, item in enumerate(value):
            yield (*path, i), False
            yield from _fields(args[0] if args[-1] is Ellipsis else args[i], item, (*path, i))
    elif origin is dict:
        for k, item in value.items():
            yield (*path, k), False
            yield from _fields(args[1], item, (*path, k))


def _damaged(data: Any, path: Path_, how: str) -> Any:
    """A deep copy of ``data`` with the value at ``path`` deleted or given the wrong type."""
    out = json.loads(json.dumps(data))
    parent = out
    for step in path[:-1]:
        parent = parent[step]
    if how == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = _wrong(parent[path[-1]])
    return out


def _template_damages(data: dict[str, Any]) -> list[tuple[Path_, str]]:
    from gguftpl.templates.facts import TemplateFacts

    found = list(_fields(TemplateFacts, data))
    return [(p, "delete") for p, field in found if field] + [(p, "swap") for p, _ in found]


def test_every_field_deleted_or_swapped_is_read_as_a_miss(warm: Path) -> None:
    """All of them, through the store the audit reads (fast: no render): none is read back, each is removed."""
    from gguftpl.templates.facts import TemplateFacts
    from gguftpl.templates.factstore import FactsStore

    (path,) = entries(warm, "templates")
    original, good = path.read_bytes(), read_entry(path)
    (key,) = _keys_of(FactsStore(warm / "facts"), TemplateFacts.from_dict(good))
    damages = _template_damages(good)
    assert len(damages) > 250 and any(p == ("llamacpp",) for p, _ in damages)
    read_back = []
    for field, how in damages:
        path.write_bytes(original)
        sealed_write(path, _damaged(good, field, how))
        if FactsStore(warm / "facts").get(key) is not None or path.exists():
            read_back.append((how, field))
    assert not read_back, f"{len(read_back)} of {len(damages)} damaged entries were read back: {read_back[:12]}"


def test_a_record_missing_a_field_is_an_error_not_its_default() -> None:
    """The decoder itself, on every record type the cache holds (Ollama's Go facts too)."""
    from gguftpl.templates.facts import EngineFacts, RenderFailure, _decode

    record = RenderFailure("plain", "error", "boom")
    assert _decode(RenderFailure, dataclasses.asdict(record)) == record
    for name in dataclasses.asdict(record):
        with pytest.raises(TypeError, match=name):
            _decode(RenderFailure, {k: v for k, v in dataclasses.asdict(record).items() if k != name})
    engine = dataclasses.asdict(EngineFacts("ollama"))
    for name in engine:
        with pytest.raises(TypeError):
            _decode(EngineFacts, {k: v for k, v in engine.items() if k != name})


def test_every_field_damaged_gives_the_no_cache_verdict_through_the_command_line(
    tmp_path: Path, make_gguf: MakeGGUF
) -> None:
    """One real GGUF per damage (the sample's ChatML default, told apart by a comment), one real audit of them
    all: every field deleted, and every top-level field given the wrong type, each in one file's entry. The
    verdict, findings and fix line of every file equal those of the audit that gathered them afresh, and of
    ``--no-cache``."""
    from gguftpl.gguf.reader import read_header
    from gguftpl.gguf.templateset import load_templateset

    default = str(load_templateset(read_header(SAMPLE)).templates["default"].text)
    cache = tmp_path / "cache"
    probe = make_gguf("probe.gguf", templates={"default": default})
    assert verdict(run(cache, "audit", "--format", "json", probe))[0] == 1
    (entry,) = entries(cache, "templates")
    shape = read_entry(entry)
    damages = [(p, how) for p, how in _template_damages(shape) if how == "delete" or len(p) == 1]
    assert len(damages) > 100
    texts = [default + "{# damage " + str(i) + " #}" for i in range(len(damages))]
    folder = tmp_path / "models"
    folder.mkdir()
    for i, text in enumerate(texts):
        make_gguf(f"models/m{i:04d}.gguf", templates={"default": text})
    first = run(cache, "audit", "--format", "json", folder, timeout=1800)
    fresh = verdict(first)
    assert fresh[0] == 1 and len(fresh[1]) == len(damages), first.stderr[-2000:]
    by_sha = {read_entry(p)["sha256"]: p for p in entries(cache, "templates")}
    for (field, how), text in zip(damages, texts, strict=True):
        path = by_sha[hashlib.sha256(text.encode()).hexdigest()]
        sealed_write(path, _damaged(read_entry(path), field, how))
    again = run(cache, "audit", "--format", "json", folder, timeout=1800)
    assert "unexpected" not in again.stderr and "Traceback" not in again.stderr, again.stderr[-2000:]
    damaged = verdict(again)
    changed = [damages[i] for i, (a, b) in enumerate(zip(fresh[1], damaged[1], strict=True)) if a != b]
    assert not changed, f"{len(changed)} damaged entries changed a verdict: {changed[:12]}"
    assert damaged[0] == fresh[0]
    some = sorted(folder.iterdir())[:: max(1, len(damages) // 3)]
    assert findings(run(None, "audit", "--no-cache", "--format", "json", *some).stdout) == [
        fresh[1][int(p.stem[1:])] for p in some
    ]


def test_every_field_of_the_file_entry_deleted_or_swapped(warm: Path) -> None:
    """The per-file entry (upstream repo, how it was found, the first invalid UTF-8 byte), each field deleted
    or of the wrong type: the sample's verdict and fix line are ``--no-cache``'s."""
    (path,) = entries(warm, "files")
    original, good = path.read_bytes(), read_entry(path)
    expected = no_cache(SAMPLE)
    for field in sorted(good):
        for how in ("delete", "swap"):
            path.write_bytes(original)
            sealed_write(path, _damaged(good, (field,), how))
            res = run(warm, "audit", "--format", "json", SAMPLE)
            assert verdict(res) == expected, (field, how, res.stderr[-1000:])
            assert read_entry(path) == good, (field, how)  # removed, and written again whole


# --------------------------------------------------------------------------------------------- item 4

EVIL_REPO = "evil-org/Hermes-2-Pro-Mistral-7B"


def _report(stdout: str) -> list[dict[str, Any]]:
    """Each file's whole JSON report but its timing and cache counters: upstream, findings, fix lines, repair."""
    return [{k: v for k, v in fa.items() if k not in ("seconds", "cached")} for fa in json.loads(stdout)["files"]]


def _steer(cache: Path, path: Path, claims: list[tuple[str | None, str]]) -> None:
    """Each claim sealed into the file's entry in turn (tag and all): the audit's report is ``--no-cache``'s."""
    expected = _report(run(None, "audit", "--no-cache", "--format", "json", path).stdout)
    assert expected[0]["repair"]
    (entry,) = entries(cache, "files")
    good = read_entry(entry)
    for repo, how in claims:
        sealed_write(entry, {**good, "repo": repo, "how": how})
        res = run(cache, "audit", "--format", "json", path)
        assert res.returncode == 1 and EVIL_REPO not in res.stdout, (repo, how, res.stdout[-3000:])
        assert _report(res.stdout) == expected, (repo, how)


def test_a_sealed_file_entry_never_steers_the_fix_line(warm: Path) -> None:
    """Issue 27 item 4: the sample's upstream is found by its model name in the catalog (cheap to find again);
    a file entry naming another repo, tag and all, never makes the fix line ``--from-hub evil-org/...``."""
    _steer(
        warm,
        SAMPLE,
        [
            (EVIL_REPO, "from general.source.url"),
            (EVIL_REPO, f"matched by tokenizer: Llama 2, catalog entry {EVIL_REPO}"),
            ("Qwen/Qwen2.5-7B-Instruct", "matched by tokenizer: Qwen2.5, catalog entry Qwen/Qwen2.5-7B-Instruct"),
            (None, "no general.base_model/source keys"),
        ],
    )


def test_a_sealed_file_entry_never_steers_an_answer_only_the_fingerprint_gives(tmp_path: Path) -> None:
    """A file whose upstream only its tokenizer's fingerprint could tell (a gpt2 vocabulary of 50,000 tokens,
    no metadata or template naming a repo): what the cache says is kept only when it names a catalog entry of a
    family this tokenizer could be. An unknown repo, or a family whose vocabulary is larger than the file's, is
    a damaged entry."""
    from gguftpl.gguf.reader import ValueType
    from gguftpl.gguf.tinymodel import tiny_llama_kv, tiny_llama_tensors
    from gguftpl.gguf.writer import Typed, write_gguf
    from tests.conftest import CHATML

    n = 50_000
    tokens = ["<|im_start|>", "<|im_end|>"] + [f"Ġw{i:x}" for i in range(n - 2)]
    path = tmp_path / "vocab50k.gguf"
    kv = {
        **tiny_llama_kv(),
        "general.name": "no-such-model",
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": Typed(ValueType.ARRAY, tokens, ValueType.STRING),
        "tokenizer.ggml.token_type": Typed(ValueType.ARRAY, [3, 3] + [1] * (n - 2), ValueType.INT32),
        "tokenizer.ggml.merges": Typed(ValueType.ARRAY, [f"Ġw{i:x} {i % 7}" for i in range(n)], ValueType.STRING),
        "tokenizer.ggml.bos_token_id": Typed(ValueType.UINT32, 0),
        "tokenizer.ggml.eos_token_id": Typed(ValueType.UINT32, 1),
        "tokenizer.chat_template": CHATML + "{# not in the catalog #}",
    }
    write_gguf(path, kv, tiny_llama_tensors(n, n_embd=16))
    cache = tmp_path / "cache"
    first = _report(run(cache, "audit", "--format", "json", path).stdout)
    assert first[0]["upstream"]["repo"] is None and "tokenizer" in first[0]["upstream"]["how"], first[0]["upstream"]
    _steer(
        cache,
        path,
        [
            (EVIL_REPO, "from general.source.url"),
            (EVIL_REPO, f"matched by tokenizer: SmolLM2, catalog entry {EVIL_REPO}"),
            ("Qwen/Qwen2.5-7B-Instruct", "matched by tokenizer: Qwen2.5, catalog entry Qwen/Qwen2.5-7B-Instruct"),
        ],
    )


# --------------------------------------------------------------------------------------- Ollama's Go facts


def test_no_cache_never_reads_ollama_s_go_facts_from_the_cache(tmp_path: Path) -> None:
    """An Ollama model (a real store layout, its Go TEMPLATE rendered by Ollama's own Go engine): a sealed
    ``gotemplates`` entry saying that TEMPLATE reads and renders the tools. ``audit --no-cache`` analyses
    afresh: its report is that of a fresh cache (it read the entry, and lost Ollama from the runtimes that
    drop the tools)."""
    import os

    from gguftpl.engines import registry
    from tests.conftest import CHATML, build_gguf
    from tests.ollama_store import CHATML_GO, CHATML_PARAMS, ollama_model

    if not registry.availability("ollama").installed:
        pytest.skip("Ollama's Go engine is not installed")
    home = tmp_path / "home"
    gguf = build_gguf(tmp_path / "src.gguf", templates={"default": CHATML})
    ollama_model(home / ".ollama" / "models", "hermes-test", gguf, template=CHATML_GO, params=CHATML_PARAMS)
    env = {"HOME": str(home), "OLLAMA_MODELS": str(home / ".ollama" / "models")}
    cache = tmp_path / "cache"

    def audit(folder: Path, *flags: str) -> Any:
        res = run(folder, "audit", "--format", "json", *flags, "ollama://hermes-test", env=env, cwd=str(home))
        assert res.returncode == 1, res.stderr[-2000:]
        return _report(res.stdout)

    first = audit(cache)
    (entry,) = [p for p in (cache / "facts").rglob("*.json") if "gotemplates" in p.parts]
    go = read_entry(entry)
    assert go["reads_tools"] is False and go["tools_in_prompt"] is False
    sealed_write(entry, {**go, "reads_tools": True, "tools_in_prompt": True})
    fresh = audit(tmp_path / "fresh", "--no-cache")
    assert fresh == first and "Ollama" in fresh[0]["repair"]["runtimes_dropping_tools"]
    assert audit(cache, "--no-cache") == fresh
    assert os.path.exists(entry) and read_entry(entry)["reads_tools"] is True  # the entry was not even read


def test_no_cache_hashes_a_store_blob_again(tmp_path: Path) -> None:
    """An Ollama blob that no longer matches its name (a byte of its tensor data flipped), and a sealed
    ``digests`` entry, under the blob's current identity, saying it does: ``audit --no-cache`` hashes the blob
    and refuses it, as with a fresh cache."""
    import os

    from gguftpl.templates.cachedisk import CacheFolder
    from tests.conftest import CHATML, build_gguf
    from tests.ollama_store import CHATML_GO, CHATML_PARAMS, ollama_model

    home = tmp_path / "home"
    models = home / ".ollama" / "models"
    gguf = build_gguf(tmp_path / "src.gguf", templates={"default": CHATML})
    ollama_model(models, "hermes-test", gguf, template=CHATML_GO, params=CHATML_PARAMS)
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    blob = models / "blobs" / f"sha256-{digest}"
    with open(blob, "r+b") as fh:
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 0xFF]))
    env = {"HOME": str(home), "OLLAMA_MODELS": str(models)}

    def audit(folder: Path, *flags: str) -> Any:
        return run(folder, "audit", "--format", "json", *flags, "ollama://hermes-test", env=env, cwd=str(home))

    fresh = audit(tmp_path / "fresh", "--no-cache")
    assert fresh.returncode == 2 and "does not match its name" in fresh.stderr, fresh.stderr
    cache = tmp_path / "cache"
    real, st = os.path.realpath(blob), os.stat(blob)
    key = f"{real}\0{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    assert CacheFolder(cache / "facts").write("digests", key, digest)
    assert audit(cache).returncode == 1  # the entry is live (its tag verifies): what --no-cache must not read
    again = audit(cache, "--no-cache")
    assert (again.returncode, again.stderr_lines) == (fresh.returncode, fresh.stderr_lines)
