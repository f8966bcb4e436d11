"""llama.cpp's llama-server and the products that render through llama.cpp's chat code (Jan, Goose)."""

from __future__ import annotations

from gguftpl.runtimes.profiles.model import RuntimeProfile, Sourced

_LCPP = "ochafik/llama.cpp {}@050ee92d (b9821)"
_JAN_EXT = "janhq/jan extensions/llamacpp-extension/src/index.ts@983de336"
_JAN_ARGS = "janhq/jan src-tauri/plugins/tauri-plugin-llamacpp/src/args.rs@fe3fe43b"
_GOOSE = "aaif-goose/goose crates/goose/src/providers/local_inference/{}"

_LLAMACPP_VARIABLES = ("bos_token", "eos_token", "add_generation_prompt", "enable_thinking", "datetime", "date_string")
_LLAMACPP_VARIABLES_TEXT = Sourced(
    "messages, bos_token, eos_token, enable_thinking; tools only when non-empty; add_generation_prompt only when "
    "true; datetime ('%b %d %Y') and date_string ('%d %b %Y') as extra context; request chat_template_kwargs "
    "override; globals raise_exception, strftime_now, tojson",
    (_LCPP.format("common/chat.cpp::common_chat_template_direct_apply_impl,common_chat_extra_context"),),
)
_LLAMACPP_MESSAGES = Sourced(
    "developer role mapped to system (except GPT-OSS templates); system folded into the first user message when "
    "the template has no system role; null content becomes '' when it renders tool calls; tool-call arguments "
    "passed as objects when the template iterates them; tools re-serialised as {type, function{name, "
    "description, parameters}} (other fields dropped)",
    (_LCPP.format("common/chat.cpp::common_chat_templates_apply_jinja"),),
)
_LLAMACPP_PARSER = Sourced(
    "autoparser generated from the template (renders probe calls and derives a PEG parser); a template it cannot "
    "derive one for gives HTTP 400 'Unable to generate parser for this template. Automatic parser generation "
    "failed: ...'; Ministral 3 has a hand-written one",
    (
        _LCPP.format("common/chat.cpp::common_chat_try_specialized_template"),
        _LCPP.format("common/chat-auto-parser-generator.cpp"),
    ),
)
_LLAMACPP_ENGINE = Sourced(
    "llama.cpp's own C++ Jinja (common/jinja, replaced minja at b8022, PR #18462): lstrip_blocks and trim_blocks "
    "on; tojson(sort_keys=true) raises 'not implemented'; jinja on by default (use_jinja = true) since b7404",
    (_LCPP.format("common/jinja/lexer.cpp"), _LCPP.format("common/jinja/value.cpp"), _LCPP.format("common/common.h")),
)

LLAMA_CPP = RuntimeProfile(
    id="llama.cpp",
    name="llama.cpp",
    version="b9821 (ochafik/llama.cpp mirror @050ee92d); issue evidence to b10423",
    based_on=None,
    hosts=("Jan", "llamafile 0.10", "LocalAI (GGUF without a YAML template)", "Ollama native mode"),
    template_choice="tool_use_with_tools",
    template_source=Sourced(
        "--chat-template(-file) override first; else tokenizer.chat_template.tool_use when the request has tools "
        "and the file has one, else tokenizer.chat_template; a default that is missing or 'chatml' is replaced by "
        "the tool_use template if there is one, else by built-in ChatML",
        (_LCPP.format("common/chat.cpp::common_chat_templates_init"), _LCPP.format("common/chat.cpp:2479")),
    ),
    engine="llamacpp",
    engine_settings=_LLAMACPP_ENGINE,
    variables=_LLAMACPP_VARIABLES,
    variables_source=_LLAMACPP_VARIABLES_TEXT,
    tools_capability="caps_probe",
    tools_capability_source=Sourced(
        "per-template caps probe: renders a probe tool and call; supports_tools is false when the probe tool's "
        "name is never read, supports_tool_calls when tool_calls is never read (shown in /props "
        "chat_template_caps); never refuses a tools request for it",
        (_LCPP.format("common/jinja/caps.cpp"),),
    ),
    ignored_tools="drop",
    ignored_tools_source=Sourced(
        "HTTP 200, the tools silently absent from the prompt, no warning (issue #27129, b10423); when "
        "supports_tool_calls && !supports_tools it logs 'Template supports tool calls but does not natively "
        "describe tools...' and still builds a parser; --no-jinja + tools: 'tools param requires --jinja flag'",
        (
            _LCPP.format("common/chat.cpp::common_chat_templates_apply_jinja"),
            _LCPP.format("tools/server/server-common.cpp:918"),
            "ggml-org/llama.cpp issue #27129 (b10423)",
        ),
    ),
    parser_source=_LLAMACPP_PARSER,
    parser_follows_template=True,
    message_handling=_LLAMACPP_MESSAGES,
)

JAN = RuntimeProfile(
    id="jan",
    name="Jan",
    version="janhq/jan @983de336 (llamacpp extension), @fe3fe43b (tauri plugin); bundled llama.cpp build not read",
    based_on="llama.cpp",
    hosts=(),
    template_choice="tool_use_with_tools",
    template_source=Sourced(
        "its bundled llama-server (janhq build) started with --jinja and an optional --chat-template setting; "
        "the template choice is llama-server's",
        (_JAN_ARGS,),
    ),
    engine="llamacpp",
    engine_settings=_LLAMACPP_ENGINE,
    variables=_LLAMACPP_VARIABLES,
    variables_source=_LLAMACPP_VARIABLES_TEXT,
    tools_capability="substring",
    capability_substrings=("tools",),
    tools_capability_source=Sourced(
        "the UI's isToolSupported: tokenizer.chat_template (the default key only) includes 'tools' (case "
        "sensitive at this commit; RUNTIMES.md saw a newer lowercase 'tool' check in the index)",
        (_JAN_EXT + "::isToolSupported",),
    ),
    ignored_tools="drop",
    ignored_tools_source=Sourced("as llama-server: silently dropped", (_JAN_ARGS,)),
    parser_source=_LLAMACPP_PARSER,
    parser_follows_template=True,
    message_handling=_LLAMACPP_MESSAGES,
)

GOOSE = RuntimeProfile(
    id="goose",
    name="Goose",
    version="aaif-goose/goose local_inference @3c2f1968/@f631b534/@9e8c7954; llama-cpp-2 0.1.145 (PR #9111)",
    based_on="llama.cpp",
    hosts=(),
    template_choice="default_only",
    template_source=Sourced(
        "llama.cpp in process through the llama-cpp-2 Rust crate, not llama-server: one LlamaChatTemplate per "
        "model, model.chat_template(None) = tokenizer.chat_template (the tool_use key is never asked for); a "
        "GGUF without one fell back to ChatML (issue #9110; PR #9440/#9442 map the architecture or refuse)",
        (_GOOSE.format("inference_engine.rs@3c2f1968::LoadedModel"), "aaif-goose/goose issue #9110, PR #9442"),
    ),
    engine="llamacpp",
    engine_settings=Sourced(
        "llama.cpp's common chat code via apply_chat_template_oaicompat (use_jinja true, parse_tool_calls true, "
        "enable_thinking false, add_bos false); the bundled llama.cpp is older than llama-server's",
        (_GOOSE.format("inference_native_tools.rs@f631b534"), "aaif-goose/goose PR #9111"),
    ),
    variables=_LLAMACPP_VARIABLES,
    variables_source=Sourced(
        "as llama.cpp (the same common chat code); enable_thinking false, no chat_template_kwargs",
        (_GOOSE.format("inference_native_tools.rs@f631b534"),),
    ),
    tools_capability="template_detect",
    tools_capability_source=Sourced(
        "has_native_tool_calling, auto-detected from the model's chat template at load time (the detection "
        "itself not read)",
        (_GOOSE.format("inference_engine.rs@3c2f1968::LoadedModel"), "aaif-goose/goose PR #9442"),
    ),
    ignored_tools="inject",
    ignored_tools_source=Sourced(
        "a model not detected as native: no tools passed to the template; Goose appends its own '# Tools' list "
        "(names and descriptions, no parameters) and parses '$ command' lines and ```execute blocks as calls of "
        "its shell/code tools; a native model whose template ignores tools: dropped as in llama.cpp",
        (_GOOSE.format("inference_emulated_tools.rs@9e8c7954::build_emulator_tool_description"),),
    ),
    parser_source=Sourced(
        "its own: a trailing JSON object with 'tool_calls', <tool_call><function=NAME><parameter=K>, GLM "
        "NAME<arg_key>K</arg_key><arg_value>V</arg_value>, Gemma 4 <|tool_call>call:NAME{...}<tool_call|>",
        (_GOOSE.format("tool_parsing.rs@f631b534"),),
    ),
    parser_dialects=("qwen3-coder-xml", "glm", "gemma4"),
    message_handling=Sourced(
        "OpenAI messages JSON to llama.cpp's oaicompat apply (so llama.cpp's message workarounds); when the "
        "prompt is over budget the tools are re-sent compacted to name and description only",
        (
            _GOOSE.format("inference_native_tools.rs@f631b534"),
            _GOOSE.format("tool_parsing.rs@f631b534::compact_tools_json"),
        ),
    ),
)
