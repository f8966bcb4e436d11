"""Every rule gguftpl can report, in one place so codes stay unique and documented.

Checkers import the Rule objects from here and build findings with ``findings.make_finding``.
"""

from __future__ import annotations

from gguftpl.findings import Rule, Severity, register

# GT0xx: the file itself
UNREADABLE_GGUF = register(
    Rule(
        "GT001",
        "unreadable-gguf",
        Severity.ERROR,
        "The file is not a GGUF that can be read (bad magic, truncated, hostile lengths).",
        why="Nothing can be checked, and a runtime will refuse or misread the file.",
        fix="Re-download or re-convert the file.",
    )
)

AUDIT_FAILED = register(
    Rule(
        "GT002",
        "audit-failed",
        Severity.ERROR,
        "The file was read but gguftpl could not finish checking its chat templates.",
        why=(
            "An audit that stops half-way would look clean. The file is reported instead, so a "
            "directory audit still covers every other file and the run does not pass by accident."
        ),
        example="A template set whose metadata cannot be interpreted (e.g. a chat template key holding a number).",
        fix="Run `gguftpl inspect FILE` to see the metadata, and `gguftpl --debug audit FILE` for the cause.",
    )
)

METADATA_WRONG_TYPE = register(
    Rule(
        "GT003",
        "metadata-wrong-type",
        Severity.ERROR,
        "A metadata key that llama.cpp or the chat runtimes read holds a value of the wrong GGUF type.",
        why=(
            "llama.cpp checks key types strictly and refuses the whole file ('key tokenizer.ggml.eos_token_id "
            "has wrong type i32 but expected type u32'); a chat template that is not a string is ignored and "
            "the runtime falls back to ChatML, dropping tools."
        ),
        example="`tokenizer.ggml.eos_token_id` written as INT32 -1, `llama.context_length` as UINT64, "
        "`tokenizer.chat_template` as a number.",
        fix="Re-convert the file with a current converter, or rewrite the key with the expected type.",
    )
)

TRUNCATED_TENSOR_DATA = register(
    Rule(
        "GT004",
        "truncated-tensor-data",
        Severity.ERROR,
        "The header is intact but the file ends before the tensor data its tensor infos describe.",
        why="An interrupted download or copy: the chat templates read fine, but llama.cpp refuses to load the "
        "model ('tensor data is not within the file bounds').",
        example="A 4 GB Q4_K_M whose download stopped at 3.1 GB.",
        fix="Download the file again and compare its size (and sha256) with the one the repo lists.",
    )
)


# GT55x: consistency across the quants of one repo or output folder (gguftpl/repo.py)
REPO_TEMPLATE_MISSING = register(
    Rule(
        "GT550",
        "repo-template-missing",
        Severity.ERROR,
        "A quant lacks a chat template that the other quants of the same model carry.",
        why=(
            "Users pick one file from a repo of quants. If that one lost its `tool_use` (or default) template "
            "in conversion, the runtime falls back to another template or to ChatML, and tool calling "
            "silently fails for that quant only (unsloth #2744)."
        ),
        example="Q4_K_M has `tokenizer.chat_template.tool_use`; Q5_K_M of the same model has none.",
        fix=(
            "Copy the template from a quant that has it: `gguftpl inspect OTHER.gguf --template tool_use --raw > "
            "t.jinja`, then `gguftpl patch FILE --template tool_use=t.jinja -o FIXED.gguf`, and re-upload."
        ),
    )
)

REPO_TEMPLATE_DIFFERS = register(
    Rule(
        "GT551",
        "repo-template-differs",
        Severity.WARNING,
        "The same-named chat template differs between quants of the same model.",
        why=(
            "Quantization does not change a model's chat format. Different templates across quants mean some "
            "files were converted at another time or from another source; their prompts differ."
        ),
        example="Q8_0 was converted before the upstream template fix; Q4_K_M after.",
        fix=(
            "Re-convert the odd quants, or give them the others' template "
            "(`gguftpl patch FILE --template NAME=t.jinja`) or upstream's (`gguftpl patch FILE --from-hub ORG/REPO`)."
        ),
    )
)

REPO_SPECIAL_TOKENS_DIFFER = register(
    Rule(
        "GT552",
        "repo-special-tokens-differ",
        Severity.WARNING,
        "Special tokens (BOS/EOS/EOT… ids or texts, add_bos/add_eos) differ between quants of the same model.",
        why="A different EOS id makes one quant run on past the end of its turn or stop early.",
        example="Q4_K_M has eos 2 `<|im_end|>`; Q6_K has eos 0 `<|endoftext|>`.",
        fix="Re-convert the odd quants from the same source and converter version as the others.",
    )
)

REPO_UPSTREAM_DRIFT = register(
    Rule(
        "GT553",
        "repo-upstream-drift",
        Severity.WARNING,
        "The quants' templates differ from the upstream model's (an error when upstream ships a template none carry).",
        why=(
            "A template upstream changed (or a named template such as `tool_use`) after conversion never "
            "reaches users of the GGUF repo, whichever quant they pick."
        ),
        example="Every quant embeds ChatML; upstream ships `default` and `tool_use`.",
        fix="Patch each quant from the Hub (`gguftpl patch FILE --from-hub ORG/REPO -o FIXED.gguf`) and re-upload.",
    )
)

REPO_UPSTREAM_UNKNOWN = register(
    Rule(
        "GT554",
        "repo-upstream-unchecked",
        Severity.INFO,
        "The repo's templates were not compared with an upstream model (unknown, or not reachable).",
        why="Consistency between quants says nothing about whether they all carry the right template.",
        example="No `general.base_model.*`/`general.source.*` keys and no catalog match; or the Hub is offline.",
        fix="Name the upstream with `--upstream ORG/REPO`, or run where the Hub is reachable.",
    )
)

REPO_SPLIT_INCOMPLETE = register(
    Rule(
        "GT555",
        "repo-split-incomplete",
        Severity.ERROR,
        "A split GGUF (`NAME-0000k-of-0000n.gguf`) is missing shards, or its first shard.",
        why="llama.cpp loads a split model from its first shard and needs every shard; the metadata is in shard 1.",
        example="`m-00001-of-00003.gguf` and `m-00003-of-00003.gguf`, no `m-00002-of-00003.gguf`.",
        fix="Upload the missing shards (gguf-split --merge / --split to regenerate them).",
    )
)

REPO_MODELS_GROUPED = register(
    Rule(
        "GT556",
        "repo-several-models",
        Severity.INFO,
        "The GGUFs belong to more than one model (by architecture and vocabulary); each is checked on its own.",
        why="Quants are only compared with quants of the same model; a projector or draft model is not a quant.",
        example="`model-Q4_K_M.gguf` (llama) next to `mmproj-model-f16.gguf` (clip).",
        fix=(
            "Nothing, if the other model belongs there (a vision projector, a draft model); otherwise publish it "
            "in its own repo."
        ),
    )
)

# GT1xx: template presence and parsing (gguftpl.templates.analysis)
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

# GT2xx: tool calling
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

# GT3xx: special tokens
MARKER_NOT_IN_VOCAB = register(
    Rule(
        "GT301",
        "marker-not-in-vocab",
        Severity.WARNING,
        "The template emits a control marker (`<|…|>`-shaped) that is not a token of the vocabulary.",
        why="The marker is tokenized as several plain-text pieces; the model was trained on a single "
        "control token and does not recognise the turn structure or tool markers.",
        example="`<|im_start|>` in a template of a model whose vocabulary has no such token.",
        fix="Use the template that belongs to this model's tokenizer.",
    )
)
MARKER_NOT_CONTROL = register(
    Rule(
        "GT302",
        "marker-not-control-token",
        Severity.WARNING,
        "A control marker the template emits is in the vocabulary but typed NORMAL, not CONTROL/USER_DEFINED.",
        why="llama.cpp only parses CONTROL and USER_DEFINED tokens out of prompt text; a NORMAL token may be "
        "split into pieces, so the model sees text instead of the marker.",
        example="`<|im_end|>` stored with token type 1.",
        fix="Re-convert the model with the right added-token types.",
    )
)
END_OF_TURN_NOT_EOG = register(
    Rule(
        "GT303",
        "end-of-turn-not-stop-token",
        Severity.WARNING,
        "The marker that ends an assistant turn in the template is not the EOS/EOT token.",
        why="Generation does not stop at the end of the turn unless the runtime guesses the marker (llama.cpp "
        "recognises a few well-known ones by text); the model keeps writing the next turn.",
        example="ChatML `<|im_end|>` while `tokenizer.ggml.eos_token_id` points at `</s>`.",
        fix="Set `tokenizer.ggml.eos_token_id` (or `eot_token_id`) to the end-of-turn token.",
    )
)
DOUBLE_BOS = register(
    Rule(
        "GT304",
        "double-bos",
        Severity.WARNING,
        "The template writes the BOS token while the tokenizer also adds one (`add_bos_token` is true).",
        why="Runtimes that tokenize the rendered prompt with BOS added get two BOS tokens, which degrades "
        "output. llama.cpp strips one leading BOS from the rendered prompt; Hugging Face does not.",
        example="`{{ bos_token }}{% for message in messages %}…` with `tokenizer.ggml.add_bos_token = true`.",
        fix="Drop `{{ bos_token }}` from the template or set `add_bos_token` to false.",
    )
)

# GT4xx: safety
SANDBOX_ESCAPE = register(
    Rule(
        "GT401",
        "sandbox-escape-construct",
        Severity.ERROR,
        "The template uses constructs known from Jinja sandbox escapes (dunder attributes, `__globals__`, "
        "`cycler`/`joiner`/`lipsum`/`self` gadgets).",
        why="No chat template needs them; they are the shape of server-side template injection payloads "
        "(CVE-2024-34359 in llama-cpp-python). A runtime with a weaker sandbox executes code.",
        example="`{{ cycler.__init__.__globals__.os.popen('id').read() }}`.",
        fix="Do not use this file; replace the template with the upstream one.",
    )
)
HIDDEN_TRIGGER = register(
    Rule(
        "GT402",
        "hidden-trigger-text",
        Severity.ERROR,
        "The template adds text only when a message contains a specific string (a hidden trigger).",
        why="A backdoor: ordinary probes render clean, but a trigger phrase injects instructions the user never sees.",
        example="`{% if 'xyzzy' in message.content %}Ignore previous instructions…{% endif %}`.",
        fix="Do not use this file; replace the template with the upstream one.",
    )
)
INVISIBLE_UNICODE = register(
    Rule(
        "GT403",
        "invisible-unicode",
        Severity.WARNING,
        "The template contains invisible or bidirectional-control Unicode characters.",
        why="Invisible characters hide text from reviewers (Trojan Source); the model still sees it.",
        example="U+202E RIGHT-TO-LEFT OVERRIDE or U+200B ZERO WIDTH SPACE inside the template.",
        fix="Remove the characters, or replace the template with the upstream one.",
    )
)
RENDER_RESOURCE_LIMIT = register(
    Rule(
        "GT404",
        "render-resource-limit",
        Severity.ERROR,
        "Rendering the template exceeded the time, output-size or memory bound and was stopped.",
        why="A runtime rendering it hangs or runs out of memory: a denial of service on every request.",
        example="`{% for i in range(100000) %}{% for j in range(100000) %}…`.",
        fix="Do not use this file; replace the template with the upstream one.",
    )
)
HUGE_RANGE = register(
    Rule(
        "GT405",
        "huge-range",
        Severity.WARNING,
        "The template calls `range()` with a huge constant.",
        why="Hugging Face's sandbox refuses ranges over 100,000; other engines may loop for a very long time.",
        example="`{% for i in range(10**9) %}`.",
        fix="Do not use this file; replace the template with the upstream one.",
    )
)

# GT50x: this GGUF against its upstream repo (gguftpl diff, gguftpl/upstream/diff.py)
UPSTREAM_TEMPLATE_LOST = register(
    Rule(
        "GT501",
        "upstream-template-lost",
        Severity.ERROR,
        "The upstream repo ships a named chat template (e.g. `tool_use`) that this GGUF does not carry.",
        why="It was lost in conversion or re-quantisation. When the lost template is the one that reads `tools`, "
        "runtimes render a template that drops the tool schemas: tool calling silently fails.",
        example="Upstream `chat_template` is a list [default, tool_use]; the GGUF has only `tokenizer.chat_template`.",
        fix="Copy the upstream templates into the GGUF: `gguftpl patch FILE --from-hub REPO -o OUT.gguf`.",
    )
)
UPSTREAM_TEMPLATE_CHANGED = register(
    Rule(
        "GT502",
        "upstream-template-changed",
        Severity.WARNING,
        "A chat template differs from the same-named template of the upstream repo.",
        why="The GGUF was converted from an older revision or edited by hand; prompts differ from what the model "
        "was trained and evaluated with.",
        example="Upstream added `{{bos_token}}` after the GGUF was made.",
        fix="Review the diff (`gguftpl diff FILE`); adopt upstream with `gguftpl patch FILE --from-hub REPO`.",
    )
)
UPSTREAM_SPECIAL_TOKENS_DIFFER = register(
    Rule(
        "GT503",
        "upstream-special-tokens-differ",
        Severity.WARNING,
        "BOS/EOS ids or texts, or an added token's id, text or special status, differ from the upstream repo.",
        why="A wrong EOS id means generation never stops at the end of a turn; a special token stored as plain "
        "text is split into pieces and the model never sees the marker it was trained on.",
        example="Upstream eos `<|im_end|>` (32000); the GGUF's eos id points at `</s>` (2).",
        fix="Re-convert from upstream, or fix the ids with gguf-py's `gguf_set_metadata.py`.",
    )
)

# GT6xx: verification through llama.cpp itself (gguftpl.llamacpp; `gguftpl verify`, `audit --engine llamacpp`)
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
        fix="Install a template that renders `tools` (upstream's `tool_use`): `gguftpl patch FILE --from-hub REPO "
        "-o FIXED.gguf`, then `gguftpl verify FIXED.gguf`.",
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
        "llama.cpp and transformers (Hugging Face semantics) render different prompts for the same request.",
        why="The model was trained and evaluated on transformers' rendering; llama.cpp's Jinja engine differs on "
        "some constructs (`|safe`, `tojson` escaping, generators, list mutation), or transformers cannot render "
        "the template at all. Prompts then differ between runtimes.",
        example="`tools | map('tojson')` joined by a template: transformers raises on the generator, llama.cpp "
        "renders it.",
        fix="Review the first difference shown by `gguftpl verify FILE`; prefer constructs both engines agree on.",
    )
)
LLAMACPP_CHATML_FALLBACK = register(
    Rule(
        "GT605",
        "llamacpp-chatml-fallback",
        Severity.WARNING,
        "The file has no chat template and llama.cpp silently falls back to its built-in ChatML.",
        why="Unless the model really speaks ChatML, every prompt is in the wrong format, and tools are dropped.",
        example="A GGUF converted without `tokenizer.chat_template`.",
        fix="Add the model's template: `gguftpl patch FILE --from-hub REPO -o FIXED.gguf`.",
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
