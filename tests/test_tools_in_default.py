"""``patch --tools-in-default`` (issue 15): the default carries tool_use behind ``{% if tools %}``, renders the old
default's prompts without tools and tool_use's with tools, is proven before it is written, and refuses otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import gguftpl
from gguftpl.cli import main_group
from gguftpl.engines.transformers import render_hf
from gguftpl.gguf.reader import read_header
from gguftpl.gguf.templateset import load_templateset, special_token_text
from gguftpl.runtimes import toolsdefault
from gguftpl.runtimes.view import LLAMACPP, OLLAMA
from gguftpl.templates import probes
from tests.conftest import CHATML, SAMPLES

CHATML_SAMPLE = SAMPLES / "hermes-2-pro-mistral-7b.chatml.gguf"
HERMES = "NousResearch/Hermes-2-Pro-Mistral-7B"
TOOLS = "{% for t in tools %}<tool>{{ t.function | tojson }}</tool>\n{% endfor %}" + CHATML


def _patch(*args: str | Path) -> str:
    res = CliRunner().invoke(main_group, ["patch", *map(str, args)])
    assert res.exit_code == 0, res.output
    return res.stdout


def _templates(path: Path) -> tuple[dict[str, str], str, str]:
    with read_header(path) as header:
        ts = load_templateset(header)
        return (
            {n: t.text for n, t in ts.templates.items()},
            special_token_text(ts, "bos"),
            special_token_text(ts, "eos"),
        )


@pytest.fixture(scope="module")
def a_and_b(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """``patch sample --from-catalog HERMES -o A`` then ``patch A --tools-in-default -o B``."""
    folder = tmp_path_factory.mktemp("tools-in-default")
    a, b = folder / "A.gguf", folder / "B.gguf"
    _patch(CHATML_SAMPLE, "--from-catalog", HERMES, "-o", a)
    return a, b, _patch(a, "--tools-in-default", "-o", b)


def test_b_keeps_a_tool_use_byte_for_byte_and_renders_the_same_prompts(a_and_b: tuple[Path, Path, str]) -> None:
    a, b, _ = a_and_b
    (ta, bos, eos), (tb, _, _) = _templates(a), _templates(b)
    assert tb["tool_use"].encode() == ta["tool_use"].encode()
    assert tb["default"] != ta["default"]

    def render(text: str, messages: list, tools: list | None) -> str:
        return render_hf(text, messages, tools, True, bos, eos)

    for messages in (probes.plain_conversation(), probes.plain_conversation(True), probes.multi_turn_conversation()):
        assert render(tb["default"], messages, None) == render(ta["default"], messages, None)
    tools = probes.canary_tools()
    for messages in (probes.tools_conversation(), probes.tool_round_trip_conversation()):
        assert render(tb["default"], messages, tools) == render(ta["tool_use"], messages, tools)
    assert probes.CANARY_PARAM_TOKEN in render(tb["default"], probes.tools_conversation(), tools)


def test_the_patch_shows_its_proof_and_records_its_provenance(a_and_b: tuple[Path, Path, str]) -> None:
    a, b, out = a_and_b
    assert "proof, before writing" in out and "transformers: 9 of 9 prompts identical" in out
    from gguftpl.engines.llamacpp_env import llamacpp_available

    if llamacpp_available():  # llama.cpp's own engine: the new default alone, and the file as llama.cpp loads it
        assert "llama.cpp, the new default alone: 9 of 9 prompts identical" in out
        assert "llama.cpp, the patched file: 9 of 9 prompts identical" in out
    with read_header(b) as header:
        kv = {k: header.get(k) for k in header.kv if k.startswith("gguftpl.patch.")}
    with read_header(a) as header:
        before = {k: header.get(k) for k in header.kv if k.startswith("gguftpl.patch.")}
    ta, _, _ = _templates(a)
    assert kv["gguftpl.patch.source"] == "tools-in-default" and kv["gguftpl.patch.templates"] == "default"
    assert kv["gguftpl.patch.template.default.source"] == "tools-in-default"
    assert "transformers: 9 of 9 prompts identical" in kv["gguftpl.patch.tools_in_default.proof"]
    assert kv["gguftpl.patch.tools_in_default.tool_use_sha256"] == before["gguftpl.patch.template.tool_use.sha256"]
    # the earlier patch's record of the tool_use it wrote still holds, so it stays
    for key in ("source_repo", "revision", "template.tool_use.sha256", "template.tool_use.source"):
        assert kv["gguftpl.patch." + key] == before["gguftpl.patch." + key]
    assert "gguftpl.patch.template.default.status" not in kv and "gguftpl.patch.tools_in_default.accepted" not in kv


def test_audit_of_b_has_no_gt205_no_error_and_no_ollama_finding(a_and_b: tuple[Path, Path, str]) -> None:
    _, b, _ = a_and_b
    res = CliRunner().invoke(main_group, ["audit", "--format", "json", str(b)])
    assert res.exit_code == 0, res.output  # no error
    fd = json.loads(res.stdout)["files"][0]
    codes = {f["code"] for f in fd["findings"]}
    assert "GT205" not in codes and not {c for c in codes if c.startswith("GT7")}
    assert not [f for f in fd["findings"] if f["severity"] == "error"]
    default = next(t for t in fd["templates"] if t["name"] == "default")
    assert default["tools_in_prompt"] is True
    rows = {r["name"]: r for r in fd["runtimes"]}
    # TGI hands the template ``function.arguments`` (a JSON string), never ``parameters`` (lib.rs
    # FunctionDefinition @db931fcf): Hermes' tool_use reads ``tool.parameters.properties`` and raises there, in
    # TGI's engine only, which the audit says as a GT107 warning naming TGI
    tgi = rows.pop("TGI")
    assert tgi["outcome"] == "fails" and "tool.parameters" in tgi["error"] and tgi["engine"] == "minijinja/tgi"
    (gt107,) = [f for f in fd["findings"] if f["code"] == "GT107"]
    assert gt107["extra"]["runtimes"] == ["TGI"] and gt107["severity"] == "warning"
    assert all(r["tools_reach_prompt"] is True for r in rows.values())
    assert rows[LLAMACPP]["template"] == "tool_use" and rows["LM Studio"]["template"] == "default"
    assert rows[OLLAMA]["template"] == "default" and rows[OLLAMA]["ollama"]["curated_template"] is None


def test_from_catalog_and_tools_in_default_in_one_step_then_verify(tmp_path: Path) -> None:
    """The README's first command: repair for every runtime at once, then llama.cpp renders and parses."""
    out = tmp_path / "fixed.gguf"
    text = _patch(CHATML_SAMPLE, "--from-catalog", "--tools-in-default", "-o", out)
    assert "GT201 error   default    tools-not-rendered" in text.split("after:")[0]
    templates, _, _ = _templates(out)
    assert templates["default"].startswith("{% if tools %}") and "tool_use" in templates
    with read_header(out) as header:
        kv = {k: header.get(k) for k in header.kv if k.startswith("gguftpl.patch.")}
    assert kv["gguftpl.patch.source"] == "catalog" and kv["gguftpl.patch.source_repo"] == HERMES
    assert kv["gguftpl.patch.template.default.source"] == "tools-in-default"
    assert "gguftpl.patch.template.default.status" not in kv  # the catalog's status was about upstream's default
    assert kv["gguftpl.patch.template.tool_use.status"] == "EXACT"  # byte-proven (upstream_templates/SOURCES.md)
    pytest.importorskip("xllamacpp")
    res = CliRunner().invoke(main_group, ["verify", str(out)])
    assert res.exit_code == 0, res.output
    assert "ok: every stage passed" in res.output and "repair" not in res.output
    assert "Ollama" in res.output and "LM Studio" in res.output and "vLLM" in res.output


def test_library_call_proves_and_patches(tmp_path: Path) -> None:
    result = gguftpl.patch_tools_in_default(CHATML_SAMPLE, tmp_path / "out.gguf", catalog=HERMES)
    assert result.written and result.tools_default is not None and result.tools_default.proof.ok
    assert result.summary is not None
    assert "GT201" in {f.code for f in result.summary.fixed}
    assert not [f for f in result.after or () if f.code == "GT205"]


# --- the construction and its whitespace -------------------------------------------------------------------


@pytest.mark.parametrize(
    "default",
    [
        CHATML,
        CHATML + "\n",  # Jinja drops a template's trailing newline; inside the new default it would print
        "\n" + CHATML,  # trim_blocks eats the first newline after our {% if %}/{% else %}
        "{% for m in messages %}{{ m.content }}\n{% endfor %}  ",  # lstrip_blocks before our {% endif %}
        "{% set sep = '\\n' %}{% for m in messages %}{{ m.role }}{{ sep }}{{ m.content }}{% endfor %}\r\n",
        # issue 27: text ending in "{" ran into the {% else %}/{% endif %} glued after it ("{{%")
        CHATML + "{",
        CHATML + "{\n",  # the brace, then the trailing newline Jinja drops
        CHATML + "\n  {",  # the indentation before it, which lstrip_blocks must not strip either
        "{% for m in messages %}{{ m.content }}{% endfor %}{{ '}' }}{",
    ],
)
@pytest.mark.parametrize("tool_use", [TOOLS + "\n", TOOLS + "{"], ids=["tool_use", "tool_use ending in {"])
def test_combine_renders_each_branch_exactly(default: str, tool_use: str) -> None:
    new = toolsdefault.combine(default, tool_use)
    for p in toolsdefault.probes():
        if p.name.startswith("tool round trip"):
            continue  # these toy templates print only content
        want = render_hf(tool_use if p.tools else default, p.messages, p.tools, p.add_generation_prompt)
        assert render_hf(new, p.messages, p.tools, p.add_generation_prompt) == want, p.name


def test_a_template_ending_in_a_brace_is_patched_and_proven(tmp_path: Path, make_gguf) -> None:
    """Through the command line and llama.cpp's proof: the join is the template's, not llama.cpp's problem."""
    src = make_gguf("m.gguf", templates={"default": CHATML + "{", "tool_use": TOOLS + "{"})
    out = tmp_path / "o.gguf"
    res = CliRunner().invoke(main_group, ["patch", str(src), "--tools-in-default", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "DIFFERS" not in res.output and "llama.cpp" in res.output
    new = _templates(out)[0]["default"]
    for p in toolsdefault.probes():
        if p.name.startswith("tool round trip"):
            continue
        want = render_hf((TOOLS if p.tools else CHATML) + "{", p.messages, p.tools, p.add_generation_prompt)
        assert render_hf(new, p.messages, p.tools, p.add_generation_prompt) == want, p.name


# --- refusals ------------------------------------------------------------------------------------------------


def test_a_difference_is_shown_and_refused_unless_accepted(
    tmp_path: Path, make_gguf, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = make_gguf("m.gguf", templates={"default": "{{ messages[0].content }}\n", "tool_use": TOOLS})

    def naive(default: str, tool_use: str) -> str:  # keeps the default's trailing newline: prints one more line
        return "{% if tools %}" + tool_use + "{% else %}" + default + "{% endif %}"

    monkeypatch.setattr(toolsdefault, "combine", naive)
    res = CliRunner().invoke(main_group, ["patch", str(src), "--tools-in-default", "-o", str(tmp_path / "x.gguf")])
    assert res.exit_code == 2 and not (tmp_path / "x.gguf").exists()
    assert "DIFFERS: plain (vs default)" in res.output and "+qz7canaryuser" in res.output
    assert "--accept-differences" in res.output
    ok = CliRunner().invoke(
        main_group, ["patch", str(src), "--tools-in-default", "--accept-differences", "-o", str(tmp_path / "y.gguf")]
    )
    assert ok.exit_code == 0, ok.output
    with read_header(tmp_path / "y.gguf") as header:
        assert "differing prompts accepted" in header.get("gguftpl.patch.tools_in_default.accepted")


@pytest.mark.parametrize(
    ("templates", "says"),
    [
        ({"default": CHATML}, "no tool_use template"),
        ({"tool_use": TOOLS}, "no default template"),
        ({"default": CHATML, "tool_use": CHATML}, "does not put the tool schemas"),
        ({"default": TOOLS, "tool_use": TOOLS}, "already puts the tool schemas"),
    ],
)
def test_nothing_to_carry_is_an_error(tmp_path: Path, make_gguf, templates: dict, says: str) -> None:
    src = make_gguf("m.gguf", templates=templates)
    res = CliRunner().invoke(main_group, ["patch", str(src), "--tools-in-default", "-o", str(tmp_path / "o.gguf")])
    assert res.exit_code == 2 and says in res.output, res.output


def test_option_combinations(tmp_path: Path, make_gguf) -> None:
    src = make_gguf("m.gguf", templates={"default": CHATML, "tool_use": TOOLS})
    out = str(tmp_path / "o.gguf")
    for args in (["--accept-differences"], ["--tools-in-default", "--remove", "tool_use"]):
        res = CliRunner().invoke(main_group, ["patch", str(src), *args, "-o", out])
        assert res.exit_code == 2, res.output


def test_without_llamacpp_the_proof_says_it_did_not_run(make_gguf, monkeypatch: pytest.MonkeyPatch) -> None:
    import gguftpl.engines.llamacpp_env as llamaenv

    monkeypatch.setattr(llamaenv, "llamacpp_available", lambda: False)
    src = make_gguf("m.gguf", templates={"default": CHATML, "tool_use": TOOLS})
    made = toolsdefault.tools_in_default(str(src), {"default": CHATML, "tool_use": TOOLS})
    assert made.proof.ok and {c.engine for c in made.proof.comparisons} == {toolsdefault.TRANSFORMERS}
    assert "xllamacpp is not installed" in made.proof.summary() and "(not run)" in made.proof.summary()
