"""Tool schemas as the model must see them: the items a schema holds, whether they reached a prompt, and
minimal arguments that satisfy it.

Schemas come from untrusted tool files and MCP servers: ``$ref`` cycles, exponential ``$ref`` trees, huge
``minItems`` are all bounded here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gguftpl.errors import ToolSourceError
from gguftpl.verify.tools import ToolSpec

MAX_SCHEMA_ITEMS = 10_000
"""Most property items one tool's schema may expand to (through $refs) before it is refused."""
_EXAMPLE_BUDGET = 10_000  # schema nodes example_arguments visits at most
_EXAMPLE_MAX_LEN = 1_000  # longest example string/array built from minLength/minItems


@dataclass(frozen=True)
class SchemaItem:
    """A piece of a tool definition that must reach the model."""

    kind: str
    """``name``, ``description``, ``property`` or ``property-description``."""
    path: str
    """Where in the tool, e.g. ``filters.items.field`` (``""`` for the tool itself)."""
    text: str


def schema_items(tool: ToolSpec) -> list[SchemaItem]:
    """The tool name, its description, and every property name and description, nested ones included."""
    items = [SchemaItem("name", "", tool.name)]
    if tool.description.strip():
        items.append(SchemaItem("description", "", tool.description))
    defs = _defs(tool.parameters)
    seen: set[int] = set()
    for path, name, sub in _walk_properties(tool.parameters, "", defs, seen, frozenset()):
        if len(items) >= MAX_SCHEMA_ITEMS:
            # $refs can describe a tree exponentially larger than the file: refuse it in one line
            raise ToolSourceError(
                f"tool {tool.name!r}: its parameter schema expands to more than {MAX_SCHEMA_ITEMS} properties"
            )
        items.append(SchemaItem("property", path, name))
        desc = sub.get("description")
        if isinstance(desc, str) and desc.strip():
            items.append(SchemaItem("property-description", path, desc))
    return items


def _defs(schema: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        d = schema.get(key)
        if isinstance(d, dict):
            out.update({f"#/{key}/{k}": v for k, v in d.items()})
    return out


def _resolve(node: Any, defs: Mapping[str, Any]) -> Any:
    ref = node.get("$ref") if isinstance(node, dict) else None
    if isinstance(ref, str) and ref in defs:
        merged = dict(defs[ref])
        merged.update({k: v for k, v in node.items() if k != "$ref"})  # sibling description wins
        return merged
    return node


def _expanding(node: Any, defs: Mapping[str, Any], expanding: frozenset[str]) -> frozenset[str] | None:
    """``expanding`` plus the $ref ``node`` points to, or None when that $ref is already being expanded on
    this path (a recursive schema: a tree node whose children are tree nodes)."""
    ref = node.get("$ref") if isinstance(node, dict) else None
    if not isinstance(ref, str) or ref not in defs:
        return expanding
    return None if ref in expanding else expanding | {ref}


def _walk_properties(
    node: Any, prefix: str, defs: Mapping[str, Any], seen: set[int], expanding: frozenset[str]
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    refs = _expanding(node, defs, expanding)
    if refs is None:
        return
    node = _resolve(node, defs)
    if not isinstance(node, dict) or id(node) in seen:
        return
    seen.add(id(node))
    props = node.get("properties")
    if isinstance(props, dict):
        for name, raw in props.items():
            sub = _resolve(raw, defs)
            path = f"{prefix}.{name}" if prefix else str(name)
            yield path, str(name), sub if isinstance(sub, dict) else {}
            yield from _walk_properties(raw, path, defs, seen, refs)
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            yield from _walk_properties(node[key], f"{prefix}.{key}" if prefix else key, defs, seen, refs)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                where = f"{prefix}.{key}[{i}]" if prefix else f"{key}[{i}]"
                yield from _walk_properties(sub, where, defs, seen, refs)


def text_variants(text: str) -> list[str]:
    """The forms a template may print a string in: raw, JSON-escaped (ASCII or not), HTML-safe JSON."""
    j_ascii = json.dumps(text)[1:-1]
    j_utf8 = json.dumps(text, ensure_ascii=False)[1:-1]
    html = j_ascii.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("'", "\\u0027")
    out: list[str] = []
    for v in (text, text.strip(), j_ascii, j_utf8, html):
        if v and v not in out:
            out.append(v)
    return out


def appears(text: str, haystack: str) -> bool:
    if any(v in haystack for v in text_variants(text)):
        return True
    # a template may re-wrap or trim whitespace inside a description
    collapsed = " ".join(text.split())
    return bool(collapsed) and collapsed in " ".join(haystack.split())


def inserted_text(without: str, with_: str) -> str:
    """What rendering the tools added: ``with_`` minus the longest common prefix and suffix with ``without``.

    Checking only this part keeps a property called ``role`` or ``content`` from being "found" in the
    conversation itself.
    """
    n = min(len(without), len(with_))
    p = 0
    while p < n and without[p] == with_[p]:
        p += 1
    s = 0
    while s < n - p and without[-1 - s] == with_[-1 - s]:
        s += 1
    return with_[p : len(with_) - s]


# ------------------------------------------------------------------------------------ example arguments

_FORMAT_EXAMPLES = {
    "date": "2026-01-01",
    "date-time": "2026-01-01T00:00:00Z",
    "time": "12:00:00",
    "email": "user@example.com",
    "idn-email": "user@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "iri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uuid": "123e4567-e89b-42d3-a456-426614174000",
    "duration": "PT1M",
    "regex": ".*",
}


def example_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Minimal arguments a validator should accept: the required properties, each with a plain value of its
    type (string "example" or its enum's first value or a format-shaped string, integer its minimum or 0…).
    """
    defs = _defs(schema)
    budget = [_EXAMPLE_BUDGET]  # a hostile schema (recursive $refs, huge minItems) stays cheap
    value = _example(schema, defs, 0, frozenset(), budget)
    return value if isinstance(value, dict) else {}


def _num(v: Any) -> int | float | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _count(v: Any, default: int = 0) -> int:
    """A schema length bound as a small int (NaN, infinities, strings and negatives give ``default``/0)."""
    n = _num(v)
    if n is None or n != n or n in (float("inf"), float("-inf")):
        return default
    return max(0, min(int(n), _EXAMPLE_MAX_LEN))


def _example(node: Any, defs: Mapping[str, Any], depth: int, expanding: frozenset[str], budget: list[int]) -> Any:
    refs = _expanding(node, defs, expanding)
    budget[0] -= 1
    if refs is None or budget[0] < 0:
        return None
    node = _resolve(node, defs)
    if not isinstance(node, dict) or depth > 20:
        return None
    if "const" in node:
        return node["const"]
    if isinstance(node.get("enum"), list) and node["enum"]:
        return node["enum"][0]
    if "default" in node:
        return node["default"]
    if isinstance(node.get("examples"), list) and node["examples"]:
        return node["examples"][0]
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list) and node[key]:
            branches = [_resolve(b, defs) for b in node[key]]
            pick = next((b for b in branches if isinstance(b, dict) and b.get("type") != "null"), branches[0])
            return _example(pick, defs, depth + 1, refs, budget)
    if isinstance(node.get("allOf"), list):
        merged: dict[str, Any] = {}
        for b in node["allOf"]:
            b = _resolve(b, defs)
            if isinstance(b, dict):
                for k, v in b.items():
                    if k in ("properties",) and isinstance(v, dict):
                        merged.setdefault("properties", {}).update(v)
                    elif k == "required" and isinstance(v, list):
                        merged.setdefault("required", []).extend(v)
                    else:
                        merged.setdefault(k, v)
        rest = {k: v for k, v in node.items() if k != "allOf"}
        return _example({**merged, **rest}, defs, depth + 1, refs, budget)
    t = node.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t is None:
        t = "object" if "properties" in node else "string"
    if t == "object":
        props: dict[str, Any] = node["properties"] if isinstance(node.get("properties"), dict) else {}
        req_raw = node.get("required")
        req = [r for r in req_raw if isinstance(r, str)] if isinstance(req_raw, list) else []
        return {r: _example(props.get(r, {}), defs, depth + 1, refs, budget) for r in req}
    if t == "array":
        n = max(_count(node.get("minItems")), 1)
        n = min(n, _count(node.get("maxItems"), default=n))
        item = _example(node.get("items", {"type": "string"}), defs, depth + 1, refs, budget)
        if node.get("uniqueItems") and n > 1 and isinstance(item, (int, float)) and not isinstance(item, bool):
            return [item + i for i in range(n)]
        return [item] * n
    if t in ("integer", "number"):
        lo = _num(node.get("minimum"))
        if lo is None and _num(node.get("exclusiveMinimum")) is not None:
            lo = node["exclusiveMinimum"] + 1
        hi = _num(node.get("maximum"))
        v = lo if lo is not None else 0
        if hi is not None and v > hi:
            v = hi
        step = _num(node.get("multipleOf"))
        if step and v % step:
            v = v - v % step + step
        if v != v or v in (float("inf"), float("-inf")):  # NaN or infinite bounds: no number satisfies them
            v = 0
        return int(v) if t == "integer" else v
    if t == "boolean":
        return True
    if t == "null":
        return None
    # string
    s = _FORMAT_EXAMPLES.get(str(node.get("format")), "example")
    lo_len = _count(node.get("minLength"))
    if len(s) < lo_len:
        s = (s * (lo_len // len(s) + 1))[:lo_len]
    if _num(node.get("maxLength")) is not None:
        s = s[: _count(node.get("maxLength"), default=len(s))]
    return s


def validate_arguments(schema: Mapping[str, Any], args: Any) -> list[str]:
    """Every place where ``args`` breaks the tool's JSON Schema, one line each (empty when valid)."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return [f"the tool's own schema is not valid JSON Schema: {exc.message}"]
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(args), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors]
