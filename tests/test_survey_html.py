"""``survey --format html``: a publisher's catalog on a hostile local Hub (tests/hostile_hub.py), the page opened in
headless Chromium (tests/browser.py): the repo x runtime matrix as the survey's JSON has it (a repo's cell is its
worst file's), each top finding with its fix, per repo the files audited; and what a hostile Hub controls (file
names in a tree, a repo's error answer, a template whose prompt is quoted in findings) shows as text, runs nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.report.html import shown as as_shown
from tests.browser import Dom, Node, dump_dom, text
from tests.conftest import CHATML, build_gguf
from tests.hostile_hub import HostileHub
from tests.test_html_report import ATTACKS, HOSTILE_NAME, HOSTILE_TEMPLATE, assert_inert, matrix, word
from tests.test_survey import TOOL_USE

ORG = "pub"
SHOWN_NAME = "q<img src=x onerror=\"document.body.append('PWN'+'ED6')\">-Q4_K_M.gguf"
"""A file name that is a safe repo path (read and audited) and markup."""
UNSAFE = "../" + ATTACKS["PWNED1"] + ".gguf"
"""A listed name that is no repo path: never requested, reported (GT557)."""
BROKEN = f"{ORG}/broken-GGUF"
"""Its every API answer: HTTP 400 with a message of markup."""
GONE = f"{ORG}/gone-GGUF"
WORST_FIRST = ("dropped", "refused", "fails", "injected", "unknown", "prompt")


def run(*args: str | Path) -> Any:
    return CliRunner().invoke(main_group, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HostileHub]:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("GGUFTPL_REMOTE_TIMEOUT", "30")
    plain = build_gguf(tmp_path / "plain.gguf", templates={"default": CHATML}, tensors=False)
    tools = build_gguf(tmp_path / "tools.gguf", templates={"default": CHATML, "tool_use": TOOL_USE}, tensors=False)
    hostile = build_gguf(tmp_path / "hostile.gguf", templates={"default": HOSTILE_TEMPLATE}, tensors=False)
    with HostileHub(tmp_path / "hub") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        hub.add_file(f"{ORG}/plain-GGUF", "plain-Q4_K_M.gguf", plain)
        hub.add_file(f"{ORG}/plain-GGUF", "plain-Q8_0.gguf", plain)
        hub.add_file(f"{ORG}/tools-GGUF", "tools-Q4_K_M.gguf", tools)
        hub.add_file(f"{ORG}/mixed-GGUF", "mixed-Q4_K_M.gguf", plain)  # one quant lost tool_use, one kept it
        hub.add_file(f"{ORG}/mixed-GGUF", "mixed-Q8_0.gguf", tools)
        hub.add_file(f"{ORG}/hostile-GGUF", SHOWN_NAME, hostile)
        hub.add_file(f"{ORG}/hostile-GGUF", HOSTILE_NAME, hostile)  # a bidi override: no safe repo path
        hub.extra_tree[f"{ORG}/hostile-GGUF"] = [UNSAFE]
        hub.add_file(BROKEN, "broken-Q4_K_M.gguf", plain)
        hub.repo_errors[BROKEN] = (400, "bad " + ATTACKS["PWNED2"])
        hub.extra_models.append({"id": GONE, "sha": "9" * 40})
        yield hub


def survey_reports(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """The html page and the JSON of the same survey (the second run takes the repos audited from the state)."""
    page, state = tmp_path / "survey.html", tmp_path / "survey.db"
    res = run("survey", "--author", ORG, "--format", "html", "-o", page, "--state", state)
    assert res.exit_code == 1, res.output
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    res = run("survey", "--author", ORG, "--format", "json", "--state", state)
    assert res.exit_code == 1, res.output
    return page, json.loads(res.stdout)


def repo_sections(dom: Node) -> dict[str, Node]:
    return {text(d.find("summary").find("span", cls="path")): d for d in dom.find_all("details", cls="repo")}


def fixes_shown(node: Node) -> list[str]:
    return [
        text(f.find("code")) if f.find_all("code") else text(f).removeprefix("fix: ")
        for f in node.find_all("span", cls="fix")
    ]


def worst(files: list[dict[str, Any]], name: str) -> str:
    rows = [r for f in files for r in f["runtimes"] if r["name"] == name]
    if not rows:
        return "\u2013"
    return word(min(rows, key=lambda r: WORST_FIRST.index(r["outcome"])))


def test_the_survey_page_shows_the_repo_matrix_the_fixes_and_the_files_audited(
    catalog: HostileHub, tmp_path: Path
) -> None:
    page, doc = survey_reports(tmp_path)
    dom = Dom.parse(dump_dom(page, tmp_path))
    head, rows = matrix(dom)
    by = {r["repo"]: r for r in doc["rows"]}
    assert list(rows) == [r["repo"] for r in doc["rows"]] and len(rows) == 6
    assert head == [r["name"] for r in by[f"{ORG}/plain-GGUF"]["files"][0]["runtimes"]]
    for repo, cells in rows.items():
        assert cells == [worst(by[repo]["files"], name) for name in head], repo
    llama = head.index("llama.cpp")
    assert rows[f"{ORG}/plain-GGUF"][llama] == "no" and rows[f"{ORG}/tools-GGUF"][llama] == "yes"
    assert rows[f"{ORG}/mixed-GGUF"][llama] == "no"  # the worst of its two quants
    mixed_cell = dom.find("table", cls="matrix").find("tbody").find_all("tr")[4].find_all("td")[llama]
    assert mixed_cell.attrs["title"].startswith("in 1 of the 2 files it was asked about: ")
    assert set(rows[GONE]) == set(rows[BROKEN]) == {"\u2013"}
    verdicts = [text(tr) for tr in dom.find("table", cls="matrix").find_all("tr", cls="verdict")]
    assert any(v.startswith("not audited: repository pub/gone-GGUF not found") for v in verdicts), verdicts

    sections = repo_sections(dom)
    assert list(sections) == list(rows)
    for repo, section in sections.items():
        row = by[repo]
        top = section.find_all("ul", cls="findings")
        # the top findings, each with the fix the JSON gives it; the repo's one repair above them
        assert (fixes_shown(top[0]) if top else []) == [c["fix"] for c in row["top_findings"]], repo
        assert all(c["fix"] for c in row["top_findings"])
        if row["fix"]:  # a command to run as code; advice in words ("gguftpl knows no upstream …") as words
            from gguftpl.commandline import is_command

            commands = [text(c) for c in section.find_all("code", cls="command")]
            words = [text(c) for c in section.find_all("span", cls="words")]
            assert row["fix"] in (commands if is_command(row["fix"]) else words), (row["fix"], commands, words)
        # the files audited: one row each, and each file's own findings below
        tables = section.find_all("table", cls="matrix")
        shown = [text(th) for th in tables[0].find_all("th") if th.attrs.get("scope") == "row"] if tables else []
        assert shown == [as_shown(f["path"]) for f in row["files"]], repo
        folded = [text(d.find("span", cls="path")) for d in section.find_all("details", cls="file-findings")]
        assert folded == [as_shown(f["path"]) for f in row["files"] if f["findings"]]
    assert "GT201" in {c["code"] for c in by[f"{ORG}/plain-GGUF"]["top_findings"]}
    assert "GT557" in {c["code"] for c in by[f"{ORG}/hostile-GGUF"]["top_findings"]}


def test_what_a_hostile_hub_controls_renders_inert(catalog: HostileHub, tmp_path: Path) -> None:
    page, doc = survey_reports(tmp_path)
    dom = assert_inert(page, tmp_path)
    shown = text(dom)
    # a file name that is markup, read and audited: its row, as text
    sections = repo_sections(dom)
    files = sections[f"{ORG}/hostile-GGUF"].find_all("table", cls="matrix")[0]
    labels = [text(th) for th in files.find_all("th") if th.attrs.get("scope") == "row"]
    assert SHOWN_NAME in labels and HOSTILE_NAME.replace("\u202e", "\\u202e") in labels
    # the names that are no repo path: never requested, each reported (GT557), the bidi override shown escaped
    assert UNSAFE in labels
    resolved = [unquote(r.path) for r in catalog.log if "/resolve/" in r.path]
    assert any(SHOWN_NAME in p for p in resolved)
    assert not [p for p in resolved if "\u202e" in p or "/../" in p or "<script>" in p]
    # the Hub's error answer for a repo, as text
    broken = next(r for r in doc["rows"] if r["repo"] == BROKEN)
    assert ATTACKS["PWNED2"] in (broken["error"] or "") and ATTACKS["PWNED2"] in shown
    # the hostile template's prompt, quoted by a finding, as text
    messages = [text(li) for li in sections[f"{ORG}/hostile-GGUF"].find_all("li", cls="finding")]
    assert any("</details>" in m for m in messages), messages
