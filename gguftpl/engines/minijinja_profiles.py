"""How each runtime that renders chat templates with minijinja sets it up, read from the runtime's own code.

One :class:`MinijinjaConfig` per runtime: whitespace options, pycompat, whether maps keep their order, which
``tojson`` it registers, which functions exist and what error kind ``raise_exception`` raises, the string
rewrites it applies to the template before compiling, and which variables it hands the template. Every setting
names the file and commit it was read at (``sources``). The facts were read on 2026-12-02 from these snapshots:

- huggingface/text-generation-inference @db931fcf42da018a3657580c64bf2720f167f9ab (v3.3.7+1, Cargo.lock minijinja
  2.8.0, features ``json`` + ``loop_controls``, no ``preserve_order``)
- EricLBuehler/mistral.rs @9e922623f24b32d41f3892b74f0eed18707f4e6c (minijinja 2.14.0 with ``preserve_order``)
- ai-dynamo/dynamo: ``tokcfg.rs`` @4c42d74085dbb0e7f5d1d389aaabe018e9a99faa, ``formatters.rs`` @533b5042,
  ``oai.rs`` @6964d34f, Cargo.lock @0033ee02 (minijinja 2.24.0 with indexmap, i.e. ``preserve_order``)
- EricLBuehler/candle-vllm @36fe5d951acdd7e80995eb1caffecd18f7df0f78 (minijinja "2.10.2", no ``preserve_order``)
- nobodywho-ooo/nobodywho @7a19e3528dcba5619ec9f6f0fb2acf697f261457 (Cargo.lock minijinja 2.22.0, no indexmap)

What the engine cannot reproduce with the Python binding (minijinja 3.0.5, always ``preserve_order``): maps a
template builds itself keep insertion order even for runtimes without ``preserve_order`` (the maps a runtime
passes in are sorted here, as its serde conversion sorts them); behaviour that changed between the runtime's
pinned minijinja and the binding (:data:`VERSION_CHANGES`: booleans print ``True`` from 2.22, the builtin ``tojson``
puts spaces after ``,`` and ``:`` from 3.0). Those change prompt bytes, not whether a template renders or reads the
tools; the engine's availability lists the ones that apply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TOJSON_BUILTIN = "builtin"
"""minijinja's own ``tojson``: ``", "``/``": "`` separators, ``< > & '`` escaped as ``\\u003c``..., and any keyword
but ``indent`` is an error ("unknown keyword argument 'ensure_ascii'")."""
TOJSON_PYTHON = "python-separators"
"""mistral.rs's ``tojson``: Python's ``json.dumps`` separators, no HTML escape, other keywords ignored, ``indent``
at most 256."""
TOJSON_COMPACT_HTML = "compact-html"
"""Dynamo's ``tojson`` (tokcfg.rs @4c42d740): ``serde_json::to_string`` (no spaces) then ``< > & '`` escaped; other
keywords ignored."""
TOJSON_VARIANTS = (TOJSON_BUILTIN, TOJSON_PYTHON, TOJSON_COMPACT_HTML)

TOOLS_NONE = "none"
"""No tools: the template sees ``tools`` as none (a Rust ``Option::None`` serialized)."""
TOOLS_UNDEFINED = "undefined"
"""No tools: ``tools`` is not passed at all (undefined)."""
TOOLS_EMPTY = "empty"
"""No tools: ``tools`` is an empty list."""


@dataclass(frozen=True)
class Rewrite:
    """One change the runtime makes to the template text before compiling it."""

    pattern: str
    replacement: str
    regex: bool = False
    """``pattern`` is a regular expression (``replacement`` in Python's ``re.sub`` syntax); else a plain string."""
    only_if: str | None = None
    """Applied only when the template contains this text (mistral.rs's GLM-4 ``{{ meta }}`` fix)."""

    def apply(self, text: str) -> str:
        if self.only_if is not None and self.only_if not in text:
            return text
        if self.regex:
            import re

            return re.sub(self.pattern, self.replacement, text)
        return text.replace(self.pattern, self.replacement)

    def to_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "replacement": self.replacement, "regex": self.regex, "only_if": self.only_if}


@dataclass(frozen=True)
class MinijinjaConfig:
    """minijinja as one runtime configures it."""

    id: str
    """Engine id suffix: the engine is ``minijinja/<id>``."""
    runtime: str
    runtime_version: str
    minijinja_version: str
    """The minijinja crate the runtime pins (Cargo.lock, else Cargo.toml's requirement)."""
    template_name: str
    """The name the runtime compiles the template under: minijinja's errors say ``(in <name>:<line>)``."""
    trim_blocks: bool
    lstrip_blocks: bool
    pycompat: bool
    """``minijinja_contrib::pycompat`` as the unknown-method callback (``.strip()``, ``.items()``, ``.get()``...)."""
    preserve_order: bool
    """The crate's ``preserve_order`` feature: without it every map iterates (and ``tojson``s) in key order."""
    tojson: str
    """One of :data:`TOJSON_VARIANTS`."""
    raise_exception: str | None
    """The minijinja error kind the runtime's ``raise_exception`` returns (``syntax error``, ``invalid operation``),
    or None when the runtime registers no such function."""
    strftime_now: str | None
    """``utc`` or ``local``; None when the runtime registers no ``strftime_now``."""
    length_none_is_zero: bool = False
    """Dynamo's ``length`` filter: none/undefined (and anything without a length) count 0 instead of an error."""
    tools_template_name: str | None = None
    """The name it renders under when the request has tools, if another (Dynamo: ``tool_use``)."""
    rewrites: tuple[Rewrite, ...] = ()
    forwarded_variables: tuple[str, ...] | None = None
    """Names of :attr:`RenderRequest.variables` the runtime passes to the template; None: all of them."""
    tools_absent: str = TOOLS_NONE
    """What the template sees as ``tools`` when the request has none (:data:`TOOLS_NONE`, ...)."""
    empty_tools_absent: bool = False
    """An empty tools list counts as no tools (mistral.rs renders without ``tools`` then)."""
    add_generation_prompt: bool | None = None
    """A value the runtime hard-codes (TGI: always true); None: the request's."""
    date_string_format: str | None = None
    """mistral.rs passes ``date_string`` (UTC now in this strftime format)."""
    tools_aliases: tuple[str, ...] = ()
    """Other names the tools are passed under as well (mistral.rs: ``xml_tools`` for SmolLM3)."""
    variable_aliases: tuple[tuple[str, str], ...] = ()
    """(given, also) pairs: a request variable the runtime passes under a second name too."""
    builtin_tool_names: tuple[str, ...] = ()
    """mistral.rs passes ``builtin_tools``: the names of the request's tools found in this list."""
    tgi_tool_shape: bool = False
    """TGI hands the template its own serialisation of the tools (:func:`tgi_tools`: ``arguments`` as a JSON
    string, no ``parameters``, ``no_tool`` appended for ``tool_choice`` auto), not the request's."""
    sources: tuple[str, ...] = field(default_factory=tuple)
    """``file@commit: setting`` for every setting above."""

    @property
    def engine_name(self) -> str:
        return f"minijinja/{self.id}"

    def rewrite(self, template: str) -> str:
        """The template text as the runtime compiles it."""
        for rewrite in self.rewrites:
            template = rewrite.apply(template)
        return template

    def to_dict(self) -> dict[str, Any]:
        """What the worker needs to build the environment (JSON data)."""
        return {
            "id": self.id,
            "template_name": self.template_name,
            "trim_blocks": self.trim_blocks,
            "lstrip_blocks": self.lstrip_blocks,
            "pycompat": self.pycompat,
            "preserve_order": self.preserve_order,
            "tojson": self.tojson,
            "raise_exception": self.raise_exception,
            "strftime_now": self.strftime_now,
            "length_none_is_zero": self.length_none_is_zero,
        }


_TGI = "huggingface/text-generation-inference"
_TGI_AT = "@db931fcf"
_MRS = "EricLBuehler/mistral.rs mistralrs-core/src/pipeline/chat_template.rs@9e922623"
_DYN = "ai-dynamo/dynamo lib/llm/src/preprocessor/prompt/template"
_CANDLE = "EricLBuehler/candle-vllm src/openai/conversation/default_conversation.rs@36fe5d95"
_NOBODY = "nobodywho-ooo/nobodywho nobodywho/core/src/template.rs@7a19e352"

_GENERATION_TAGS = (Rewrite("{% generation %}", ""), Rewrite("{% endgeneration %}", ""))

TGI = MinijinjaConfig(
    id="tgi",
    tgi_tool_shape=True,
    runtime="Hugging Face TGI",
    runtime_version="v3.3.7+1",
    minijinja_version="2.8.0",
    template_name="<string>",
    trim_blocks=False,
    lstrip_blocks=False,
    pycompat=True,
    preserve_order=False,
    tojson=TOJSON_BUILTIN,
    raise_exception="syntax error",
    strftime_now="local",
    rewrites=(
        Rewrite("messages[0]['content'][0]['text']", "messages[0]['content']"),  # their gemma3 hack
        Rewrite("[::-1]", "|reverse"),  # Qwen3: negative slices need minijinja >= 2.10
        *_GENERATION_TAGS,
    ),
    forwarded_variables=("bos_token", "eos_token"),
    tools_absent=TOOLS_NONE,
    add_generation_prompt=True,
    sources=(
        f"{_TGI} router/src/infer/chat_template.rs{_TGI_AT}: Environment::new() (no trim/lstrip), pycompat "
        "unknown_method_callback, rewrites (gemma3 content, [::-1] -> |reverse, {% generation %} removed), "
        "raise_exception -> ErrorKind::SyntaxError, strftime_now = chrono::Local, template_from_str (name <string>), "
        "add_generation_prompt: true always",
        f"{_TGI} router/src/lib.rs{_TGI_AT}: ChatTemplateInputs {{messages, bos_token, eos_token, "
        "add_generation_prompt, tools: Option}}",
        f"{_TGI} Cargo.toml + Cargo.lock{_TGI_AT}: minijinja 2.8.0 features json (router adds loop_controls), no "
        "preserve_order (no indexmap in its lock entry), builtin tojson",
    ),
)

MISTRALRS = MinijinjaConfig(
    id="mistralrs",
    runtime="mistral.rs",
    runtime_version="v0.9.2+7",
    minijinja_version="2.14.0",
    template_name="chat_template",
    trim_blocks=True,
    lstrip_blocks=True,
    pycompat=True,
    preserve_order=True,
    tojson=TOJSON_PYTHON,
    raise_exception="invalid operation",
    strftime_now="utc",
    rewrites=(
        Rewrite("namespace(name=tcid if tcid else '')", "namespace(name=(tcid if tcid else ''))"),
        Rewrite("[::-1]", "|reverse"),
        Rewrite(r"range\((?P<expr>[^,]+),\s*-1,\s*-1\)", r"range(\g<expr>)|reverse", regex=True),
        Rewrite('{%- set meta = message.get("metadata", "") %}', "", only_if="{{ meta }}"),
        Rewrite("{{ meta }}", ""),
        Rewrite(r"\{%-?\s*(?:end)?generation\s*-?%\}", "", regex=True),
    ),
    forwarded_variables=("bos_token", "eos_token", "unk_token", "enable_thinking", "reasoning_effort"),
    tools_absent=TOOLS_UNDEFINED,
    empty_tools_absent=True,
    date_string_format="%d, %B, %Y",
    tools_aliases=("xml_tools",),
    variable_aliases=(("reasoning_effort", "reasoning_strength"),),
    builtin_tool_names=("browser", "python", "code_interpreter", "web_search", "brave_search", "wolfram_alpha"),
    sources=(
        f"{_MRS}: apply_chat_template_to: pycompat, set_lstrip_blocks(true), set_trim_blocks(true), rewrites "
        "(normalize_minijinja_compatibility, [::-1], range(x, -1, -1), GLM4 meta, generation tags), "
        "add_template('chat_template'), raise_exception -> InvalidOperation, tojson filter, strftime_now = Utc",
        f"{_MRS}: fn tojson: PythonCompactFormatter, PrettyFormatter for indent <= 256, Value::from_safe_string "
        "(no HTML escape), kwargs other than indent never checked",
        f"{_MRS}: context!: tools/xml_tools/builtin_tools only when tools non-empty; date_string (%d, %B, %Y, UTC), "
        "unk_token, enable_thinking, reasoning_effort and reasoning_strength",
        "EricLBuehler/mistral.rs Cargo.toml@9e922623: minijinja 2.14.0 features builtins, json, preserve_order",
    ),
)

DYNAMO = MinijinjaConfig(
    id="dynamo",
    runtime="NVIDIA Dynamo",
    runtime_version="main (2026)",
    minijinja_version="2.24.0",
    template_name="default",
    tools_template_name="tool_use",
    trim_blocks=True,
    lstrip_blocks=True,
    pycompat=True,
    preserve_order=True,
    tojson=TOJSON_COMPACT_HTML,
    raise_exception="invalid operation",
    strftime_now="local",
    length_none_is_zero=True,
    rewrites=_GENERATION_TAGS,
    forwarded_variables=None,  # chat_template_args are merged into the context last
    tools_absent=TOOLS_NONE,
    sources=(
        f"{_DYN}/formatters.rs@533b5042: JinjaEnvironment::default set_lstrip_blocks/set_trim_blocks(true); length "
        "filter (none/undefined -> 0); pycompat; tojson, raise_exception, strftime_now from tokcfg; "
        "remove_known_non_jinja2_tags; templates 'default' and 'tool_use' (the same string for a single template)",
        f"{_DYN}/tokcfg.rs@4c42d740: tojson = serde_json::to_string + HTML escape of < > & ', indent kwarg; "
        "raise_exception -> InvalidOperation",
        f"{_DYN}/tokcfg.rs (later NVIDIA 2024-2026 version, code-search index, commit not named): strftime_now = "
        "chrono Local",
        f"{_DYN}/oai.rs@6964d34f: context {{messages, tools (Option), bos/eos/unk_token, add_generation_prompt, "
        "mixins, chat_template_args merged last}}; tool_use template when tools non-empty",
        "ai-dynamo/dynamo Cargo.lock@0033ee02: minijinja 2.24.0 depends on indexmap (preserve_order)",
    ),
)

CANDLE_VLLM = MinijinjaConfig(
    id="candle-vllm",
    runtime="candle-vllm",
    runtime_version="v0.8.9",
    minijinja_version="2.10.2",
    template_name="candle-vllm",
    trim_blocks=True,
    lstrip_blocks=True,
    pycompat=True,
    preserve_order=False,
    tojson=TOJSON_BUILTIN,
    raise_exception=None,
    strftime_now=None,
    rewrites=(
        Rewrite(
            r"(?x)\|(?P<ws>\s*)tojson\(\s*ensure_ascii\s*=\s*(?:false|true|False|True)\s*\)",
            r"|\g<ws>tojson",
            regex=True,
        ),
        Rewrite("[::-1]", "|reverse"),
        Rewrite('{%- set meta = message.get("metadata", "") %}', "", only_if="{{ meta }}"),
        Rewrite("{{ meta }}", ""),
    ),
    forwarded_variables=("bos_token", "eos_token", "enable_thinking"),
    tools_absent=TOOLS_EMPTY,
    sources=(
        f"{_CANDLE}: render_chat_template: set_lstrip_blocks/set_trim_blocks(true), pycompat, "
        "normalize_template_source (|tojson(ensure_ascii=...) -> |tojson), [::-1] -> |reverse, GLM meta fix, "
        "add_template('candle-vllm'); no raise_exception, no strftime_now; context {messages, add_generation_prompt, "
        "bos_token, eos_token, enable_thinking, tools (a list)}",
        "EricLBuehler/candle-vllm Cargo.toml@36fe5d95: minijinja 2.10.2 features builtins, json (no lockfile)",
    ),
)

NOBODYWHO = MinijinjaConfig(
    id="nobodywho",
    runtime="nobodywho",
    runtime_version="core @7a19e352",
    minijinja_version="2.22.0",
    template_name="<string>",
    trim_blocks=False,
    lstrip_blocks=False,
    pycompat=True,
    preserve_order=False,
    tojson=TOJSON_BUILTIN,
    raise_exception="invalid operation",
    strftime_now="local",
    rewrites=(
        Rewrite(r"\{%(-?)\s*endgeneration\s*(-?)%\}", r"{%\1 endif \2%}", regex=True),
        Rewrite(r"\{%(-?)\s*generation\s*(-?)%\}", r"{%\1 if true \2%}", regex=True),
    ),
    forwarded_variables=None,
    tools_absent=TOOLS_NONE,
    sources=(
        f"{_NOBODY}: MINIJINJA_ENV: Environment::new() (no trim/lstrip), raise_exception -> InvalidOperation, "
        "strftime_now = chrono Local, pycompat; rewrite_generation_tags ({% generation %} -> {% if true %}); "
        "template_from_str (name <string>)",
        "nobodywho-ooo/nobodywho nobodywho/Cargo.lock@7a19e352: minijinja 2.22.0 (no indexmap: no preserve_order)",
        f"{_NOBODY}: render_unhandled: context {{messages, add_generation_prompt (last message user or tool), "
        "bos_token, eos_token, tools = from_serialize(Option<Vec<Tool>>) (none when absent), template_variables "
        "(booleans) merged}}",
    ),
)

VERSION_CHANGES: tuple[tuple[str, str, bool], ...] = (
    ("2.10.0", "negative slices such as [::-1] exist from 2.10.0 (PR #781)", False),
    ("2.22.0", "none, true and false print as None, True and False from 2.22.0 (before: none, true, false)", False),
    ("2.24.0", "string repetition is capped at 100 MB from 2.24.0", False),
    ("3.0.0", "the builtin tojson writes ', ' and ': ' separators from 3.0 (before: compact)", True),
    ("3.0.0", "printed lists and maps quote strings Python-style from 3.0", False),
)
"""Behaviour that differs between a runtime's pinned minijinja and the binding, by the release that changed it
(and whether only the builtin ``tojson`` is concerned): CHANGELOG.md of mitsuhiko/minijinja @eb17be57, and
``filters.rs`` at tag 2.8.0 for the old ``tojson`` (``serde_json::to_string``)."""


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split(".")[:3])


def version_differences(pinned: str, binding: str, builtin_tojson: bool = True) -> list[str]:
    """The known changes between minijinja ``pinned`` (the runtime's) and ``binding`` (what renders here); a
    runtime with its own ``tojson`` is not concerned by the builtin's."""
    low, high = sorted((_version_key(pinned), _version_key(binding)))
    return [
        why
        for release, why, tojson_only in VERSION_CHANGES
        if low < _version_key(release) <= high and (builtin_tojson or not tojson_only)
    ]


CONFIGS: dict[str, MinijinjaConfig] = {c.id: c for c in (TGI, MISTRALRS, DYNAMO, CANDLE_VLLM, NOBODYWHO)}
"""Every runtime's configuration, by id."""


def config(config_id: str) -> MinijinjaConfig:
    """The configuration named ``config_id`` (``tgi``, ``mistralrs``, ``dynamo``, ``candle-vllm``, ``nobodywho``)."""
    try:
        return CONFIGS[config_id]
    except KeyError:
        raise KeyError(f"no minijinja configuration {config_id!r}; known: {', '.join(CONFIGS)}") from None


# ------------------------------------------------------------------------------------------- TGI's tool prompt

TGI_DEFAULT_TOOL_PROMPT = (
    "\nGiven the functions available, please respond with a JSON for a function call with its proper arguments "
    "that best answers the given prompt. Respond in the format {name: function name, parameters: dictionary of "
    "argument name and its value}.Do not use variables.\n"
)
"""``default_tool_prompt()`` in router/src/lib.rs @db931fcf, byte for byte."""

_TGI_NO_TOOL = {
    "type": "function",
    "function": {
        "name": "no_tool",
        "description": "Open ended response with no specific tool selected",
        "parameters": {"type": "object"},
    },
}
"""What ``ToolGrammar::apply`` (router/src/infer/tool_grammar.rs @db931fcf) appends for ``tool_choice`` auto."""


def tgi_tools(tools: Sequence[Mapping[str, Any]], tool_choice: str = "auto") -> list[dict[str, Any]]:
    """The tools as TGI hands them to the template: ``no_tool`` appended for ``auto`` (its default when tools
    are given), ``none`` gives no tools; each serialized as its ``Tool``/``FunctionDefinition`` structs do
    (lib.rs @db931fcf): ``{"type", "function": {"description", "name", "arguments"}}`` where ``arguments`` is the
    JSON schema as a *string* (``serialize_as_string``; ``parameters`` is only its input alias), its keys sorted
    as TGI's serde_json (no ``preserve_order``: a ``BTreeMap``) writes them."""
    if tool_choice == "none":
        return []
    chosen = [*tools, _TGI_NO_TOOL] if tool_choice == "auto" else list(tools)
    out = []
    for tool in chosen:
        fn = tool.get("function") or {}
        schema = fn.get("parameters", fn.get("arguments"))
        out.append(
            {
                "type": tool.get("type", "function"),
                "function": {
                    "description": fn.get("description"),
                    "name": fn.get("name"),
                    "arguments": json.dumps(schema, separators=(",", ":"), ensure_ascii=False, sort_keys=True),
                },
            }
        )
    return out


def _tgi_text(message: Mapping[str, Any]) -> str:
    """``From<Message> for TextMessage``: chunks joined, an image as ``![](url)``, tool calls as their JSON."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for chunk in content:
            if isinstance(chunk, Mapping) and chunk.get("type") == "image_url":
                parts.append(f"![]({(chunk.get('image_url') or {}).get('url', '')})")
            elif isinstance(chunk, Mapping):
                parts.append(str(chunk.get("text", "")))
        return "".join(parts)
    calls = message.get("tool_calls") or []
    return json.dumps(calls, separators=(",", ":"), ensure_ascii=False) if calls else ""


def tgi_tool_prompt_applied(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    template_uses_tools: bool,
    tool_prompt: str = TGI_DEFAULT_TOOL_PROMPT,
) -> list[dict[str, Any]]:
    """The messages as TGI's ``ChatTemplate::apply`` (router/src/infer/chat_template.rs @db931fcf) hands them to
    the template: each flattened to ``{role, content}`` (a string), and, when tools are given, the last one
    extended by ``"\\n---\\n" + tools JSON + "\\n" + tool_prompt`` if the template does not use ``tools``
    (``undeclared_variables(true)`` lacks it), else by ``"\\n---\\n" + tool_prompt`` only. ``tools`` are the ones
    :func:`tgi_tools` gives (what TGI serializes); ``template_uses_tools`` is
    ``"tools" in MinijinjaEngine.undeclared_variables(template)``."""
    out = [{"role": str(m.get("role", "")), "content": _tgi_text(m)} for m in messages]
    if tools is not None and out:
        if template_uses_tools:
            extra = f"\n---\n{tool_prompt}"
        else:
            extra = f"\n---\n{json.dumps(list(tools), separators=(',', ':'), ensure_ascii=False)}\n{tool_prompt}"
        out[-1]["content"] += extra
    return out
