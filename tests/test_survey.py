"""``gguftpl survey``: a publisher's catalog on the local Hub (tests/hubserver.py), 60 repos listed page by page:
most lose the tools, some keep them, one has a hostile template, one is slow, one 404s after the listing named it."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import gguftpl
from gguftpl.cli import main_group
from gguftpl.hubsurvey.listing import quant_family, sample_files
from gguftpl.hubsurvey.state import SurveyState
from tests.conftest import CHATML, ROOT, build_gguf
from tests.hubserver import HubServer

TOOL_USE = (
    "{% if tools %}<|im_start|>system\nTools: <tools>{{ tools | tojson }}</tools><|im_end|>\n{% endif %}" + CHATML
)
HOSTILE = "\x1b]0;owned\x07<script>alert(1)</script>{% for i in range(10**12) %}{{ i }}{% endfor %}" + CHATML
QUANTS = ("Q4_K_M", "Q4_K_S", "Q8_0", "IQ2_XS")
READ = ("IQ2_XS", "Q4_K_M", "Q8_0")
"""One per family of QUANTS, first in name order: i-quant, k-quant, legacy."""
ORG = "pub"
REPOS = 60
REPO_TIMEOUT = 10
"""Seconds for one repo's reads: the slow repo overruns it; the others' three localhost reads, starved of the GIL
by the audit on a machine at load 4.5, once took over 3 s."""


def run(*args: str) -> Any:
    return CliRunner().invoke(main_group, list(args), catch_exceptions=False)


@pytest.fixture
def catalog(hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """60 GGUF repos of ORG (57 published, one slow, one gone, one hostile among the published), pages of 7."""
    monkeypatch.setenv("GGUFTPL_REMOTE_TIMEOUT", str(REPO_TIMEOUT))
    files = {
        "plain": build_gguf(tmp_path / "plain.gguf", templates={"default": CHATML}, tensors=False),
        "tools": build_gguf(
            tmp_path / "tools.gguf", templates={"default": CHATML, "tool_use": TOOL_USE}, tensors=False
        ),
        "hostile": build_gguf(tmp_path / "hostile.gguf", templates={"default": HOSTILE}, tensors=False),
    }
    kinds: dict[str, str] = {}
    for i in range(REPOS - 2):
        kind = "hostile" if i == 7 else ("tools" if i % 3 == 0 else "plain")
        repo = f"{ORG}/model{i:02d}-GGUF"
        for q in QUANTS:
            hub.add_file(repo, f"model{i:02d}-{q}.gguf", files[kind])
        kinds[repo] = kind
    # listed 7th, as a slow repo may be anywhere: its deadline runs while the others are read (listed last, every
    # survey of the catalog waited it out after the others were done), and --limit 5 stays clear of it
    slow = f"{ORG}/model05-slow-GGUF"
    hub.add_file(slow, "slow-Q4_K_M.gguf", files["plain"])
    hub.slow_repos[slow] = 60.0
    kinds[slow] = "slow"
    gone = f"{ORG}/model99-gone-GGUF"
    hub.extra_models.append({"id": gone, "sha": "9" * 40})
    kinds[gone] = "gone"
    hub.add_file("other/not-theirs-GGUF", "x-Q4_K_M.gguf", files["plain"])  # another author: never listed
    hub.add_repo(f"{ORG}/no-gguf", {"README.md": "no GGUF here"})  # not a GGUF repo: never listed
    hub.models_page_size = 7
    hub.clear_log()
    yield {"kinds": kinds, "slow": slow, "gone": gone}


def expected_reads(hub: HubServer, kinds: dict[str, str]) -> set[tuple[str, str, str]]:
    return {
        (repo, hub.commit_sha(repo), f"{repo.split('/')[1].split('-')[0]}-{q}.gguf")
        for repo, kind in kinds.items()
        if kind not in ("slow", "gone")
        for q in READ
    }


def test_survey_reports_every_repo_of_the_author(hub: HubServer, catalog: dict[str, Any], tmp_path: Path) -> None:
    result = gguftpl.survey(authors=[ORG], state=tmp_path / "survey.db", jobs=4)
    kinds = catalog["kinds"]
    assert [r.repo for r in result.rows] == sorted(k for k in kinds if k != catalog["gone"]) + [catalog["gone"]]
    by = {r.repo: r for r in result.rows}
    for repo, kind in kinds.items():
        row = by[repo]
        codes = [c.code for c in row.top_findings]
        if kind == "plain":  # no template reads the tools: every runtime loses them
            assert row.error is None and "GT201" in codes and "llama.cpp" in row.dropping and row.fix
        elif kind == "tools":  # llama.cpp takes tool_use; the default-only runtimes lose the tools
            assert row.error is None and "GT201" not in codes and "llama.cpp" not in row.dropping
            assert "vLLM" in row.dropping and "--tools-in-default" in (row.fix or "")
        elif kind == "hostile":
            assert row.error is None and row.status == "findings" and len(row.files) == 3
        if kind in ("plain", "tools", "hostile"):
            assert (len(row.files), row.files_listed) == (3, 4)
    assert f"gave up after {REPO_TIMEOUT} s" in (by[catalog["slow"]].error or "")
    assert "not found" in (by[catalog["gone"]].error or "")
    assert result.failed == 2 and result.exit_code() == 1
    # one header read per file read, and only the files chosen: one per quant family
    reads = hub.header_reads()
    assert set(reads) == expected_reads(hub, kinds) and set(reads.values()) == {1}
    assert result.header_reads == len(reads)
    # the listing went page by page, as huggingface_hub follows the Link headers
    pages = [r for r in hub.log if r.path.startswith("/api/models?")]
    assert len(pages) == -(-(REPOS) // 7) and all("filter=gguf" in r.path and "author=pub" in r.path for r in pages)


def test_survey_second_run_audits_only_changed_commits(hub: HubServer, catalog: dict[str, Any], tmp_path: Path) -> None:
    state = tmp_path / "survey.db"
    gguftpl.survey(authors=[ORG], state=state)
    changed = f"{ORG}/model05-GGUF"
    hub.new_commit(changed)
    hub.clear_log()
    again = gguftpl.survey(authors=[ORG], state=state)
    assert len(again.rows) == REPOS
    audited = {r.repo for r in again.rows if not r.reused}
    # the changed repo, and the two that failed last time (tried again); the others came from the state
    assert audited == {changed, catalog["slow"], catalog["gone"]}
    assert {k for k, _, _ in hub.header_reads()} == {changed}
    assert next(r for r in again.rows if r.repo == changed).sha == hub.commit_sha(changed)
    trees = {r.path.split("/tree/")[0] for r in hub.log if "/tree/" in r.path}
    assert trees <= {f"/api/models/{changed}", f"/api/models/{catalog['slow']}"}


def test_survey_resumes_after_sigint(hub: HubServer, catalog: dict[str, Any], tmp_path: Path) -> None:
    """A real Ctrl-C at a random point of a real process; the second run finishes: every repo reported, no
    file read twice, none lost."""
    state = tmp_path / "survey.db"
    env = {**os.environ, "HF_ENDPOINT": hub.url, "PYTHONPATH": str(ROOT), "GGUFTPL_REMOTE_TIMEOUT": str(REPO_TIMEOUT)}
    hub.latency = 0.01
    cmd = [sys.executable, "-m", "gguftpl", "survey", "--author", ORG, "--state", str(state), "--format", "json"]
    cmd += ["-j", "2"]
    expected = expected_reads(hub, catalog["kinds"])
    stop_at = random.Random().randint(3, len(expected) - 20)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while sum(hub.header_reads().values()) < stop_at and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the survey ended before the interrupt"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "gguftpl: interrupted"
    first = hub.header_reads()
    assert 0 < sum(first.values()) < len(expected)

    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert sorted(r["repo"] for r in report["rows"]) == sorted(catalog["kinds"])
    reads = hub.header_reads()
    assert set(reads) == expected and set(reads.values()) == {1}  # none read twice, none lost
    assert report["header_reads"] == len(expected) - sum(first.values())
    audited_now = {r["repo"] for r in report["rows"] if not r["reused"]}
    assert audited_now and len(audited_now) < REPOS


def test_a_ctrl_c_does_not_wait_out_a_stuck_listing(hub: HubServer, catalog: dict[str, Any], tmp_path: Path) -> None:
    """The slow repo's listing is held by the server for a minute, under a deadline of 10 minutes: a Ctrl-C ends
    the survey its own way while the server still holds it, the repo recorded as interrupted (to be listed again).
    Before, the survey waited for the listing until the interrupt's watchdog ended the process, its state unsaved."""
    listing = tmp_path / "repos.txt"
    listing.write_text(f"{catalog['slow']}\n")
    env = {**os.environ, "HF_ENDPOINT": hub.url, "PYTHONPATH": str(ROOT), "GGUFTPL_REMOTE_TIMEOUT": "600"}
    cmd = [sys.executable, "-m", "gguftpl", "survey", "--repos", str(listing), "--state", str(tmp_path / "s.db")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300  # a safety net: the listing arrives within seconds
    while hub.held == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hub.held == 1 and proc.poll() is None
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "gguftpl: interrupted"
    assert hub.held == 1, "the survey waited for the stuck listing"
    assert sum(hub.header_reads().values()) == 0
    with SurveyState(tmp_path / "s.db") as st:
        row = st.row(catalog["slow"])
    assert row is not None and row[1] is False and "interrupted" in row[2]["error"]


def test_survey_csv_loads_in_pythons_csv(hub: HubServer, catalog: dict[str, Any], tmp_path: Path) -> None:
    res = run("survey", "--author", ORG, "--format", "csv", "--state", str(tmp_path / "s.db"))
    assert res.exit_code == 1, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == REPOS
    by = {r["repo"]: r for r in rows}
    assert by[catalog["slow"]]["status"] == "error" and "gave up" in by[catalog["slow"]]["error"]
    assert "llama.cpp" in by[f"{ORG}/model01-GGUF"]["runtimes_losing_tools"]
    assert by[f"{ORG}/model01-GGUF"]["files_read"] == "3"
    hub.slow_repos.clear()  # it answers now (tried again as it failed): the rerun need not wait out its deadline
    text = run("survey", "--author", ORG, "--state", str(tmp_path / "s.db"))
    assert text.exit_code == 1
    assert text.stdout.startswith(f"survey of --author {ORG}: {REPOS} repos, 2 audited, 58 unchanged")
    assert "\x1b" not in text.stdout and "\x07" not in text.stdout


def test_survey_all_files_and_repos_file(hub: HubServer, catalog: dict[str, Any], tmp_path: Path) -> None:
    listing = tmp_path / "repos.txt"
    listing.write_text(f"# mine\n{ORG}/model01-GGUF\n\n{ORG}/model03-GGUF  # tools\n{ORG}/model01-GGUF\n")
    result = gguftpl.survey(repos_file=listing, all_files=True)
    assert [(r.repo, len(r.files)) for r in result.rows] == [(f"{ORG}/model01-GGUF", 4), (f"{ORG}/model03-GGUF", 4)]
    assert sum(hub.header_reads().values()) == 8
    limited = gguftpl.survey(authors=[ORG], limit=5)
    assert len(limited.rows) == 5


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "no GGUF repos on the Hub for --author nobody-at-all"),
        ("offline", "HF_HUB_OFFLINE is set"),
        ("network", "listing the Hub's GGUF models"),
        ("bad-id", "the Hub's model listing names no repo at entry 61"),
        ("bad-sha", "gives pub/x no commit"),
        ("not-a-list", "is not a list of models"),
        ("endless-page", "gave up after 3 s"),
        ("endless-pages", "gave up after 3 s"),
    ],
)
def test_survey_bad_input_is_one_line_exit_2(
    hub: HubServer, catalog: dict[str, Any], monkeypatch: pytest.MonkeyPatch, setup: str, message: str
) -> None:
    author = ORG
    monkeypatch.setenv("GGUFTPL_REMOTE_TIMEOUT", "3")  # the listing's deadline is what these cases reach
    if setup == "missing":
        author = "nobody-at-all"
    elif setup == "offline":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    elif setup == "network":
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    elif setup == "bad-id":
        hub.extra_models.append({"id": "pub/../../etc/passwd", "sha": "1" * 40})
    elif setup == "bad-sha":
        hub.extra_models.append({"id": "pub/x", "sha": "../../../main"})
    elif setup == "not-a-list":
        hub.extra_models.append("pub/just-a-string")
    elif setup == "endless-page":
        hub.models_endless_page = True
    else:
        hub.models_loop = True
    res = run("survey", "--author", author)
    assert res.exit_code == 2, res.output
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr  # one line (under load an endless listing once gave two: shown if again)
    assert lines[0].startswith("gguftpl: error: ") and message in lines[0]
    assert sum(hub.header_reads().values()) == 0


def test_quant_families_from_the_type_names() -> None:
    fam = quant_family
    assert fam("M-Q4_K_M.gguf") == fam("M-Q4_K_S.gguf") == fam("M-Q6_K.gguf") != fam("M-Q8_0.gguf")
    assert fam("M-IQ2_XXS.gguf") == fam("M-IQ4_NL.gguf") != fam("M-Q4_K_M.gguf")
    assert fam("M-f16.gguf") == fam("M-BF16.gguf") != fam("mmproj-M-f16.gguf")
    assert fam("notes.gguf") == "notes.gguf"
    files = [
        ("M-Q4_K_M.gguf", 1),
        ("M-Q5_K_M.gguf", 1),
        ("big/M-Q8_0-00001-of-00002.gguf", 1),
        ("big/M-Q8_0-00002-of-00002.gguf", 1),
        ("mmproj-M-f16.gguf", 1),
    ]
    chosen, listed = sample_files(files)
    assert listed == 5
    assert [n for n, _ in chosen] == ["M-Q4_K_M.gguf", "big/M-Q8_0-00001-of-00002.gguf", "mmproj-M-f16.gguf"]
    assert [n for n, _ in sample_files(files, all_files=True)[0]] == [n for n, _ in files if "00002-of" not in n]


def test_every_survey_format_has_a_formatter() -> None:
    from gguftpl.cli.survey_cmd import command
    from gguftpl.hubsurvey import FileRecord, RepoRow, SurveyResult
    from gguftpl.report.survey import SURVEY_FORMATS, get_survey_formatter

    choices = next(p for p in command.params if p.name == "fmt").type.choices  # type: ignore[attr-defined]
    assert list(choices) == list(SURVEY_FORMATS)
    rec = FileRecord("m-Q4_K_M.gguf", "hf://o/m@x", (("GT201", "error", "no tools"),), ("llama.cpp",), "=cmd")
    result = SurveyResult("--author o", [RepoRow("o/m", "a" * 40, 2, (rec,))])
    for name in SURVEY_FORMATS:
        text = get_survey_formatter(name).format(result)
        assert isinstance(text, str) and text.endswith("\n") and "o/m" in text
    (row,) = list(csv.DictReader(io.StringIO(get_survey_formatter("csv").format(result))))
    assert row["fix"] == "'=cmd" and row["top_findings"] == "GT201 x1"  # no formula runs in a spreadsheet
    assert RepoRow.from_dict(json.loads(json.dumps(result.rows[0].to_dict()))) == result.rows[0]
