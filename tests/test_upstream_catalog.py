"""The bundled catalog: integrity, provenance, one copy on disk, discovery (offline)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gguftpl.errors import HubError
from gguftpl.gguf.reader import read_header
from gguftpl.gguf.templateset import load_templateset
from gguftpl.upstream.catalog import (
    STATUSES,
    catalog_dir,
    catalog_upstream,
    fallback_entry,
    load_catalog,
)
from gguftpl.upstream.discover import find_upstream_repo, repo_from_url
from tests.conftest import CHATML

# sha256 values as recorded independently in the research notes (corpus/upstream/SOURCES.md)
SOURCES_SHA = {
    (
        "NousResearch/Hermes-2-Pro-Llama-3-8B",
        "tool_use",
    ): "7ce09d55d3690e06c70b5c07228cc7e8c99c43a23cdc027762be4011efcdea6c",
    (
        "NousResearch/Hermes-3-Llama-3.1-8B",
        "tool_use",
    ): "7ce09d55d3690e06c70b5c07228cc7e8c99c43a23cdc027762be4011efcdea6c",
    (
        "NousResearch/Hermes-2-Pro-Mistral-7B",
        "tool_use",
    ): "7ce09d55d3690e06c70b5c07228cc7e8c99c43a23cdc027762be4011efcdea6c",
    (
        "NousResearch/Hermes-2-Pro-Mistral-7B",
        "default",
    ): "a805e50fed68938a076b07e2e602639611b50b1ced0e50f11eb92f1ba25be4dc",
}


ROOT = Path(__file__).resolve().parent.parent


def test_one_catalog_on_disk() -> None:
    """The catalog the code reads is the reviewed top-level folder, and no copy of it exists elsewhere."""
    src = ROOT / "upstream_templates"
    if not (src / "index.json").is_file():
        pytest.skip("not a source checkout")
    assert catalog_dir().resolve() == src.resolve()
    copies = [p.parent for p in ROOT.glob("gguftpl/**/index.json")]
    assert copies == [], f"a second catalog inside the package: {copies}"
    for name in ("README.md", "LICENSE.llama.cpp"):  # provenance stays with the templates
        assert (src / name).is_file(), name


def test_every_template_matches_its_index_entry() -> None:
    cat = load_catalog()
    assert len(cat.entries) >= 10
    rank = {s: i for i, s in enumerate(STATUSES)}
    for e in cat.entries:
        assert e.templates, e.repo_id
        assert e.status == max((t.status for t in e.templates.values()), key=rank.__getitem__)
        assert e.model_license
        for name, t in e.templates.items():
            data = (cat.root / t.file).read_bytes()
            assert hashlib.sha256(data).hexdigest() == t.sha256 and len(data) == t.length, t.file
            assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == t.git_blob_sha1, t.file
            assert t.status in STATUSES and t.source
            assert e.text(name) == data.decode("utf-8")
    ids = [e.repo_id.lower() for e in cat.entries]
    assert len(ids) == len(set(ids))


def test_hermes_entries_match_the_recorded_provenance() -> None:
    cat = load_catalog()
    for (repo, name), sha in SOURCES_SHA.items():
        entry = cat.get(repo)
        assert entry is not None and entry.templates[name].sha256 == sha
    mistral = cat.get("NousResearch/Hermes-2-Pro-Mistral-7B")
    assert mistral is not None
    assert mistral.templates["tool_use"].status == "PROXY" and mistral.status == "PROXY"
    assert mistral.templates["tool_use"].note
    assert mistral.revision == "24dbda51d986efa05201eec7a093ac91fc5519cf"
    hermes3 = cat.get("NousResearch/Hermes-3-Llama-3.1-8B")
    assert hermes3 is not None and hermes3.templates["tool_use"].status == "EXACT"
    # the llama.cpp git blob recorded in the research notes (SOURCES.md), matched by the file's own bytes
    assert hermes3.templates["tool_use"].git_blob_sha1 == "149250bd540aa98c90c7b81ce4fcfd2a5c040fdf"


def test_damaged_catalog_file_is_an_error(tmp_path: Path) -> None:
    copy = tmp_path / "cat"
    shutil.copytree(catalog_dir(), copy)
    entry = load_catalog(copy).get("Qwen/Qwen2.5-7B-Instruct")
    assert entry is not None
    path = copy / entry.templates["default"].file
    path.write_text(path.read_text() + " ")
    with pytest.raises(HubError, match="damaged"):
        entry.text("default")
    (copy / "index.json").write_text(json.dumps({"entries": [{"repo_id": "x/y"}]}))
    load_catalog.__globals__["_CACHE"].clear()
    with pytest.raises(HubError, match="malformed"):
        load_catalog(copy)


def test_catalog_upstream_and_fallback() -> None:
    cfg = catalog_upstream("nousresearch/hermes-2-pro-mistral-7b")  # ids are case-insensitive
    assert list(cfg.templates) == ["default", "tool_use"] and cfg.origin == "catalog"
    assert any("PROXY" in w for w in cfg.warnings)
    with pytest.raises(HubError, match="not in the bundled catalog"):
        catalog_upstream("org/unknown")
    partial = catalog_upstream("CohereForAI/c4ai-command-r-plus")
    assert partial.complete is False
    assert fallback_entry("NousResearch/Hermes-2-Pro-Mistral-7B", None) is not None
    assert fallback_entry("NousResearch/Hermes-2-Pro-Mistral-7B", "f" * 40) is None
    assert fallback_entry("Qwen/Qwen2.5-7B-Instruct", None) is None  # revision unknown: never a stand-in


def test_catalog_found_from_an_installed_layout(tmp_path: Path) -> None:
    """Lay the package out as the wheel does (pyproject.toml maps gguftpl.upstream_templates onto the
    top-level folder) away from the source tree and import it from there: the catalog must be found inside
    the package. tests/test_packaging.py builds the real wheel."""
    pkg = Path(__import__("gguftpl").__file__).parent
    shutil.copytree(pkg, tmp_path / "site" / "gguftpl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(catalog_dir(), tmp_path / "site" / "gguftpl" / "upstream_templates")
    code = (
        "import gguftpl.upstream.catalog as c; cat = c.load_catalog(); "
        "print(c.catalog_dir()); print(len(cat.entries)); "
        "print(cat.get('Qwen/Qwen2.5-7B-Instruct').text('default')[:20])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0].startswith(str(tmp_path / "site"))
    assert int(out[1]) == len(load_catalog().entries)


# ---------------------------------------------------------------------------------------------- discovery


@pytest.mark.parametrize(
    ("value", "repo"),
    [
        ("https://huggingface.co/NousResearch/Hermes-2-Pro-Mistral-7B", "NousResearch/Hermes-2-Pro-Mistral-7B"),
        ("https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/", "Qwen/Qwen2.5-7B-Instruct"),
        ("hf.co/org/name", "org/name"),
        ("org/name", "org/name"),
        ("https://github.com/org/name", None),
        ("example.com/x", None),
        (3, None),
    ],
)
def test_repo_from_url(value: object, repo: str | None) -> None:
    assert repo_from_url(value) == repo


def _tset(make_gguf, **kw):
    return load_templateset(read_header(make_gguf(**kw)))


def test_discovery_order_and_quant_repo_skipped(make_gguf) -> None:
    ts = _tset(
        make_gguf,
        templates={"default": CHATML},
        extra_kv={
            "general.source.huggingface.repository": "bartowski/Some-Model-GGUF",
            "general.base_model.count": 1,
            "general.base_model.0.repo_url": "https://huggingface.co/org/Some-Model",
        },
    )
    assert find_upstream_repo(ts) == ("org/Some-Model", "from general.base_model.0.repo_url")
    ts2 = _tset(
        make_gguf,
        name="b.gguf",
        templates={"default": CHATML},
        extra_kv={"general.source.url": "https://huggingface.co/org/Other"},
    )
    assert find_upstream_repo(ts2) == ("org/Other", "from general.source.url")


def test_discovery_by_catalog_hash_and_name(make_gguf) -> None:
    cat = load_catalog()
    qwen = cat.get("Qwen/Qwen2.5-7B-Instruct")
    assert qwen is not None
    ts = _tset(make_gguf, templates={"default": qwen.text("default")}, extra_kv={"general.name": "whatever"})
    repo, how = find_upstream_repo(ts)
    assert repo == "Qwen/Qwen2.5-7B-Instruct" and "sha256" in how
    # bartowski's case: a plain ChatML that no catalog entry holds, but the model name matches
    ts2 = _tset(
        make_gguf, name="c.gguf", templates={"default": CHATML}, extra_kv={"general.name": "Hermes-2-Pro-Mistral-7B"}
    )
    repo2, how2 = find_upstream_repo(ts2)
    assert repo2 == "NousResearch/Hermes-2-Pro-Mistral-7B" and "model name" in how2
    # the Hermes tool_use text is shared by two catalog entries: a hash alone is ambiguous
    hermes = cat.get("NousResearch/Hermes-3-Llama-3.1-8B")
    ts3 = _tset(
        make_gguf,
        name="d.gguf",
        templates={"default": CHATML, "tool_use": hermes.text("tool_use")},
        extra_kv={"general.name": "my-merge"},
    )
    repo3, how3 = find_upstream_repo(ts3)
    assert repo3 is None and "several" in how3
    ts4 = _tset(
        make_gguf,
        name="e.gguf",
        templates={"default": CHATML, "tool_use": hermes.text("tool_use")},
        extra_kv={"general.name": "Hermes-3-Llama-3.1-8B"},
    )
    assert find_upstream_repo(ts4)[0] == "NousResearch/Hermes-3-Llama-3.1-8B"


def test_discovery_never_imports_the_hub_client() -> None:
    code = (
        "import sys; from gguftpl.upstream.discover import find_upstream_repo\n"
        "class T: provenance = {'general.name': 'Qwen2.5-7B-Instruct'}; templates = {}\n"
        "print(find_upstream_repo(T())[0]); print('huggingface_hub' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["Qwen/Qwen2.5-7B-Instruct", "False"]


def test_the_catalog_tool_facts_are_measured_again() -> None:
    """``tool_templates.json`` (what ``gguftpl.repair`` reads instead of parsing) holds every catalog template's
    verdict and markers as measured now (run ``scripts/catalog_tool_facts.py`` after adding a template)."""
    from gguftpl.upstream.catalog import measure_tool_facts

    cat = load_catalog()
    for e in cat.entries:
        for name, t in e.templates.items():
            assert cat.tool_facts.get(t.sha256) == measure_tool_facts(e.text(name)), f"{e.repo_id}:{name}"
