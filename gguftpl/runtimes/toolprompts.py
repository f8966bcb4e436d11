"""The tool prompts runtimes write themselves when a template does not carry the tools, as their code builds them.

Three runtimes put the tool schemas (or part of them) in front of the model on their own:

- LM Studio's "default tool use": a system prompt of its own with the tools as a ``toolArray`` setting. The
  text is the one its docs show from ``lms log stream`` (lmstudio-ai/docs ``1_developer/3_openai-compat/
  tools.mdx`` @c6854fba, file last changed @2e643a41, "the default format is subject to change"); the setting's
  shape is ``LLMToolUseSetting`` (lmstudio-ai/lmstudio-js ``packages/lms-shared-types/src/llm/
  LLMToolUseSetting.ts`` @6ec11db1). The app is closed source: where the prompt goes when the conversation
  already has a system message is not public.
- Hugging Face TGI: ``"\\n---\\n" + tools JSON + "\\n" + tool_prompt`` appended to the last message's content
  when the template never reads ``tools``, else ``"\\n---\\n" + tool_prompt`` alone
  (huggingface/text-generation-inference ``router/src/infer/chat_template.rs::apply`` @db931fcf). The JSON is
  serde's compact form of TGI's ``Tool`` (``router/src/lib.rs``: ``description`` first, ``parameters`` renamed
  ``arguments`` and written as a JSON *string*), with ``no_tool`` appended under ``tool_choice`` auto
  (``router/src/infer/tool_grammar.rs``); ``tool_prompt`` defaults to ``default_tool_prompt()``.
- Goose's built-in local inference, for a model it does not detect as native tool-calling: a "# Tools" list of
  names and descriptions only, no parameters (aaif-goose/goose ``crates/goose/src/providers/local_inference/
  inference_emulated_tools.rs::build_emulator_tool_description`` @9e8c7954, shell-only mode).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

LMSTUDIO_AVAILABLE_TOOLS = "{available_tools}"
"""Where :data:`LMSTUDIO_TOOL_PROMPT` takes the ``toolArray`` JSON."""

LMSTUDIO_TOOL_PROMPT = (
    "You are a tool-calling AI. You can request calls to available tools with this EXACT format:\n"
    '[TOOL_REQUEST]{"name": "tool_name", "arguments": {"param1": "value1"}}[END_TOOL_REQUEST]\n'
    "\n"
    "AVAILABLE TOOLS:\n"
    "{available_tools}\n"
    "\n"
    "RULES:\n"
    "- Only use tools from AVAILABLE TOOLS\n"
    "- Include all required arguments\n"
    "- Use one [TOOL_REQUEST] block per tool\n"
    "- Never use [TOOL_RESULT]\n"
    "- If you decide to call one or more tools, there should be no other text in your message\n"
    "\n"
    "Examples:\n"
    '"Check Paris weather"\n'
    '[TOOL_REQUEST]{"name": "get_weather", "arguments": {"location": "Paris"}}[END_TOOL_REQUEST]\n'
    "\n"
    '"Send email to John about meeting and open browser"\n'
    '[TOOL_REQUEST]{"name": "send_email", "arguments": {"to": "John", "subject": "meeting"}}[END_TOOL_REQUEST]\n'
    '[TOOL_REQUEST]{"name": "open_browser", "arguments": {}}[END_TOOL_REQUEST]\n'
    "\n"
    "Respond conversationally if no matching tools exist."
)
"""LM Studio's default tool-use system prompt (docs ``tools.mdx`` @c6854fba, the gemma-2-2b ``lms log stream``
example, its ``\\"`` escapes undone)."""

LMSTUDIO_CALL_OPEN = "[TOOL_REQUEST]"
LMSTUDIO_CALL_CLOSE = "[END_TOOL_REQUEST]"

TGI_DEFAULT_TOOL_PROMPT = (
    "\nGiven the functions available, please respond with a JSON for a function call with its proper arguments "
    "that best answers the given prompt. Respond in the format {name: function name, parameters: dictionary of "
    "argument name and its value}.Do not use variables.\n"
)
"""``default_tool_prompt()`` (TGI ``router/src/lib.rs`` @db931fcf), used when a request's ``tool_prompt`` is
absent or empty."""

TGI_SEPARATOR = "\n---\n"
"""What TGI puts between the last message's own content and the tools (``chat_template.rs`` @db931fcf)."""

TGI_NO_TOOL = {
    "type": "function",
    "function": {
        "description": "Open ended response with no specific tool selected",
        "name": "no_tool",
        "arguments": '{"type":"object"}',
    },
}
"""The tool TGI adds under ``tool_choice`` auto (its default), already in TGI's serialised shape
(``tool_grammar.rs`` @db931fcf)."""

GOOSE_TOOLS_HEADER = "\n\n# Tools\n\nYou have access to the following tools:\n\n"
"""Goose's emulated-tools list header, shell-only mode (``inference_emulated_tools.rs`` @9e8c7954)."""

GOOSE_NO_DESCRIPTION = "No description"


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    fn = tool.get("function", tool)
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
        raise ValueError(f"not an OpenAI function tool: {tool!r}")
    return fn


def lmstudio_tool_prompt(tools: Sequence[Mapping[str, Any]]) -> str:
    """LM Studio's default tool prompt for ``tools`` (OpenAI ``{"type": "function", "function": {...}}``).

    The setting is ``{"type": "toolArray", "tools": [...]}`` (``LLMToolUseSetting``); each tool keeps only
    ``type`` and ``function.name/description/parameters``: its zod schema (``llmToolSchema``) strips other keys
    (inferred from zod's default, not seen in LM Studio's output). The dump is ``JSON.stringify(…, null, 2)``, as
    the docs' example shows; Python's ``indent=2`` writes the same text."""
    kept = []
    for tool in tools:
        fn = _function(tool)
        out_fn: dict[str, Any] = {"name": fn["name"]}
        for key in ("description", "parameters"):
            if fn.get(key) is not None:
                out_fn[key] = fn[key]
        kept.append({"type": "function", "function": out_fn})
    setting = json.dumps({"type": "toolArray", "tools": kept}, indent=2, ensure_ascii=False)
    return LMSTUDIO_TOOL_PROMPT.replace(LMSTUDIO_AVAILABLE_TOOLS, setting)


def _serde_compact(value: Any) -> str:
    # serde_json::to_string: no spaces, non-ASCII kept as is, key order kept (TGI's lock has indexmap)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def tgi_tools_json(tools: Sequence[Mapping[str, Any]], tool_choice: str = "auto") -> str:
    """The tools JSON TGI appends: its ``Tool`` serialised by serde (``description``, ``name``, then
    ``arguments`` = the parameters as a compact JSON string), plus ``no_tool`` under ``tool_choice`` auto.

    TGI's ``FunctionDefinition.arguments`` (alias ``parameters``) has no serde default, so a tool without
    parameters is refused when the request is read; this raises ValueError for it."""
    out: list[Mapping[str, Any]] = []
    for tool in tools:
        fn = _function(tool)
        if "parameters" not in fn and "arguments" not in fn:
            raise ValueError(f"TGI needs parameters for tool {fn['name']!r} (missing field `arguments`)")
        params = fn.get("parameters", fn.get("arguments"))
        serde_fn = {"description": fn.get("description"), "name": fn["name"], "arguments": _serde_compact(params)}
        out.append({"type": str(tool.get("type", "function")), "function": serde_fn})
    if tool_choice == "auto":
        out.append(TGI_NO_TOOL)
    return _serde_compact(out)


def tgi_appended_text(
    tools: Sequence[Mapping[str, Any]],
    *,
    template_uses_tools: bool = False,
    tool_prompt: str | None = None,
    tool_choice: str = "auto",
) -> str:
    """What TGI appends to the last message's content for a tools request. ``template_uses_tools`` is TGI's own
    test: ``tools`` among the template's undeclared variables (minijinja's ``undeclared_variables(true)``)."""
    prompt = tool_prompt or TGI_DEFAULT_TOOL_PROMPT
    if template_uses_tools:
        return f"{TGI_SEPARATOR}{prompt}"
    return f"{TGI_SEPARATOR}{tgi_tools_json(tools, tool_choice)}\n{prompt}"


def goose_tool_list(tools: Sequence[Mapping[str, Any]]) -> str:
    """Goose's emulated-tools description (shell-only mode): one ``- name: description`` line per tool."""
    lines = []
    for tool in tools:
        fn = _function(tool)
        lines.append(f"- {fn['name']}: {fn.get('description') or GOOSE_NO_DESCRIPTION}\n")
    return GOOSE_TOOLS_HEADER + "".join(lines)
