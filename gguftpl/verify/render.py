"""``gguftpl render``: the exact prompt an engine renders for a conversation, and where each tool landed.

``hf`` renders with transformers' semantics (bounded, in the render worker) the template llama.cpp would
choose; ``llamacpp`` asks llama.cpp's own engine, on a stand-in (or the real file), after the preflight check
(:mod:`gguftpl.verify.preflight`) has made sure no template would hang or crash it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gguftpl.engines.llamacpp_choice import FALLBACK, choose_template
from gguftpl.errors import TemplateError, UsageError

if TYPE_CHECKING:
    from gguftpl.stores.model import OllamaLayers, StoreModel

Message = dict[str, Any]

DEFAULT_MESSAGES: list[Message] = [
    {"role": "system", "content": "You are a helpful assistant with access to tools."},
    {"role": "user", "content": "What is the weather in Paris right now, in Celsius?"},
]
"""The sample conversation (``samples/conversation.json``; a test keeps the two equal)."""
DEFAULT_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "Name of the city, e.g. Paris."},
                    "unit": {
                        "type": "string",
                        "enum": ["celsius", "fahrenheit"],
                        "description": "Temperature unit to report in.",
                    },
                },
                "required": ["city"],
            },
        },
    }
]
"""The sample tool (``samples/tools.json``)."""

ENGINES = ("hf", "llamacpp", "hfjs", "minijinja/tgi", "minijinja/mistralrs", "minijinja/dynamo", "ollama")
ENGINE_ALIASES = {"transformers": "hf", "minijinja": "minijinja/tgi"}
"""``transformers`` is ``hf``; plain ``minijinja`` is stock minijinja as TGI sets it up."""


def load_messages_file(path: str | os.PathLike[str]) -> list[Message]:
    """A conversation file: a list of messages, or an object with a ``messages`` list."""
    from gguftpl.safeio import read_json_file

    data = read_json_file(path, what="conversation file")  # FIFOs, huge or deeply nested files: one line
    msgs = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) and "role" in m for m in msgs):
        raise UsageError(f"{os.fspath(path)}: expected a list of messages with a 'role' (or {{'messages': [...]}})")
    return msgs


@dataclass(frozen=True)
class ToolSpan:
    """Where one piece of a tool definition landed in a rendered prompt."""

    tool: str
    kind: str
    """``name``, ``description``, ``property`` or ``property-description``."""
    text: str
    start: int
    """Character offset in the prompt (-1: not found)."""
    line: int
    """1-based line (0: not found)."""

    @property
    def found(self) -> bool:
        return self.start >= 0


def locate_tools(prompt: str, tools: Sequence[dict[str, Any]]) -> list[ToolSpan]:
    """Find each tool's name, description and parameter names/descriptions in ``prompt``."""
    from gguftpl.verify.schema import schema_items
    from gguftpl.verify.tools import tools_from_json

    spans: list[ToolSpan] = []
    for spec in tools_from_json(list(tools), "<tools>"):
        for item in schema_items(spec):
            at = prompt.find(item.text)
            if at < 0 and item.kind.endswith("description"):
                # json.dumps escapes quotes and non-ASCII: look for the escaped form too
                esc = json.dumps(item.text)[1:-1]
                at = prompt.find(esc)
                text = esc if at >= 0 else item.text
            else:
                text = item.text
            line = prompt.count("\n", 0, at) + 1 if at >= 0 else 0
            spans.append(ToolSpan(spec.name, item.kind, text, at, line))
    return spans


@dataclass
class RenderResult:
    prompt: str
    engine: str
    template: str
    """Template name (``default``, ``tool_use``, …, ``fallback``, or ``override``)."""
    tools: list[dict[str, Any]]
    spans: list[ToolSpan]
    notes: list[str] = field(default_factory=list)


def select_template(templates: Mapping[str, str], tools: Sequence[Any] | None, name: str | None) -> str | None:
    """The template name to render: ``name`` when given (it must exist), else the one llama.cpp would
    choose (:func:`gguftpl.engines.llamacpp_choice.choose_template`). None: the file has none for this request."""
    if name is not None:
        if name not in templates:
            have = ", ".join(sorted(templates)) or "none"
            raise UsageError(f"--template {name}: the file has no such template (has: {have})")
        return name
    choice = choose_template(templates, tools)
    return None if choice.fallback else choice.name


def render_prompt(
    path: str | os.PathLike[str],
    *,
    engine: str = "hf",
    template: str | None = None,
    messages: list[Message] | None = None,
    tools: list[dict[str, Any]] | None = None,
    load_weights: bool = False,
    add_generation_prompt: bool = True,
    store: StoreModel | None = None,
) -> RenderResult:
    """The exact prompt an engine renders for ``messages`` and ``tools`` (defaults: the sample ones).

    ``hf``: transformers semantics (``render_hf``) on the template llama.cpp would choose (or ``template``),
    with the file's BOS/EOS texts. ``llamacpp``: llama.cpp's own engine (``/apply-template``) on a stand-in
    (or the real file with ``load_weights``); ``template`` is passed as a ``--chat-template`` override.
    ``store``: the file is a model Ollama already has: ``ollama`` renders what its manifest makes Ollama render
    (its TEMPLATE layer), not the curated template an import would get.
    """
    from gguftpl.gguf.reader import read_header
    from gguftpl.gguf.templateset import load_templateset
    from gguftpl.verify.preflight import check_regular

    engine = ENGINE_ALIASES.get(engine, engine)
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")
    path = os.fspath(path)
    check_regular(path)
    req = _Request(
        list(messages if messages is not None else DEFAULT_MESSAGES),
        list(tools if tools is not None else DEFAULT_TOOLS),
        add_generation_prompt,
    )
    tset = load_templateset(read_header(path))
    if engine == "hf":
        prompt, used, notes = _render_hf(path, tset, req, template)
    elif engine == "llamacpp":
        prompt, used, notes = _render_llamacpp(path, tset, req, template, load_weights)
    else:
        ollama = store.ollama if store is not None and engine == "ollama" and template is None else None
        prompt, used, notes = _render_engine(path, tset, req, template, engine, ollama)
    return RenderResult(prompt, engine, used, req.tools, locate_tools(prompt, req.tools) if req.tools else [], notes)


@dataclass(frozen=True)
class _Request:
    messages: list[Message]
    tools: list[dict[str, Any]]
    add_generation_prompt: bool


def _render_hf(path: str, tset: Any, req: _Request, template: str | None) -> tuple[str, str, list[str]]:
    from gguftpl.engines.transformers import render_hf
    from gguftpl.gguf.templateset import special_token_text

    texts = {n: t.text for n, t in tset.templates.items()}
    name = select_template(texts, req.tools, template)
    if name is None:
        raise TemplateError(
            f"{path} has no chat template: transformers refuses to render; llama.cpp silently falls back "
            "to ChatML (see it with --engine llamacpp)"
        )
    prompt = render_hf(
        texts[name],
        req.messages,
        tools=req.tools or None,
        add_generation_prompt=req.add_generation_prompt,
        bos_token=special_token_text(tset, "bos"),
        eos_token=special_token_text(tset, "eos"),
    )
    return prompt, name, []


def _render_llamacpp(
    path: str, tset: Any, req: _Request, template: str | None, load_weights: bool
) -> tuple[str, str, list[str]]:
    from gguftpl.engines.llamacpp_session import LlamaCppSession
    from gguftpl.verify.preflight import render_bombs

    texts = {n: t.text for n, t in tset.templates.items()}
    name = select_template(texts, req.tools, template)
    override = texts[name] if template is not None and name is not None else None
    bombs = render_bombs(path, req.messages, req.tools, also_load=[name] if override is not None and name else [])
    if bombs:
        raise TemplateError(
            "not rendered in llama.cpp, which has no time, size or recursion limits: " + "; ".join(bombs[:3])
        )
    notes: list[str] = []
    with LlamaCppSession(path, load_weights=load_weights, chat_template=override) as s:
        prompt = s.apply_template(req.messages, req.tools or None, add_generation_prompt=req.add_generation_prompt)
        used = s.template_for(req.tools).name
        if override is not None:
            used = name or "override"
        elif used == FALLBACK:
            what = "no chat template" if not texts else "no default chat template"
            notes.append(f"the file has {what}: llama.cpp rendered with its built-in ChatML fallback")
        if req.tools and not s.caps.get("supports_tools"):
            notes.append("llama.cpp's capability probe: supports_tools=false (it drops the tools)")
    return prompt, used, notes


def _manifest_template(layers: OllamaLayers, default: str | None) -> tuple[str, str, str]:
    """(text, name, why) of the TEMPLATE Ollama renders for this manifest; TemplateError when it renders none."""
    from gguftpl.runtimes.ollamamanifest import TEMPLATE_LABEL, mode

    how, why = mode(layers, default)
    if how == "template" and layers.template is not None:
        return layers.template, TEMPLATE_LABEL, why
    if how == "native":
        raise TemplateError(f"{why}: see that prompt with --engine llamacpp")
    raise TemplateError(f"{why}: gguftpl renders no Go template for it")


def _render_engine(
    path: str, tset: Any, req: _Request, template: str | None, engine_id: str, layers: OllamaLayers | None = None
) -> tuple[str, str, list[str]]:
    """Another runtime's engine (:mod:`gguftpl.engines.registry`) on the template that runtime reads: the default
    (or ``template``); Ollama's engine on the curated Go template ``ollama create`` puts in its place, or, for a
    model Ollama has (``layers``), on the TEMPLATE its manifest makes Ollama render."""
    from gguftpl.engines import registry
    from gguftpl.engines.base import RenderRequest
    from gguftpl.gguf.templateset import special_token_text, template_special_tokens

    available = registry.availability(engine_id)
    if not available.installed:
        raise TemplateError(available.unknown_reason())
    texts = {n: t.text for n, t in tset.templates.items()}
    name = template or "default"
    if name not in texts:
        have = ", ".join(sorted(texts)) or "none"
        raise TemplateError(f"{path} has no {name} template for {engine_id} to render (has: {have})")
    text, notes = texts[name], [f"{engine_id}: {available.version}"]
    if layers is not None:
        text, name, why = _manifest_template(layers, texts.get("default"))
        notes.append(why)
    elif engine_id == "ollama":
        from gguftpl.engines import ollama_registry

        found = ollama_registry.nearest(text)
        if found is None:
            raise TemplateError(
                f"no Ollama registry template is near the {name} template: Ollama renders the GGUF's own Jinja "
                "through its bundled llama-server (see it with --engine llamacpp)"
            )
        text = ollama_registry.curated(found[0]).text
        name = f"{found[0]} (Ollama's curated Go template)"
        notes.append(f"ollama create replaces the default with {found[0]}.gotmpl (Levenshtein distance {found[1]})")
    variables = {
        **template_special_tokens(tset),
        "bos_token": special_token_text(tset, "bos"),
        "eos_token": special_token_text(tset, "eos"),
    }
    request = RenderRequest(req.messages, req.tools or None, req.add_generation_prompt, variables)
    (out,) = registry.get(engine_id).render(text, [request])
    if out.error is not None:
        line = f" (template line {out.error.line})" if out.error.line else ""
        raise TemplateError(f"{engine_id} cannot render the {name} template: {out.error.message}{line}")
    return str(out.text), name, notes
