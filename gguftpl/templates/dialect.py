"""Which tool-call dialect a template teaches, and the exact text it renders for a call.

The primary signal is behavioural: render a conversation whose last assistant message carries a tool call
and the same conversation without it; the text that appears is how the template writes calls (that is
also how llama.cpp derives its parser). The template's literal text is the secondary signal, for templates
that describe a format in the system prompt but do not render calls in history.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from gguftpl.engines.transformers import TemplateRenderError, render_hf
from gguftpl.templates import probes

DIALECTS = (
    "hermes",
    "llama3-json",
    "llama3-python-tag",
    "mistral",
    "qwen3-coder-xml",
    "gemma4",
    "deepseek",
    "command-r",
    "functionary",
    "gpt-oss",
    "granite",
    "phi4-mini",
    "glm",
    "kimi",
    "invoke-xml",
    "apertus",
    "generic-json",
    "pythonic",
    "unknown",
    "none",
)

# (dialect, pattern) checked in order on a text; the first match wins. Most specific first.
_MARKERS: list[tuple[str, re.Pattern[str]]] = [
    ("deepseek", re.compile(r"<｜tool▁call|<｜tool▁calls|<\|tool▁call|tool▁sep|<｜DSML｜|<\|DSML\|")),
    ("kimi", re.compile(r"<\|tool_calls_section_begin\|>|<\|tool_call_begin\|>")),
    ("gpt-oss", re.compile(r"to=functions\.|<\|channel\|>commentary")),
    ("gemma4", re.compile(r"<\|tool_call>")),
    # Phi-4-mini closes each call (<|tool_call|>{…}<|/tool_call|>); Granite writes <|tool_call|>[…] unclosed
    ("phi4-mini", re.compile(r"<\|tool_call\|>[\s\S]*?<\|/tool_call\|>")),
    ("granite", re.compile(r"<\|tool_call\|>")),
    ("qwen3-coder-xml", re.compile(r"<function=[^>]*>\s*<parameter=")),
    # <invoke name="f"> (MiniMax, Anthropic-style XML; any namespace prefix such as <ns:invoke …>)
    ("invoke-xml", re.compile(r"<(?:[\w\-]+:)?invoke\s+name=")),
    ("glm", re.compile(r"<arg_key>|<tool_call>[A-Za-z_][\w.\-]*\s*<arg")),
    ("functionary", re.compile(r">>>[A-Za-z_]|<function=[A-Za-z_][\w.\-]*>\s*\{")),
    ("mistral", re.compile(r"\[TOOL_CALLS\]")),
    ("command-r", re.compile(r"<\|START_ACTION\|>|Action:\s*```json")),
    ("llama3-python-tag", re.compile(r"<\|python_tag\|>")),
    ("hermes", re.compile(r"<tool_call>\s*\{")),
]


@dataclass
class CallRendering:
    text: str
    """The text the template inserted for the call ('' if it rendered nothing for it)."""
    rendered_call: bool
    """The call's argument value appears in the inserted text."""
    string_arguments: bool
    """The rendering succeeded only with ``arguments`` as a JSON string."""
    with_call: str
    without_call: str
    content_none: bool = False
    """The call rendered only with the assistant ``content`` set to None."""


_PIECE = re.compile(
    r"<\|[^<>\s]{0,40}?\|>|<｜[^<>]{0,40}?｜>|<\|\w+>|<\w+\|>|</?[A-Za-z_][\w:.\-]*(?:=[^<>\s]*)?>"
    r"|\[/?[A-Z_]+\]|\w+|\s|.",
    re.DOTALL,
)


def _pieces(text: str) -> list[str]:
    return _PIECE.findall(text)


def inserted_text(a: str, b: str) -> str:
    """Text present in ``a`` where ``b`` differs: trim the common prefix and suffix, compared piece by
    piece (markers like ``<|im_end|>`` and ``<tool_call>`` are single pieces, so a shared ``<`` never
    splits one)."""
    pa, pb = _pieces(a), _pieces(b)
    p = 0
    limit = min(len(pa), len(pb))
    while p < limit and pa[p] == pb[p]:
        p += 1
    s = 0
    while s < limit - p and pa[len(pa) - 1 - s] == pb[len(pb) - 1 - s]:
        s += 1
    return "".join(pa[p : len(pa) - s])


def render_call(
    template_text: str,
    call: dict[str, Any] | None = None,
    *,
    tools: list[dict[str, Any]] | None = None,
    bos_token: str = "",
    eos_token: str = "",
    **kwargs: Any,
) -> CallRendering:
    """Render an assistant message carrying ``call`` (an OpenAI ``tool_calls`` entry, default: the canary
    call) and the same message without it, and return the text the call added. ``verify`` uses ``.text``
    to write a canned call the way this template writes calls. Raises TemplateRenderError.

    The call is tried as the last message first; a template may treat a final assistant message as a
    prefill to continue (its content only, calls dropped) and write calls only in history, so when that
    renders no call the conversation goes on with a tool result (or, for a template that refuses that
    continuation, with a user turn)."""
    if tools is None:
        tools = probes.canary_tools()
    call = call or probes.tool_call()
    first: CallRendering | None = None
    first_error: TemplateRenderError | None = None
    tails: tuple[list[dict[str, Any]], ...] = (
        [],
        [probes.tool_result_message()],
        [{"role": "user", "content": probes.CANARY_USER + "2"}],
    )
    for tail in tails:
        try:
            rendering = _render_call_before(template_text, call, tail, tools, bos_token, eos_token, **kwargs)
        except TemplateRenderError as e:
            first_error = first_error or e
            continue
        if rendering.rendered_call:
            return rendering
        if first is not None:
            break  # the continuations are alternatives: one that renders is enough
        first = rendering
    if first is not None:
        return first
    assert first_error is not None
    raise first_error


def _render_call_before(
    template_text: str,
    call: dict[str, Any],
    tail: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    bos_token: str,
    eos_token: str,
    **kwargs: Any,
) -> CallRendering:
    """:func:`render_call` with ``tail`` (possibly empty) rendered after the assistant message."""
    user = {"role": "user", "content": probes.CANARY_USER}
    without = ""
    for content in ("", probes.CANARY_ASSISTANT):
        try:
            without = render_hf(
                template_text,
                [user, {"role": "assistant", "content": content}, *tail],
                tools=tools,
                add_generation_prompt=False,
                bos_token=bos_token,
                eos_token=eos_token,
                **kwargs,
            )
            break
        except TemplateRenderError:
            if content:
                raise
    fn = call.get("function", {})
    values = _argument_values(fn.get("arguments"))
    variants: list[dict[str, Any]] = [call]
    if not isinstance(fn.get("arguments"), str):
        # Some templates print arguments only when they are a JSON string (OpenAI's wire format).
        as_string = json.loads(json.dumps(call))
        as_string["function"]["arguments"] = json.dumps(fn.get("arguments") or {})
        variants.append(as_string)
    # Content "" first, then None: some templates render calls only when content `is none`.
    attempts: list[tuple[dict[str, Any], str | None]] = [(c, cc) for cc in ("", None) for c in variants]
    results: list[CallRendering] = []
    errors: list[TemplateRenderError] = []
    for c, call_content in attempts:
        try:
            with_call = render_hf(
                template_text,
                [user, {"role": "assistant", "content": call_content, "tool_calls": [c]}, *tail],
                tools=tools,
                add_generation_prompt=False,
                bos_token=bos_token,
                eos_token=eos_token,
                **kwargs,
            )
        except TemplateRenderError as e:
            errors.append(e)
            continue
        inserted = inserted_text(with_call, without)
        if values:
            rendered = all(v in inserted for v in values)
        else:
            rendered = bool(fn.get("name")) and fn["name"] in inserted
        as_str = isinstance(c["function"].get("arguments"), str) and not isinstance(fn.get("arguments"), str)
        results.append(CallRendering(inserted, rendered, as_str, with_call, without, call_content is None))
        if rendered:
            return results[-1]
    if results:
        return results[0]
    raise errors[0]


def _argument_values(args: Any) -> list[str]:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return [args] if args else []
    if isinstance(args, dict):
        return [str(v) for v in args.values() if isinstance(v, (str, int, float)) and str(v)]
    return []


def classify(call_text: str, literal_text: str = "") -> tuple[str, str]:
    """Dialect of a rendered call (primary) or of the template's literal text (secondary).
    Returns (dialect, source) where source is 'rendered', 'literal' or ''."""
    if call_text.strip():
        for name, pattern in _MARKERS:
            if pattern.search(call_text):
                return name, "rendered"
        if _pythonic_call(call_text):
            return "pythonic", "rendered"
        if _name_keyed_call(call_text):
            return "apertus", "rendered"
        js = _json_call_shape(call_text)
        if js:
            return js, "rendered"
        return "unknown", "rendered"
    if literal_text:
        for name, pattern in _MARKERS:
            if pattern.search(literal_text):
                return name, "literal"
        # Markers alone, as written in prompts that describe the format
        if "<tool_call>" in literal_text:
            return "hermes", "literal"
    if call_text.strip():
        return "unknown", "rendered"
    return "none", ""


# A Python call expression with keyword arguments (or none): ``f(a=1)``, ``f()``
_PY_CALL = re.compile(r"[A-Za-z_][\w.\-]*\(\s*(?:\)|[A-Za-z_]\w*\s*=)")
_CODE_FENCE = re.compile(r"^```[\w+\-]*[ \t]*\n")
_WRAPPER_PIECE = re.compile(r"<\|[^<>\s]{0,40}?\|>|<｜[^<>]{0,40}?｜>|</?[A-Za-z_][\w:.\-]*>|\[/?[A-Z_]+\]")


def _pythonic_call(text: str) -> bool:
    r"""The call is written as Python: ``[f(a=1), g()]``, bare or between wrapper markers
    (``<|tool_call_start|>[f(a=1)]<|tool_call_end|>``, ``<function_calls>\nf(a='x')\n</function_calls>``),
    or in a Markdown code block (``<|tool_call_start|>\n```python\nf(a=1)\n```\n<|tool_call_end|>``).
    The call must open the text once markers, whitespace and a list bracket are set aside, so a JSON body
    that merely contains ``f(a=…)`` in a string is not mistaken for one."""
    body = _WRAPPER_PIECE.sub(" ", text).strip()
    body = _CODE_FENCE.sub("", body).lstrip("[").lstrip()
    return bool(_PY_CALL.match(body))


# Keys of a JSON call object that name its parts; a call keyed by the function's own name has none of them.
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "function", "tool_name", "type", "id", "call", "args"})


def _name_keyed_call(text: str) -> bool:
    """The call is JSON keyed by the function's name, its value the arguments object:
    ``[{"f": {"a": 1}}, {"g": {}}]`` (Apertus, between ``<|tools_prefix|>`` and ``<|tools_suffix|>``).
    The first JSON value in the text must be such an object or a list of them."""
    starts = [i for i in (text.find("["), text.find("{")) if i >= 0]
    if not starts:
        return False
    try:
        value, _ = json.JSONDecoder().raw_decode(text[min(starts) :])
    except ValueError:
        return False
    calls = value if isinstance(value, list) else [value]
    return bool(calls) and all(
        isinstance(c, dict)
        and len(c) == 1
        and next(iter(c)) not in _CALL_KEYS
        and isinstance(next(iter(c.values())), dict)
        for c in calls
    )


def _json_call_shape(text: str) -> str | None:
    """A bare JSON call: Llama 3.x writes {"name": …, "parameters": …}; others {"name": …, "arguments": …}."""
    start = text.find("{")
    if start < 0:
        return None
    body = text[start:]
    if '"parameters"' in body and '"name"' in body:
        return "llama3-json"
    if '"name"' in body or '"arguments"' in body or '"function"' in body:
        return "generic-json"
    return None
