"""``gguftpl audit`` from the command line: exit codes, options, output file, colour, the pre-commit hook,
and golden outputs of a real audit in every format."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.report import format_names, tool_version
from tests.conftest import CHATML, ROOT, read_pty
from tests.golden._check import assert_golden, normalise
from tests.test_audit import TOOLS_TEMPLATE

MakeGGUF = Callable[..., Path]


def audit(*args: str | Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main_group, ["audit", *map(str, args)], env=env)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def junk(tmp_path: Path) -> Path:
    path = tmp_path / "junk.gguf"
    path.write_bytes(b"definitely not GGUF")
    return path


def test_exit_codes(junk: Path) -> None:
    code, out, err = audit(junk)
    assert code == 2 and "GT001" in out  # bad input: reported, and exit 2
    assert err.startswith("gguftpl: error: ") and len(err.splitlines()) == 1
    assert audit(junk, "--exit-zero")[0] == 2  # an error is not a finding --exit-zero waives
    assert audit(junk, "--ignore", "GT001")[0] == 0
    assert audit(junk, "--ignore", "GT0")[0] == 0
    assert audit(junk, "--select", "GT002")[0] == 0
    assert audit(junk, "--ignore", "GT002,GT001")[0] == 0  # comma-separated
    assert audit(junk, "--select", "GT002", "--select", "GT001")[0] == 2
    assert audit(junk, "--fail-on", "info")[0] == 2


def test_fail_on_threshold(make_gguf: MakeGGUF) -> None:
    """Exit 1 exactly when some finding is at or above --fail-on (severities read from the JSON report)."""
    path = make_gguf("chatml.gguf", templates={"default": CHATML})
    code, out, _ = audit(path, "--format", "json", "--exit-zero")
    assert code == 0
    severities = {f["severity"] for f in json.loads(out)["files"][0]["findings"]}
    order = ["info", "warning", "error"]
    for level in order:
        expected = int(any(order.index(s) >= order.index(level) for s in severities))
        assert audit(path, "--fail-on", level)[0] == expected, level


@pytest.mark.parametrize(
    ("args", "with_file", "message"),
    [
        (["does-not-exist.gguf"], True, "GGUF file not found: does-not-exist.gguf"),
        (["--select", "GT9"], True, "unknown rule selector"),
        (["--format", "xml"], True, "Invalid value for '--format'"),
        ([], False, "Missing argument"),
    ],
)
def test_usage_errors_exit_2(args: list[str], with_file: bool, message: str, junk: Path) -> None:
    code, out, err = audit(*args, *([junk] if with_file else []))
    assert code == 2
    assert message in err
    assert "Traceback" not in err and out == ""


def test_output_file_is_written_atomically(tmp_path: Path, junk: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old report")
    code, out, _ = audit(junk, "--format", "json", "-o", target)
    assert code == 2 and out == ""
    assert json.loads(target.read_text())["files"][0]["path"] == str(junk)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.gguf", "report.json"]  # no temp left over
    # a folder that does not exist: exit 2 and nothing written anywhere
    code, _, err = audit(junk, "-o", tmp_path / "nope" / "r.txt")
    assert code == 2 and "gguftpl: error:" in err
    assert not (tmp_path / "nope").exists()


def test_colour_only_on_request_or_terminal(junk: Path) -> None:
    assert "\x1b[" not in audit(junk)[1]  # CliRunner's stdout is not a terminal
    assert "\x1b[" in audit(junk, "--color")[1]
    assert "\x1b[" not in audit(junk, "--color", "--format", "json")[1]


def test_no_color_env_beats_a_terminal(junk: Path) -> None:
    """Run in a real pseudo-terminal: colour by default, none with NO_COLOR."""
    pty = pytest.importorskip("pty")

    def run_in_pty(env: dict[str, str]) -> bytes:
        script = "from gguftpl.cli import main; main()"
        pid, fd = pty.fork()
        if pid == 0:  # child
            os.execve(sys.executable, [sys.executable, "-c", script, "audit", str(junk)], env)
        out = read_pty(fd)
        os.waitpid(pid, 0)
        os.close(fd)
        return out

    base = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    assert b"\x1b[" in run_in_pty(base)
    assert b"\x1b[" not in run_in_pty({**base, "NO_COLOR": "1"})


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    """Issue 14: a folder without a GGUF passed CI (a warning, exit 0): it is a usage error, one line, exit 2."""
    code, out, err = audit(tmp_path)
    assert code == 2 and out == ""
    assert err.strip() == f"gguftpl: error: no GGUF files (*.gguf) in {tmp_path}"


def test_pre_commit_hook_runs_the_installed_command(tmp_path: Path, make_gguf: MakeGGUF, junk: Path) -> None:
    """Run the hook the way pre-commit would: its entry (the installed console script) + args + files."""
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "gguftpl-audit")
    assert hook["language"] == "python" and hook.get("pass_filenames", True) is True
    import re

    assert re.search(hook["files"], "models/x.gguf") and not re.search(hook["files"], "README.md")
    entry = shlex.split(hook["entry"])
    script = Path(sys.executable).parent / entry[0]
    assert script.exists(), f"console script {entry[0]} is not installed next to {sys.executable}"
    cmd = [str(script), *entry[1:], *hook.get("args", [])]
    good = make_gguf("good.gguf", templates={"default": TOOLS_TEMPLATE})
    env = {**os.environ, "NO_COLOR": "1"}
    ok = subprocess.run([*cmd, str(good)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = subprocess.run([*cmd, str(good), str(junk)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert bad.returncode == 2  # the junk file is bad input; the good one is still reported
    assert "GT001" in bad.stdout and "Traceback" not in bad.stderr and "good.gguf" in bad.stdout


# --- golden outputs of a real audit -----------------------------------------------------------------------


@pytest.fixture
def golden_tree(tmp_path: Path, make_gguf: MakeGGUF) -> Path:
    """A folder with a ChatML-only GGUF, a GGUF with a tools template, one without any template, and junk."""
    root = tmp_path / "models"
    root.mkdir()
    make_gguf("models/chatml.gguf", templates={"default": CHATML})
    make_gguf("models/with-tools.gguf", templates={"default": CHATML, "tool_use": TOOLS_TEMPLATE})
    make_gguf("models/no-template.gguf", templates={})
    (root / "junk.gguf").write_bytes(b"GGUF\x09\x00\x00\x00 broken")
    return root


@pytest.mark.parametrize("fmt", format_names())
def test_golden_audit(fmt: str, golden_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # audit a relative path from the parent, so the paths in every format are the same on every machine
    monkeypatch.chdir(golden_tree.parent)
    code, out, err = audit("models", "--format", fmt, "--fail-on", "info")
    assert code == 2 and err == "gguftpl: error: models/junk.gguf: unsupported GGUF version 9 at byte 4\n", err
    if fmt == "sarif":
        schema = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
        jsonschema.validators.validator_for(schema)(schema).validate(json.loads(out))
    suffix = {"text": "txt", "json": "json", "sarif": "sarif", "github": "github.txt", "html": "html"}[fmt]
    if fmt == "html":  # the page names the version in words, not as a JSON field
        out = out.replace(f"gguftpl {tool_version()}", "gguftpl <VERSION>")
    text = normalise(out, paths={str(golden_tree.parent): "<TMP>"}, version=tool_version())
    assert_golden(f"audit.{suffix}", text)


def test_a_second_rule_code_after_ignore_gets_a_hint(samples_dir) -> None:
    """`--ignore GT304 GT205` reads GT205 as a path: the one-line error says how to give several codes."""
    res = CliRunner().invoke(
        main_group, ["audit", "--ignore", "GT304", "GT205", str(samples_dir / "hermes-2-pro-mistral-7b.chatml.gguf")]
    )
    assert res.exit_code == 2
    assert "--ignore GT304,GT205" in res.stderr
