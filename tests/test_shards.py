"""Local split GGUFs are read through their first shard; remote headers use the raw-metadata cache level."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gguftpl.audit import AuditOptions, audit_file, audit_paths, collect_paths
from gguftpl.auditcache import AnalysisCache
from gguftpl.cli import main_group
from gguftpl.errors import GGUFFormatError
from gguftpl.gguf.open import MissingFirstShardError, open_header
from gguftpl.gguf.reader import ValueType
from gguftpl.gguf.writer import Typed, write_gguf
from gguftpl.repo.audit import audit_remote_file
from tests.conftest import CHATML, build_gguf
from tests.hubserver import HubServer


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main_group, list(args))


def split_kv(no: int, count: int, tensors: int) -> dict[str, Any]:
    # the keys and types llama.cpp's gguf-split writes into every shard
    return {
        "split.no": Typed(ValueType.UINT16, no),
        "split.count": Typed(ValueType.UINT16, count),
        "split.tensors.count": Typed(ValueType.INT32, tensors),
    }


def make_split(folder: Path, stem: str = "model", count: int = 3, first: bool = True) -> list[Path]:
    """Shard 1 carries the whole metadata (and the tiny model's tensors); later shards only split.* keys,
    as gguf-split leaves them."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{stem}-{n:05d}-of-{count:05d}.gguf" for n in range(1, count + 1)]
    if first:
        build_gguf(paths[0], templates={"default": CHATML}, extra_kv=split_kv(0, count, 9))
    for n, p in enumerate(paths[1:], start=1):
        write_gguf(p, split_kv(n, count, 9), [])
    return paths


def codes(fa: Any) -> list[str]:
    return [f.code for f in fa.findings]


def test_later_shard_is_audited_through_the_first(tmp_path: Path) -> None:
    s1, s2, _ = make_split(tmp_path / "m")
    direct = audit_file(s1)
    via = audit_file(s2)
    assert via.path == str(s1) and via.error is None
    assert codes(via) == codes(direct) and via.templates and via.templates[0].sha256 == direct.templates[0].sha256
    assert len(via.notes) == 1 and s2.name in via.notes[0] and s1.name in via.notes[0]
    assert direct.notes == []


def test_missing_first_shard_is_a_finding_not_the_end_of_the_run(tmp_path: Path, make_gguf: Any) -> None:
    _, s2, s3 = make_split(tmp_path / "m", first=False)
    other = make_gguf("other.gguf", templates={"default": CHATML})
    run = audit_paths([tmp_path / "m", other])
    # the two orphan shards count once; the other file is still audited
    assert [fa.path for fa in run.files] == [str(s2), str(other)]
    orphan = run.files[0]
    assert codes(orphan) == ["GT555"] and "00001-of-00003" in orphan.findings[0].message
    assert orphan.error is not None and run.files[1].error is None
    assert run.exit_code() == 1
    assert audit_paths([s3], AuditOptions(ignore=["GT555"])).files[0].findings == []


def test_directory_of_shards_audits_shard_one_once(tmp_path: Path, make_gguf: Any) -> None:
    s1, s2, s3 = make_split(tmp_path / "m")
    single = make_gguf("m/single.gguf", templates={"default": CHATML})
    assert collect_paths([tmp_path / "m"]) == [str(s1), str(single)]
    # naming shards explicitly, in any order, still reads the set once (through shard 1)
    assert collect_paths([s3, s1, s2]) == [str(s3)]
    cache = AnalysisCache()
    run = audit_paths([s3, tmp_path / "m"], cache=cache)
    assert [fa.path for fa in run.files] == [str(s1), str(single)]
    assert run.files[0].notes and "shard 3 of 3" in run.files[0].notes[0]


def test_audit_cli_notes_in_text_and_json(tmp_path: Path) -> None:
    s1, s2, _ = make_split(tmp_path / "m")
    res = invoke("audit", str(s2), "--exit-zero", "--no-color")
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0] == str(s1)
    assert f"  note: {s2.name} is shard 2 of 3" in res.output
    doc = json.loads(invoke("audit", str(s2), "--format", "json", "--exit-zero").output)
    (fd,) = doc["files"]
    assert fd["path"] == str(s1) and "reading " + s1.name in fd["notes"][0]
    # an unsplit file carries no notes key (the JSON report is unchanged for it)
    assert "notes" not in json.loads(invoke("audit", str(s1), "--format", "json", "--exit-zero").output)["files"][0]


def test_inspect_later_shard_reads_the_first(tmp_path: Path) -> None:
    s1, s2, _ = make_split(tmp_path / "m")
    header, label, extra = open_header(str(s2))
    assert label == str(s1) and header.get("tokenizer.chat_template") == CHATML
    assert extra is not None and extra["shard"] == {"number": 2, "count": 3, "first": str(s1)}
    res = invoke("inspect", str(s2), "--format", "json")
    assert res.exit_code == 0, res.output
    (info,) = json.loads(res.output)["files"]
    assert info["path"] == str(s1) and "remote" not in info and info["split"]["notes"]
    assert info["templates"][0]["name"] == "default"
    text = invoke("inspect", str(s2)).output
    assert "note: " + s2.name + " is shard 2 of 3" in text
    raw = invoke("inspect", str(s2), "--template", "default", "--raw")
    assert raw.exit_code == 0 and raw.output == CHATML


def test_inspect_missing_first_shard_is_one_line_exit_2(tmp_path: Path) -> None:
    _, s2, _ = make_split(tmp_path / "m", first=False)
    with pytest.raises(MissingFirstShardError) as err:
        open_header(str(s2))
    assert isinstance(err.value, GGUFFormatError) and err.value.shard.number == 2
    res = invoke("inspect", str(s2))
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gguftpl: error: ") and "is missing" in lines[0]


def test_header_saying_it_is_not_the_first_shard_gets_a_note(tmp_path: Path) -> None:
    # a shard renamed so the file name no longer tells: split.no in the header still does
    p = tmp_path / "renamed.gguf"
    write_gguf(p, split_kv(1, 2, 9), [])
    fa = audit_file(p)
    assert any("split.no is 1" in n for n in fa.notes)


def test_second_remote_quant_is_a_header_cache_hit(hub: HubServer, make_gguf: Any) -> None:
    q4 = make_gguf(
        "m-Q4_K_M.gguf", templates={"default": CHATML}, extra_kv={"general.name": "m", "general.file_type": 15}
    )
    q8 = make_gguf("m-Q8_0.gguf", templates={"default": CHATML}, extra_kv={"general.name": "m", "general.file_type": 7})
    other = make_gguf(
        "o.gguf", templates={"default": CHATML}, extra_kv={"general.name": "m", "general.file_type": 7, "x.y": 1}
    )
    for p in (q4, q8, other):
        hub.add_file("org/m-GGUF", p.name, p)
    cache = AnalysisCache()
    a, rr = audit_remote_file(f"hf://org/m-GGUF/{q4.name}", cache=cache)
    assert rr is not None and (cache.misses, cache.hits, cache.header_hits) == (1, 0, 0)
    b, _ = audit_remote_file(f"hf://org/m-GGUF/{q8.name}", cache=cache)
    assert b.cached and (cache.misses, cache.hits, cache.header_hits) == (1, 1, 1)
    assert codes(a) == codes(b) and b.error is None
    # the remote and local readings of one file share the raw-metadata key (the last file's, which is all the
    # cache keeps: memory bounded by the largest file, issue 27 item 9)
    local = audit_file(q4, cache=cache)
    assert local.cached and cache.header_hits == 2
    # metadata that differs beyond the per-quant keys is not taken from the raw level
    audit_remote_file(f"hf://org/m-GGUF/{other.name}", cache=cache)
    assert cache.header_hits == 2
