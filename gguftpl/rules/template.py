"""GT1xx: template presence, parsing and rendering."""

from __future__ import annotations

from gguftpl.findings import Rule, Severity, register

NO_CHAT_TEMPLATE = register(
    Rule(
        "GT101",
        "no-chat-template",
        Severity.WARNING,
        "The file has no chat template at all.",
        why="Runtimes silently fall back to a built-in format (usually ChatML) that may not match the model, "
        "and that fallback drops any tools passed to it.",
        example="A GGUF without `tokenizer.chat_template` loaded in llama.cpp or Ollama.",
        fix="Add the model's template from its Hugging Face repo: `gguftpl patch FILE --from-hub REPO -o OUT.gguf`.",
    )
)
TEMPLATE_PARSE_ERROR = register(
    Rule(
        "GT102",
        "template-parse-error",
        Severity.ERROR,
        "The chat template is not valid Jinja (it fails to parse under Hugging Face's jinja2 environment).",
        why="transformers, vLLM, llama-cpp-python and similar runtimes refuse the template; nothing renders.",
        example="`{% for m in messages %}` without `{% endfor %}`.",
        fix="Replace the template with a working upstream one (`gguftpl patch --from-hub` or `--template`).",
    )
)
TEMPLATE_RENDER_ERROR = register(
    Rule(
        "GT103",
        "template-render-error",
        Severity.ERROR,
        "The chat template raises while rendering a probe conversation under Hugging Face semantics.",
        why="A runtime that renders templates with jinja2 fails on that kind of conversation (for example a "
        "tool round trip), or the template only works in llama.cpp's more lenient engine.",
        example="`tools | map(...) | tojson` (a generator), `list.append` in the immutable sandbox.",
        fix="Fix the failing line or replace the template with a working upstream one.",
    )
)
SYSTEM_ROLE_UNSUPPORTED = register(
    Rule(
        "GT104",
        "system-role-unsupported",
        Severity.INFO,
        "The template rejects system messages; the analysis folded the system text into the first user turn.",
        why="llama.cpp does the same folding; other runtimes raise, so system prompts (and any tool "
        "instructions placed there) are lost or fail.",
        example="gemma-2: `raise_exception('System role not supported')`.",
        fix="Nothing to do for llama.cpp; elsewhere put the system text in the first user message.",
    )
)
MESSAGE_DROPPED = register(
    Rule(
        "GT105",
        "message-dropped",
        Severity.WARNING,
        "A system message or an assistant reply in history renders without error but never reaches the prompt.",
        why="The template has no branch for that role, so the text vanishes silently: a system prompt (and any "
        "instructions in it) is ignored, or the model never sees its own earlier answers in a multi-turn chat.",
        example="A loop that writes only `{% if message['role'] == 'user' %}` turns.",
        fix="Use the upstream template, which renders every role.",
    )
)
