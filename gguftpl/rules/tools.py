"""GT2xx: tool calling: do the schemas, calls and results reach the prompt, and in which dialect."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gguftpl.findings import Finding, Rule, Severity, check, register
from gguftpl.repair import RULE_FIX, TOOLS_NEVER_REACH
from gguftpl.rules.context import FileContext
from gguftpl.templates import probes
from gguftpl.templates.facts import EVIDENCE_MAX, around, trim

if TYPE_CHECKING:
    from gguftpl.runtimes.view import RuntimeView
    from gguftpl.templates.facts import TemplateFacts


def tools_missing(t: TemplateFacts) -> bool:
    """The canary tool's schema reaches no prompt: not the user-only one, not one with a system message."""
    return t.tools_in_prompt is False and not t.tools_with_system


TOOLS_NOT_RENDERED = register(
    Rule(
        "GT201",
        "tools-not-rendered",
        Severity.ERROR,
        "The template never puts the tool schemas into the prompt.",
        why="Tools passed by the client are silently dropped: the model never sees them, answers without "
        "calling them or hallucinates a result, and nothing in the runtime says why.",
        example="Plain ChatML `{% for message in messages %}<|im_start|>…{% endfor %}` in a model trained "
        "for tool calls (Hermes-2-Pro GGUFs).",
        fix=RULE_FIX,
    )
)


_ENGINE_WORDS = {
    "llama.cpp": "llama.cpp rendered it with a canary tool",
    "transformers": "rendered with a canary tool",
    "lenient": "rendered with a canary tool (in llama.cpp's lenient sandbox: transformers refuses it)",
}


@check(TOOLS_NOT_RENDERED, "template")
def tools_not_rendered(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    if not tools_missing(t) or t.tool_name_in_prompt:
        return
    if t.name == "default" and ctx.tool_capable():
        return  # GT205: llama.cpp switches to the tool-capable one
    how = []
    if t.tools_engine in _ENGINE_WORDS:
        how.append(
            f"{_ENGINE_WORDS[t.tools_engine]}: neither its name nor its parameter description appears in the prompt"
        )
    else:
        how.append("the template could not be rendered")
    if t.tools_static is False:
        reads = t.static is not None and t.static.reads_tools
        how.append("the template reads `tools` only to test it" if reads else "the template never reads `tools`")
    elif t.tools_static:
        how.append("the AST has a path from `tools` to the output that the probe did not take")
    message = "tool schemas never reach the prompt: " + "; ".join(how)
    severity: Severity | None = None
    fix: str | None = ctx.tools_fix() or ctx.hub_fix("tool_use")
    verdict: str | None = TOOLS_NEVER_REACH
    if t.name != "default" and "tool" not in t.name:
        message = f"named template '{t.name}' does not render tools (a problem only if used for tool calls)"
        severity, fix, verdict = Severity.INFO, None, None
    yield ctx.finding(
        TOOLS_NOT_RENDERED,
        message,
        t,
        evidence=trim(t.tools_prompt()),
        fix=fix,
        severity=severity,
        tools_in_prompt=t.tools_in_prompt,
        tools_static=t.tools_static,
        engine=t.tools_engine,
        **_verdict(verdict),
    )


def _verdict(verdict: str | None) -> dict[str, Any]:
    """``verdict=…`` for a finding that says the tools never reach the prompt (``gguftpl.repair``)."""
    return {"verdict": verdict} if verdict else {}


TOOLS_PARTIALLY_RENDERED = register(
    Rule(
        "GT202",
        "tool-schema-incomplete",
        Severity.WARNING,
        "The template renders the tool names but not their parameter schemas.",
        why="The model cannot know which arguments a tool takes; calls come back with invented arguments.",
        example="`{% for t in tools %}{{ t.function.name }}{% endfor %}`.",
        fix="Render the whole function object, e.g. `{{ tool.function | tojson }}`.",
    )
)


@check(TOOLS_PARTIALLY_RENDERED, "template")
def tools_partially_rendered(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    if tools_missing(t) and t.tool_name_in_prompt:
        yield ctx.finding(
            TOOLS_PARTIALLY_RENDERED,
            "the tool name reaches the prompt but its parameter descriptions do not",
            t,
            evidence=around(t.tools_prompt(), probes.CANARY_TOOL_NAME),
        )


TOOL_CALLS_NOT_RENDERED = register(
    Rule(
        "GT203",
        "tool-calls-not-rendered",
        Severity.WARNING,
        "The template renders tools but drops assistant `tool_calls` from the history.",
        why="In a multi-turn conversation the model does not see the calls it made, so the tool results "
        "that follow make no sense to it. Judged on llama.cpp's round-trip prompt (the call's argument value) when "
        "llama.cpp rendered one, else on transformers' rendering of the call.",
        example="A template that prints only `message.content` for assistant messages.",
        fix="Use the upstream template, which renders calls in the model's own dialect.",
    )
)


@check(TOOL_CALLS_NOT_RENDERED, "template")
def tool_calls_not_rendered(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    if t.renders_tools and t.renders_tool_calls is False:
        where = ""
        if t.calls_engine == "llama.cpp":
            hf = t.call is not None and t.call.rendered
            where = " (llama.cpp's prompt" + ("; transformers renders the call)" if hf else ")")
        yield ctx.finding(
            TOOL_CALLS_NOT_RENDERED,
            f"tools are rendered, but an assistant message's tool_calls leave no trace in the prompt{where}",
            t,
            evidence=trim(t.call_text),
        )


TOOL_RESULTS_NOT_RENDERED = register(
    Rule(
        "GT204",
        "tool-results-not-rendered",
        Severity.WARNING,
        "The template renders tools but drops `tool`-role results (or raises on them).",
        why="The model never sees what the tool returned; it repeats the call or invents the result. Judged on "
        "llama.cpp's prompt when llama.cpp rendered the round trip (the runtime the file is for), else on "
        "transformers'; the message names the engine whose prompt lacks the result.",
        example="A loop that handles only user/assistant/system roles.",
        fix="Use the upstream template, which renders tool results.",
    )
)


@check(TOOL_RESULTS_NOT_RENDERED, "template")
def tool_results_not_rendered(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    if not t.renders_tools:
        return
    if t.renders_tool_results is False:
        yield ctx.finding(
            TOOL_RESULTS_NOT_RENDERED,
            f"tools are rendered, but a tool-role result does not appear in the prompt ({_results_engine(t)})",
            t,
            evidence=trim(t.round_trip_prompt()[-EVIDENCE_MAX:]),
            engine=t.results_engine,
        )
    elif t.renders_tool_results is None and t.overrun is None:
        engines = "transformers and llama.cpp" if t.llamacpp is not None else "transformers (llama.cpp not asked)"
        yield ctx.finding(
            TOOL_RESULTS_NOT_RENDERED, f"tools are rendered, but rendering a tool round trip raises in {engines}", t
        )


def _results_engine(t: TemplateFacts) -> str:
    """Whose prompt lacks the tool result, and what the other engine did."""
    if t.results_engine != "llama.cpp":
        engine = "transformers" if t.results_engine == "transformers" else "llama.cpp's leniencies; transformers raises"
        return engine + ("" if t.llamacpp is None else "; llama.cpp did not render the round trip")
    hf = t.prompts.get("round_trip")
    if hf is not None and probes.CANARY_RESULT in hf:
        return "llama.cpp's prompt; transformers renders the result"
    return "llama.cpp's prompt" + ("; transformers' too" if probes.ROUND_TRIP in t.strict else "")


DEFAULT_IGNORES_TOOLS = register(
    Rule(
        "GT205",
        "default-template-ignores-tools",
        Severity.WARNING,
        "The default template ignores tools while a named template (e.g. `tool_use`) renders them.",
        why="llama.cpp switches to `tool_use` when tools are passed, but runtimes that read only the default "
        "template (LM Studio, vLLM and other OpenAI-compatible servers, llama-cpp-python's formatter) drop the "
        "tools, and so does Ollama, which reads only the default and often replaces it with a curated template "
        "without tools (GT701). The message names the runtimes, from the file's runtime view.",
        example="Hermes-2-Pro: `default` is ChatML, `tool_use` has `<tools>`.",
        fix="Make the default carry the tools without changing anything else: `gguftpl patch FILE "
        "--tools-in-default -o OUT.gguf` writes `{% if tools %}` + tool_use + `{% else %}` + default, proven to "
        "render the old default's prompts without tools and tool_use's with tools.",
    )
)


@check(DEFAULT_IGNORES_TOOLS, "template")
def default_ignores_tools(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    capable = ctx.tool_capable()
    if t.name != "default" or not capable or not tools_missing(t) or t.tool_name_in_prompt:
        return
    view = ctx.runtimes
    dropping = [r for r in view.dropping() if r.name != "llama.cpp"]
    names = [_runtime_label(r.name, view) for r in dropping]
    llamacpp = view.row("llama.cpp")
    head = (
        f"the default template ignores tools while '{capable[0]}' renders them: fine for llama.cpp (it "
        "switches to tool_use when tools are passed), but "
        if llamacpp.tools_reach_prompt
        else f"the default template ignores tools while '{capable[0]}' renders them, which llama.cpp never reads: "
    )
    where = " and ".join(names) if names else "runtimes that read only the default"
    yield ctx.finding(
        DEFAULT_IGNORES_TOOLS,
        head + f"{where} drop the tools",
        t,
        evidence=_runtime_evidence(ctx) + "\n\n" + trim(t.tools_prompt()),
        fix=ctx.tools_fix() or f"gguftpl patch {ctx.quoted()} --template default=PATH -o FIXED.gguf",
        tools_in_prompt=t.tools_in_prompt,
        tools_static=t.tools_static,
        runtimes_dropping_tools=[r.name for r in view.dropping()],
    )


def _runtime_label(name: str, view: RuntimeView) -> str:
    o = view.ollama
    return f"{name} (it renders its curated '{o.match}' template)" if name == "Ollama" and o.substituted else name


def _runtime_evidence(ctx: FileContext) -> str:
    from gguftpl.rules.runtimes import runtime_lines

    return runtime_lines(ctx)


TOOL_CALL_DIALECT = register(
    Rule(
        "GT206",
        "tool-call-dialect",
        Severity.INFO,
        "The tool-call format the template teaches (as it renders a call in history).",
        why="The runtime's parser must understand this format; llama.cpp derives its parser from the "
        "template, other runtimes need the matching parser configured.",
        example='Hermes: `<tool_call>\\n{"name": …, "arguments": …}\\n</tool_call>`.',
        fix="Configure the runtime's tool parser for this dialect.",
    )
)


@check(TOOL_CALL_DIALECT, "template")
def tool_call_dialect(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    if t.dialect == "none" or t.parse_error is not None or t.too_large:
        return  # a template that does not parse names its dialect in the report, not as a finding
    yield ctx.finding(
        TOOL_CALL_DIALECT,
        f"tool-call dialect: {t.dialect} (from the {t.dialect_source or 'template'} text)",
        t,
        evidence=trim(t.call_text),
        dialect=t.dialect,
    )


NO_GENERATION_PROMPT = register(
    Rule(
        "GT207",
        "no-generation-prompt",
        Severity.WARNING,
        "`add_generation_prompt` changes nothing: the template never opens the assistant turn.",
        why="The model continues the user's text instead of answering as the assistant.",
        example="A ChatML template without `{% if add_generation_prompt %}<|im_start|>assistant\\n{% endif %}`.",
        fix="Use the upstream template.",
    )
)


@check(NO_GENERATION_PROMPT, "template")
def no_generation_prompt(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    plain = t.prompts.get("plain")
    # Nothing follows the user's text: the model would continue it. (Mistral's `[/INST]` or a template
    # that always opens the assistant turn is fine.)
    if t.handles_generation_prompt is False and plain is not None and plain.rstrip().endswith(probes.CANARY_USER):
        yield ctx.finding(
            NO_GENERATION_PROMPT,
            "add_generation_prompt=True renders the same prompt as False: the assistant turn is never opened",
            t,
            evidence=trim(plain),
        )


TOOL_DATA_AS_PYTHON_REPR = register(
    Rule(
        "GT208",
        "tool-data-as-python-repr",
        Severity.WARNING,
        "The template prints tool schemas or call arguments as a Python dict (`{'key': 'value'}`), not JSON.",
        why="Printing a mapping with `{{ x }}` or `| string` gives Python's repr: single quotes, `True`, "
        "`None`. For call arguments llama.cpp cannot derive a parser from such a template and refuses to load "
        "it, and the history shows the model calls in a format it does not write (warning). A schema in repr "
        "is reported as information: it is right only if the model was trained on that form.",
        example="`{{ '\"arguments\": ' + function.arguments | string }}` with arguments passed as a mapping "
        "(transformers' convention).",
        fix="Print mappings with `| tojson` (arguments that may be a string: "
        "`{{ a if a is string else a | tojson }}`).",
    )
)


@check(TOOL_DATA_AS_PYTHON_REPR, "template")
def tool_data_as_python_repr(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    for leak in t.python_repr:
        # A schema in repr may be what the model was trained on (Apriel's upstream template prints tools with
        # `| string`): information. Call arguments in repr also break llama.cpp, which refuses the template.
        schema = leak.what == "the tool schema"
        yield ctx.finding(
            TOOL_DATA_AS_PYTHON_REPR,
            f"{leak.what} {'reaches' if schema else 'reach'} the prompt as a Python dict ({leak.needle}…), not JSON",
            t,
            evidence=leak.evidence,
            severity=Severity.INFO if schema else None,
        )


CALL_ID_IN_PLACE_OF_NAME = register(
    Rule(
        "GT209",
        "call-id-in-place-of-name",
        Severity.INFO,
        "The template writes a tool call's `id` where the function's name belongs, and not the name.",
        why="The name reaches the history only inside ids shaped like `functions.NAME:0` (Kimi K2's convention, "
        "which llama.cpp's parser gives back as the call id). A client or runtime that mints its own ids "
        "(`call_abc123`) sends calls the model cannot tell apart: it sees which call, not which tool.",
        example="`<|tool_call_begin|>{{ tool_call.id }}<|tool_call_argument_begin|>…` (Kimi K2 Thinking).",
        fix="Keep the ids llama.cpp returns when sending calls back, or build the id from the name in the "
        "template: `{{ 'functions.' + tool_call.function.name + ':' + loop.index0 | string }}`.",
    )
)


@check(CALL_ID_IN_PLACE_OF_NAME, "template")
def call_id_in_place_of_name(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    if t.call is None or not t.call.id_in_place_of_name:
        return
    yield ctx.finding(
        CALL_ID_IN_PLACE_OF_NAME,
        f"a tool call is written with its id ({probes.CANARY_CALL_ID!r}) where the function's name belongs: "
        f"the name reaches the prompt only when the id carries it ({t.call.named_id!r}, as llama.cpp returns "
        "ids); ids a client mints itself lose it",
        t,
        evidence=around(t.call.text, probes.CANARY_CALL_ID, 120),
    )


TOOLS_NEED_SYSTEM_MESSAGE = register(
    Rule(
        "GT210",
        "tools-need-system-message",
        Severity.WARNING,
        "The tool schemas reach the prompt only when the conversation has a system message.",
        why="The template writes its tool block inside the system turn. A client that sends tools with a user "
        "message alone (most agents' first request, OpenAI's own examples) gets a prompt without them: the "
        "model never learns the tools exist, although the same template works for clients that send a system "
        "prompt. `tools in prompt` reports the user-only case.",
        example="`{% if messages[0].role == 'system' %}…{{ tools | tojson }}…{% endif %}`.",
        fix="Send a system message with every tools request, or use a template that writes the tool block "
        "when there is no system message too.",
    )
)


@check(TOOLS_NEED_SYSTEM_MESSAGE, "template")
def tools_need_system_message(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    if not t.tools_need_system:
        return
    engine = "llama.cpp" if t.tools_engine == "llama.cpp" else "transformers"
    yield ctx.finding(
        TOOLS_NEED_SYSTEM_MESSAGE,
        f"the tool schemas reach the prompt only with a system message ({engine}): a request with tools and a "
        "user message alone gets none",
        t,
        evidence="user message + tools:\n"
        + trim(t.tools_prompt(), 300)
        + "\n\nsystem + user message + tools:\n"
        + around(t.tools_with_system_prompt(), probes.CANARY_TOOL_NAME, 150),
        engine=engine,
    )


TOOLS_VERDICT_UNKNOWN = register(
    Rule(
        "GT211",
        "tools-verdict-unknown",
        Severity.WARNING,
        "Whether the tool schemas reach the prompt cannot be decided: no engine rendered a conversation with "
        "tools and the AST does not rule it out.",
        why="An unknown is not a pass: the template may drop the tools, and neither llama.cpp nor transformers "
        "could show what it prints. The finding says why each engine failed.",
        example="A template transformers refuses while xllamacpp is not installed, with a path from `tools` to "
        "the output.",
        fix="Install llama.cpp's bindings (`pip install 'gguftpl[llamacpp]'`) to let llama.cpp decide, or fix "
        "the template so it renders.",
    )
)


@check(TOOLS_VERDICT_UNKNOWN, "template")
def tools_verdict_unknown(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    if t.tools_in_prompt is None and not t.too_large and t.tools_undecided:
        yield ctx.finding(
            TOOLS_VERDICT_UNKNOWN,
            f"cannot tell whether the tool schemas reach the prompt: {t.tools_undecided}",
            t,
        )


TOOLS_LOST_WITH_SYSTEM_MESSAGE = register(
    Rule(
        "GT212",
        "tools-lost-with-system-message",
        Severity.WARNING,
        "The tool schemas reach the prompt for a user message alone but vanish once a system message is sent.",
        why="Most clients send a system prompt with their tools (agents, IDE assistants, OpenAI-compatible "
        "frameworks): they get a prompt without the tools, and the model answers as if it had none. Judged on "
        "llama.cpp's prompt when llama.cpp rendered both conversations (its engine drops what a loop iteration "
        "printed before `{% continue %}`, so a template that writes the system turn and its tools and then "
        "continues loses both there), else on transformers'. The opposite case is GT210.",
        example="`{% if loop.first and m.role == 'system' %}…{{ tools | tojson }}…{% continue %}{% endif %}` "
        "rendered by llama.cpp, or a template that writes the tool block only when there is no system message.",
        fix="Write the tool block whether or not a system message is sent, without `{% continue %}` after "
        "output (use `{% if %}…{% else %}` instead); use the upstream template if it already does.",
    )
)


@check(TOOLS_LOST_WITH_SYSTEM_MESSAGE, "template")
def tools_lost_with_system_message(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    if not (t.tools_in_prompt and t.tools_with_system is False):
        return
    llama = t.llamacpp.text(probes.TOOLS_WITH_SYSTEM) if t.llamacpp is not None else None
    engine = "llama.cpp" if llama is not None else "transformers"
    with_system = t.tools_with_system_prompt()
    also = ""
    if probes.CANARY_SYSTEM not in with_system:
        also = " (and the system message itself is lost)"
    yield ctx.finding(
        TOOLS_LOST_WITH_SYSTEM_MESSAGE,
        f"the tool schemas (the canary tool {probes.CANARY_TOOL_NAME!r}) reach the prompt for a user message "
        f"alone but not once a system message is sent ({engine}){also}: clients that send a system prompt with "
        "their tools get none",
        t,
        evidence="user message + tools:\n"
        + around(t.tools_prompt(), probes.CANARY_TOOL_NAME, 150)
        + "\n\nsystem + user message + tools:\n"
        + trim(with_system, 300),
        engine=engine,
    )
