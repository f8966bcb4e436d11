"""GT2xx: tool calling: do the schemas, calls and results reach the prompt, and in which dialect."""

from __future__ import annotations

from gguftpl.findings import Rule, Severity, register

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
        fix="Install the upstream tool-capable template: `gguftpl patch FILE --from-hub REPO -o FIXED.gguf`, "
        "or `gguftpl patch FILE --template tool_use=PATH -o FIXED.gguf`.",
    )
)
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
TOOL_CALLS_NOT_RENDERED = register(
    Rule(
        "GT203",
        "tool-calls-not-rendered",
        Severity.WARNING,
        "The template renders tools but drops assistant `tool_calls` from the history.",
        why="In a multi-turn conversation the model does not see the calls it made, so the tool results "
        "that follow make no sense to it.",
        example="A template that prints only `message.content` for assistant messages.",
        fix="Use the upstream template, which renders calls in the model's own dialect.",
    )
)
TOOL_RESULTS_NOT_RENDERED = register(
    Rule(
        "GT204",
        "tool-results-not-rendered",
        Severity.WARNING,
        "The template renders tools but drops `tool`-role results (or raises on them).",
        why="The model never sees what the tool returned; it repeats the call or invents the result.",
        example="A loop that handles only user/assistant/system roles.",
        fix="Use the upstream template, which renders tool results.",
    )
)
DEFAULT_IGNORES_TOOLS = register(
    Rule(
        "GT205",
        "default-template-ignores-tools",
        Severity.WARNING,
        "The default template ignores tools while a named template (e.g. `tool_use`) renders them.",
        why="llama.cpp switches to `tool_use` when tools are passed, but runtimes that read only the default "
        "template (Ollama import, LM Studio, llama-cpp-python's formatter) drop the tools.",
        example="Hermes-2-Pro: `default` is ChatML, `tool_use` has `<tools>`.",
        fix="Make the tool-capable template the default: `gguftpl patch FILE --template default=PATH -o OUT.gguf`.",
    )
)
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
