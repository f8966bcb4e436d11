"""``gguftpl catalog``: the bundled entries with their status, templates, tools and provenance; the ids every
catalog error points to; and the provenance of the templates whose status changed (``upstream_templates/SOURCES.md``)
checked against the index and the bytes. Issue 26 items 5 and 6."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.upstream.catalog import PROVEN, load_catalog, measure_tool_facts

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "hermes-2-pro-mistral-7b.chatml.gguf"
HERMES = "NousResearch/Hermes-2-Pro-Mistral-7B"


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main_group, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_the_list_shows_every_entry_with_status_templates_and_tools() -> None:
    cat = load_catalog()
    code, out, err = run("catalog")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["id", "status", "templates", "tools", "provenance"]
    rows = {ln.split()[0]: ln for ln in lines[1:-1]}
    assert list(rows) == [e.repo_id for e in cat.entries]
    for e in cat.entries:
        row = rows[e.repo_id]
        assert row.split()[1] == e.status
        for name, t in e.templates.items():
            assert f"{name} {t.status}" in row
        carries = [n for n in e.templates if measure_tool_facts(e.text(n))[0]]  # measured again, not read
        assert (f"yes ({', '.join(sorted(carries, key=lambda n: (n != 'default', n)))})" in row) == bool(carries)
        assert (f"rev {e.revision[:12]}" if e.revision else "rev -") in row
    assert lines[-1].startswith(f"{len(cat.entries)} entries; `gguftpl catalog ID`")


def test_json_and_one_entry_carry_the_provenance() -> None:
    cat = load_catalog()
    code, out, _ = run("catalog", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert [d["id"] for d in doc] == [e.repo_id for e in cat.entries]
    for d, e in zip(doc, cat.entries, strict=True):
        assert d["status"] == e.status and set(d["templates"]) == set(e.templates)
        for name, t in d["templates"].items():
            src = e.templates[name]
            assert (t["status"], t["sha256"], t["source"], t["proven"]) == (
                src.status,
                src.sha256,
                src.source,
                PROVEN[src.status],
            )
        assert d["tools"] == [n for n, t in d["templates"].items() if t["renders_tools"]]
    code, out, _ = run("catalog", HERMES.lower())  # ids in any case, as --catalog takes them
    assert code == 0
    entry = cat.get(HERMES)
    assert entry is not None
    assert out.startswith(f"{HERMES}: EXACT\n")
    for t in entry.templates.values():
        assert t.sha256 in out and t.source in out and t.git_blob_sha1 in out
    code, out, _ = run("catalog", HERMES, "--format", "json")
    assert code == 0 and json.loads(out)["id"] == HERMES


@pytest.mark.parametrize(
    "argv",
    [
        ["catalog", "Nous/Hermes-2-Pro-Mistral"],
        ["diff", str(SAMPLE), "--no-behaviour", "--catalog", "Nous/Hermes-2-Pro-Mistral"],
        ["patch", str(SAMPLE), "--from-catalog", "Nous/Hermes-2-Pro-Mistral", "--dry-run"],
    ],
    ids=["catalog", "diff", "patch"],
)
def test_an_unknown_id_points_to_the_catalog_command(argv: list[str]) -> None:
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gguftpl: error: Nous/Hermes-2-Pro-Mistral is not in the bundled")
    assert f"did you mean {HERMES}" in lines[0] and "`gguftpl catalog` lists the ids" in lines[0]


def _sources_rows() -> list[dict[str, str]]:
    text = (ROOT / "upstream_templates" / "SOURCES.md").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        m = re.match(r"^\| (\S+\.jinja) \| (\d+) \| ([0-9a-f]{64}) \| (\w+) \| (.+) \|$", line)
        if m:
            rows.append(dict(zip(("file", "bytes", "sha256", "status", "source"), m.groups(), strict=True)))
    return rows


def test_sources_md_is_the_provenance_of_the_index_and_the_bytes() -> None:
    """Every row of upstream_templates/SOURCES.md (copied from the research notes, never read at run time) names a
    catalog file whose bytes have that sha256 and length, and whose index status is the row's."""
    cat = load_catalog()
    rows = _sources_rows()
    assert {r["file"] for r in rows} >= {f"{HERMES}/default.jinja", f"{HERMES}/tool_use.jinja"}
    by_file = {t.file: t for e in cat.entries for t in e.templates.values()}
    for r in rows:
        t = by_file[r["file"]]
        data = (cat.root / r["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == r["sha256"] == t.sha256, r["file"]
        assert len(data) == int(r["bytes"]) == t.length
        assert t.status == r["status"]


def test_hermes_mistral_is_exact_and_the_first_readme_command_says_so() -> None:
    """Both Hermes-2-Pro-Mistral-7B templates are byte-proven: EXACT, and the README's repair (patch --from-catalog
    --tools-in-default of the sample) no longer says PROXY anywhere."""
    entry = load_catalog().get(HERMES)
    assert entry is not None and entry.status == "EXACT"
    assert {n: t.status for n, t in entry.templates.items()} == {"default": "EXACT", "tool_use": "EXACT"}
    assert not entry.to_upstream().warnings  # nothing to warn about a byte copy
    res = CliRunner().invoke(main_group, ["patch", str(SAMPLE), "--from-catalog", "--tools-in-default", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "PROXY" not in res.output and "CORROBORATED" not in res.output
    assert "catalog EXACT" in res.output  # the plan's row of each template it writes
    shown = CliRunner().invoke(main_group, ["patch", str(SAMPLE), "--from-catalog", "--dry-run", "--show-diff"])
    assert "catalog tool_use: EXACT (byte-verified" in shown.output
