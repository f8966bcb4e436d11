"""The audit library: path collection, rule selection, unreadable files as findings, the analysis cache,
and auditing a header from any source."""

from __future__ import annotations

import gc
import os
import shutil
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gguftpl.audit import AuditOptions, RuleFilter, audit_file, audit_header, audit_paths, collect_paths
from gguftpl.auditcache import AnalysisCache
from gguftpl.errors import GGUFFormatError, UsageError
from gguftpl.findings import Severity
from gguftpl.gguf.reader import read_header
from tests.conftest import CHATML

# A template that serialises the tool schemas (the shape of Hermes' tool_use, written here from scratch).
TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nYou may call these tools: <tools>{{ tools | tojson }}</tools>\n"
    'Answer with <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>\n{% endif %}'
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message.get('tool_calls') %}{% for call in message['tool_calls'] %}<tool_call>\n"
    "{{ call['function'] | tojson }}\n</tool_call>{% endfor %}"
    "{% elif message['content'] is not none %}{{ message['content'] }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

MakeGGUF = Callable[..., Path]


def garbage(path: Path, data: bytes = b"NOPE, not a model at all") -> Path:
    path.write_bytes(data)
    return path


# --- rule selection -----------------------------------------------------------------------------------


def test_rule_filter_prefixes_commas_and_specificity() -> None:
    everything = RuleFilter()
    assert everything("GT001") and everything("GT002")
    assert RuleFilter(["GT001,GT002"])("GT002")
    assert not RuleFilter("GT001")("GT002")
    assert RuleFilter(["gt0"])("GT002")  # case-insensitive
    # the most specific selector wins; ignore wins a tie
    narrow = RuleFilter(select=["GT001"], ignore=["GT0"])
    assert narrow("GT001") and not narrow("GT002")
    broad = RuleFilter(select=["GT0"], ignore=["GT001"])
    assert not broad("GT001") and broad("GT002")
    assert not RuleFilter(select=["GT001"], ignore=["GT001"])("GT001")
    assert not RuleFilter(ignore=["ALL"])("GT001")
    assert RuleFilter(select=["ALL"], ignore=["GT0"])("GT101") is True
    assert RuleFilter(select=[])("GT001")  # an empty --select restricts nothing


@pytest.mark.parametrize("selector", ["GT9", "XYZ", "GT0011"])
def test_unknown_selector_is_a_usage_error(selector: str) -> None:
    with pytest.raises(UsageError, match="unknown rule selector"):
        RuleFilter(select=[selector])
    with pytest.raises(UsageError):
        RuleFilter(ignore=[selector])


# --- paths ----------------------------------------------------------------------------------------------


def test_collect_paths_recurses_sorts_and_dedups(tmp_path: Path) -> None:
    (tmp_path / "d" / "b").mkdir(parents=True)
    (tmp_path / "d" / "a").mkdir()
    for rel in ("d/b/z.gguf", "d/a/y.GGUF", "d/x.gguf", "d/notes.txt", "d/a/model.gguf.part"):
        (tmp_path / rel).write_bytes(b"x")
    got = collect_paths([tmp_path / "d" / "x.gguf", tmp_path / "d"])
    rel = [str(Path(p).relative_to(tmp_path)) for p in got]
    assert rel == ["d/x.gguf", "d/a/y.GGUF", "d/b/z.gguf"]
    # a file given explicitly is audited whatever its name
    assert collect_paths([tmp_path / "d" / "notes.txt"]) == [str(tmp_path / "d" / "notes.txt")]
    (tmp_path / "empty").mkdir()  # an empty target must not pass CI (issue 14, item 4)
    with pytest.raises(UsageError, match="no GGUF files"):
        collect_paths([tmp_path / "empty"])


def test_missing_path_or_unknown_engine_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="GGUF file not found"):
        audit_paths([tmp_path / "missing.gguf"])
    with pytest.raises(UsageError, match="unknown analysis engine"):
        audit_paths([tmp_path], AuditOptions(engine="nope"))


# --- unreadable files --------------------------------------------------------------------------------------


def test_unreadable_files_are_findings_and_the_run_goes_on(tmp_path: Path, make_gguf: MakeGGUF) -> None:
    good = make_gguf("good.gguf", templates={"default": CHATML})
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(good.read_bytes()[:100])
    paths = [garbage(tmp_path / "junk.gguf"), garbage(tmp_path / "empty.gguf", b""), truncated, good]
    run = audit_paths(paths)
    assert [Path(fa.path).name for fa in run.files] == ["junk.gguf", "empty.gguf", "truncated.gguf", "good.gguf"]
    for fa in run.files[:3]:
        assert fa.error
        assert [f.code for f in fa.findings] == ["GT001"]
        f = fa.findings[0]
        assert f.severity is Severity.ERROR and f.location.file == fa.path
    assert "4e 4f 50 45" in run.files[0].findings[0].evidence  # the bytes b"NOPE"
    assert run.files[1].findings[0].evidence == "empty file"
    with pytest.raises(GGUFFormatError) as reader_says:
        read_header(truncated)
    assert run.files[2].findings[0].message == str(reader_says.value)
    assert run.files[3].error is None and run.files[3].templates
    assert all(f.code != "GT001" for f in run.files[3].findings)
    assert run.exit_code("error") == 2 and run.exit_code("error", exit_zero=True) == 2  # bad input
    assert [Path(fa.path).name for fa in run.unreadable] == ["junk.gguf", "empty.gguf", "truncated.gguf"]
    assert audit_paths(paths[:3], AuditOptions(ignore=["GT001"])).exit_code("info") == 0


def test_audit_failure_is_a_finding_not_a_crash() -> None:
    # Something that is not a GGUF header at all: the template set cannot be built from it.
    fa = audit_header(object(), "weird-source")
    assert fa.error
    assert [f.code for f in fa.findings] == ["GT002"]
    assert fa.findings[0].location.file == "weird-source"
    with pytest.raises(AttributeError):
        audit_header(object(), "weird-source", AuditOptions(strict=True))


# --- the analysis, the cache and header sources ---------------------------------------------------------


def test_header_from_any_source_is_labelled_as_asked(make_gguf: MakeGGUF) -> None:
    path = make_gguf("chatml.gguf", templates={"default": CHATML})
    header = read_header(path)
    fa = audit_header(header, "hf://org/repo/chatml.gguf")
    assert fa.path == "hf://org/repo/chatml.gguf"
    assert [t.name for t in fa.templates] == ["default"]
    assert fa.findings, "a ChatML template without tools should give findings"
    for f in fa.findings:
        assert f.location.file == "hf://org/repo/chatml.gguf"
        assert str(path) not in f.message + f.evidence + (f.fix or "")


def test_templates_are_analysed_once_per_distinct_set(tmp_path: Path, make_gguf: MakeGGUF) -> None:
    first = make_gguf("q4.gguf", templates={"default": CHATML})
    folder = tmp_path / "quants"
    folder.mkdir()
    names = [f"model-Q{i}.gguf" for i in range(12)]
    for name in names:
        shutil.copyfile(first, folder / name)
    make_gguf("quants/other.gguf", templates={"default": CHATML, "tool_use": TOOLS_TEMPLATE})
    cache = AnalysisCache()
    run = audit_paths([folder], cache=cache)
    assert len(run.files) == 13
    assert run.analyses == 2 and cache.misses == 2 and cache.hits == 11
    copies = [fa for fa in run.files if Path(fa.path).name in names]
    assert sum(not fa.cached for fa in copies) == 1
    # shared findings, each labelled with its own file
    ref = copies[0]
    for fa in copies:
        assert [(f.code, f.message.replace(fa.path, "<F>")) for f in fa.findings] == [
            (f.code, f.message.replace(ref.path, "<F>")) for f in ref.findings
        ]
        for f in fa.findings:
            assert f.location.file == fa.path
            if f.fix and "gguftpl" in f.fix and ".gguf" in f.fix:
                assert fa.path in f.fix
    # a second run with the same cache analyses nothing
    again = audit_paths([folder], cache=cache)
    assert again.analyses == 0


def test_same_templates_different_vocab_are_analysed_separately(make_gguf: MakeGGUF) -> None:
    a = make_gguf("a.gguf", templates={"default": TOOLS_TEMPLATE})
    b = make_gguf("b.gguf", templates={"default": TOOLS_TEMPLATE}, specials=("<|im_start|>", "<|im_end|>"))
    run = audit_paths([a, b])
    assert run.analyses == 2


def test_select_and_ignore_apply_to_analysis_findings(make_gguf: MakeGGUF) -> None:
    path = make_gguf("chatml.gguf", templates={"default": CHATML})
    full = audit_file(path)
    codes = sorted({f.code for f in full.findings})
    assert codes
    first = codes[0]
    only = audit_file(path, AuditOptions(select=[first]))
    assert {f.code for f in only.findings} == {first}
    rest = audit_file(path, AuditOptions(ignore=[first]))
    assert first not in {f.code for f in rest.findings}
    assert len(rest.findings) + len(only.findings) == len(full.findings)


def test_quants_of_one_model_share_the_raw_metadata_level(make_gguf: MakeGGUF) -> None:
    """Files that differ only in per-quant keys skip building a template set; this is sound only because
    those keys never change the template set, which is checked here too."""
    import dataclasses

    from gguftpl.gguf.templateset import load_templateset

    q4 = make_gguf(
        "m-Q4_K_M.gguf",
        templates={"default": CHATML},
        extra_kv={
            "general.name": "m",
            "general.file_type": 15,
            "general.quantization_version": 2,
            "quantize.imatrix.file": "a.dat",
        },
    )
    q8 = make_gguf("m-Q8_0.gguf", templates={"default": CHATML}, extra_kv={"general.name": "m", "general.file_type": 7})
    a, b = load_templateset(read_header(q4)), load_templateset(read_header(q8))
    for f in dataclasses.fields(a):
        if f.name != "path" and not f.name.startswith("_"):
            assert getattr(a, f.name) == getattr(b, f.name), f.name
    cache = AnalysisCache()
    run = audit_paths([q4, q8], cache=cache)
    assert run.analyses == 1 and cache.header_hits == 1
    assert [f.code for f in run.files[0].findings] == [f.code for f in run.files[1].findings]
    # a change anywhere else in the metadata is not taken from the raw level
    other = make_gguf(
        "m-other.gguf", templates={"default": CHATML}, extra_kv={"general.name": "m", "general.file_type": 7, "x.y": 1}
    )
    audit_paths([other], cache=cache)
    assert cache.header_hits == 1


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can list any folder")
def test_unlistable_folder_is_an_error_not_a_silent_skip(tmp_path: Path) -> None:
    locked = tmp_path / "d" / "locked"
    locked.mkdir(parents=True)
    (locked / "m.gguf").write_bytes(b"x")
    locked.chmod(0)
    try:
        with pytest.raises(PermissionError):
            collect_paths([tmp_path / "d"])
    finally:
        locked.chmod(0o755)


class _Recording(AnalysisCache):
    """An AnalysisCache that keeps a weak reference to everything it loads for each file (the header, its
    template set and vocabulary, the facts), so a test can see what outlives the file's report."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[list[weakref.ref[Any]]] = []

    def load(self, header: Any, engine: str) -> Any:
        loaded, seen = super().load(header, engine)
        self.refs.append([weakref.ref(o) for o in (header, loaded.tset, loaded.vocab, loaded.facts, loaded)])
        return loaded, seen


def test_a_folder_audit_keeps_one_file_s_facts_at_a_time(tmp_path: Path, make_gguf: MakeGGUF) -> None:
    """Issue 27 item 9: memory bounded by the largest file, not the folder (100 GGUFs of 262k tokens held 4.67 GB
    when every file's loaded facts were kept): once a file is reported, nothing loaded for it stays alive, but
    for the last file's (kept for the next quant of the same model)."""
    (tmp_path / "models").mkdir()
    for i in range(4):
        make_gguf(f"models/m{i}.gguf", templates={"default": CHATML}, extra_kv={"general.name": f"model {i}"})
    cache = _Recording()
    run = audit_paths([tmp_path / "models"], cache=cache)
    assert len(run.files) == 4 and len(cache.refs) == 4 and cache.header_hits == 0
    gc.collect()
    alive = [i for i, refs in enumerate(cache.refs) if any(r() is not None for r in refs)]
    assert alive == [3], f"the loaded facts of files {alive} outlived their reports"
    # the report itself holds what it shows, and still shows it
    assert all(fa.findings and fa.error is None for fa in run.files)
