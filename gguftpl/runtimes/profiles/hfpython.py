"""The Python servers that render with transformers (vLLM, SGLang)."""

from __future__ import annotations

from gguftpl.runtimes.profiles.model import RuntimeProfile, Sourced

_VLLM_SERVING = "vllm-project/vllm vllm/entrypoints/openai/chat_completion/serving.py@5e918640"
_VLLM_HF = "vllm-project/vllm vllm/renderers/hf.py@e7ad92e5"
_VLLM_PARSERS = "vllm-project/vllm vllm/tool_parsers/__init__.py@dbaaf020"
_HF_GGUF = "huggingface/transformers src/transformers/integrations/ggml.py@02261d3c"
_HF_GGUF_524 = "transformers 5.24.0 (PyPI) transformers/integrations/gguf/gguf_tokenizer_mapping.py"
_SGL_CHAT = "sgl-project/sglang python/sglang/srt/entrypoints/openai/serving_chat.py@002897c2"
_SGL_CHAT_OLD = "sgl-project/sglang python/sglang/srt/entrypoints/openai/serving_chat.py@0c078e6f"
_SGL_PARSERS = "sgl-project/sglang python/sglang/srt/function_call/function_call_parser.py@ce2b3128"

_HF_VARIABLES = ("bos_token", "eos_token", "add_generation_prompt", "documents", "reasoning_effort")
_HF_ENGINE = Sourced(
    "transformers' apply_chat_template: jinja2 ImmutableSandboxedEnvironment, trim_blocks and lstrip_blocks, "
    "loopcontrols, HF tojson (no HTML escape), raise_exception, strftime_now",
    ("transformers 5.24.0 (PyPI) transformers/utils/chat_template_utils.py::_compile_jinja_template", _VLLM_HF),
)

VLLM_PARSERS: tuple[tuple[str, str | None], ...] = (
    ("deepseek_v3", "deepseek"), ("deepseek_v31", "deepseek"), ("deepseek_v32", "deepseek"),
    ("ernie45", None), ("glm45", "glm"), ("glm47", "glm"), ("granite-20b-fc", None), ("granite", "granite"),
    ("hermes", "hermes"), ("hunyuan_a13b", None), ("internlm", None), ("jamba", None), ("kimi_k2", "kimi"),
    ("llama3_json", "llama3-json"), ("llama4_json", "llama3-json"), ("llama4_pythonic", "pythonic"),
    ("longcat", None), ("minimax_m2", "invoke-xml"), ("minimax", None), ("mistral", "mistral"),
    ("olmo3", "pythonic"), ("openai", "gpt-oss"), ("phi4_mini_json", "phi4-mini"), ("pythonic", "pythonic"),
    ("qwen3_coder", "qwen3-coder-xml"), ("qwen3_xml", "qwen3-coder-xml"), ("seed_oss", None), ("step3", None),
    ("step3p5", None), ("xlam", None), ("gigachat3", None), ("functiongemma", None),
)  # fmt: skip
"""``--tool-call-parser`` names registered in ``vllm/tool_parsers/__init__.py`` @dbaaf020 (gemma4 and others
exist in newer trees), each with the dialect gguftpl's names give it (read from the parser's name and
docstring, not its tests)."""

VLLM = RuntimeProfile(
    id="vllm",
    name="vLLM",
    version="serving.py @5e918640, renderers/hf.py @e7ad92e5, tool_parsers @dbaaf020 (index; dates not known)",
    based_on=None,
    hosts=(),
    template_choice="default_only",
    template_source=Sourced(
        "--chat-template > tokenizer.get_chat_template(None, tools) (named tool_use when tools) > fallbacks; a "
        "GGUF's tokenizer comes from transformers' GGUF loader, which maps only tokenizer.chat_template, so for "
        "a GGUF it is the default only (docs recommend --tokenizer <base repo>; GGUF moved to vllm-gguf-plugin, "
        "not read)",
        (_VLLM_HF, _HF_GGUF, _HF_GGUF_524),
    ),
    engine="transformers",
    engine_settings=_HF_ENGINE,
    variables=_HF_VARIABLES,
    variables_source=Sourced(
        "apply_chat_template(conversation, tools=[tool.model_dump()...], documents, add_generation_prompt, "
        "**chat_template_kwargs) with reasoning_effort added to the kwargs; the tokenizer's special tokens",
        (_VLLM_SERVING + "::render_chat_request",),
    ),
    tools_capability="flag",
    tools_capability_source=Sourced(
        "--enable-auto-tool-choice and --tool-call-parser NAME; without them a request with tools (tool_choice "
        "defaults to 'auto' when tools are given, per RUNTIMES.md; that validator not re-read) is refused; "
        "the flags gate parsing only, the template alone decides the prompt",
        (_VLLM_SERVING + "::render_chat_request",),
    ),
    ignored_tools="drop",  # the 400 without the tool flags comes whatever the template: a note, not a verdict
    refusal_message='"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    ignored_tools_source=Sourced(
        "refused (HTTP 400) unless started with the tool flags, whatever the template; with them, a template "
        "that ignores tools drops them silently (--exclude-tools-when-tool-choice-none off by default)",
        (_VLLM_SERVING + "::render_chat_request",),
    ),
    parser_source=Sourced("the --tool-call-parser NAME chosen at start (parser_names)", (_VLLM_PARSERS,)),
    parser_names=VLLM_PARSERS,
    message_handling=Sourced(
        "chat_template_content_format auto-detects string vs OpenAI content parts; Mistral tokenizers re-serialise "
        "tool_calls and truncate call ids; GPT-OSS goes through Harmony, not the template",
        (_VLLM_SERVING,),
    ),
)

SGLANG_PARSERS: tuple[tuple[str, str | None], ...] = (
    ("deepseekv3", "deepseek"), ("deepseekv31", "deepseek"), ("deepseekv32", "deepseek"), ("glm", "glm"),
    ("glm45", "glm"), ("glm47", "glm"), ("gpt-oss", "gpt-oss"), ("kimi_k2", "kimi"), ("llama3", "llama3-json"),
    ("mimo", None), ("mistral", "mistral"), ("pythonic", "pythonic"), ("qwen", "hermes"), ("qwen25", "hermes"),
    ("qwen3_coder", "qwen3-coder-xml"), ("step3", None), ("minimax-m2", "invoke-xml"), ("trinity", None),
    ("interns1", None),
)  # fmt: skip
"""``FunctionCallParser.ToolCallParserEnum`` (``function_call_parser.py`` @ce2b3128)."""

SGLANG = RuntimeProfile(
    id="sglang",
    name="SGLang",
    version="serving_chat.py @002897c2 (newer) and @0c078e6f (older), function_call_parser.py @ce2b3128 (index)",
    based_on=None,
    hosts=(),
    template_choice="default_only",
    template_source=Sourced(
        "the HF tokenizer's chat_template unless --chat-template names a built-in conversation template; a GGUF "
        "via --load-format gguf and transformers' tokenizer, so tokenizer.chat_template only",
        (_SGL_CHAT, _HF_GGUF, _HF_GGUF_524),
    ),
    engine="transformers",
    engine_settings=_HF_ENGINE,
    variables=("bos_token", "eos_token", "add_generation_prompt", "reasoning_effort"),
    variables_source=Sourced(
        "apply_chat_template(messages, add_generation_prompt=True, tools, reasoning_effort, "
        "**chat_template_kwargs); tools are full OpenAI objects (@002897c2; @0c078e6f passed function-only dicts)",
        (_SGL_CHAT, _SGL_CHAT_OLD),
    ),
    tools_capability="always",
    tools_capability_source=Sourced(
        "no gate: --tool-call-parser only adds parsing and output constraints; tool_choice 'none' removes the tools",
        (_SGL_CHAT_OLD + "::_process_messages",),
    ),
    ignored_tools="drop",
    ignored_tools_source=Sourced(
        "the template alone decides; a built-in conversation template ignores tools; a template exception is "
        "retried once with the tools reshaped, and Jinja errors become HTTP 400",
        (_SGL_CHAT, _SGL_CHAT_OLD + "::_apply_jinja_template"),
    ),
    parser_source=Sourced("the --tool-call-parser NAME chosen at start (parser_names)", (_SGL_PARSERS,)),
    parser_names=SGLANG_PARSERS,
    message_handling=Sourced(
        "content None becomes ''; assistant tool_call arguments (JSON strings) parsed to dicts; content parts "
        "shaped by the detected template content format",
        (_SGL_CHAT_OLD + "::_apply_jinja_template",),
    ),
)
