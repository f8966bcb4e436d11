"""``audit --format html``: the report opened in headless Chromium (tests/browser.py), asserting on what the page
shows: the file x runtime matrix, each finding with its fix, and per template the prompt each runtime's engine
renders for the canary tools request, the schema highlighted where it landed. Hostile templates, file names and
Hub listings render inert: a positive control proves each attack runs when written into a page raw, and the
report, with and without its Content-Security-Policy, shows it as text and runs nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.templates import probes
from tests.browser import Dom, Node, dump_dom, screenshot, text
from tests.conftest import CHATML

MakeGGUF = Callable[..., Path]
ROOT = Path(__file__).resolve().parent.parent
CHATML_SAMPLE = "hermes-2-pro-mistral-7b.chatml.gguf"
UPSTREAM_SAMPLE = "hermes-2-pro-mistral-7b.upstream.gguf"
CSP = '<meta http-equiv="Content-Security-Policy"'

# each attack writes its own marker, built at run time: the page's text holds "PWN'+'ED1", never "PWNED1"
ATTACKS = {
    "PWNED1": "</pre></textarea></title></style><script>document.body.setAttribute('data-p','PWN'+'ED1');"
    "document.body.append('PWN'+'ED1')</script>",
    "PWNED2": "<img src=x onerror=\"document.body.append('PWN'+'ED2')\">",
    "PWNED3": "<svg><svg onload=\"document.body.append('PWN'+'ED3')\"></svg></svg>",
    "PWNED4": "<iframe srcdoc=\"<script>parent.document.body.append('PWN'+'ED4')</script>\"></iframe>",
    "PWNED5": "--><details open ontoggle=\"document.body.append('PWN'+'ED5')\">x</details>",
}
HOSTILE_TEXT = "".join(ATTACKS.values()) + "\u202e\x1b[31m{{ 7*7 }}"
HOSTILE_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}" + "{% raw %}" + HOSTILE_TEXT + "{% endraw %}"
    "{% if tools %}{{ tools | tojson }}" + "{% raw %}" + ATTACKS["PWNED2"] + "{% endraw %}{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
HOSTILE_NAME = "q<img src=x onerror=\"document.body.append('PWN'+'ED6')\">\u202e.gguf"
FORBIDDEN_TAGS = {"script", "img", "svg", "iframe", "object", "embed", "link", "base", "form", "input", "video"}


def cli(*args: str | Path) -> tuple[int, str, str]:
    res = CliRunner().invoke(main_group, [str(a) for a in args])
    return res.exit_code, res.stdout, res.stderr


def html_report(tmp_path: Path, name: str, *args: str | Path) -> Path:
    out = tmp_path / name
    code, _, err = cli("audit", "--format", "html", "-o", out, *args)
    assert code in (0, 1, 2), err
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    return out


def json_report(*args: str | Path) -> dict:
    code, out, err = cli("audit", "--format", "json", *args)
    assert code in (0, 1, 2), err
    return json.loads(out)


def word(row: dict) -> str:
    """The cell a runtime row should show: its outcome when that is the answer, else yes / no / unknown."""
    if row["outcome"] in ("injected", "refused", "fails"):
        return row["outcome"]
    return {True: "yes", False: "no", None: "unknown"}[row["tools_reach_prompt"]]


def matrix(dom: Node) -> tuple[list[str], dict[str, list[str]]]:
    """The matrix as shown: its runtime columns, and each file's row of cell words."""
    table = dom.find("table", cls="matrix")
    head = [text(th) for th in table.find("thead").find_all("th")][1:]
    rows = {}
    for tr in table.find("tbody").find_all("tr"):
        if "verdict" in tr.classes():
            continue
        rows[text(tr.find("th"))] = [text(td) for td in tr.find_all("td")]
    return head, rows


def panels(dom: Node, section: Node | None = None) -> list[dict]:
    """Every prompt panel: the runtimes on it, its engine, its badge, its prompt and the highlighted pieces."""
    out = []
    for p in (section or dom).find_all("div", cls="panel"):
        pre = p.find_all("pre", cls="prompt")
        out.append(
            {
                "runtimes": text(p.find("div", cls="panel-head").find("b")),
                "engine": text(p.find("span", cls="engine")).removeprefix("engine "),
                "badge": text(p.find("span", cls="badge")),
                "prompt": text(pre[0]) if pre else None,
                "marks": [text(m) for m in p.find_all("mark", cls="schema")],
                "classes": p.classes(),
            }
        )
    return out


def test_sample_reports_show_the_matrix_the_fixes_and_the_prompts_side_by_side(
    samples_dir: Path, tmp_path: Path
) -> None:
    files = [samples_dir / CHATML_SAMPLE, samples_dir / UPSTREAM_SAMPLE]
    page = html_report(tmp_path, "report.html", "--exit-zero", *files)
    doc = json_report("--exit-zero", *files)
    dom = Dom.parse(dump_dom(page, tmp_path))

    head, rows = matrix(dom)
    expected_rows = {fa["path"]: [word(r) for r in fa["runtimes"]] for fa in doc["files"]}
    assert head == [r["name"] for r in doc["files"][0]["runtimes"]]
    assert rows == expected_rows
    assert rows[str(files[0])] == ["no", "injected", "injected", "no", "no", "injected", "no", "no", "refused"]
    assert rows[str(files[1])][head.index("llama.cpp")] == "yes"

    # every finding with the fix text every other format prints
    shown = [
        text(f.find("code")) if f.find_all("code") else text(f).removeprefix("fix: ")
        for f in dom.find_all("span", cls="fix")
    ]
    fixes = [f["fix"] for fa in doc["files"] for f in fa["findings"]]
    assert shown == fixes and fixes

    from gguftpl.audit import audit_paths
    from gguftpl.templates.enginefacts import engine_facts

    run = audit_paths([str(f) for f in files])
    sections = dom.find_all("article", cls="prompts")
    assert len(sections) == 2
    broken, fixed = (panels(dom, s) for s in sections)
    assert broken and all(p["badge"] == "tool schema missing" and not p["marks"] for p in broken)
    assert "LM Studio" in {p["runtimes"] for p in broken}
    assert all("schema-missing" in p["classes"] for p in broken)
    # upstream's tool_use: llama.cpp's own prompt, the schema highlighted where it landed
    llama = next(p for p in fixed if p["runtimes"] == "llama.cpp")
    tool_use = next(t for t in run.files[1].templates if t.name == "tool_use")
    assert llama["prompt"] == engine_facts(tool_use, "llamacpp").text(probes.TOOLS)
    assert llama["badge"].startswith("tool schema in the prompt (line ")
    assert probes.CANARY_TOOL_NAME in llama["marks"] and probes.CANARY_PARAM_NAME in llama["marks"]
    assert set(llama["marks"]) <= {
        probes.CANARY_TOOL_NAME,
        probes.CANARY_PARAM_NAME,
        probes.CANARY_PARAM_TOKEN,
        probes.CANARY_PARAM_DESCRIPTION,
        probes.CANARY_TOOL_DESCRIPTION,
    }
    vllm = next(p for p in fixed if "vLLM" in p["runtimes"])
    assert vllm["engine"] == "transformers" and vllm["badge"] == "tool schema missing" and not vllm["marks"]
    assert vllm["prompt"] == engine_facts(run.files[1].templates[0], "transformers").text(probes.TOOLS)


def test_a_folder_audit_shows_every_quant_and_one_prompts_section_for_the_shared_templates(tmp_path: Path) -> None:
    from tests.quantfolder import QUANTS, make_quant_folder

    folder = tmp_path / "quants"
    made = make_quant_folder(folder, quants=QUANTS[:4])
    page = html_report(tmp_path, "folder.html", "--repo-check", folder, "--no-upstream")
    doc = json_report("--repo-check", folder, "--no-upstream")
    dom = Dom.parse(dump_dom(page, tmp_path))
    _, rows = matrix(dom)
    readable = [fa for fa in doc["files"] if fa.get("runtimes")]
    assert len(readable) == 5 and len(made) == 7  # 4 quants and the split set's first shard; a broken file
    for fa in readable:
        assert rows[fa["path"]] == [word(r) for r in fa["runtimes"]]
    assert any(fa["path"].endswith("Q4_1.gguf") for fa in doc["files"])
    broken = next(label for label in rows if label.endswith("Q4_1.gguf"))
    assert set(rows[broken]) == {"\u2013"}  # no runtime view: dashes
    sections = dom.find_all("article", cls="prompts")
    assert len(sections) == 1 and "and 4 more file(s) with the same templates" in text(sections[0].find("h3"))
    # the folder's own checks (GT55x) are a section of their own, with their fixes
    codes = {f["code"] for fa in doc["files"] for f in fa["findings"]}
    assert {"GT001", "GT201"} <= codes
    assert {text(b) for b in dom.find_all("b") if text(b).startswith("GT")} == codes
    repo_level = [
        d for d in dom.find_all("details", cls="file") if "checks across the quants" in text(d.find("summary"))
    ]
    assert len(repo_level) == 1


def hostile_folder(tmp_path: Path, make_gguf: MakeGGUF) -> Path:
    folder = tmp_path / "hostile"
    folder.mkdir()
    make_gguf(f"hostile/{HOSTILE_NAME}", templates={"default": HOSTILE_TEMPLATE, "tool_use": HOSTILE_TEMPLATE})
    make_gguf("hostile/b.gguf", templates={"default": CHATML, "x<b>" + ATTACKS["PWNED1"]: HOSTILE_TEMPLATE})
    return folder


def assert_inert(page: Path, tmp_path: Path) -> Node:
    """Nothing in ``page`` runs or loads, with its CSP and without it (escaping alone holds too)."""
    raw = page.read_text(encoding="utf-8")
    assert raw.count(CSP) == 1
    bare = page.with_name(page.stem + "-no-csp.html")
    bare.write_text("\n".join(line for line in raw.split("\n") if CSP not in line), encoding="utf-8")
    dom = None
    for shown in (page, bare):
        dumped = dump_dom(shown, tmp_path)
        for marker in (*ATTACKS, "PWNED6"):
            assert marker not in dumped, (shown.name, marker)
        dom = Dom.parse(dumped)
        assert not FORBIDDEN_TAGS & set(dom.all_tags()), FORBIDDEN_TAGS & set(dom.all_tags())
        assert [n.tag for n in dom.find_all() if any(a.startswith("on") for a in n.attrs)] == []
        assert all((n.attrs.get("href") or "#").startswith("#") for n in dom.find_all())
        assert "\u202e" not in dumped and "\x1b" not in dumped
    assert dom is not None
    return dom


def test_the_attacks_run_when_written_into_a_page_raw(tmp_path: Path) -> None:
    """The control: each attack the report must defuse does run in this browser when it is markup."""
    page = tmp_path / "control.html"
    page.write_text(f"<!DOCTYPE html><html><body><pre>{HOSTILE_TEXT}</pre>{HOSTILE_NAME}</body></html>", "utf-8")
    dumped = dump_dom(page, tmp_path)
    assert all(marker in dumped for marker in (*ATTACKS, "PWNED6")), dumped[-3000:]


def test_hostile_templates_and_file_names_render_inert(tmp_path: Path, make_gguf: MakeGGUF) -> None:
    folder = hostile_folder(tmp_path, make_gguf)
    page = html_report(tmp_path, "hostile.html", "--repo-check", folder, "--no-upstream")
    dom = assert_inert(page, tmp_path)
    shown = text(dom)
    assert "<script>document.body.setAttribute('data-p','PWN'+'ED1')" in shown  # the template's text, as text
    assert "\\u202e" in shown and "\\x1b[31m" in shown  # as the text report shows them
    assert "{{ 7*7 }}" in shown
    names = [text(h) for h in dom.find_all("h4")]
    assert any(n.startswith("template x<b></pre></textarea></title></style><script>") for n in names), names
    _, rows = matrix(dom)
    assert any(label.startswith(str(folder / "q<img src=x onerror=")) for label in rows), list(rows)
    hostile = [p for p in panels(dom) if p["prompt"] is not None and "</pre>" in p["prompt"]]
    assert hostile, "no prompt panel shows the hostile template's output"
    assert any(p["marks"] and probes.CANARY_TOOL_NAME in p["marks"] for p in hostile)


def test_a_hostile_hub_listing_renders_inert(tmp_path: Path, make_gguf: MakeGGUF) -> None:
    from tests.hostile_hub import HostileHub
    from tests.test_hostile_hub import gguftpl

    with HostileHub(tmp_path / "hub") as hub:
        hub.add_file("org/repo", HOSTILE_NAME, make_gguf("one.gguf", templates={"default": HOSTILE_TEMPLATE}))
        hub.add_file("org/repo", "good.gguf", make_gguf("good.gguf", templates={"default": CHATML}))
        hub.extra_tree["org/repo"] = ["../" + ATTACKS["PWNED1"] + ".gguf", ATTACKS["PWNED5"] + "\u202e.gguf"]
        out = tmp_path / "hub.html"
        res = gguftpl(hub, tmp_path, "audit", "--repo", "org/repo", "--no-upstream", "--format", "html", "-o", out)
    assert res.code == 1, res.stderr
    dom = assert_inert(out, tmp_path)
    _, rows = matrix(dom)
    assert [label.split("@")[0] for label in rows] == ["hf://org/repo/good.gguf"]  # the unsafe names: not read
    assert "GT557" in {text(b) for b in dom.find_all("b")}  # but reported, as text
    shown = text(dom)
    assert HOSTILE_NAME.replace("\u202e", "\\u202e") in shown and ATTACKS["PWNED5"] in shown


def test_the_report_is_one_self_contained_file(samples_dir: Path, tmp_path: Path) -> None:
    page = html_report(tmp_path, "one.html", "--exit-zero", samples_dir / CHATML_SAMPLE)
    raw = page.read_text(encoding="utf-8")
    dom = Dom.parse(raw)
    assert not FORBIDDEN_TAGS & set(dom.all_tags())
    assert not [n for n in dom.find_all() if "src" in n.attrs]
    assert {n.attrs["href"][:1] for n in dom.find_all("a")} == {"#"}
    assert "http://" not in raw and "https://" not in raw and "url(" not in raw and "@import" not in raw
    png = screenshot(page, tmp_path / "one.png", tmp_path, height=900)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a page was drawn, not a blank


def test_the_readme_shows_the_checked_in_screenshot() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/html-report.png)" in readme
    data = (ROOT / "docs" / "html-report.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 1000 and height >= 600


@pytest.mark.parametrize("fmt", ["html"])
def test_html_to_stdout_is_the_same_page(fmt: str, samples_dir: Path, tmp_path: Path) -> None:
    page = html_report(tmp_path, "a.html", "--exit-zero", samples_dir / CHATML_SAMPLE)
    code, out, _ = cli("audit", "--exit-zero", "--format", fmt, samples_dir / CHATML_SAMPLE)
    assert code == 0 and out == page.read_text(encoding="utf-8")


def test_the_page_takes_rows_of_repos_as_well_as_files(tmp_path: Path) -> None:
    """A survey's table (repo x runtime) is the same matrix built from rows as JSON carries them."""
    from gguftpl.report.html import page
    from gguftpl.report.htmlparts import matrix as build

    rows = [
        {
            "name": "llama.cpp",
            "outcome": "dropped",
            "tools_reach_prompt": False,
            "reason": "drops " + ATTACKS["PWNED2"],
        },
        {"name": "Ollama", "outcome": "refused", "tools_reach_prompt": False, "reason": "refuses"},
    ]
    entries = [("org/" + ATTACKS["PWNED1"], "", rows, "a note \u202e"), ("org/fine", "", rows[:1], "")]
    out = tmp_path / "repos.html"
    out.write_text(page("survey", "2 repos", build("repo", entries)), encoding="utf-8")
    dom = assert_inert(out, tmp_path)
    head, shown = matrix(dom)
    assert head == ["llama.cpp", "Ollama"]
    assert shown == {"org/" + ATTACKS["PWNED1"]: ["no", "refused"], "org/fine": ["no", "\u2013"]}
    assert dom.find("td", cls="no").attrs["title"] == "drops " + ATTACKS["PWNED2"]
    assert "a note \\u202e" in text(dom)
