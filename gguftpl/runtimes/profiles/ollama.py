"""Ollama: its renderers, Go templates and bundled llama-server."""

from __future__ import annotations

from gguftpl.runtimes.profiles.model import RuntimeProfile, Sourced

_OLLAMA = "ollama/ollama {}@fb307609 (v0.33.0-rc2)"

OLLAMA_PARSERS: tuple[tuple[str, str | None], ...] = (
    ("qwen3", "hermes"), ("qwen3-thinking", "hermes"), ("qwen3.5", None), ("ornith", None),
    ("qwen3-coder", "qwen3-coder-xml"), ("qwen3-vl-instruct", None), ("qwen3-vl-thinking", None),
    ("ministral", "mistral"), ("passthrough", None), ("harmony", "gpt-oss"), ("cogito", None),
    ("deepseek3", "deepseek"), ("olmo3", None), ("olmo3-think", None), ("nemotron-3-nano", None),
    ("nemotron-3.5-nano", None), ("functiongemma", None), ("glm-4.7", "glm"), ("gemma4", "gemma4"),
    ("gemma4-no-thinking", "gemma4"), ("glm-ocr", None), ("lfm2", None), ("lfm2-thinking", None),
    ("laguna", None), ("poolside-v1", None), ("cohere", "command-r"), ("glimmer", None),
)  # fmt: skip
"""Modelfile ``PARSER`` names (``model/parsers/parsers.go::ParserForName`` @fb307609)."""

OLLAMA = RuntimeProfile(
    id="ollama",
    name="Ollama",
    version="v0.33.0-rc2 @fb307609 (2026-08-21); bundled llama-server b10488",
    based_on=None,
    hosts=(),
    template_choice="ollama",
    template_source=Sourced(
        "in order: a Modelfile/registry RENDERER or PARSER (Go code per family), the Go TEMPLATE layer (set at "
        "import from the nearest of 37 curated templates, or by a Modelfile; OLLAMA_GO_TEMPLATE wins), else the "
        "GGUF's tokenizer.chat_template rendered by its bundled llama-server ('native' mode, which also takes "
        "the tool_use key); PreferChatTemplate picks native when the GGUF template shows more capabilities",
        (
            _OLLAMA.format("server/routes.go::usesOllamaRenderedChat,shouldUseGoTemplate"),
            _OLLAMA.format("server/images.go::shouldPreferChatTemplate"),
            _OLLAMA.format("server/model.go::detectChatTemplate"),
        ),
    ),
    engine="ollama",
    also_engines=("llamacpp",),
    engine_settings=Sourced(
        "Go text/template with missingkey=zero and funcs json, currentDate, yesterdayDate, toTypeScriptType; "
        "native mode: llama-server's Jinja",
        (_OLLAMA.format("template/template.go"), _OLLAMA.format("llm/llama_server.go")),
    ),
    variables=(
        ".System",
        ".Messages",
        ".Tools",
        ".Prompt",
        ".Suffix",
        ".Response",
        ".Think",
        ".ThinkLevel",
        ".IsThinkSet",
    ),  # fmt: skip
    variables_source=Sourced(
        "Go template data; native mode sends messages, tools and chat_template_kwargs {enable_thinking, "
        "reasoning_effort} to llama-server /v1/chat/completions",
        (_OLLAMA.format("template/template.go"), _OLLAMA.format("llm/llama_server.go::llamaServerChatTemplateKwargs")),
    ),
    tools_capability="substring",
    capability_substrings=("tools", "tool_call"),
    tools_capability_source=Sourced(
        "GGUF template: contains 'tools' or 'tool_call' (tokenizer.chat_template only); Go template: .Tools among "
        "its Vars() (go_vars); a built-in parser's HasToolSupport(); the config blob's capabilities",
        (
            _OLLAMA.format("server/images.go::chatTemplateHasToolSupport,goTemplateCapabilities"),
            _OLLAMA.format("server/model_list_cache.go"),
        ),
    ),
    ignored_tools="refuse",
    refusal_message="<model> does not support tools",
    ignored_tools_source=Sourced(
        "a tools request on a model without the capability: HTTP 400 '<model> does not support tools' (the "
        "model's full name) before rendering; a GGUF template that only mentions 'tools' passes the test and "
        "llama-server then drops them silently",
        (
            _OLLAMA.format("server/routes.go:211,handleScheduleError"),
            _OLLAMA.format("server/images.go::CheckCapabilities"),
        ),
    ),
    parser_source=Sourced(
        "a Modelfile PARSER (parser_names); else, for a Go template, a tag parser from the first text after "
        ".ToolCalls (JSON objects after it, '{' when none); native mode: llama-server's autoparser",
        (
            _OLLAMA.format("model/parsers/parsers.go"),
            _OLLAMA.format("tools/template.go::parseTag"),
            _OLLAMA.format("server/routes.go:2735"),
        ),
    ),
    parser_dialects=("hermes", "mistral", "generic-json"),
    parser_names=OLLAMA_PARSERS,
    message_handling=Sourced(
        "Go template: consecutive same-role messages merged with '\\n\\n' (tool messages excepted), system "
        "messages joined into .System; native mode: messages converted for llama-server",
        (
            _OLLAMA.format("template/template.go::collate"),
            _OLLAMA.format("llm/llama_server.go::llamaServerChatMessage"),
        ),
    ),
)
