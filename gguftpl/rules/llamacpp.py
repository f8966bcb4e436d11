"""GT6xx: verdicts of llama.cpp itself (``gguftpl verify``, ``audit --engine llamacpp``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gguftpl.engines.llamacpp_choice import FALLBACK
from gguftpl.findings import Finding, Location, Rule, Severity, check, make_finding, register
from gguftpl.repair import RULE_FIX
from gguftpl.rules.context import FileContext
from gguftpl.verify.result import (
    NOT_RUN,
    REJECTED,
    RENDER_BOMB,
    STAGE_AGREEMENT,
    STAGE_CALL,
    STAGE_RESULT,
    STAGE_SCHEMA,
    STAGE_SELECTION,
    VerifyResult,
)

if TYPE_CHECKING:
    from gguftpl.templates.facts import TemplateFacts

LLAMACPP_TOOLS_DROPPED = register(
    Rule(
        "GT601",
        "llamacpp-tools-dropped",
        Severity.ERROR,
        "llama.cpp renders a request with tools into a prompt that holds no tool schema.",
        why="This is what a llama.cpp-based runtime (llama-server, Goose, LM Studio's llama.cpp engine) really "
        "sends the model: the tools are gone, llama.cpp only logs a warning, and the model answers without them.",
        example="A Hermes-2-Pro GGUF whose only template is plain ChatML: `supports_tools=false`, the canary tool's "
        "name and parameter description are absent from `/apply-template`'s prompt.",
        fix="Install a template that renders `tools` (upstream's `tool_use`): " + RULE_FIX,
    )
)
LLAMACPP_CALL_NOT_PARSED = register(
    Rule(
        "GT602",
        "llamacpp-call-not-parsed",
        Severity.ERROR,
        "A tool call written the way the template itself writes calls is not parsed back by llama.cpp.",
        why="llama.cpp derives its tool-call parser from the template; when that fails, a model that emits a "
        "perfect call gets it back as plain text (or an error) and the host never runs the tool.",
        example="The template writes no text for an assistant `tool_calls` message, or its format is one "
        "llama.cpp's differential parser cannot learn.",
        fix="Use the model's upstream tool template; check with `gguftpl verify FILE`.",
    )
)
LLAMACPP_RESULT_NOT_RENDERED = register(
    Rule(
        "GT603",
        "llamacpp-result-not-rendered",
        Severity.ERROR,
        "After a tool call, llama.cpp's prompt for the next turn does not contain the tool's result.",
        why="The model never sees what the tool returned and answers from nothing (or calls the tool again).",
        example="A template with no branch for the `tool` role, or one llama.cpp cannot render with tools.",
        fix="Use a template that renders `tool` messages (upstream's tool template).",
    )
)
LLAMACPP_HF_MISMATCH = register(
    Rule(
        "GT604",
        "llamacpp-hf-prompt-mismatch",
        Severity.WARNING,
        "Two engines render different prompts for the same request: llama.cpp (or another runtime's engine) and "
        "transformers (Hugging Face semantics).",
        why="The model was trained and evaluated on transformers' rendering; llama.cpp's Jinja engine differs on "
        "some constructs (`|safe`, `tojson` escaping, generators, list mutation), or transformers cannot render "
        "the template at all. Prompts then differ between runtimes. The other runtimes' engines are compared too "
        "(LM Studio's @huggingface/jinja, minijinja as TGI, mistral.rs and Dynamo set it up: TGI trims no "
        "whitespace, for one); those differences are information, llama.cpp's a warning.",
        example="`tools | map('tojson')` joined by a template: transformers raises on the generator, llama.cpp "
        "renders it.",
        fix="Review the first difference shown by `gguftpl verify FILE`; prefer constructs both engines agree on.",
    )
)


@check(LLAMACPP_HF_MISMATCH, "template")
def engines_render_differently(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    """The audit's own comparison: every probe both engines rendered, transformers given llama.cpp's variables."""
    from gguftpl.runtimes.profiles import for_engine

    for d in t.engine_differences:
        if d.engine != "llamacpp":
            who = " and ".join(p.name for p in for_engine(d.engine)) or d.engine
            yield ctx.finding(
                LLAMACPP_HF_MISMATCH,
                f"{d.engine} ({who}) and transformers render different prompts for the {d.probe} conversation, "
                f"from character {d.at} (line {d.line}); around it {d.engine} {d.llama!r} vs transformers "
                f"{d.transformers!r}",
                t,
                evidence=f"{d.engine}: {d.llama!r}\ntransformers: {d.transformers!r}",
                severity=Severity.INFO,
                probe=d.probe,
                check="engine-agreement",
                engine=d.engine,
                runtimes=[p.name for p in for_engine(d.engine)],
            )
            continue
        yield ctx.finding(
            LLAMACPP_HF_MISMATCH,
            f"llama.cpp and transformers render different prompts for the {d.probe} conversation, from character "
            f"{d.at} (line {d.line}); around it llama.cpp {d.llama!r} vs transformers {d.transformers!r}",
            t,
            evidence=f"llama.cpp:    {d.llama!r}\ntransformers: {d.transformers!r}\n"
            f"normalised: {'; '.join(d.normalised)}",
            probe=d.probe,
            check="engine-agreement",
        )


LLAMACPP_CHATML_FALLBACK = register(
    Rule(
        "GT605",
        "llamacpp-chatml-fallback",
        Severity.WARNING,
        "The file has no chat template and llama.cpp silently falls back to its built-in ChatML.",
        why="Unless the model really speaks ChatML, every prompt is in the wrong format, and tools are dropped.",
        example="A GGUF converted without `tokenizer.chat_template`.",
        fix="Add the model's templates: " + RULE_FIX,
    )
)
LLAMACPP_TEMPLATE_REJECTED = register(
    Rule(
        "GT606",
        "llamacpp-template-rejected",
        Severity.ERROR,
        "llama.cpp cannot parse a chat template of the file and refuses to load it.",
        why="llama-server exits at startup with 'chat template parsing error' (or crashes, when the template "
        "overflows its renderer); users must pass --no-jinja or their own --chat-template, and tool calling is "
        "lost either way. A tool_use template llama.cpp cannot parse is dropped without a word, so requests "
        "with tools get the default template. The default audit asks llama.cpp (when xllamacpp is installed) "
        "to load each distinct default and tool_use template once, in a child process.",
        example="A template using a construct llama.cpp's Jinja engine does not support, or a syntax error.",
        fix="Replace the template with one llama.cpp parses (upstream's current one): `gguftpl patch FILE "
        "--from-hub REPO -o FIXED.gguf`; check with `gguftpl verify FIXED.gguf`.",
    )
)


@check(LLAMACPP_TEMPLATE_REJECTED, "template")
def llamacpp_template_rejected(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    error = t.llamacpp_load_error
    if not error:
        return
    from gguftpl.engines.llamacpp import crashed_or_hung  # the worker module: only when there is an error

    if crashed_or_hung(error):
        what = f"the {t.name} template"  # the worker crashed or hung: the error says so
    elif t.name == "default":
        what = "llama.cpp refuses to load the file: llama-server exits at startup ('chat template parsing error')"
    else:
        what = (
            f"llama.cpp cannot use the {t.name} template: it drops one it cannot parse (requests with tools "
            "then get the default template) or fails every request with tools"
        )
    yield ctx.finding(
        LLAMACPP_TEMPLATE_REJECTED,
        f"{what}: {error[:300]}",
        t,
        evidence=f"llama.cpp, loading a stand-in model that carries this template: {error[:1200]}",
        fix=ctx.hub_fix(t.name),
        check="llamacpp-parse",
    )


LLAMACPP_RENDER_BOMB = register(
    Rule(
        "GT607",
        "llamacpp-render-bomb",
        Severity.ERROR,
        "A chat template exhausts time, output size, memory or recursion when rendered; llama.cpp would hang "
        "or crash on it, so it was not run there.",
        why="llama.cpp renders templates without time, size or recursion limits: such a template stalls every "
        "request, fills memory, or overflows the stack and kills llama-server (a self-calling macro, thousands "
        "of nested brackets).",
        example="`{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}`, or a loop that prints gigabytes.",
        fix="Replace the template with a working upstream one: `gguftpl patch FILE --from-hub REPO -o FIXED.gguf`.",
    )
)
LLAMACPP_LOAD_FAILED = register(
    Rule(
        "GT608",
        "llamacpp-load-failed",
        Severity.ERROR,
        "llama.cpp refuses to load the file for a reason other than its chat template.",
        why="Whatever the templates say, llama-server exits at startup: a key of the wrong type, a broken "
        "vocabulary, truncated data. The message is llama.cpp's own.",
        example="`key tokenizer.ggml.eos_token_id has wrong type i32 but expected type u32`.",
        fix="Re-convert the file with a current llama.cpp converter (see also GT003/GT004 for the cause).",
    )
)


# ---------------------------------------------------------------------------------------------- checks
# Each reads one stage of a verify result (gguftpl.verify.result.VerifyResult: the facts) and yields its
# finding when that stage failed; registered in stage order, so findings come out in the order of the stages.
# Tool-check stages are not findings.


@dataclass(frozen=True)
class VerifyFacts:
    """What the GT6xx checks read: llama.cpp's verdicts on one file, and where to report them."""

    result: VerifyResult
    label: str
    """The file as the report names it."""
    upstream_repo: str | None = None
    """The repo the fix command names (``REPO`` when unknown)."""
    repair: str | None = None
    """The file's one repair of its tool calling (:mod:`gguftpl.repair`), when the audit computed it: the fix of
    the stages where the tools are lost (no template, dropped, no call format)."""


def _stage_finding(rule: Rule, facts: VerifyFacts, stage: str) -> Iterator[Finding]:
    import shlex

    from gguftpl.gguf.templateset import template_key
    from gguftpl.repair import upstream_command

    st = facts.result.failed(stage)
    if st is None:
        return
    name = facts.result.template
    tname = name if name not in (None, FALLBACK, *NOT_RUN) else None
    fix = upstream_command(facts.label, facts.upstream_repo) or (
        f"gguftpl patch {shlex.quote(facts.label)} --from-hub REPO -o FIXED.gguf && gguftpl verify FIXED.gguf"
    )
    if facts.repair and rule in (LLAMACPP_TOOLS_DROPPED, LLAMACPP_CHATML_FALLBACK, LLAMACPP_CALL_NOT_PARSED):
        fix = facts.repair
    yield make_finding(
        rule,
        f"llama.cpp verification, stage {st.name!r}: {st.evidence.splitlines()[0][:300]}",
        Location(file=facts.label, key=template_key(tname) if tname else None),
        template=tname,
        evidence=st.evidence[:1200],
        fix=fix if rule is not LLAMACPP_HF_MISMATCH else None,
        stage=st.name,
    )


@check(LLAMACPP_TEMPLATE_REJECTED, "llamacpp")
def template_rejected(facts: VerifyFacts) -> Iterator[Finding]:
    if facts.result.template == REJECTED:
        yield from _stage_finding(LLAMACPP_TEMPLATE_REJECTED, facts, STAGE_SELECTION)


@check(LLAMACPP_RENDER_BOMB, "llamacpp")
def render_bomb(facts: VerifyFacts) -> Iterator[Finding]:
    if facts.result.template == RENDER_BOMB:
        yield from _stage_finding(LLAMACPP_RENDER_BOMB, facts, STAGE_SELECTION)


@check(LLAMACPP_CHATML_FALLBACK, "llamacpp")
def chatml_fallback(facts: VerifyFacts) -> Iterator[Finding]:
    if facts.result.template not in NOT_RUN:  # an incomplete file is GT004's, from the audit itself
        yield from _stage_finding(LLAMACPP_CHATML_FALLBACK, facts, STAGE_SELECTION)


@check(LLAMACPP_TOOLS_DROPPED, "llamacpp")
def tools_dropped(facts: VerifyFacts) -> Iterator[Finding]:
    return _stage_finding(LLAMACPP_TOOLS_DROPPED, facts, STAGE_SCHEMA)


@check(LLAMACPP_CALL_NOT_PARSED, "llamacpp")
def call_not_parsed(facts: VerifyFacts) -> Iterator[Finding]:
    return _stage_finding(LLAMACPP_CALL_NOT_PARSED, facts, STAGE_CALL)


@check(LLAMACPP_RESULT_NOT_RENDERED, "llamacpp")
def result_not_rendered(facts: VerifyFacts) -> Iterator[Finding]:
    return _stage_finding(LLAMACPP_RESULT_NOT_RENDERED, facts, STAGE_RESULT)


@check(LLAMACPP_HF_MISMATCH, "llamacpp")
def hf_mismatch(facts: VerifyFacts) -> Iterator[Finding]:
    return _stage_finding(LLAMACPP_HF_MISMATCH, facts, STAGE_AGREEMENT)
