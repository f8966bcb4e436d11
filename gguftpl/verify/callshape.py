"""Which shape a tool call has in a model's own text, found by parsing it (``verify --live``).

When llama.cpp returns no ``tool_calls``, the model may still have written a call, only not the way the
template's parser takes it: Qwen2.5-Coder writes the right name and arguments as a ```json fence or bare JSON
where its template asks for ``<tool_call>`` tags (RESEARCH §7). Each JSON value in the text is decoded; one that
calls a known tool (by name, or as ``{"name": …, "arguments": …}``) is a call, and where it sits (a code fence,
between markers, alone, inside prose) is its shape. A Python-style ``tool(arg=…)`` counts too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

JSON_FENCE = "json-fence"
FENCE = "fence"
TAGGED = "tagged"
BARE_JSON = "bare-json"
JSON_IN_PROSE = "json-in-prose"
PYTHON_CALL = "python-call"

SHAPE_WORDS = {
    JSON_FENCE: "a ```json code fence around a JSON call",
    FENCE: "a ``` code fence around a JSON call",
    TAGGED: "a JSON call between markers",
    BARE_JSON: "bare JSON",
    JSON_IN_PROSE: "a JSON call inside prose",
    PYTHON_CALL: "a Python-style call",
}

_ARG_KEYS = ("arguments", "parameters", "args", "input")
_FENCE_OPEN = re.compile(r"```([\w+\-]*)[ \t]*\n?\s*$")
_MARKER_BEFORE = re.compile(r"(<\|?[^<>\s]{1,40}\|?>|\[[A-Z_]{2,40}\])\s*$")
_MAX_STARTS = 400
"""JSON values tried per text: a model's answer is bounded by max tokens, this keeps a wall of brackets cheap."""


@dataclass(frozen=True)
class FoundCall:
    """A call the model wrote in its text."""

    shape: str
    """One of :data:`SHAPE_WORDS`."""
    name: str
    arguments: Any
    excerpt: str
    """The part of the text holding the call (with its fence or markers)."""
    marker: str = ""
    """For :data:`TAGGED`: the marker before the JSON (``<tool_call>``, ``[TOOL_CALLS]``…)."""

    def describe(self) -> str:
        if self.shape == TAGGED and self.marker:
            return f"a JSON call after {self.marker}"
        return SHAPE_WORDS[self.shape]

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "description": self.describe(),
            "name": self.name,
            "arguments": self.arguments,
            "excerpt": self.excerpt,
        }


def find_call(text: str, tool_names: Sequence[str]) -> FoundCall | None:
    """The first tool call written in ``text`` (a JSON call in any setting, then a Python-style call)."""
    names = [n for n in tool_names if n]
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"[\[{]", text)][:_MAX_STARTS]
    covered = -1
    for start in starts:
        if start < covered:
            continue  # inside a value already decoded
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        covered = end
        call = _as_call(value, names)
        if call is not None:
            return _placed(text, start, end, *call)
    return _python_call(text, names)


def _as_call(value: Any, names: Sequence[str]) -> tuple[str, Any] | None:
    """(name, arguments) when ``value`` is a call (or a list whose first item is one)."""
    if isinstance(value, list):
        return _as_call(value[0], names) if value else None
    if not isinstance(value, dict):
        return None
    fn = value.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):  # OpenAI's own {"type": "function", …}
        value = fn
    name = value.get("name") if isinstance(value.get("name"), str) else value.get("tool_name")
    args = next((value[k] for k in _ARG_KEYS if k in value), None)
    if isinstance(name, str) and (name in names or args is not None):
        return name, args
    if len(value) == 1:  # keyed by the tool's own name: {"get_weather": {"city": "Paris"}}
        key, inner = next(iter(value.items()))
        if key in names and isinstance(inner, dict):
            return key, inner
    return None


def _placed(text: str, start: int, end: int, name: str, args: Any) -> FoundCall:
    before, after = text[:start], text[end:]
    fence = _FENCE_OPEN.search(before)
    if fence is not None:
        close = after.find("```")
        stop = end + close + 3 if close >= 0 else len(text)
        shape = JSON_FENCE if fence.group(1).lower() == "json" else FENCE
        return FoundCall(shape, name, args, text[fence.start() : stop])
    marker = _MARKER_BEFORE.search(before)
    if marker is not None:
        closing = re.match(r"\s*(</?[^<>\s]{1,40}>|<\|[^<>\s]{1,40}\|>)", after)
        stop = end + (closing.end() if closing else 0)
        return FoundCall(TAGGED, name, args, text[marker.start() : stop], marker.group(1))
    shape = BARE_JSON if not before.strip() and not after.strip() else JSON_IN_PROSE
    return FoundCall(shape, name, args, text[start:end])


def _python_call(text: str, names: Sequence[str]) -> FoundCall | None:
    for name in names:
        m = re.search(rf"(?<![\w.]){re.escape(name)}\s*\(([^()]*)\)", text)
        if m is not None:
            return FoundCall(PYTHON_CALL, name, m.group(1).strip(), m.group(0))
    return None
