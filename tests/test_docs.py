"""The README's commands are the ones CI runs, and every command documents itself."""

from __future__ import annotations

import os
import re
import tempfile

import pytest
from click.testing import CliRunner

from gguftpl.cli import COMMANDS, main_group
from tests.conftest import ROOT


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.*?)\n```", text, flags=re.S)


def test_readme_has_exactly_two_commands_and_ci_runs_the_test_one():
    commands = _readme_commands()
    assert len(commands) == 2
    assert all("\n" not in c for c in commands)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[1] in ci, "the README's test command must be a line of .ci/run"
    assert "pytest" in commands[1] and "fetch_corpus.py" in commands[1]
    assert "samples/" in commands[0]


def test_every_command_has_help():
    runner = CliRunner()
    for name in COMMANDS:
        result = runner.invoke(main_group, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "Usage: " in result.output
        body = result.output.split("\n\n", 1)[1]
        assert len(body.strip()) > 40, name
        assert f"### `gguftpl {name}" in (ROOT / "README.md").read_text(encoding="utf-8") or name == "rules"


def test_readme_python_example_runs(tmp_path, monkeypatch):
    """The README's Python library example, run as written (from the checkout, like the README's commands)."""
    pytest.importorskip("xllamacpp")
    (code,) = re.findall(r"```python\n(.*?)\n```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example's output folder goes here
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the project's own documentation
    result = namespace["result"]
    assert os.path.isfile(result.output) and result.output.startswith(str(tmp_path))
    assert namespace["check"].template == "tool_use"  # llama.cpp picks the restored tool_use for tools


def test_readme_runtime_table_is_the_profiles_table():
    """The README's runtime table is generated from the profiles, not written by hand: they cannot drift."""
    from gguftpl.runtimes.profiles import profiles_table

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = text.index("<!-- profiles-table -->\n"), text.index("<!-- /profiles-table -->")
    assert text[start + len("<!-- profiles-table -->\n") : end] == profiles_table()


def test_readme_names_every_canary_string():
    """The canary's strings appear in evidence: the README says what each is (issue 26 item 6)."""
    from gguftpl.templates import probes

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    strings = [v for k, v in vars(probes).items() if k.startswith("CANARY_") and isinstance(v, str)]
    shown = [v for v in strings if probes.quotes_canary(v) and len(v) < 30]  # the bare strings, not sentences
    assert len(shown) >= 8
    missing = [v for v in shown if f"`{v}`" not in text]
    assert not missing, missing


def test_readme_counterfactual_example_is_the_committed_record_replayed():
    """The README's counterfactual table is the replay of the record committed under docs/records, and the
    record's verdicts are what the judge says of its recorded answers (no model needed)."""
    record = ROOT / "docs" / "records" / "qwen2.5-coder-0.5b-chatml-counterfactual"
    res = CliRunner().invoke(main_group, ["verify", "--replay", str(record), "--width", "100"])
    assert res.exit_code == 1, res.output  # the after run's live stage fails: the model's call is not parsed
    lines = res.stdout.splitlines()
    assert lines[-2].startswith("replay: every verdict is the recorded one")
    table = lines[next(i for i, x in enumerate(lines) if x.startswith("stage ")) : -2]
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Prove a repair: the counterfactual") :]
    assert "\n".join("    " + x for x in table) in section
