"""The Rust servers that render with minijinja, each configured its own way (TGI, mistral.rs, Dynamo)."""

from __future__ import annotations

from gguftpl.runtimes.profiles.model import RuntimeProfile, Sourced

_TGI = "huggingface/text-generation-inference {}@db931fcf (v3.3.7+)"
_MRS = "EricLBuehler/mistral.rs {}@9e922623 (v0.9.2+7)"
_MJ = "mitsuhiko/minijinja minijinja/src/value/argtypes.rs@eb17be57"
_DYN = "ai-dynamo/dynamo lib/llm/src/preprocessor/prompt/template/{}"
_DYN_PARSERS = "ai-dynamo/dynamo lib/parsers/src/tool_calling/parsers.rs@ecd29799"

TGI = RuntimeProfile(
    id="tgi",
    name="TGI",
    version="v3.3.7+ @db931fcf (2026-01-08, maintenance mode); minijinja 2.8.0",
    based_on=None,
    hosts=(),
    template_choice="default_only",
    template_source=Sourced(
        "tokenizer_config.json chat_template (or the processor config's); a named list gives the entry named "
        "'default' only; never the GGUF's metadata, even on the llamacpp backend (it fetches tokenizer.json and "
        "the config from the Hub by model id)",
        (_TGI.format("router/src/infer/mod.rs::Infer::new"), _TGI.format("backends/llamacpp/src/main.rs")),
    ),
    engine="minijinja/tgi",
    engine_settings=Sourced(
        "Environment::new() (no trim_blocks/lstrip_blocks), loop_controls and json features, pycompat unknown-"
        "method callback; builtin tojson (ensure_ascii=... is 'unknown keyword argument'); raise_exception as a "
        "SyntaxError-kind error; strftime_now in local time; rewrites [::-1] to |reverse, drops {% generation %} "
        "tags and messages[0]['content'][0]['text'] to messages[0]['content']",
        (_TGI.format("router/src/infer/chat_template.rs::ChatTemplate::new"), _TGI.format("router/Cargo.toml"), _MJ),
    ),
    variables=("bos_token", "eos_token", "add_generation_prompt"),
    variables_source=Sourced(
        "ChatTemplateInputs: messages, bos_token, eos_token, add_generation_prompt (always true), tools; tools in "
        "TGI's shape (function.arguments = the parameters as a JSON string) with no_tool added under auto",
        (_TGI.format("router/src/lib.rs::ChatTemplateInputs"), _TGI.format("router/src/infer/tool_grammar.rs")),
    ),
    tools_capability="always",
    tools_capability_source=Sourced(
        "no gate; tools and response_format together are refused ('Grammar and tools are mutually exclusive')",
        (_TGI.format("router/src/lib.rs::ChatRequest::try_into_generate"),),
    ),
    ignored_tools="inject",
    ignored_tools_source=Sourced(
        "when 'tools' is not among the template's undeclared variables: '\\n---\\n' + tools JSON + '\\n' + "
        "tool_prompt appended to the last message's content (toolprompts.tgi_appended_text); when it is, "
        "'\\n---\\n' + tool_prompt alone; tool_prompt defaults to toolprompts.TGI_DEFAULT_TOOL_PROMPT",
        (
            _TGI.format("router/src/infer/chat_template.rs::ChatTemplate::apply"),
            _TGI.format("router/src/lib.rs::default_tool_prompt"),
        ),
    ),
    parser_source=Sourced(
        "no text parser: the output is grammar-constrained JSON {'function': {'_name': NAME, ...arguments}} "
        "(anyOf over the tools, no_tool included)",
        (_TGI.format("router/src/infer/tool_grammar.rs::ToolGrammar::apply"),),
    ),
    parser_dialects=("generic-json",),
    message_handling=Sourced(
        "messages flattened to {role, content} text: content parts joined, images as ![](url), assistant "
        "tool_calls become content = their JSON; a final assistant message is continued (the prompt cut after "
        "its content)",
        (
            _TGI.format("router/src/lib.rs::TextMessage::from"),
            _TGI.format("router/src/infer/chat_template.rs::ChatTemplate::apply"),
        ),
    ),
)

MISTRALRS_FORMATS: tuple[tuple[str, str | None], ...] = (
    ("atem", None), ("gemma4", "gemma4"), ("liquid", "pythonic"), ("llama", "llama3-python-tag"),
    ("qwen", "hermes"), ("hunyuan", None), ("mistral_nemo", "mistral"), ("deepseek", "deepseek"),
    ("harmony", "gpt-oss"),
)  # fmt: skip

MISTRALRS = RuntimeProfile(
    id="mistral.rs",
    name="mistral.rs",
    version="v0.9.2+7 @9e922623 (2026-08-22); minijinja 2.14.0",
    based_on=None,
    hosts=(),
    template_choice="default_only",
    template_source=Sourced(
        "from a GGUF: tokenizer.chat_template only, and only when no template file or --chat-template is given "
        "(a string, so never a named list); HF tokenizer_config lists: the tool_use entry by name when tools, "
        "else 'default'",
        (
            _MRS.format("mistralrs-core/src/gguf/chat_template.rs"),
            _MRS.format("mistralrs-core/src/pipeline/gguf.rs:1297"),
            _MRS.format("mistralrs-core/src/pipeline/chat_template.rs::apply_chat_template_to"),
        ),
    ),
    engine="minijinja/mistralrs",
    engine_settings=Sourced(
        "pycompat, lstrip_blocks and trim_blocks on; own tojson (Python separators, no HTML escape, indent <= 256, "
        "ensure_ascii and other keywords accepted and ignored: minijinja never checks unused kwargs unless asked); "
        "raise_exception, strftime_now (UTC); rewrites [::-1], range(x, -1, -1), {% generation %}, GLM meta",
        (_MRS.format("mistralrs-core/src/pipeline/chat_template.rs::tojson"), _MJ),
    ),
    variables=(
        "bos_token",
        "eos_token",
        "unk_token",
        "add_generation_prompt",
        "date_string",
        "enable_thinking",
        "reasoning_effort",
        "reasoning_strength",
        "xml_tools",
        "builtin_tools",
    ),  # fmt: skip
    variables_source=Sourced(
        "date_string '%d, %B, %Y' (UTC); tools, xml_tools (same list) and builtin_tools only when tools are "
        "non-empty; tools with parameters keys in a fixed order",
        (_MRS.format("mistralrs-core/src/pipeline/chat_template.rs::apply_chat_template_to"),),
    ),
    tools_capability="always",
    tools_capability_source=Sourced(
        "no gate for a string template; the parser format is detected from template substrings",
        (_MRS.format("mistralrs-core/src/pipeline/chat_template.rs::template_tool_call_format"),),
    ),
    ignored_tools="drop",
    refusal_message="Tools were provided but this chat template does not handle tool usage",
    ignored_tools_source=Sourced(
        "a string template (every GGUF): tools passed, silently unused; a named list without tool_use: the "
        "refusal_message error",
        (_MRS.format("mistralrs-core/src/pipeline/chat_template.rs::apply_chat_template_to"),),
    ),
    parser_source=Sourced(
        "registered format parsers tried in order (parser_names), then bare JSON {name, arguments|parameters}",
        (_MRS.format("mistralrs-core/src/tools/parsers/mod.rs"), _MRS.format("mistralrs-core/src/tools/mod.rs")),
    ),
    parser_dialects=("llama3-json", "generic-json"),
    parser_names=MISTRALRS_FORMATS,
    message_handling=Sourced(
        "tool-call arguments parsed from JSON strings to maps; Gemma 4 tool messages reshaped; Liquid templates "
        "get assistant tool-call content cleared",
        (_MRS.format("mistralrs-core/src/pipeline/chat_template.rs::apply_chat_template_to"),),
    ),
)

DYNAMO_PARSERS: tuple[tuple[str, str | None], ...] = (
    ("hermes", "hermes"), ("nemotron_deci", None), ("llama3_json", "llama3-json"), ("mistral", "mistral"),
    ("phi4", "phi4-mini"), ("pythonic", "pythonic"), ("harmony", "gpt-oss"), ("deepseek_v3", "deepseek"),
    ("deepseek_v3_1", "deepseek"), ("deepseek_v3_2", "deepseek"), ("qwen3_coder", "qwen3-coder-xml"),
    ("jamba", None), ("minimax_m2", "invoke-xml"), ("glm47", "glm"), ("default", "generic-json"),
    ("nemotron_nano", "qwen3-coder-xml"),
)  # fmt: skip
"""``get_tool_parser_map`` (``parsers.rs`` @ecd29799), chosen with ``--dyn-tool-call-parser``."""

DYNAMO = RuntimeProfile(
    id="dynamo",
    name="Dynamo",
    version="template/formatters.rs @533b5042, oai.rs @6964d34f, tokcfg.rs @4c42d740 (index; release not known)",
    based_on=None,
    hosts=(),
    template_choice="named_list",
    template_source=Sourced(
        "tokenizer_config.json chat_template (+ chat_template.jinja/.json); a string is registered under both "
        "'default' and 'tool_use', a list under each entry's name, and 'tool_use' is rendered when tools are "
        "non-empty (a list without it: minijinja's template-not-found, inferred); GGUF metadata only in older "
        "releases (PromptFormatterArtifact::GGUF, index)",
        (_DYN.format("formatters.rs@533b5042"), _DYN.format("oai.rs@6964d34f::render")),
    ),
    engine="minijinja/dynamo",
    engine_settings=Sourced(
        "lstrip_blocks and trim_blocks on, pycompat, length filter (None/undefined -> 0), own tojson (compact "
        "serde JSON, then < > & ' escaped as \\u003c...; indent honoured; ensure_ascii accepted and ignored), "
        "raise_exception (InvalidOperation), strftime_now (local time in a newer tokcfg copy seen in the index, repo "
        "not named there; tokcfg.rs@4c42d740 has none, yet formatters.rs@533b5042 imports it); {% generation %} "
        "tags removed",
        (_DYN.format("formatters.rs@533b5042"), _DYN.format("tokcfg.rs@4c42d740::tojson"), _MJ),
    ),
    variables=("bos_token", "eos_token", "unk_token", "add_generation_prompt", "datetime"),
    variables_source=Sourced(
        "tools (None when absent; empty parameters get type/properties), add_generation_prompt false when the "
        "last message is the assistant's; datetime '%d, %B, %Y' only with the Llama3DateTime mixin; request "
        "chat_template_args merged last",
        (_DYN.format("oai.rs@6964d34f"), _DYN.format("context.rs@5b7cf2be")),
    ),
    tools_capability="always",
    tools_capability_source=Sourced(
        "no gate; exclude_tools_when_tool_choice_none option", (_DYN.format("oai.rs@6964d34f::render"),)
    ),
    ignored_tools="drop",
    ignored_tools_source=Sourced(
        "the template alone decides: tools passed, silently unused", (_DYN.format("oai.rs@6964d34f::render"),)
    ),
    parser_source=Sourced("--dyn-tool-call-parser NAME (parser_names), 'default' when unset", (_DYN_PARSERS,)),
    parser_names=DYNAMO_PARSERS,
    message_handling=Sourced(
        "text-only content arrays flattened to one string joined by '\\n' (or strings wrapped in parts for "
        "templates that need arrays); image_url parts become {type: image}; tool-call arguments parsed to objects",
        (_DYN.format("oai.rs@6964d34f::may_be_fix_msg_content,normalize_tool_arguments_in_messages"),),
    ),
)
