"""Report formatters on a hand-built audit run: golden outputs, SARIF schema validity, GitHub escaping,
colour handling, and the --format registry staying exhaustive.

Golden files live in tests/golden/; regenerate them with ``GGUFTPL_UPDATE_GOLDEN=1`` (see
tests/golden/_check.py) and review the diff.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import urllib.parse
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gguftpl.audit import AuditRun, FileAudit
from gguftpl.cli.audit_cmd import command as audit_command
from gguftpl.cli.audit_cmd import use_color
from gguftpl.findings import Location, Rule, Severity, make_finding
from gguftpl.report import FORMATS, format_names, get_formatter, tool_version
from gguftpl.report.github import escape_data, escape_property
from gguftpl.report.sarif import artifact_uri
from gguftpl.templates.facts import StaticFacts, TemplateFacts
from tests.golden._check import assert_golden, normalise

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"

# Rule definitions owned by this test, so the goldens do not change when real rule texts are edited.
R_TOOLS = Rule(
    "GT201",
    "tools-not-rendered",
    Severity.ERROR,
    "Tool schemas passed to the template never reach the prompt.",
    why="The model never sees the tools and cannot call them.",
    example="{% for m in messages %}{{ m.content }}{% endfor %}",
    fix="Embed the upstream tool-use template.",
)
R_WARN = Rule("GT305", "eos-not-emitted", Severity.WARNING, "The template never emits the EOS token.")
R_INFO = Rule("GT501", "upstream-unknown", Severity.INFO, "No upstream repository could be identified.")
R_FILE = Rule("GT001", "unreadable-gguf", Severity.ERROR, "The file is not a GGUF that can be read.")


def tpl(name: str, key: str, sha: str, tools: bool | None, dialect: str) -> TemplateFacts:
    return TemplateFacts(
        name=name,
        key=key,
        sha256=sha,
        size=0,
        static=StaticFacts(reads_tools=bool(tools), tools_rendered=tools),
        tools_in_prompt=tools,
        dialect=dialect,
        renders_tool_calls=bool(tools),
        renders_tool_results=bool(tools),
        handles_generation_prompt=True,
    )


def sample_run() -> AuditRun:
    """Three files: one with findings on two templates and the file, one unreadable (with characters
    GitHub must escape in its name), one clean."""
    hermes = "models/hermes.gguf"
    broken = "models/broken, v2: final.gguf"
    clean = "models/clean.gguf"
    f_tools = make_finding(
        R_TOOLS,
        "tools passed to the template are not in the prompt (100% dropped)",
        Location(hermes, "tokenizer.chat_template", 3, 7),
        template="default",
        evidence="<|im_start|>user\nWhat is the weather?<|im_end|>\n<|im_start|>assistant\n",
        fix=f"gguftpl patch {hermes} --from-hub NousResearch/Hermes-2-Pro-Mistral-7B",
    )
    f_warn = make_finding(
        R_WARN,
        "the template never writes <|im_end|>",
        Location(hermes, "tokenizer.chat_template.tool_use"),
        template="tool_use",
    )
    f_info = make_finding(R_INFO, "no general.source.* or base_model keys", Location(hermes))
    f_broken = make_finding(
        R_FILE, "bad magic b'NOPE', not a GGUF file at byte 0", Location(broken), evidence="bad magic"
    )
    return AuditRun(
        files=[
            FileAudit(
                path=hermes,
                templates=[
                    tpl("default", "tokenizer.chat_template", "a" * 64, False, "chatml"),
                    tpl("tool_use", "tokenizer.chat_template.tool_use", "b" * 64, True, "hermes"),
                ],
                findings=[f_info, f_tools, f_warn],
                upstream_repo="NousResearch/Hermes-2-Pro-Mistral-7B",
                upstream_how="from general.base_model.0.repo_url",
                seconds=0.5,
            ),
            FileAudit(path=broken, findings=[f_broken], error="bad magic", seconds=0.001),
            FileAudit(
                path=clean,
                templates=[tpl("default", "tokenizer.chat_template", "c" * 64, True, "hermes")],
                seconds=0.01,
                cached=True,
            ),
        ],
        rules={r.code: r for r in (R_TOOLS, R_WARN, R_INFO, R_FILE)},
        seconds=0.6,
        analyses=2,
    )


def render(fmt: str, **options: object) -> str:
    return get_formatter(fmt, **options).format(sample_run())


def test_every_format_choice_has_a_formatter_and_vice_versa() -> None:
    choices = next(p for p in audit_command.params if p.name == "fmt").type.choices  # type: ignore[attr-defined]
    assert sorted(choices) == sorted(FORMATS) == sorted(format_names())
    for name in format_names():
        formatter = get_formatter(name)
        assert formatter.name == name
        out = formatter.format(sample_run())
        assert isinstance(out, str) and out.endswith("\n")


@pytest.mark.parametrize(
    ("fmt", "golden"),
    [("text", "report.txt"), ("json", "report.json"), ("sarif", "report.sarif"), ("github", "report.github.txt")],
)
def test_golden(fmt: str, golden: str) -> None:
    assert_golden(golden, normalise(render(fmt), version=tool_version()))


def test_json_shape() -> None:
    doc = json.loads(render("json"))
    assert doc["schema_version"] == 1
    first = doc["files"][0]
    assert set(first) >= {"path", "templates", "findings"}
    assert first["templates"][0] == {
        "name": "default",
        "key": "tokenizer.chat_template",
        "sha256": "a" * 64,
        "tools_in_prompt": False,
        "tools_engine": "",
        "tools_with_system": None,
        "tools_static": False,
        "dialect": "chatml",
        "renders_tool_calls": False,
        "renders_tool_results": False,
        "handles_generation_prompt": True,
    }
    for f in (f for fa in doc["files"] for f in fa["findings"]):
        assert set(f) >= {"code", "name", "severity", "message", "template", "evidence", "fix", "location"}
    tools = next(f for f in first["findings"] if f["code"] == "GT201")
    assert tools["location"] == {"file": "models/hermes.gguf", "key": "tokenizer.chat_template", "line": 3, "column": 7}
    assert doc["summary"]["by_severity"] == {"error": 2, "warning": 1, "info": 1}


def test_sarif_validates_and_links_rules() -> None:
    log = json.loads(render("sarif"))
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    for rule in rules:
        assert set(rule) >= {"id", "name", "shortDescription", "fullDescription", "help", "defaultConfiguration"}
    results = run["results"]
    assert len(results) == 4
    for res in results:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        uri = res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert urllib.parse.unquote(uri) in {fa.path for fa in sample_run().files}
    tools = next(r for r in results if r["ruleId"] == "GT201")
    assert tools["level"] == "error"
    # a GGUF is binary: the template's line is no region of it, it is said in the message and the properties
    assert all("region" not in r["locations"][0]["physicalLocation"] for r in results)
    assert (tools["properties"]["templateLine"], tools["properties"]["templateColumn"]) == (3, 7)
    assert tools["message"]["text"].startswith("tokenizer.chat_template:3:7: tools passed")
    assert tools["locations"][0]["logicalLocations"][0]["name"] == "tokenizer.chat_template"
    assert {r["level"] for r in results} == {"error", "warning", "note"}
    prints = [r["partialFingerprints"]["primaryLocationLineHash"] for r in results]
    assert len(set(prints)) == len(prints)
    # the identity ignores the wording: a reworded message keeps its fingerprint
    reworded = sample_run()
    f0 = reworded.files[0].findings[1]
    reworded.files[0].findings[1] = dataclasses.replace(f0, message="different words")
    again = json.loads(get_formatter("sarif").format(reworded))["runs"][0]["results"]
    assert [r["partialFingerprints"] for r in again] == [r["partialFingerprints"] for r in results]


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("a/b c.gguf", "a/b%20c.gguf"),
        ("/tmp/x y.gguf", "file:///tmp/x%20y.gguf"),
        ("hf://org/repo/m.gguf", "hf://org/repo/m.gguf"),
        # issue 27 item 11: any name, as the bytes the filesystem holds, percent-encoded (RFC 3986)
        (os.fsdecode(b"x\xff.gguf"), "x%FF.gguf"),
        ("/tmp/é #?.gguf", "file:///tmp/%C3%A9%20%23%3F.gguf"),
        ("a:b.gguf", "a%3Ab.gguf"),  # not a URI with the scheme "a"
        ("hf://org/repo/my model é.gguf", "hf://org/repo/my%20model%20%C3%A9.gguf"),
        ("https://host/x%20y%zz.gguf", "https://host/x%20y%25zz.gguf"),  # encoded already: kept; a stray % encoded
    ],
)
def test_sarif_artifact_uri(label: str, expected: str) -> None:
    assert artifact_uri(label) == expected


def _unescape(text: str) -> str:
    # the inverse the runner applies (actions/runner ActionCommand.Unescape)
    for enc, raw in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(enc, raw)
    return text


def test_github_annotations_escape_and_round_trip() -> None:
    out = render("github")
    lines = out.splitlines()
    assert len(lines) == 4  # one per finding, no raw newline inside an annotation
    pattern = re.compile(r"^::(error|warning|notice) file=([^,:]*),title=([^,:]*)::(.*)$")
    parsed = [pattern.match(line) for line in lines]
    assert all(parsed), lines
    files = {_unescape(m.group(2)) for m in parsed if m}
    assert files == {"models/hermes.gguf", "models/broken, v2: final.gguf"}
    titles = {_unescape(m.group(3)) for m in parsed if m}
    assert "GT201 tools-not-rendered" in titles
    messages = [_unescape(m.group(4)) for m in parsed if m]
    tools_msg = next(m for m in messages if "not in the prompt" in m)
    assert "(100% dropped)" in tools_msg and "\nFix: gguftpl patch" in tools_msg
    assert escape_data("a%b\r\nc") == "a%25b%0D%0Ac"
    assert escape_property("x:y,z%") == "x%3Ay%2Cz%25"


def test_text_is_grouped_per_file_and_template() -> None:
    out = render("text")
    assert "\x1b[" not in out
    blocks = out.split("\n\n")
    assert blocks[0].startswith("models/hermes.gguf\n")
    hermes = blocks[0]
    # the GT201 finding sits under the default template, GT305 under tool_use, GT501 under "file"
    assert hermes.index("template default") < hermes.index("GT201") < hermes.index("template tool_use")
    assert hermes.index("template tool_use") < hermes.index("GT305")
    assert hermes.index("  file") < hermes.index("GT501") < hermes.index("template default")
    assert "no findings" in blocks[2]
    assert out.rstrip().endswith("in 3 files (2 with findings)")


def test_a_fix_to_run_and_a_fix_in_words_have_two_colours() -> None:
    """Issue 26: a fix written in words was coloured like a command to run."""
    from gguftpl.report.text import FIX_COMMAND_FG, FIX_WORDS_FG, TextFormatter

    assert FIX_COMMAND_FG != FIX_WORDS_FG
    run = sample_run()
    tools = next(f for f in run.files[0].findings if f.code == "GT201")
    run.files[0].findings.append(dataclasses.replace(tools, fix=""))  # its rule's fix, in words
    out = TextFormatter(color=True).format(run)
    assert "fix: \x1b[36mgguftpl patch " in out  # cyan: run it
    words = re.findall(r"fix: \x1b\[35m([^\x1b]*)", out)  # magenta: advice
    assert words == ["Embed the upstream tool-use template."]
    assert "\x1b[" not in TextFormatter(color=False).format(run)


def test_advice_that_starts_with_gguftpl_is_words_not_a_command(make_gguf: Any) -> None:
    """Issue 26: "gguftpl knows no upstream template …" (a file whose upstream is unknown) was coloured and
    wrapped as a runnable command (cyan, `` \\`` at each break) because it starts with "gguftpl ". A fix is a
    command only when the shell would read it as gguftpl subcommands."""
    from click.testing import CliRunner

    from gguftpl.cli import main_group
    from gguftpl.commandline import is_command
    from gguftpl.report._common import fix_is_command
    from tests.conftest import CHATML

    path = make_gguf("anonymous.gguf", templates={"default": CHATML})
    out = CliRunner().invoke(main_group, ["audit", "--color", "--width", "80", str(path)]).stdout
    fixes = [ln for ln in out.splitlines() if ln.lstrip().startswith("fix: ")]
    advice = [ln for ln in fixes if "gguftpl knows no upstream" in ln]
    assert advice and all("fix: \x1b[35mgguftpl knows" in ln for ln in advice), fixes  # magenta: words
    assert not any(ln.endswith(" \\") for ln in out.splitlines()), out  # prose wraps as prose
    command = (
        "gguftpl patch 'a b.gguf' --from-catalog ORG/X --tools-in-default -o FIXED.gguf && gguftpl verify FIXED.gguf"
    )
    assert fix_is_command(command) and is_command("gguftpl verify FIXED.gguf")
    for words in (
        "gguftpl knows no upstream template for this file, so it names no repair",
        "gguftpl patch 'unclosed",  # the shell would not run it
        "`gguftpl patch FILE --from-catalog ID` (upstream's templates)",
        "gguftpl verify X.gguf; rm -rf /",  # a second command that is not gguftpl's
        "gguftpl",
    ):
        assert not fix_is_command(words), words


def test_text_colour_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "\x1b[" in render("text", color=True)
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color(None, None) is False
    assert use_color(True, None) is True
    monkeypatch.delenv("NO_COLOR")
    assert use_color(None, "report.txt") is False
    assert use_color(None, None) is False  # pytest captures stdout: not a terminal


def test_every_format_carries_the_same_fix() -> None:
    """A finding without a command of its own gets its rule's fix in words, in every format alike (JSON never
    says null where text and github print a fix): one place decides it (report._common.fix_of)."""
    base = sample_run()
    worded = make_finding(R_TOOLS, "no command of its own", Location("models/hermes.gguf", "tokenizer.chat_template"))
    base.files[0].findings.append(worded)
    words = R_TOOLS.fix
    js = json.loads(get_formatter("json").format(base))
    assert [f["fix"] for f in js["files"][0]["findings"] if f["message"] == "no command of its own"] == [words]
    assert js["files"][1]["findings"][0]["fix"] is None  # a rule without a fix: none, in every format
    sarif = json.loads(get_formatter("sarif").format(base))["runs"][0]["results"]
    hit = next(r for r in sarif if r["message"]["text"].startswith("no command of its own"))
    assert hit["properties"]["fix"] == words and hit["message"]["text"].endswith(f"Fix: {words}")
    github = get_formatter("github").format(base)
    assert escape_data(f"Fix: {words}") in github
    assert f"fix: {words}" in get_formatter("text").format(base)


def test_the_canary_strings_are_explained_once_in_a_text_report() -> None:
    """Evidence quotes gguftpl's probe data (qz7canaryuser, gguftpl_canary_lookup): the text report says what it is
    once, under the first finding that quotes it, and a report that quotes none says nothing (issue 26 item 6)."""
    from gguftpl.templates.probes import CANARY_LEGEND, CANARY_USER

    assert CANARY_LEGEND not in render("text")
    base = sample_run()
    for i in range(2):
        base.files[0].findings.append(
            make_finding(R_WARN, f"quoted {i}", Location("models/hermes.gguf"), evidence=f"<user>{CANARY_USER}</s>")
        )
    out = get_formatter("text").format(base)
    assert out.count(CANARY_LEGEND) == 1
    lines = out.splitlines()
    quoted = next(i for i, ln in enumerate(lines) if CANARY_USER in ln)
    assert CANARY_LEGEND in lines[quoted + 1], lines[quoted : quoted + 2]
