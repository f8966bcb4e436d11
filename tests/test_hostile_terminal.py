"""Issue 14, item 6: terminal control from a model file, an upstream repo or an MCP server never reaches the
terminal or a CI log.

Every command runs as a real process over hostile inputs: a template that writes an OSC title set, an OSC 52
clipboard write, a screen clear, U+202E, a zero-width space, lines starting with ``::`` (GitHub workflow
commands, also after blanks) and ``##[`` (the legacy form, anywhere in a line); file names holding the same;
an MCP server whose server and tool names hold them. Every human-facing output must show them as escapes,
JSON must stay the same value with them escaped, and only ``--raw`` gives the exact bytes.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CHATML
from tests.hubserver import tokenizer_config
from tests.mcp_servers.hostile_server import OSC_TITLE
from tests.test_hostile_cli import run_gguftpl

MakeGGUF = Callable[..., Path]

PAYLOAD = (
    "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07 \u202eevil\u200bhidden\n"
    "::error title=forged::a finding gguftpl never made\n"
    "   ::add-mask::x\n"
    "text ##[error]legacy form\n"
    "\x9b8m"
)
HOSTILE_TEMPLATE = PAYLOAD + CHATML
HAS_LLAMACPP = importlib.util.find_spec("xllamacpp") is not None
_ANNOTATION = re.compile(r"^::(error|warning|notice) file=[^:]*,title=GT\d{3} [a-z0-9-]+::")


def assert_inert(text: str, *, annotations: bool = False) -> None:
    """No control, format, surrogate or line-separator character, no workflow command that gguftpl did
    not write itself (``annotations``: the github format's own lines)."""
    for ch in text:
        if ch not in "\n\t":
            assert unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp"), (
                f"raw U+{ord(ch):04X} in the output: {text[:2000]!r}"
            )
    for line in text.split("\n"):
        if line.lstrip().startswith("::"):
            assert annotations and _ANNOTATION.match(line), f"a workflow command gguftpl did not write: {line!r}"
    assert "##[" not in text


def strings(value: Any) -> Iterator[str]:
    """Every string inside decoded JSON."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


@pytest.mark.parametrize("engine", ["hf", "llamacpp"])
def test_render_shows_control_characters_as_escapes_and_raw_gives_the_bytes(make_gguf: MakeGGUF, engine: str) -> None:
    """`render` printed the rendered prompt raw: the title was set, the screen cleared, `::error` annotated."""
    if engine == "llamacpp" and not HAS_LLAMACPP:
        pytest.skip("xllamacpp is not installed")
    path = make_gguf("hostile.gguf", templates={"default": HOSTILE_TEMPLATE})
    proc = run_gguftpl("render", "--no-tools", "--engine", engine, path)
    assert proc.returncode == 0, proc.stderr
    assert_inert(proc.stdout + proc.stderr)
    assert "\\x1b]0;pwned\\x07" in proc.stdout and "\\u202eevil\\u200bhidden" in proc.stdout
    # the prompt sits behind a line-number gutter: no prompt line can pass for one of gguftpl's own
    assert re.search(r"^\d+ \| ::error title=forged::", proc.stdout, re.M), proc.stdout
    assert "--- engine:" in proc.stdout
    raw = run_gguftpl("render", "--no-tools", "--raw", "--engine", engine, path)
    assert raw.returncode == 0 and PAYLOAD in raw.stdout  # exact bytes only when asked for


def test_patch_plan_and_diff_show_bidi_and_zero_width_as_escapes(make_gguf: MakeGGUF, tmp_path: Path) -> None:
    """`patch`'s plan diff and `diff` printed U+202E and U+200B raw (and would have passed OSC and `::`)."""
    path = make_gguf("m.gguf", templates={"default": CHATML})
    new = tmp_path / "new.jinja"
    new.write_text(HOSTILE_TEMPLATE, encoding="utf-8")
    plan = run_gguftpl("patch", path, "--template", f"default={new}", "--dry-run", "--show-diff")
    assert plan.returncode == 0, plan.stderr
    assert_inert(plan.stdout + plan.stderr)
    assert "\\u202eevil" in plan.stdout and "dry run: nothing written" in plan.stdout

    upstream = tmp_path / "upstream"
    upstream.mkdir()
    (upstream / "tokenizer_config.json").write_text(tokenizer_config(HOSTILE_TEMPLATE), encoding="utf-8")
    text = run_gguftpl("diff", path, "--upstream", upstream)
    assert text.returncode == 1, text.stderr
    assert_inert(text.stdout + text.stderr)
    assert "\\u202eevil" in text.stdout
    as_json = run_gguftpl("diff", path, "--upstream", upstream, "--format", "json")
    assert as_json.returncode == 1
    assert_inert(as_json.stdout)
    json.loads(as_json.stdout)  # still JSON: the escapes are JSON's own


def test_an_mcp_servers_names_reach_no_terminal(make_gguf: MakeGGUF) -> None:
    """`verify --mcp` printed the server's and the tool's names raw: an MCP server could set the terminal's
    title, or with OSC 52 write the clipboard."""
    path = make_gguf("m.gguf", templates={"default": CHATML})
    server = f"{sys.executable} {Path(__file__).parent / 'mcp_servers' / 'hostile_server.py'} names"
    render = run_gguftpl("render", path, "--mcp", server)
    assert render.returncode == 0, render.stderr
    assert_inert(render.stdout + render.stderr)
    if not HAS_LLAMACPP:
        pytest.skip("verify needs xllamacpp")
    verify = run_gguftpl("verify", path, "--mcp", server)
    assert verify.returncode in (0, 1), verify.stderr
    assert_inert(verify.stdout + verify.stderr)
    assert "\\x1b]0;pwned-by-mcp\\x07" in verify.stdout  # the server's name, shown
    as_json = run_gguftpl("verify", path, "--mcp", server, "--format", "json")
    assert_inert(as_json.stdout)
    assert any(OSC_TITLE in s for s in strings(json.loads(as_json.stdout)))  # the same data, escaped text


@pytest.mark.parametrize("fmt", ["text", "github", "json", "sarif"])
def test_audit_reports_escape_hostile_file_names(make_gguf: MakeGGUF, tmp_path: Path, fmt: str) -> None:
    """`audit --format github` printed an OSC sequence inside a file name raw; a file named `::error::…`
    started a line of the text report."""
    folder = tmp_path / "models"
    folder.mkdir()
    make_gguf(f"models/m{OSC_TITLE}\u202e.gguf", templates={"default": HOSTILE_TEMPLATE})
    make_gguf("models/::error title=forged::x.gguf", templates={"default": CHATML})
    proc = run_gguftpl("audit", "--engine", "hf-only", "--format", fmt, folder)
    assert proc.returncode == 1, proc.stderr
    assert_inert(proc.stdout + proc.stderr, annotations=fmt == "github")
    if fmt == "github":
        assert all(_ANNOTATION.match(line) for line in proc.stdout.splitlines()), proc.stdout
        assert "GT406" in proc.stdout
    elif fmt == "json":
        paths = [f["path"] for f in json.loads(proc.stdout)["files"]]
        assert any(OSC_TITLE in p for p in paths) and any("::error title=forged::x.gguf" in p for p in paths)
    elif fmt == "sarif":
        json.loads(proc.stdout)  # still JSON: the escapes are JSON's own
    else:
        assert "\\x1b]0;pwned-by-mcp\\x07\\u202e.gguf" in proc.stdout


def test_inspect_and_error_messages_escape_what_they_quote(make_gguf: MakeGGUF, tmp_path: Path) -> None:
    path = make_gguf("m.gguf", templates={"default": HOSTILE_TEMPLATE, f"x{OSC_TITLE}": CHATML})
    for argv in (["inspect", path], ["inspect", "--template", "default", path], ["inspect", "--format", "json", path]):
        proc = run_gguftpl(*argv)
        assert proc.returncode == 0, proc.stderr
        assert_inert(proc.stdout + proc.stderr)
    raw = run_gguftpl("inspect", "--template", "default", "--raw", path)
    assert raw.stdout == HOSTILE_TEMPLATE
    missing = run_gguftpl("inspect", str(tmp_path / f"no{OSC_TITLE}such\u202e.gguf"))
    assert missing.returncode == 2 and "\\x1b]0;pwned-by-mcp\\x07" in missing.stderr
    assert_inert(missing.stdout + missing.stderr)


def test_control_characters_in_a_template_are_gt406(make_gguf: MakeGGUF) -> None:
    """ESC (and the 8-bit CSI) is an error; other C0 controls a warning; each character once, with a count."""
    path = make_gguf(
        "ctl.gguf", templates={"default": HOSTILE_TEMPLATE, "tool_use": "\x0c\x0c" + CHATML, "rag": CHATML + "\r\n"}
    )
    proc = run_gguftpl("audit", "--engine", "hf-only", "--format", "json", "--select", "GT403,GT406", path)
    findings = json.loads(proc.stdout)["files"][0]["findings"]
    got = {(f["code"], f["template"], f["severity"], f["message"].split(",")[0]) for f in findings}
    assert ("GT406", "default", "error", "control character U+001B ESCAPE") in got
    assert ("GT406", "default", "error", "control character U+009B CONTROL SEQUENCE INTRODUCER") in got
    assert ("GT406", "default", "warning", "control character U+0007 BELL") in got
    assert ("GT406", "tool_use", "warning", "control character U+000C FORM FEED") in got
    assert not [f for f in findings if f["template"] == "rag"]  # CRLF is no control character here
    esc = next(f for f in findings if "ESCAPE" in f["message"])
    assert "3 times" in esc["message"] and esc["location"]["line"] == 1 and esc["location"]["column"] == 1
    assert {f["code"] for f in findings if f["template"] == "default"} == {"GT403", "GT406"}  # RLO, ZWSP: GT403
