"""LM Studio (closed source: its docs and SDK)."""

from __future__ import annotations

from gguftpl.runtimes.profiles.model import RuntimeProfile, Sourced

_LMS_DOCS = "lmstudio-ai/docs 1_developer/3_openai-compat/tools.mdx@c6854fba"
_LMS_JS = "lmstudio-ai/lmstudio-js {}@6ec11db1 (SDK 1.5.0)"

LMSTUDIO = RuntimeProfile(
    id="lmstudio",
    name="LM Studio",
    version="closed app; docs @c6854fba (tools.mdx @2e643a41), SDK lmstudio-js 1.5.0 @6ec11db1",
    based_on=None,
    hosts=(),
    template_choice="default_only",
    template_source=Sourced(
        "the model file's metadata (GGUF tokenizer.chat_template), or the user's override in My Models > Prompt "
        "Template; no public statement that tokenizer.chat_template.tool_use is ever read",
        (
            "lmstudio-ai/docs 0_app/5_advanced/prompt-template.md@c6854fba",
            _LMS_JS.format("packages/lms-shared-types/src/llm/LLMPromptTemplate.ts"),
        ),
    ),
    engine="hfjs",
    engine_settings=Sourced(
        "its JS-side Jinja renderer; the error texts users report are @huggingface/jinja's byte for byte "
        "(Parser Error: ... !== CloseStatement; Unknown test: ...; Unexpected character: ~); vendored or forked, "
        "and which version per release, is not public",
        (
            "huggingface/huggingface.js packages/jinja/src/parser.ts,runtime.ts,lexer.ts@fe42e680",
            "lmstudio-ai/lmstudio-bug-tracker #323 #495 #702",
        ),
    ),
    variables=("bos_token", "eos_token", "add_generation_prompt"),
    variables_source=Sourced("not public (closed source); assumed the Hugging Face set", ("inferred",)),
    tools_capability="format_list",
    tools_capability_source=Sourced(
        "'Native' needs a template that supports tool use and a tool-call format LM Studio knows (docs list "
        "Qwen, Llama-3.1/3.2, Mistral; 0.3.37 adds LFM2); REST capabilities ['tool_use'] (>= 0.3.16), SDK "
        "trainedForToolUse; every other model gets 'default' tool use, so tools are never refused",
        (_LMS_DOCS, _LMS_JS.format("packages/lms-client/src/llm/LLM.ts")),
    ),
    ignored_tools="inject",
    ignored_tools_source=Sourced(
        "default tool use: its own system prompt with the tools as a toolArray setting "
        "(toolprompts.LMSTUDIO_TOOL_PROMPT), replies in [TOOL_REQUEST]{...}[END_TOOL_REQUEST] parsed back into "
        "tool_calls; 'the default format is subject to change'",
        (_LMS_DOCS, _LMS_JS.format("packages/lms-shared-types/src/llm/LLMToolUseSetting.ts")),
    ),
    parser_source=Sourced(
        "its own [TOOL_REQUEST] format for default tool use; the known native formats for the rest",
        (_LMS_DOCS,),
    ),
    parser_dialects=("hermes", "llama3-json", "mistral"),
    message_handling=Sourced(
        "default tool use: tool role messages become user, assistant tool_calls are rewritten into the "
        "[TOOL_REQUEST] format; tool names normalised (0.3.23, SDK toolNaming 'removeSpecial')",
        (_LMS_DOCS,),
    ),
)
