"""Issue 26: no line of any text report is longer than the width it was given.

Every command with text output runs on the bundled samples, on real GGUFs of the corpus and on hostile
files (10 kB tokens, templates without a blank, control and bidi characters, tabs, wide CJK and emoji, hostile
template names, model names and file names), at 80 and 120 columns, given both as ``--width`` and as
``COLUMNS``. Each line is measured by ``wcwidth`` (the library terminals' width tables come from), after
dropping gguftpl's own colour sequences; a line that holds a character wcwidth cannot measure (a control
character) fails too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from tests.conftest import CHATML
from tests.hubserver import tokenizer_config
from tests.test_audit import TOOLS_TEMPLATE
from tests.test_hostile_terminal import PAYLOAD

MakeGGUF = Callable[..., Path]
WIDTHS = (80, 120)
SGR = re.compile(r"\x1b\[[0-9;]*m")

LONG = "x" * 10_000
CJK = "模板" * 300  # wide characters, no blank
EMOJI = "👍🏽🧑‍💻" * 200  # a modifier sequence and a ZWJ sequence: one cluster each
HOSTILE = (
    PAYLOAD
    + "{#- "
    + LONG
    + " -#}"
    + "{{- '"
    + CJK
    + "\t\t"
    + EMOJI
    + "' if false -}}"
    + "{%- set path='/models/"
    + "deep/" * 300
    + "' -%}"
    + CHATML.replace(" ", "")  # the same template without a blank where Jinja allows none
    .replace("{%formessageinmessages%}", "{% for message in messages %}")
    .replace("{%endfor%}", "{% endfor %}")
    .replace("{%ifadd_generation_prompt%}", "{% if add_generation_prompt %}")
    .replace("{%endif%}", "{% endif %}")
)
HOSTILE_TOOLS = "{{- '" + CJK + "' if tools -}}" + TOOLS_TEMPLATE
BROKEN = "{% for m in messages %}{{ m['content'] " + "+ '" + CJK + "' " + LONG + " }}"  # an error with evidence
NAME = "名前\u202e" + "n" * 200 + "👍🏽"


def _widest(text: str) -> tuple[int, str]:
    import wcwidth

    worst, line_of = 0, ""
    for line in text.split("\n"):
        plain = SGR.sub("", line)
        w = wcwidth.wcswidth(plain)
        assert w >= 0, f"a character no terminal can measure in {plain[:300]!r}"
        if w > worst:
            worst, line_of = w, plain
    return worst, line_of


def run(args: list[str], width: int, how: str) -> Any:
    """``gguftpl ARGS`` with the width as ``--width`` (``how == "flag"``) or as ``COLUMNS``."""
    if how == "flag":
        argv, env = [*args, "--width", str(width)], {"COLUMNS": "10000"}
    else:
        argv, env = args, {"COLUMNS": str(width)}
    return CliRunner().invoke(main_group, argv, env=env, catch_exceptions=False)


def assert_fits(args: list[str], width: int, how: str, codes: tuple[int, ...] = (0, 1)) -> str:
    res = run(args, width, how)
    assert res.exit_code in codes, (args, res.exit_code, res.stdout[-3000:], res.stderr[-3000:])
    assert res.stdout.strip(), args
    worst, line = _widest(res.stdout)
    assert worst <= width, f"{worst} columns > {width} in `gguftpl {' '.join(args)}`:\n{line}"
    return str(res.stdout)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, samples_dir: Path) -> dict[str, Path]:
    """The hostile GGUFs, each in a folder of its own, plus one folder with all of them."""
    from tests.conftest import build_gguf

    root = tmp_path_factory.mktemp("width")
    every = root / "every"
    every.mkdir()
    made = {
        "hostile": {"default": HOSTILE, "tool_use": HOSTILE_TOOLS},
        "broken": {"default": BROKEN},
        "named": {"default": CHATML, NAME: HOSTILE},
    }
    out: dict[str, Path] = {}
    for key, templates in made.items():
        stem = ("模型" * 30 + key) if key == "named" else key  # a wide, 190-byte file name
        path = build_gguf(every / f"{stem}.gguf", templates=templates, extra_kv={"general.name": NAME + LONG})
        out[key] = path
    out["every"] = every
    out["sample"] = samples_dir / "hermes-2-pro-mistral-7b.chatml.gguf"
    out["upstream"] = samples_dir / "hermes-2-pro-mistral-7b.upstream.gguf"
    up = root / "upstream"
    up.mkdir()
    upstream = {"default": HOSTILE.replace("模板", "模型"), "tool_use": HOSTILE_TOOLS}
    (up / "tokenizer_config.json").write_text(tokenizer_config(upstream), encoding="utf-8")
    out["upstream_dir"] = up
    (root / "new.jinja").write_text(HOSTILE, encoding="utf-8")
    out["new_template"] = root / "new.jinja"
    return out


FORMS = [(w, how) for w in WIDTHS for how in ("flag", "COLUMNS")]


@pytest.mark.parametrize(("width", "how"), FORMS)
@pytest.mark.parametrize("key", ["sample", "hostile", "broken", "named"])
def test_audit_inspect_render_fit(files: dict[str, Path], key: str, width: int, how: str) -> None:
    path = str(files[key])
    assert_fits(["audit", path], width, how)
    assert_fits(["inspect", path], width, how)
    if key != "broken":  # a template that does not parse renders nothing: one line on stderr, exit 2
        assert_fits(["render", path, "--engine", "hf"], width, how)


@pytest.mark.parametrize(("width", "how"), FORMS)
def test_audit_of_a_folder_and_repo_check_fit(files: dict[str, Path], width: int, how: str) -> None:
    report = assert_fits(["audit", str(files["every"])], width, how)
    assert "3 files" in report.replace("\n", " ")
    assert_fits(["audit", "--repo-check", "--no-upstream", str(files["every"])], width, how)


@pytest.mark.parametrize(("width", "how"), FORMS)
def test_audit_in_colour_fits(files: dict[str, Path], width: int, how: str) -> None:
    """Colour sequences take no column: a coloured report is fitted as the plain one is."""
    report = assert_fits(["audit", "--color", str(files["hostile"]), str(files["sample"])], width, how)
    assert "\x1b[36m" in report  # the fix command's colour survived the fitting


@pytest.mark.parametrize(("width", "how"), FORMS)
def test_diff_and_patch_fit(files: dict[str, Path], width: int, how: str) -> None:
    sample, hostile = str(files["sample"]), str(files["hostile"])
    assert_fits(["diff", sample], width, how)
    assert_fits(["diff", hostile, "--upstream", str(files["upstream_dir"])], width, how)
    assert_fits(["patch", sample, "--from-catalog", "--dry-run"], width, how)
    assert_fits(["patch", sample, "--template", f"default={files['new_template']}", "--dry-run"], width, how)
    assert_fits(["patch", hostile, "--tools-in-default", "--dry-run", "--accept-differences"], width, how, (0, 1, 2))


@pytest.mark.parametrize(("width", "how"), FORMS)
def test_rules_cache_and_engines_fit(width: int, how: str) -> None:
    table = assert_fits(["rules"], width, how)
    assert "GT201" in table
    for code in re.findall(r"^(GT\d{3})", table, re.M):
        assert_fits(["rules", code], width, how)
    assert_fits(["cache", "info"], width, how)
    assert_fits(["engines"], width, how)


@pytest.mark.parametrize(("width", "how"), [(80, "flag"), (120, "COLUMNS")])
@pytest.mark.parametrize("key", ["sample", "hostile"])
def test_verify_fits(files: dict[str, Path], key: str, width: int, how: str) -> None:
    pytest.importorskip("xllamacpp")
    assert_fits(["verify", str(files[key])], width, how)


@pytest.mark.parametrize(("width", "how"), [(80, "flag"), (120, "COLUMNS")])
def test_more_forms_fit(files: dict[str, Path], samples_dir: Path, tmp_path: Path, width: int, how: str) -> None:
    """A template shown alone, a prompt highlighted in colour, another engine, the user's tools, and a patch
    that writes (its before/after report)."""
    named, sample = str(files["named"]), str(files["sample"])
    assert_fits(["inspect", named, "--template", NAME], width, how)
    assert_fits(["render", str(files["hostile"]), "--color", "--tools", str(samples_dir / "tools.json")], width, how)
    assert_fits(["render", sample, "--engine", "minijinja"], width, how)
    out = tmp_path / "fixed.gguf"
    assert_fits(["patch", sample, "--from-catalog", "--tools-in-default", "-o", str(out)], width, how)
    assert out.exists()


@pytest.mark.parametrize(("width", "how"), [(80, "flag"), (120, "COLUMNS")])
def test_verify_live_fits(make_gguf: MakeGGUF, width: int, how: str) -> None:
    """The live stage quotes the model's own answer: fitted as every other line."""
    pytest.importorskip("xllamacpp")
    from tests.test_live import _qwen_template

    src = make_gguf("tiny.gguf", templates={"default": _qwen_template() + "{#- " + LONG + " #}"})
    assert_fits(["verify", str(src), "--live", "--max-tokens", "8", "--threads", "1"], width, how)


def test_verify_live_probes_fit(make_gguf: MakeGGUF) -> None:
    """The probes' stages quote the model's answers and the tools' results: fitted too."""
    pytest.importorskip("xllamacpp")
    from tests.test_live import _qwen_template

    src = make_gguf("tiny.gguf", templates={"default": _qwen_template()}, specials=["<|im_start|>", "<|im_end|>"])
    cmd = ["verify", str(src), "--live", "--probe", "all", "--max-tokens", "8", "--threads", "1"]
    out = assert_fits([*cmd, "--no-required-retry"], 80, "flag")
    assert all(f"live: {p}" in out for p in ("parallel", "no-tools", "tool-error")), out[-2000:]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(
    "name", ["SmolLM2-135M-Instruct.Q4_1.gguf", "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf", "ggml-vocab-command-r.gguf"]
)
def test_corpus_files_fit(corpus_file: Callable[[str], Path], files: dict[str, Path], name: str, width: int) -> None:
    path = str(corpus_file(name))
    for how in ("flag", "COLUMNS"):
        assert_fits(["audit", path], width, how)
        assert_fits(["inspect", path], width, how)
        assert_fits(["diff", path, "--upstream", str(files["upstream_dir"])], width, how)
        if name.startswith("Qwen"):  # the catalog holds its upstream
            assert_fits(["diff", path], width, how)
        assert_fits(["render", path, "--engine", "hf", "--no-tools"], width, how)


def test_an_unbreakable_token_is_cut_with_the_mark(files: dict[str, Path]) -> None:
    """A token wider than a line is cut, the cut line ends with the mark, and nothing of it is lost."""
    from gguftpl.textfit import CUT_MARK, fit_line

    lines = fit_line("    | " + "ab/" * 60 + " tail", 40)
    assert all(line.endswith(CUT_MARK) for line in lines[:-1]) and lines[-1].endswith("tail")
    assert all(line.startswith("    : ") for line in lines[1:])  # the evidence gutter goes on
    joined = lines[0][:-1] + "".join(line[len("    : ") :].removesuffix(CUT_MARK) for line in lines[1:])
    assert joined.replace(" tail", "").replace("tail", "") == "    | " + "ab/" * 60
    assert all(line[:-1].endswith("/") for line in lines[:-1])  # cut after a slash, not mid-word

    report = run(["audit", str(files["hostile"])], 80, "flag").stdout
    assert CUT_MARK in report


def test_wide_characters_are_never_split(files: dict[str, Path]) -> None:
    """An emoji with its skin-tone modifier is one cluster: never cut between the two."""
    from gguftpl.textfit import CUT_MARK, fit_line

    lines = fit_line("  " + "👍🏽" * 100, 41)
    assert len(lines) > 1
    for line in lines:
        assert line.strip().removesuffix(CUT_MARK).replace("👍🏽", "") == ""  # whole clusters only
        assert _widest(line)[0] <= 41


def test_a_wrapped_command_stays_a_command(files: dict[str, Path]) -> None:
    """The fix command wraps with `` \\`` at each break, so pasted into a shell it is still one command."""
    report = run(["audit", str(files["sample"])], 80, "flag").stdout
    lines = report.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("  fix: gguftpl patch"))
    command = []
    for line in lines[start:]:
        command.append(line.removesuffix(" \\").strip())
        if not line.endswith(" \\"):
            break
    joined = " ".join(command).removeprefix("fix: ")
    wide = run(["audit", str(files["sample"])], 10_000, "flag").stdout
    assert f"  fix: {joined}\n" in wide


def test_diff_lines_continue_in_a_gutter(files: dict[str, Path]) -> None:
    """A wrapped diff line cannot pass for a context line: its continuation starts with ``:``."""
    report = run(["diff", str(files["hostile"]), "--upstream", str(files["upstream_dir"])], 80, "flag").stdout
    hunk = report.split("@@", 1)[1]
    assert re.search(r"^: ", hunk, re.M), hunk[:2000]


def _wrapped_command(report: str, label: str) -> str:
    """The command on the line that starts with ``label``, joined back from its `` \\`` continuations."""
    lines = report.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(label + "gguftpl "))
    command = []
    for line in lines[start:]:
        command.append(line.removesuffix(" \\").strip())
        if not line.endswith(" \\"):
            break
    return " ".join(command).removeprefix(label.strip()).strip()


@pytest.mark.parametrize("label", ["fix: ", "repair: ", "  fix: ", ""])
def test_a_label_line_followed_by_a_command_wraps_as_a_command(label: str) -> None:
    """Issue 26: `repair: gguftpl patch …` (verify), `fix: gguftpl patch …` (diff, scan) were wrapped as prose, so
    the pasted lines ran as several broken commands. A line whose text after a short label is a gguftpl command
    line wraps with `` \\`` and goes on under the command; advice in words that starts with "gguftpl" does not."""
    from gguftpl.textfit import fit_text

    cmd = (
        "gguftpl patch /models/some/long/path/Model-Q4_K_M.gguf --from-catalog NousResearch/Hermes-2-Pro-Mistral-7B"
        " --tools-in-default -o FIXED.gguf && gguftpl verify FIXED.gguf"
    )
    lines = fit_text(label + cmd, 60).split("\n")
    assert len(lines) > 2 and all(_widest(line)[0] <= 60 for line in lines)
    assert all(line.endswith(" \\") for line in lines[:-1]) and not lines[-1].endswith("\\"), lines
    assert all(line.startswith(" " * len(label)) and line.strip() for line in lines[1:])  # under the command
    assert _wrapped_command("\n".join(lines), label) == cmd
    advice = label + "gguftpl knows no upstream template with tools for this file, so it names no repair; " * 2
    assert not any(line.endswith("\\") for line in fit_text(advice, 60).split("\n"))


def test_verify_and_diff_commands_wrap_as_commands(files: dict[str, Path]) -> None:
    """The fix `verify` and `diff` print, wrapped at 80 columns, is the command they print at full width."""
    pytest.importorskip("xllamacpp")
    sample = str(files["sample"])
    for args, label in ((["verify", sample], "repair: "), (["diff", sample, "--no-behaviour"], "fix: ")):
        narrow, wide = run(args, 80, "flag").stdout, run(args, 10_000, "flag").stdout
        assert f"\n{label}{_wrapped_command(narrow, label)}\n" in wide, narrow[-1500:]


@pytest.mark.parametrize(("width", "how"), FORMS)
def test_catalog_fits(width: int, how: str) -> None:
    """`gguftpl catalog` (its table of 40-odd entries with long ids and revisions) and each entry's page."""
    table = assert_fits(["catalog"], width, how)
    from gguftpl.upstream.catalog import load_catalog

    ids = [e.repo_id for e in load_catalog().entries]
    assert all(f"\n{i}  " in "\n" + table for i in ids)  # each id whole at a line's start, at 80 columns too
    for entry in ids[:: max(1, len(ids) // 6)]:  # every sixth entry's page, its sha256s and git blobs
        assert_fits(["catalog", entry], width, how)


@pytest.mark.parametrize(("width", "how"), FORMS)
def test_scan_fits(files: dict[str, Path], tmp_path: Path, width: int, how: str) -> None:
    """`gguftpl scan` over a home with an Ollama store holding the hostile file under a long name and --path
    with the hostile files (names of 190 bytes, wide characters)."""
    from tests.ollama_store import ollama_model

    home = tmp_path / "home"
    ollama_model(home / ".ollama" / "models", "模型" * 20 + "hostile", files["hostile"])
    env = {"HOME": str(home), "HF_HOME": str(home / "hf"), "GGUFTPL_CACHE_DIR": str(tmp_path / "facts")}
    env |= {"OLLAMA_MODELS": None, "HF_HUB_CACHE": None, "LLAMA_CACHE": None}  # type: ignore[dict-item]
    argv = ["scan", "--path", str(files["every"])] + (["--width", str(width)] if how == "flag" else [])
    res = CliRunner().invoke(main_group, argv, env={**env, "COLUMNS": "10000" if how == "flag" else str(width)})
    assert res.exit_code in (0, 1), (res.stdout[-2000:], res.stderr[-2000:])
    worst, line = _widest(res.stdout)
    assert worst <= width and "models (" in res.stdout.replace("\n", " "), line


@pytest.mark.parametrize(("width", "how"), [(80, "flag"), (120, "COLUMNS")])
def test_folder_patch_fits(files: dict[str, Path], tmp_path: Path, width: int, how: str) -> None:
    """`gguftpl patch DIR -o OUTDIR`: the table of the hostile files, their names and their before/after."""
    out = tmp_path / "out"
    args = ["patch", str(files["every"]), "--template", f"default={files['new_template']}", "-o", str(out)]
    report = assert_fits(args, width, how, (0, 1))
    assert "3" in report and out.is_dir()


def test_verify_replay_fits(make_gguf: MakeGGUF, tmp_path: Path) -> None:
    """`verify --replay DIR`: the recorded live run judged again, its model's answer quoted, at 80 and 120."""
    pytest.importorskip("xllamacpp")
    from tests.test_live import _qwen_template

    src = make_gguf("tiny.gguf", templates={"default": _qwen_template() + "{#- " + LONG + " #}"})
    rec = tmp_path / "rec"
    made = run(["verify", str(src), "--live", "--max-tokens", "8", "--threads", "1", "--record", str(rec)], 80, "flag")
    assert made.exit_code in (0, 1) and (rec / "record.json").exists(), (made.stdout[-2000:], made.stderr[-2000:])
    for width, how in FORMS:
        assert "live" in assert_fits(["verify", "--replay", str(rec)], width, how)


def test_survey_fits(hub: Any, files: dict[str, Path], tmp_path: Path) -> None:
    """`gguftpl survey`: repos on the local Hub with the hostile files (long names, a 10 kB model name)."""
    for i, key in enumerate(("hostile", "named", "sample")):
        hub.add_file(f"pub/{'m' * 60}{i}-GGUF", f"{'q' * 80}-Q4_K_M.gguf", files[key])
    for width, how in FORMS:
        args = ["survey", "--author", "pub", "--state", str(tmp_path / f"s{width}{how}.db")]
        assert "pub/" in assert_fits(args, width, how)


def test_verify_runtime_reasons_go_on_under_their_column(files: dict[str, Path]) -> None:
    """verify's runtime table wrapped each reason back to column 4, under the runtime names; now a reason goes on
    under its own column, as in the audit's report, and a narrow terminal gets one runtime a line."""
    pytest.importorskip("xllamacpp")
    report = run(["verify", str(files["sample"])], 140, "flag").stdout  # 84 columns before the reasons
    block = report.split("each by its own engine):\n", 1)[1].split("\nverdict: ", 1)[0].split("\n")
    first = re.match(r"^  (.+?)  +(\S+)  +(.+?)  +(\S.*)$", block[0])
    assert first is not None, block[:3]
    goes_on = [line for line in block if line.startswith("   ")]
    assert goes_on and all(len(line) - len(line.lstrip(" ")) == first.start(4) for line in goes_on), block
    narrow = run(["verify", str(files["sample"])], 40, "flag").stdout
    rows = narrow.split("engine):\n", 1)[1].split("\nverdict: ", 1)[0].split("\n")
    assert rows[0].startswith("  llama.cpp, template default: tools") and rows[1].startswith("      "), rows[:3]


def _stdout_on_terminal(args: list[str], env: dict[str, str]) -> str:
    """``gguftpl ARGS`` with stdout on a 120-column pseudo-terminal: what the terminal got."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    from tests.conftest import ROOT

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    full.pop("COLUMNS", None)
    proc = subprocess.Popen([sys.executable, "-m", "gguftpl", *args], stdout=slave, stderr=subprocess.DEVNULL, env=full)
    os.close(slave)
    got = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        got.append(data)
    proc.wait()
    os.close(master)
    return b"".join(got).decode("utf-8", "replace")


def test_diff_and_verify_colour_a_command_and_advice_apart(files: dict[str, Path], make_gguf: MakeGGUF) -> None:
    """Two colours for a fix in every text report, not only audit's: on a terminal, diff's and verify's fix is
    cyan when it is a command to run and magenta when it is advice in words; no colour with NO_COLOR."""
    pytest.importorskip("xllamacpp")
    anonymous = str(make_gguf("anonymous.gguf", templates={"default": CHATML}))
    sample = str(files["sample"])
    for args, label, colour in (
        (["diff", sample, "--no-behaviour"], "fix: ", "36"),
        (["diff", anonymous], "fix: ", "35"),  # no upstream offline: the advice, then the error
        (["verify", sample], "repair: ", "36"),
        (["verify", anonymous], "repair: ", "35"),
    ):
        shown = _stdout_on_terminal(args, {})
        assert f"{label}\x1b[{colour}mgguftpl " in shown, (args, shown[-800:])
        assert "\x1b[" not in _stdout_on_terminal(args, {"NO_COLOR": "1"})
