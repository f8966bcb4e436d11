"""Issue 14, items 0 and 8: hostile template texts, through the real command line and real processes.

0. jinja2 evaluates constant expressions while it compiles, so compiling a template from a GGUF or the Hub is
   running it: ``{{ 'x' * 10**10 }}`` took ``diff``'s own process to 15 GB. No template is compiled or rendered
   in gguftpl's process; these tests watch the main process's peak memory while it meets such templates, and
   a tripwire proves that no command compiles or folds a template in-process at all.
8. A template nested deeper than jinja2's recursive parser follows is a parse error that says so (GT102),
   wherever it is met; a macro that calls itself without end is a render bomb (GT404), from the bounded render
   or, when no probe reaches it, from the AST.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gguftpl.cli import main_group
from tests.conftest import CHATML
from tests.procwatch import run_watched

MakeGGUF = Callable[..., Path]
HERMES = "NousResearch/Hermes-2-Pro-Mistral-7B"
SMALL = 200 << 20
"""Bytes the main process may reach while it meets a hostile template (it uses ~40 MB; the attack took 15 GB)."""


def cli(*args: str | Path) -> Result:
    return CliRunner().invoke(main_group, [str(a) for a in args])


def codes(res: Result) -> list[str]:
    return [f["code"] for fa in json.loads(res.stdout)["files"] for f in fa["findings"]]


# --------------------------------------------------------------------------------------------- item 0


@pytest.mark.parametrize("bomb", ["{{ 'x'|center(10**10) }}", "{{ 'x' * 10**10 }}"])
def test_diff_of_a_folding_bomb_keeps_the_main_process_small(make_gguf: MakeGGUF, bomb: str) -> None:
    """The issue's own attack: `diff --catalog` of a GGUF whose default template folds to 10 GB."""
    gguf = make_gguf(templates={"default": bomb})
    w = run_watched("diff", "--catalog", HERMES, gguf)
    assert w.killed is None, (w.killed, w.peak_main >> 20)
    assert w.peak_main < SMALL, f"main process reached {w.peak_main >> 20} MB"
    assert w.returncode == 1 and "Traceback" not in w.stderr, w.stderr
    # each probe that met the bomb says so in one line
    errors = [line.strip() for line in w.stdout.splitlines() if line.strip().startswith("gguf error:")]
    assert errors == ["gguf error: out of memory while rendering"] * 3, w.stdout


@pytest.mark.parametrize(
    ("bomb", "finding"),
    [
        # jinja2's as_const folded the range bound in this process: a 10 GB string
        ("{% for i in range('x' * 10**10) %}{% endfor %}", "GT404"),
        # a bound of 2**(2**40) computed in full: 128 GiB
        ("{% for i in range(2**(2**40)) %}{% endfor %}", "GT405"),
    ],
)
def test_audit_of_a_range_bomb_keeps_the_main_process_small(make_gguf: MakeGGUF, bomb: str, finding: str) -> None:
    gguf = make_gguf(templates={"default": CHATML + bomb})
    w = run_watched("audit", "--format", "json", gguf)
    assert w.killed is None and w.peak_main < SMALL, (w.killed, w.peak_main >> 20)
    assert w.returncode == 1 and "Traceback" not in w.stderr, w.stderr
    found = [f["code"] for fa in json.loads(w.stdout)["files"] for f in fa["findings"]]
    assert finding in found, found


@pytest.fixture
def tripwire(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Records every jinja2 compile and constant fold in this process (the worker processes are others)."""
    import jinja2.compiler
    import jinja2.nodes

    calls: list[str] = []

    def wrap(owner: Any, name: str) -> None:
        original = getattr(owner, name)

        def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(f"{owner.__name__}.{name}")
            return original(self, *args, **kwargs)

        monkeypatch.setattr(owner, name, recorded)

    wrap(jinja2.compiler.CodeGenerator, "__init__")  # from_string, compile, jinja2.meta all build one
    for cls in vars(jinja2.nodes).values():
        if isinstance(cls, type) and "as_const" in vars(cls):
            wrap(cls, "as_const")
    yield calls


# cheap to evaluate, but every shape that gets folded: a filter, string arithmetic, a range bound, a list
FOLDABLE = CHATML + "{{ 'x'|center(3) }}{{ 'ab' * 2 }}{% for i in range(2 ** 3) %}{% endfor %}{{ [1] * 2 }}"


def test_no_command_compiles_or_folds_a_template_in_process(
    make_gguf: MakeGGUF, tmp_path: Path, tripwire: list[str]
) -> None:
    gguf = make_gguf(templates={"default": FOLDABLE, "tool_use": FOLDABLE + "{{ tools }}"})
    text = tmp_path / "t.jinja"
    text.write_text(FOLDABLE + "{{ 3 * 3 }}")
    runs = {
        "audit": cli("audit", "--engine", "hf-only", gguf),
        "diff": cli("diff", "--catalog", HERMES, gguf),
        "patch": cli("patch", gguf, "--template", f"default={text}", "-o", tmp_path / "out.gguf"),
        "render": cli("render", gguf),
        "inspect": cli("inspect", gguf),
    }
    for name, res in runs.items():
        assert res.exit_code in (0, 1), (name, res.output)
    assert tripwire == []


# --------------------------------------------------------------------------------------------- item 8


def nested(n: int) -> str:
    return "{{ " + "(" * n + "1" + ")" * n + " }}"


@pytest.mark.parametrize("depth", [500, 10_000])
def test_deep_nesting_is_a_parse_error_wherever_it_is_met(make_gguf: MakeGGUF, tmp_path: Path, depth: int) -> None:
    template = nested(depth)
    gguf = make_gguf(templates={"default": template})
    text = tmp_path / "deep.jinja"
    text.write_text(template)
    says = f"template nests too deeply to parse ({depth} levels of brackets and blocks)"

    audit = cli("audit", "--engine", "hf-only", "--format", "json", gguf)
    (finding,) = [f for f in json.loads(audit.stdout)["files"][0]["findings"] if f["code"] == "GT102"]
    assert says in finding["message"], finding

    plain = make_gguf("plain.gguf", templates={"default": CHATML})
    patch = cli("patch", plain, "--template", f"default={text}", "-o", tmp_path / "out.gguf")
    assert (
        patch.exit_code == 2
        and patch.stderr.strip() == f"gguftpl: error: template 'default' does not parse: {says} (line 1)"
    )
    assert not (tmp_path / "out.gguf").exists()

    compiled = says.replace("to parse", "to compile")
    diff = cli("diff", "--catalog", HERMES, gguf)
    assert diff.exit_code == 1 and "unexpected" not in diff.output
    errors = {line.strip() for line in diff.stdout.splitlines() if line.strip().startswith("gguf error:")}
    assert errors == {f"gguf error: {compiled} (template line 1)"}, diff.stdout

    render = cli("render", gguf)
    assert render.exit_code == 2 and render.stderr.strip() == f"gguftpl: error: {compiled} (template line 1)"


RECURSE = "{% macro f(x) %}{{ f(x) }}{% endmacro %}"


def test_unbounded_macro_recursion_is_a_render_bomb(make_gguf: MakeGGUF) -> None:
    """llama.cpp has no recursion limit: loading this crashed it (SIGSEGV). The bounded render stops it."""
    gguf = make_gguf(templates={"default": CHATML + RECURSE + "{{ f(1) }}"})
    res = cli("audit", "--engine", "hf-only", "--format", "json", gguf)
    (bomb,) = [f for fa in json.loads(res.stdout)["files"] for f in fa["findings"] if f["code"] == "GT404"]
    assert bomb["message"] == (
        "rendering was stopped: rendering recursed deeper than 1000 calls (a macro calling itself without end) "
        "(template line 1)"
    )
    assert "GT103" not in codes(res)  # not "the template has an error": a bound stopped it

    # and nothing hands it to llama.cpp, which has no such bound
    render = cli("render", "--engine", "llamacpp", gguf)
    assert render.exit_code == 2 and "rendering recursed deeper than" in render.stderr


@pytest.mark.parametrize(
    "latent",
    [
        RECURSE,  # defined, never called by any probe
        "{% macro f(x) %}{{ g(x) }}{% endmacro %}{% macro g(x) %}{% set y = f(x) %}{% endmacro %}",  # f -> g -> f
    ],
)
def test_recursion_no_probe_reaches_is_flagged_from_the_ast(make_gguf: MakeGGUF, latent: str) -> None:
    gguf = make_gguf(templates={"default": CHATML + latent})
    res = cli("audit", "--engine", "hf-only", "--format", "json", gguf)
    (bomb,) = [f for fa in json.loads(res.stdout)["files"] for f in fa["findings"] if f["code"] == "GT404"]
    assert bomb["message"].startswith("unbounded recursion: macro 'f' calls itself on every path (f -> ")


@pytest.mark.parametrize(
    "guarded",
    [
        "{% macro f(x) %}{% if x %}{{ f(x - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
        "{% macro f(x) %}{% for y in x %}{{ f(y) }}{% endfor %}{% endmacro %}{{ f([[1], [2]]) }}",
        "{% macro f(x) %}{{ x > 0 and f(x - 1) }}{% endmacro %}{{ f(3) }}",
    ],
)
def test_recursion_with_a_base_case_is_not_flagged(make_gguf: MakeGGUF, guarded: str) -> None:
    gguf = make_gguf(templates={"default": CHATML + guarded})
    res = cli("audit", "--engine", "hf-only", "--format", "json", gguf)
    assert "GT404" not in codes(res)


@pytest.mark.parametrize(
    "bomb",
    [
        "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",  # the bounded renderer: too large
        "{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}",  # the bounded renderer: recursion
    ],
    ids=["output", "recursion"],
)
def test_a_bomb_the_bounded_renderer_stopped_is_never_loaded_in_llamacpp(bomb: str) -> None:
    """The check read the facts' overrun, which is set only after llama.cpp was asked: a cold audit loaded this
    template in llama.cpp's child, which rendered it until its memory bound (27 s of a 35-52 s audit)."""
    pytest.importorskip("xllamacpp")
    from gguftpl.analysis import analyze_template_text
    from gguftpl.engines.llamacpp import parse_check_stats
    from gguftpl.templates.enginefacts import llamacpp_engine_facts

    before = parse_check_stats()["loads"]
    facts = analyze_template_text(bomb, llamacpp=True)
    assert facts.overrun is not None and facts.llamacpp is None
    assert parse_check_stats()["loads"] == before
    # what the llama.cpp runtimes' rows read: the bomb, not a verdict of a render that never happened
    seen = llamacpp_engine_facts(facts)
    assert seen is not None and seen.renders
    assert all(r.overran and "not run through llama.cpp" in (r.error or "") for r in seen.renders.values())
