"""One repair per file (``gguftpl.repair``, issues 25 and 26): ``audit``, ``diff``, ``verify``, ``rules`` and the
library print the same command, or say plainly that no template repair exists; running it makes every runtime
get the tools. Before/after matches findings by identity, and the tools that never reach the prompt are one verdict
whatever drops them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import gguftpl
from gguftpl.cli import main_group
from gguftpl.repair import NO_TOOL_TEMPLATE
from gguftpl.runtimes.rows import FAILS
from gguftpl.upstream.catalog import load_catalog
from tests.conftest import CHATML, SAMPLES

CHATML_SAMPLE = SAMPLES / "hermes-2-pro-mistral-7b.chatml.gguf"
HERMES = "NousResearch/Hermes-2-Pro-Mistral-7B"
TOOLS_DEFAULT = "{% for t in tools %}<tool>{{ t.function | tojson }}</tool>\n{% endfor %}" + CHATML
PLACEHOLDER = re.compile(r"ORG/REPO|ORG/NAME|\bREPO\b|=PATH")


def cli(*args: str | Path) -> Any:
    return CliRunner().invoke(main_group, [str(a) for a in args])


def _fix_lines(text: str) -> list[str]:
    return [ln.split("fix: ", 1)[1] for ln in text.splitlines() if ln.lstrip().startswith("fix: ")]


def _verify_repair(path: Path) -> str:
    pytest.importorskip("xllamacpp")
    res = cli("verify", path)
    (line,) = [ln for ln in res.output.splitlines() if ln.startswith("repair: ")]
    return line.removeprefix("repair: ")


def test_audit_diff_verify_rules_and_the_library_print_one_repair_and_it_works(tmp_path: Path) -> None:
    run = gguftpl.audit_paths([CHATML_SAMPLE])
    repair = run.files[0].repair
    want = (
        f"gguftpl patch {CHATML_SAMPLE} --from-catalog {HERMES} --tools-in-default -o FIXED.gguf "
        "&& gguftpl verify FIXED.gguf"
    )
    assert repair.command == want
    # every fix line of the audit about lost tools is that command, and the file's last line says it again
    text = cli("audit", "--exit-zero", CHATML_SAMPLE).output
    assert [f.fix for f in run.findings if f.code == "GT201"] == [want]
    assert _fix_lines(text).count(want) == 2 and text.rstrip().splitlines()[-3] == f"  fix: {want}"
    assert "verdict: tools reach the prompt in 0 of 9 runtimes" in text
    doc = json.loads(cli("audit", "--format", "json", CHATML_SAMPLE).stdout)
    assert doc["files"][0]["repair"]["command"] == want
    assert f"\nfix: {want}\n" in cli("diff", CHATML_SAMPLE, "--no-behaviour").output  # was --from-catalog -o PATCHED
    assert _verify_repair(CHATML_SAMPLE) == want
    assert not any(PLACEHOLDER.search(f) for f in _fix_lines(text))
    rules = cli("rules", "GT201").output
    assert "--from-catalog ID --tools-in-default" in rules and "&& gguftpl verify FIXED.gguf" in rules

    # running it (the library's same repair): every runtime gets the tools, or its engine raises on upstream's own
    # template (TGI on the Hermes tool_use), which the finding says
    out = tmp_path / "fixed.gguf"
    result = gguftpl.patch_from_upstream(CHATML_SAMPLE, out, catalog=HERMES, tools_in_default=True)
    fixed = gguftpl.audit_paths([out]).files[0]
    assert fixed.repair is not None and not fixed.repair.needed
    for row in fixed.runtimes.rows:
        if row.outcome == FAILS:
            (gt107,) = [f for f in fixed.findings if f.code == "GT107" and row.name in f.extra.get("runtimes", ())]
            assert gt107.extra["from_upstream"].startswith("built by --tools-in-default from " + HERMES)
        else:
            assert row.tools_reach_prompt is True, row
    assert result.repair_after is not None and not result.repair_after.needed
    after = cli("audit", "--exit-zero", "--select", "GT2,GT7", out).output.split("verdict:")[-1]
    assert "fix: " not in after and "its engine raises on upstream's own template: TGI" in after

    # before/after by identity: the two GT106 of the default differ in severity; the warning (null content) went
    fixed_106 = [f for f in result.summary.fixed if f.code == "GT106"]
    assert [(f.severity.value, f.extra["probe"]) for f in fixed_106] == [("warning", "tool call with null content")]
    assert not [f for f in result.summary.introduced if f.code == "GT106"]
    shown = cli("patch", CHATML_SAMPLE, "--from-catalog", "--tools-in-default", "-o", tmp_path / "b.gguf").output
    assert "    GT106 warning default    message-shape-crash (tool call with null content)" in shown
    assert "from upstream's own template" in shown and "runtimes (input -> output):" in shown


def test_real_smollm2_and_qwen_coder(corpus_file: Any) -> None:
    smol = corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf")
    repair = gguftpl.audit_paths([smol]).files[0].repair
    # its family is known by its tokenizer, its templates are not: no command that cannot work, and it says why
    assert repair.command is None and repair.source == "unknown"
    assert "knows no upstream template with tools" in repair.advice and "SmolLM2" in repair.advice
    text = cli("audit", "--exit-zero", smol).output
    assert set(_fix_lines(text)[-1:]) == {repair.advice} and repair.advice in _fix_lines(text)[0]
    assert _verify_repair(smol) == repair.advice

    qwen = corpus_file("Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf")
    fa = gguftpl.audit_paths([qwen]).files[0]
    assert not fa.repair.needed and all(r.tools_reach_prompt for r in fa.runtimes.rows)
    text = cli("audit", qwen).output
    assert "verdict: tools reach the prompt in 9 of 9 runtimes" in text and "  fix: " not in text.split("verdict:")[1]
    # --from-catalog would write the Qwen2.5 family's template: identical here, so nothing is written
    res = cli("patch", qwen, "--from-catalog", "--dry-run")
    assert res.exit_code == 0 and "no template changes" in res.output


def _tail(text: str, n: int) -> list[str]:
    """The last ``n`` report lines of a file (before an audit's summary), without their indent."""
    return [ln.strip() for ln in text.rstrip().splitlines()[-n:]]


@pytest.mark.parametrize("kind", ["sample", "tool_use", "anonymous"])
def test_diff_ends_with_the_verdict_and_the_fix_audit_prints(kind: str, make_gguf: Any) -> None:
    """Issue 26: each file's text report ends with the verdict per runtime and the one fix; `diff` printed them
    before its summary, and with no upstream known (offline, no metadata, no catalog match) nothing but its error
    line. Now it ends with audit's very lines, and without an upstream it prints them, then its error, exit 2; the
    library hands the same repair to the caller (``on_no_upstream``)."""
    templates = {"default": CHATML, "tool_use": TOOLS_DEFAULT} if kind == "tool_use" else {"default": CHATML}
    path = CHATML_SAMPLE if kind == "sample" else make_gguf(f"{kind}.gguf", templates=templates)
    audit = cli("audit", "--exit-zero", "--width", "10000", path).output
    want = _tail(audit.rsplit("\n\n", 1)[0], 2)  # the file block's last lines: verdict, fix
    assert want[0].startswith("verdict: ") and want[1].startswith("fix: "), audit[-2000:]
    res = cli("diff", path, "--no-behaviour", "--width", "10000")
    assert _tail(res.stdout, 2) == want, res.stdout[-2000:]
    fa = gguftpl.audit_paths([path]).files[0]
    if kind == "sample":
        assert res.exit_code == 1 and gguftpl.diff(path).repair.text() == fa.repair.text()
        # the JSON carries the same runtime rows and repair as audit's
        doc = json.loads(cli("diff", path, "--no-behaviour", "--format", "json").stdout)
        audited = json.loads(cli("audit", "--format", "json", path).stdout)["files"][0]
        assert doc["runtimes"] == audited["runtimes"] and doc["repair"]["command"] == audited["repair"]["command"]
        return
    assert res.exit_code == 2 and res.stdout.startswith(f"{path}\n"), (res.stdout, res.stderr)
    (err,) = res.stderr.strip().splitlines()
    assert err.startswith("gguftpl: error: cannot tell which repo this GGUF came from")
    told: list[Any] = []
    with pytest.raises(gguftpl.UsageError):
        gguftpl.diff(path, on_no_upstream=lambda view, repair, own: told.append(repair))
    assert told == [fa.repair] and want[1] == f"fix: {fa.repair.text()}"
    assert (fa.repair.command is not None) == (kind == "tool_use")


def test_real_smollm2_and_qwen_coder_diff_ends_as_audit_does(corpus_file: Any) -> None:
    """Acceptance of issue 26 on the corpus: `diff` prints audit's verdict and fix. SmolLM2 (its upstream unknown
    offline) gets the same advice and then diff's error, exit 2; Qwen2.5-Coder (tools in all 9) no fix at all."""
    for name, code in (("SmolLM2-135M-Instruct.Q4_1.gguf", 2), ("Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf", 0)):
        path = corpus_file(name)
        fa = gguftpl.audit_paths([path]).files[0]
        audit = cli("audit", "--exit-zero", "--width", "10000", path).output.rsplit("\n\n", 1)[0]
        want = _tail(audit, 2 if fa.repair.needed else 1)
        assert want[0].startswith("verdict: "), audit[-1500:]
        res = cli("diff", path, "--no-behaviour", "--width", "10000")
        assert res.exit_code == code and _tail(res.stdout, len(want)) == want, (res.stdout[-1500:], res.stderr)
        if fa.repair.needed:
            assert want[1] == f"fix: {fa.repair.text()}" and "fix: " in audit.split("verdict: ")[0]
        else:
            assert "fix: " not in res.stdout and "9 of 9 runtimes" in want[0]


def test_an_upstream_without_a_tool_template_says_no_repair_exists(make_gguf: Any) -> None:
    entry = load_catalog().get("deepseek-ai/DeepSeek-R1-Distill-Llama-8B")
    assert entry is not None
    path = make_gguf(
        "r1.gguf", templates={"default": CHATML}, extra_kv={"general.name": "DeepSeek-R1-Distill-Llama-8B"}
    )
    fa = gguftpl.audit_paths([path]).files[0]
    assert fa.repair.command is None and fa.repair.advice.startswith(NO_TOOL_TEMPLATE)
    fixes = [f.fix for f in fa.findings if f.fix]
    assert fixes and all(not PLACEHOLDER.search(f) for f in fixes), fixes
    assert fa.repair.advice in [f.fix for f in fa.findings if f.code == "GT201"]


def test_markers_upstream_needs_that_are_no_tokens_say_no_repair_exists(make_gguf: Any) -> None:
    # named like a Hermes 3 model, but its vocabulary has none of the ChatML control tokens Hermes writes
    path = make_gguf(
        "h3.gguf", templates={"default": "{{ messages }}"}, specials=(), bos=None, eos=None,
        extra_kv={"general.name": "Hermes-3-Llama-3.1-8B"},
    )  # fmt: skip
    repair = gguftpl.audit_paths([path]).files[0].repair
    assert repair.command is None and repair.source == "none"
    assert "not a token of this file's vocabulary" in repair.advice and "'<|im_start|>'" in repair.advice


def test_real_vocab_with_its_upstream_reasoning_template_says_no_repair_exists(
    corpus_file: Any, tmp_path: Path
) -> None:
    """Issue 25 item 2 on real files: llama.cpp's real Llama-3 vocabulary (DeepSeek-R1-Distill-Llama-8B's tokenizer
    family) carrying the catalog's DeepSeek-R1-Distill-Llama-8B template, written by ``gguftpl patch`` itself. Its
    upstream has no tool template and its tool markers are no tokens here: the fix says so, and names nothing."""
    upstream = Path(gguftpl.__file__).parent.parent / "upstream_templates" / "deepseek-ai"
    template = upstream / "DeepSeek-R1-Distill-Llama-8B" / "default.jinja"
    out = tmp_path / "r1.gguf"
    made = cli("patch", corpus_file("ggml-vocab-llama-bpe.gguf"), "--template", f"default={template}", "-o", out)
    assert made.exit_code == 0, made.output
    fa = gguftpl.audit_paths([out]).files[0]
    assert fa.repair.command is None and fa.repair.advice.startswith(NO_TOOL_TEMPLATE)
    assert "deepseek-ai/DeepSeek-R1-Distill-Llama-8B" in fa.repair.advice
    missing = {f.evidence or f.message for f in fa.findings if f.code == "GT301"}
    assert any("tool▁calls▁begin" in m for m in missing), missing
    text = cli("audit", "--exit-zero", out).output
    assert "verdict: tools reach the prompt in 0 of" in text
    assert all(not PLACEHOLDER.search(f) for f in _fix_lines(text)), _fix_lines(text)


def test_adding_a_template_to_a_file_with_none_is_no_regression(tmp_path: Path) -> None:
    """No template (GT101: llama.cpp's ChatML fallback drops the tools) and a template ignoring tools (GT201) are one
    verdict with one severity: the exit code does not go 0 -> 1, and the before/after says nothing changed."""
    src = SAMPLES / "no-template.gguf"
    chatml = tmp_path / "chatml.jinja"
    chatml.write_text(CHATML, encoding="utf-8")
    before = cli("audit", src)
    res = cli("patch", src, "--template", f"default={chatml}", "-o", tmp_path / "o.gguf")
    assert res.exit_code == 0, res.output
    after = cli("audit", tmp_path / "o.gguf")
    assert before.exit_code == after.exit_code == 1
    codes = {f.code: f.severity.value for f in gguftpl.audit_paths([src]).findings}
    assert codes["GT101"] == "error"
    fixed = res.output.split("  fixed:", 1)[1].split("  introduced:", 1)
    assert "GT101" not in fixed[0] and "GT201" not in fixed[1], res.output
    assert "no change: the tools reach the prompt in the same runtimes as before" in res.output


def test_a_refusal_says_when_the_original_fails_too() -> None:
    from gguftpl.errors import PatchError
    from gguftpl.runtimes.toolsdefault import (
        Comparison,
        Rendered,
        ToolsDefault,
        ToolsDefaultProof,
        refuse_unless_accepted,
    )

    moved = Comparison(
        "llama.cpp", "plain", False, "the original file",
        Rendered(None, "While executing CallExpression at line 1, column 82 in source:\n...x\n   ^\nError: boom"),
        Rendered(None, "While executing CallExpression at line 152, column 104 in source:\n...y\n      ^\nError: boom"),
    )  # fmt: skip
    assert moved.same  # the same exception, only its position moved: no difference
    other = Comparison("transformers", "tools", True, "tool_use", Rendered(None, "A"), Rendered(None, "B"))
    proof = ToolsDefaultProof((moved, other))
    with pytest.raises(PatchError, match="the original fails too, with another error: 'A' vs 'B'"):
        refuse_unless_accepted(ToolsDefault("d", "t", "n", proof), accept=False)


def test_same_failure_in_old_and_new_default_is_no_difference(make_gguf: Any) -> None:
    from gguftpl.patching import plan_tools_in_default

    raises = (
        "{% for message in messages %}{% if message['role'] == 'tool' %}{{ raise_exception('no tool role') }}"
        "{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )
    tool_use = load_catalog().get(HERMES).text("tool_use")  # type: ignore[union-attr]
    path = make_gguf("raises.gguf", templates={"default": raises, "tool_use": tool_use})
    _, made = plan_tools_in_default(str(path))
    assert made is not None and made.proof.ok, made.proof.text()
    assert "SAME FAILURE: tool round trip, no tools passed" in made.proof.text()


def test_tools_in_default_on_an_entry_without_tool_use_names_the_real_reason(make_gguf: Any, tmp_path: Path) -> None:
    path = make_gguf("g.gguf", templates={"default": CHATML})
    res = cli("patch", path, "--from-catalog", "google/gemma-2-2b-it", "--tools-in-default", "-o", tmp_path / "o.gguf")
    assert res.exit_code == 2 and not (tmp_path / "o.gguf").exists()
    assert "google/gemma-2-2b-it has no tool_use template" in res.output and NO_TOOL_TEMPLATE in res.output
    assert "--tools-in-default together" not in res.output  # not the command the user just ran


def test_catalog_matches_say_what_matched_and_refuse_a_neighbour(corpus_file: Any, make_gguf: Any) -> None:
    res = cli("patch", CHATML_SAMPLE, "--from-catalog", HERMES, "--dry-run")
    assert res.exit_code == 0 and f"catalog entry {HERMES}: exact upstream (catalog match: model name" in res.output

    smol = corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf")
    refused = cli("patch", smol, "--from-catalog", "google/gemma-2-2b-it", "--dry-run")
    assert refused.exit_code == 2 and "refusing --from-catalog google/gemma-2-2b-it: a neighbour" in refused.output
    assert "the SmolLM2 family's" in refused.output and "--accept-family" in refused.output
    accepted = cli("patch", smol, "--from-catalog", "google/gemma-2-2b-it", "--dry-run", "--accept-family")
    assert accepted.exit_code == 0 and "a neighbour" in accepted.output and "applied as asked" in accepted.output

    llama3 = corpus_file("ggml-vocab-llama-bpe.gguf")
    qwen = cli("patch", llama3, "--from-catalog", "Qwen/Qwen2.5-7B-Instruct", "--dry-run")
    assert qwen.exit_code == 2 and "'<|im_start|>'" in qwen.output and "Llama 3 family's" in qwen.output


def test_from_catalog_keeps_a_template_that_already_renders_the_tools(make_gguf: Any, tmp_path: Path) -> None:
    path = make_gguf("works.gguf", templates={"default": TOOLS_DEFAULT})
    kept = cli("patch", path, "--from-catalog", "Qwen/Qwen2.5-7B-Instruct", "-o", tmp_path / "o.gguf")
    assert kept.exit_code == 0 and "kept the file's default template" in kept.output
    assert kept.output.endswith("nothing written\n") and not (tmp_path / "o.gguf").exists()
    asked = cli("patch", path, "--from-catalog", "Qwen/Qwen2.5-7B-Instruct", "--only", "default", "-o", tmp_path / "a")
    assert asked.exit_code == 0 and (tmp_path / "a").exists()


def test_no_fix_line_names_a_placeholder_when_the_repo_is_known() -> None:
    pytest.importorskip("xllamacpp")
    doc = json.loads(cli("audit", "--engine", "llamacpp", "--format", "json", CHATML_SAMPLE).stdout)
    fixes = [f["fix"] for f in doc["files"][0]["findings"] if f.get("fix")]
    assert any(f.startswith("gguftpl patch") for f in fixes)
    assert not [f for f in fixes if PLACEHOLDER.search(f)], fixes
    # llama.cpp's own verdicts (GT601, GT602) give the same repair as the audit's GT201
    assert len({f for f in fixes if "--from-catalog" in f}) == 1


def test_the_repair_follows_the_runtimes_judged() -> None:
    upstream = SAMPLES / "hermes-2-pro-mistral-7b.upstream.gguf"
    llamacpp = gguftpl.audit_paths([upstream], gguftpl.AuditOptions(runtimes=("llama.cpp",))).files[0]
    assert not llamacpp.repair.needed  # llama.cpp switches to tool_use: nothing to repair for it
    vllm = gguftpl.audit_paths([upstream], gguftpl.AuditOptions(runtimes=("vllm",))).files[0]
    assert vllm.repair.command == (
        f"gguftpl patch {upstream} --tools-in-default -o FIXED.gguf && gguftpl verify FIXED.gguf"
    )
    assert vllm.repair.dropping == ("vLLM",)


def test_tools_in_default_without_tool_use_names_the_files_one_repair(corpus_file: Any, tmp_path: Path) -> None:
    """Issue 25 item 4, the plain form: ``patch FILE --tools-in-default`` on a file without tool_use said "bring
    upstream's with --from-hub REPO or --from-catalog and --tools-in-default together" (a placeholder, and not the
    file's repair). It now names the repair ``audit`` prints, or the plain fact when there is none to run."""
    out = tmp_path / "o.gguf"
    res = cli("patch", CHATML_SAMPLE, "--tools-in-default", "-o", out)
    assert res.exit_code == 2 and not out.exists(), res.output
    want = gguftpl.audit_paths([CHATML_SAMPLE]).files[0].repair.command
    assert want is not None and f"--from-catalog {HERMES} --tools-in-default" in want
    assert f"its repair: {want}" in res.output, res.output
    assert not PLACEHOLDER.search(res.output), res.output

    smol = corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf")
    res = cli("patch", smol, "--tools-in-default", "-o", out)
    assert res.exit_code == 2 and not out.exists(), res.output
    advice = gguftpl.audit_paths([smol]).files[0].repair.advice
    assert "knows no upstream template with tools" in advice and advice in res.output, res.output
    assert "--from-hub REPO" not in res.output


def test_real_base_model_without_a_template_says_no_repair_exists(corpus_file: Any) -> None:
    """Issue 25 item 2, the base model: llama.cpp's real Llama-2 SentencePiece vocabulary, no chat template, an
    upstream gguftpl cannot name. Its fix said 'with a chat template with tools you trust: gguftpl patch FILE
    --template default=PATH', a placeholder; it is now the plain fact, in every fix line, with no command."""
    spm = corpus_file("ggml-vocab-llama-spm.gguf")
    fa = gguftpl.audit_paths([spm]).files[0]
    assert fa.kind is not None and fa.kind.kind == "base"
    assert fa.repair.command is None and fa.repair.source == "none"
    assert fa.repair.advice.startswith("no template repair gives this model tools: a base model without a chat")
    text = CliRunner(env={"COLUMNS": "10000"}).invoke(main_group, ["audit", "--exit-zero", str(spm)]).output
    assert "verdict: tools reach the prompt in 0 of 9 runtimes" in text
    fixes = _fix_lines(text)
    assert fixes and set(fixes) == {fa.repair.advice} and not PLACEHOLDER.search(text), fixes
    assert _verify_repair(spm) == fa.repair.advice


def test_a_template_added_to_a_real_base_file_shows_one_verdict_before_and_after(
    corpus_file: Any, tmp_path: Path
) -> None:
    """Issue 25 item 5 on a real file: ChatML added to llama.cpp's real Llama-2 vocabulary, which has no template.
    Before, llama.cpp's ChatML fallback drops the tools (GT101); after, the template ignores them (GT201). The
    patch's tool-calling headline said "before: none, after: 1 error", a regression; it is one verdict."""
    chatml = tmp_path / "chatml.jinja"
    chatml.write_text(CHATML, encoding="utf-8")
    spm = corpus_file("ggml-vocab-llama-spm.gguf")
    res = cli("patch", spm, "--template", f"default={chatml}", "-o", tmp_path / "o")
    assert res.exit_code == 0, res.output
    head = res.output.split("tool-calling findings (audit before -> after):\n", 1)[1].split("all findings", 1)[0]
    assert head.splitlines() == [
        "  before: 1 error",
        "    GT101 error   -          no-chat-template (the tools never reach the prompt)",
        "  after:  1 error",
        "    GT201 error   default    tools-not-rendered (the tools never reach the prompt)",
    ], head
    assert "no change: the tools reach the prompt in the same runtimes as before" in res.output


def test_from_catalog_on_a_real_working_template_says_it_kept_it(corpus_file: Any) -> None:
    """Issue 25 item 7 on a real file: llama.cpp's real Gemma 4 vocabulary, whose own template renders the tools,
    with ``--from-catalog google/gemma-2-2b-it`` (a neighbour). The template is kept, and the patch said "nothing
    to change: FILE already has google/gemma-2-2b-it's templates" and "the file already has these templates":
    untrue, the texts differ. It says which template it kept and why."""
    gemma = corpus_file("ggml-vocab-gemma-4.gguf")
    res = cli("patch", gemma, "--from-catalog", "google/gemma-2-2b-it", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "catalog entry google/gemma-2-2b-it: a neighbour, not this GGUF's upstream" in res.output
    assert "already has google/gemma-2-2b-it's templates" not in res.output
    assert "the file already has these templates" not in res.output
    assert (
        f"nothing to change: {gemma} keeps its default template, which already puts the tool schemas in the prompt "
        "(google/gemma-2-2b-it's would replace it; --only default replaces it anyway); nothing is written"
    ) in " ".join(res.output.split()), res.output


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("ggml-vocab-nomic-bert-moe.gguf", "not a chat model: an embedding model (nomic-bert-moe.pooling_type = 1"),
        ("ggml-vocab-llama-spm.gguf", "no template repair gives this model tools: a base model without a chat"),
    ],
)
def test_tools_in_default_without_a_default_says_why_no_repair_applies(
    corpus_file: Any, tmp_path: Path, name: str, why: str
) -> None:
    """A real embedding model and a real base model have no default to carry the tools into: the refusal said only
    that; it now says why no template repair applies, with no command."""
    res = cli("patch", corpus_file(name), "--tools-in-default", "-o", tmp_path / "o.gguf")
    assert res.exit_code == 2 and not (tmp_path / "o.gguf").exists()
    assert "has no default template to carry the tools into; " + why in res.output, res.output
    assert "gguftpl patch" not in res.output and not PLACEHOLDER.search(res.output)


def test_a_family_entry_without_a_fingerprint_is_not_refused_when_its_markers_are_tokens(corpus_file: Any) -> None:
    """llama.cpp's real Command R vocabulary (c4ai-command-r-v01's tokenizer) with ``--from-catalog
    CohereForAI/c4ai-command-r-plus``: the entry has no tokenizer fingerprint, and every control marker its template
    writes (``<|START_OF_TURN_TOKEN|>``…) is a token here. It was refused as a neighbour because "this GGUF's
    tokenizer is the Command R family's, CohereForAI/c4ai-command-r-plus's is of no fingerprinted family": no
    difference at all. A neighbour with no marker to tell it by (gemma-2 onto SmolLM2) is still refused."""
    res = cli("patch", corpus_file("ggml-vocab-command-r.gguf"), "--from-catalog", "CohereForAI/c4ai-command-r-plus",
              "--dry-run")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "refusing" not in res.output and "of no fingerprinted family" not in res.output
    assert "catalog entry CohereForAI/c4ai-command-r-plus: a neighbour, not this GGUF's upstream" in res.output
    assert "its templates' markers are tokens of this vocabulary" in res.output


def test_from_catalog_keeps_only_a_template_the_audit_finds_rendering_the_tools(corpus_file: Any) -> None:
    """llama.cpp's real Command R vocabulary carries Command R's own tool_use, which reads ``tool.name``: llama.cpp
    renders no OpenAI-shaped tool with it (the audit's GT201). ``--from-catalog`` kept it as "already puts the tool
    schemas in the prompt" (the AST has a path from ``tools`` to the output); it keeps only what the audit agrees
    renders them."""
    vocab = corpus_file("ggml-vocab-command-r.gguf")
    fa = gguftpl.audit_paths([vocab]).files[0]
    assert any(f.code == "GT201" and f.template == "tool_use" for f in fa.findings)
    res = cli("patch", vocab, "--from-catalog", "CohereForAI/c4ai-command-r-plus", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "kept the file's tool_use template" not in res.output and "keeps its tool_use" not in res.output
    assert "replace   tool_use" in res.output, res.output
