"""The default audit asks llama.cpp whether it can load each distinct template (GT606), in a child process.

Real llama.cpp (xllamacpp) and real jinja2 throughout; the templates are written here, and which engine
accepts them is checked here too, not assumed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gguftpl.audit import audit_paths
from gguftpl.auditcache import AnalysisCache
from tests.conftest import CHATML

pytest.importorskip("xllamacpp")

from gguftpl.engines.llamacpp import parse_check, parse_check_stats  # noqa: E402
from gguftpl.gguf.templateset import sha256_text  # noqa: E402

# A string literal holding a backslash and a real newline: Python's Jinja (and so transformers) reads it
# like a Python literal (a line continuation); llama.cpp's lexer stops at "unknown escape character".
BACKSLASH_NEWLINE = CHATML.replace("{% endif %}", "{{ 'Reply briefly.\\\nThank you.' }}{% endif %}")
SELF_CALLING = "{% macro f(x) %}{{ f(x) }}{% endmacro %}{% for m in messages %}{{ f(m) }}{% endfor %}"


def _audit_json(*args: str) -> dict:
    r = subprocess.run(
        [sys.executable, "-m", "gguftpl", "audit", "--format", "json", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def _codes(report: dict) -> list[str]:
    return [f["code"] for fa in report["files"] for f in fa["findings"]]


def test_engines_disagree_on_backslash_newline():
    import jinja2

    env = jinja2.Environment()
    rendered = env.from_string(BACKSLASH_NEWLINE).render(
        messages=[{"role": "user", "content": "hi"}], add_generation_prompt=True
    )
    # jinja2 parses it and reads backslash-newline as a line continuation, as a Python literal would
    assert rendered.endswith("assistant\nReply briefly.Thank you.")

    verdicts = parse_check([BACKSLASH_NEWLINE, CHATML])
    assert verdicts[sha256_text(CHATML)] is None
    error = verdicts[sha256_text(BACKSLASH_NEWLINE)]
    assert error and "escape" in error


def test_default_audit_reports_gt606_through_the_cli(make_gguf):
    bad = make_gguf("bad.gguf", templates={"default": BACKSLASH_NEWLINE})
    report = _audit_json(str(bad))
    gt606 = [f for f in report["files"][0]["findings"] if f["code"] == "GT606"]
    assert len(gt606) == 1
    assert gt606[0]["template"] == "default"
    assert "escape" in gt606[0]["evidence"]  # llama.cpp's own message
    assert str(bad) in gt606[0]["fix"]

    off = _audit_json("--engine", "hf-only", str(bad))
    assert "GT606" not in _codes(off)


def test_a_template_llamacpp_loads_gives_no_gt606(make_gguf):
    good = make_gguf("good.gguf", templates={"default": CHATML + "{# parse-check: good #}"})
    run = audit_paths([good])
    assert run.llamacpp_check == "on"
    assert run.llamacpp_checks == 1
    assert "GT606" not in {f.code for f in run.findings}


def test_named_tool_use_template_is_checked(make_gguf):
    # llama.cpp loads a file whose tool_use it cannot parse, but drops that template (measured: /props has
    # no chat_template_tool_use then), so tool requests never see it
    tool_use = BACKSLASH_NEWLINE.replace("{% for", "{{ tools | tojson }}{% for", 1)
    path = make_gguf("named.gguf", templates={"default": CHATML, "tool_use": tool_use})
    run = audit_paths([path])
    gt606 = [f for f in run.findings if f.code == "GT606"]
    assert [f.template for f in gt606] == ["tool_use"]
    assert "escape" in gt606[0].evidence


def test_a_self_calling_macro_does_not_crash_the_audit(make_gguf):
    # loading renders the template: llama.cpp overflows its stack on this one (SIGSEGV in the worker)
    verdicts = parse_check([SELF_CALLING])
    assert "crashed" in (verdicts[sha256_text(SELF_CALLING)] or "")
    # the next check gets a fresh worker
    assert parse_check([CHATML + "{# after the crash #}"]) == {sha256_text(CHATML + "{# after the crash #}"): None}

    path = make_gguf("macro.gguf", templates={"default": SELF_CALLING})
    report = _audit_json(str(path))
    assert report["files"][0]["findings"]  # the audit finished and reported on the file


def test_once_per_distinct_template_across_a_folder(tmp_path: Path):
    from tests.conftest import build_gguf

    a = CHATML + "{# folder: A #}"
    b = BACKSLASH_NEWLINE + "{# folder: B #}"
    for i in range(6):
        # a different name per file: six template sets to analyse, two distinct template texts
        build_gguf(
            tmp_path / f"m{i}.gguf", templates={"default": a if i % 2 else b}, extra_kv={"general.name": f"m{i}"}
        )
    before = parse_check_stats()["loads"]
    cache = AnalysisCache()
    run = audit_paths([tmp_path], cache=cache)
    assert len(run.files) == 6
    assert run.llamacpp_checks == 2
    assert parse_check_stats()["loads"] - before == 2
    per_file = [sum(f.code == "GT606" for f in fa.findings) for fa in run.files]
    assert per_file == [1, 0, 1, 0, 1, 0]

    again = audit_paths([tmp_path], cache=cache)
    assert again.llamacpp_checks == 0
    assert [sum(f.code == "GT606" for f in fa.findings) for fa in again.files] == per_file


def test_without_xllamacpp_the_audit_runs_without_the_check(make_gguf):
    bad = make_gguf("bad-noxl.gguf", templates={"default": BACKSLASH_NEWLINE + "{# no xllamacpp #}"})
    # a fresh interpreter in which `import xllamacpp` fails, as when the package is not installed
    code = (
        "import sys, json\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'xllamacpp':\n"
        "            raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from gguftpl.audit import audit_paths\n"
        "run = audit_paths([sys.argv[1]])\n"
        "print(json.dumps({'codes': [f.code for f in run.findings], 'check': run.llamacpp_check,"
        " 'n': run.llamacpp_checks}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(bad)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert "GT606" not in out["codes"]
    assert out["codes"]  # the rest of the audit ran
    assert out["check"].startswith("skipped") and "xllamacpp" in out["check"]
    assert out["n"] == 0
