"""Checks with the tools a user really runs: does each schema reach the prompt, what do the tools cost in
tokens, and does one call survive the whole host round trip (render → parse → validate → dispatch → render
the result)?

Everything here talks to llama.cpp through a small :class:`PromptEngine` protocol (the llama.cpp session in
:mod:`gguftpl.llamacpp` satisfies it), and to the MCP server through a ``dispatch`` callable, so each check
can be driven by the real components and nothing else.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gguftpl.errors import GGUFTplError, ToolSourceError
from gguftpl.tools import ToolSpec, openai_tools

Message = dict[str, Any]

PASS, FAIL, WARN, SKIP = "pass", "fail", "warn", "skip"

DEFAULT_MAX_TOOL_SHARE = 0.5
MAX_SCHEMA_ITEMS = 10_000
"""Most property items one tool's schema may expand to (through $refs) before it is refused."""
_EXAMPLE_BUDGET = 10_000  # schema nodes example_arguments visits at most
_EXAMPLE_MAX_LEN = 1_000  # longest example string/array built from minLength/minItems

STAGE_TOOLS = "tools listed"
STAGE_SCHEMA = "schema in prompt"
STAGE_BUDGET = "context budget"
STAGE_CALL_PARSED = "call parsed"
STAGE_ARGS_VALID = "arguments valid"
STAGE_DISPATCH = "dispatched"
STAGE_RESULT = "result rendered"


class PromptEngine(Protocol):
    """What the checks need from llama.cpp (``gguftpl.llamacpp.LlamaCppSession`` provides it)."""

    def apply_template(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> str: ...

    def tokenize(self, text: str, parse_special: bool = True) -> list[int]: ...


class CallParser(Protocol):
    def parse_completion(self, messages: list[Message], tools: list[dict[str, Any]], canned_text: str) -> Message: ...


CallText = Callable[[ToolSpec, dict[str, Any]], str]
"""Writes one call in the template's own dialect (what the model would emit)."""


class ResultLike(Protocol):
    @property
    def text(self) -> str: ...

    @property
    def is_error(self) -> bool: ...


Dispatch = Callable[[ToolSpec, dict[str, Any]], ResultLike]
"""Runs a parsed call (``McpToolSource.dispatch`` sends it as MCP ``tools/call``)."""


@dataclass(frozen=True)
class DispatchResult:
    text: str
    is_error: bool = False


@dataclass
class ToolStage:
    """One step of the tool checks, in the shape ``verify`` reports stages."""

    name: str
    status: str
    """``pass``, ``fail``, ``warn`` or ``skip``."""
    evidence: str
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in (PASS, WARN, SKIP)


def probe_messages(
    question: str = "Please use the available tools to answer: what is the current status?",
) -> list[Message]:
    return [{"role": "user", "content": question}]


# ------------------------------------------------------------------------------------ schema walking


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


# ------------------------------------------------------------------------------------ measuring


@dataclass
class ToolReach:
    """How much of one tool reached the prompt."""

    name: str
    total: int
    missing: list[SchemaItem]
    cost_alone: int
    """Prompt tokens with only this tool minus prompt tokens with no tools (includes the template's fixed
    tool preamble)."""

    @property
    def ok(self) -> bool:
        return not self.missing


@dataclass
class ToolMeasurement:
    """Renders and token counts of the probe conversation with no tools, all tools and each tool alone."""

    base_prompt: str
    all_prompt: str
    base_tokens: int
    all_tokens: int
    tools: list[ToolReach]

    @property
    def tool_tokens(self) -> int:
        """Prompt tokens the whole tool list adds (with all tools minus without tools)."""
        return self.all_tokens - self.base_tokens

    @property
    def overhead_tokens(self) -> int | None:
        """The template's per-request tool preamble, estimated from the alone costs (n ≥ 2):
        Σ alone_i = n·overhead + Σ marginal_i and all - none = overhead + Σ marginal_i."""
        n = len(self.tools)
        if n < 2:
            return None
        # tokenisation at the seams makes a template without a preamble come out at -1 or -2: that is 0
        return max(0, round((sum(t.cost_alone for t in self.tools) - self.tool_tokens) / (n - 1)))

    def marginal(self, reach: ToolReach) -> int:
        oh = self.overhead_tokens
        return reach.cost_alone - (oh or 0)


def measure_tools(
    engine: PromptEngine, tools: Sequence[ToolSpec], messages: list[Message] | None = None
) -> ToolMeasurement:
    """Render through llama.cpp without tools, with all tools and with each tool alone; tokenise each with
    llama.cpp's own tokenizer; find which parts of each tool definition reached the prompt.

    An item counts as present only if it is in the text the tools added, both with all tools and with
    this tool alone (a template that renders only ``tools[0]`` fails for the others).
    """
    msgs = messages or probe_messages()
    oa = openai_tools(tools)
    base = engine.apply_template(msgs, None)
    base_n = len(engine.tokenize(base, True))
    all_prompt = engine.apply_template(msgs, oa) if oa else base
    all_n = len(engine.tokenize(all_prompt, True))
    all_block = inserted_text(base, all_prompt)
    reaches: list[ToolReach] = []
    for tool, o in zip(tools, oa, strict=True):
        alone = engine.apply_template(msgs, [o]) if len(oa) > 1 else all_prompt
        alone_n = len(engine.tokenize(alone, True)) if len(oa) > 1 else all_n
        block = inserted_text(base, alone)
        items = schema_items(tool)
        missing = [it for it in items if not (appears(it.text, block) and appears(it.text, all_block))]
        reaches.append(ToolReach(tool.name, len(items), missing, alone_n - base_n))
    return ToolMeasurement(base, all_prompt, base_n, all_n, reaches)


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def tools_stage(tools: Sequence[ToolSpec]) -> ToolStage:
    """Where the tools came from, and what a model will struggle with even when the template is right:
    names the OpenAI API refuses, tools or parameters without a description."""
    from gguftpl.tools import name_is_portable

    by_source: dict[str, int] = {}
    for t in tools:
        by_source[t.source] = by_source.get(t.source, 0) + 1
    where = ", ".join(f"{n} from {src}" for src, n in by_source.items())
    notes: list[str] = []
    bad_names = [t.name for t in tools if not name_is_portable(t.name)]
    if bad_names:
        notes.append(f"names outside [A-Za-z0-9_-]{{1,64}}: {', '.join(bad_names[:3])}")
    no_desc = [t.name for t in tools if not t.description.strip()]
    if no_desc:
        notes.append(f"{_n(len(no_desc), 'tool')} without a description ({', '.join(no_desc[:3])})")
    bare = [
        f"{t.name}.{it.path}"
        for t in tools
        for it in schema_items(t)
        if it.kind == "property" and not _has_description(t, it)
    ]
    if bare:
        notes.append(f"{_n(len(bare), 'parameter')} without a description ({', '.join(bare[:3])})")
    broken = [t.extra["schema_error"] for t in tools if t.extra.get("schema_error")]
    if broken:
        notes.append(f"{_n(len(broken), 'schema')} that are not valid JSON Schema ({broken[0]})")
    data = {"sources": by_source, "names": [t.name for t in tools], "notes": notes}
    text = f"{_n(len(tools), 'tool')}: {where}"
    if notes:
        return ToolStage(STAGE_TOOLS, WARN, text + "; " + "; ".join(notes), data)
    return ToolStage(STAGE_TOOLS, PASS, text, data)


def _has_description(tool: ToolSpec, prop: SchemaItem) -> bool:
    return any(it.kind == "property-description" and it.path == prop.path for it in schema_items(tool))


def schema_stage(m: ToolMeasurement) -> ToolStage:
    bad = [r for r in m.tools if not r.ok]
    per_tool = {
        r.name: {"items": r.total, "missing": [f"{it.kind} {it.path or '(tool)'}: {it.text[:60]}" for it in r.missing]}
        for r in m.tools
    }
    data = {"tools": per_tool, "tools_total": len(m.tools), "tools_incomplete": len(bad)}
    if not m.tools:
        return ToolStage(STAGE_SCHEMA, SKIP, "no tools given", data)
    if not bad:
        n_items = sum(r.total for r in m.tools)
        return ToolStage(
            STAGE_SCHEMA,
            PASS,
            ("the tool reaches" if len(m.tools) == 1 else f"all {len(m.tools)} tools reach")
            + f" the prompt in full ({n_items} names and descriptions checked)",
            data,
        )
    if m.all_prompt == m.base_prompt:
        names = ", ".join(r.name for r in m.tools[:3]) + (", …" if len(m.tools) > 3 else "")
        return ToolStage(
            STAGE_SCHEMA,
            FAIL,
            f"llama.cpp renders the same prompt with and without the tools: none of {_n(len(m.tools), 'tool')} "
            f"({names}) reaches the model",
            data,
        )
    first = bad[0]
    names_lost = sum(1 for r in bad if any(it.kind == "name" for it in r.missing))
    what = ", ".join(f"{it.kind} {it.path or '(tool)'} {it.text[:40]!r}" for it in first.missing[:3])
    more = f" and {len(first.missing) - 3} more" if len(first.missing) > 3 else ""
    lead = f"{len(bad)}/{len(m.tools)} tools do not reach the prompt in full" + (
        f" ({names_lost} not even by name)" if names_lost else ""
    )
    return ToolStage(STAGE_SCHEMA, FAIL, f"{lead}; {first.name}: missing {what}{more}", data)


def budget_stage(
    m: ToolMeasurement, context_length: int | None, max_share: float = DEFAULT_MAX_TOOL_SHARE
) -> ToolStage:
    """Token cost of the tools against the model's context length (``<arch>.context_length``)."""
    costs = sorted(((r.cost_alone, r.name) for r in m.tools), reverse=True)
    data: dict[str, Any] = {
        "prompt_tokens_without_tools": m.base_tokens,
        "prompt_tokens_with_tools": m.all_tokens,
        "tool_tokens": m.tool_tokens,
        "per_tool_method": "prompt tokens with only that tool minus prompt tokens with no tools",
        "per_tool_tokens": {r.name: r.cost_alone for r in m.tools},
        "overhead_tokens_estimate": m.overhead_tokens,
        "context_length": context_length,
        "max_share": max_share,
    }
    heaviest = ", ".join(f"{n} {c}" for c, n in costs[:3])
    desc = (
        f"{_n(len(m.tools), 'tool')} {'adds' if len(m.tools) == 1 else 'add'} {m.tool_tokens} prompt tokens "
        f"({m.base_tokens} → {m.all_tokens}); "
        f"heaviest alone: {heaviest}"
    )
    if m.overhead_tokens is not None:
        desc += f"; template tool preamble ≈ {m.overhead_tokens}"
    if not context_length:
        data["share"] = None
        return ToolStage(STAGE_BUDGET, WARN, desc + "; the GGUF gives no context length to compare with", data)
    share = m.tool_tokens / context_length
    data["share"] = share
    desc += f"; {share:.1%} of the {context_length}-token context"
    if m.all_tokens > context_length:
        return ToolStage(
            STAGE_BUDGET,
            FAIL,
            desc + f" — the prompt with all tools ({m.all_tokens} tokens) does not fit: llama.cpp refuses the "
            "request before the model sees it",
            data,
        )
    if share > max_share:
        return ToolStage(
            STAGE_BUDGET,
            WARN,
            desc + f" — more than the {max_share:.0%} allowed (--max-tool-share): drop tools or split servers",
            data,
        )
    return ToolStage(STAGE_BUDGET, PASS, desc, data)


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


# ------------------------------------------------------------------------------------ round trip


@dataclass
class RoundTrip:
    stages: list[ToolStage]
    tool: str | None
    arguments: dict[str, Any] | None = None
    parsed_arguments: dict[str, Any] | None = None
    result_text: str | None = None
    second_turn_prompt: str | None = None

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.stages)


_CALL_ID = "gtcall001"


def rendered_call_text(
    engine: PromptEngine, tools: Sequence[ToolSpec], messages: list[Message] | None = None
) -> CallText:
    """A :data:`CallText` that writes a call the way the template itself renders one in history, cut out of
    llama.cpp's render by :func:`gguftpl.llamacpp.call_text_from_template` (needs only ``apply_template``)."""
    from gguftpl.errors import LlamaCppError
    from gguftpl.llamacpp import call_text_from_template

    oa = openai_tools(tools)

    def write(tool: ToolSpec, args: dict[str, Any]) -> str:
        msgs = list(messages or probe_messages(f"Use {tool.name} to answer my question."))
        # nine alphanumerics: Mistral's templates refuse any other tool call id
        call = {"id": _CALL_ID, "type": "function", "function": {"name": tool.name, "arguments": json.dumps(args)}}
        ct = call_text_from_template(engine, msgs, oa, call)  # type: ignore[arg-type]
        if not ct.text.strip() or tool.name not in ct.text:
            raise LlamaCppError("the template does not render an assistant tool call in the conversation history")
        return ct.text

    return write


def _parse(
    parser: CallParser, msgs: list[Message], tools: list[dict[str, Any]], text: str
) -> tuple[Message | None, str | None]:
    try:
        return parser.parse_completion(msgs, tools, text), None
    except GGUFTplError as exc:
        return None, str(exc)


def pick_tool(tools: Sequence[ToolSpec], name: str | None) -> ToolSpec:
    from gguftpl.errors import UsageError

    if not tools:
        raise UsageError("no tools to call")
    if name is None:
        return tools[0]
    for t in tools:
        if name in (t.name, t.remote_name):
            return t
    names = ", ".join(t.name for t in tools[:8]) + (", …" if len(tools) > 8 else "")
    raise UsageError(f"--call {name!r}: no such tool (have: {names})")


def round_trip(
    engine: PromptEngine,
    parser: CallParser,
    call_text: CallText | None,
    tools: Sequence[ToolSpec],
    tool: ToolSpec,
    arguments: dict[str, Any] | None = None,
    dispatch: Dispatch | None = None,
    messages: list[Message] | None = None,
) -> RoundTrip:
    """One call the whole way a host takes it, with only the model's sampling replaced by a canned call.

    ``call_text`` writes the call in the template's dialect; llama.cpp parses it back (``parser``); the
    parsed arguments are checked against the schema; ``dispatch`` runs it (the MCP ``tools/call``; None →
    skipped and a synthetic result is used); the result goes back as a ``tool`` message and the second turn
    is rendered by llama.cpp, which must show the result text.
    """
    msgs = list(messages or probe_messages(f"Use {tool.name} to answer my question."))
    oa = openai_tools(tools)
    if call_text is None:
        call_text = rendered_call_text(engine, tools, msgs)
    args = dict(arguments) if arguments is not None else example_arguments(tool.parameters)
    rt = RoundTrip([], tool.name, arguments=args)
    stages = rt.stages

    def skip_rest(after: str) -> RoundTrip:
        order = [STAGE_CALL_PARSED, STAGE_ARGS_VALID, STAGE_DISPATCH, STAGE_RESULT]
        for name in order[order.index(after) + 1 :]:
            stages.append(ToolStage(name, SKIP, f"not reached: {after} failed"))
        return rt

    # 1. the model's turn, written in the template's dialect, parsed by llama.cpp
    try:
        canned = call_text(tool, args)
    except GGUFTplError as exc:
        stages.append(ToolStage(STAGE_CALL_PARSED, FAIL, f"cannot write a call in this template's dialect: {exc}"))
        return skip_rest(STAGE_CALL_PARSED)
    parsed, error = _parse(parser, msgs, oa, canned)
    trimmed = False
    if not (parsed and parsed.get("tool_calls")) and canned.strip() != canned:
        # the whitespace around a turn belongs to the template's layout; a model need not emit it
        again, _ = _parse(parser, msgs, oa, canned.strip())
        if again and again.get("tool_calls"):
            parsed, error, canned, trimmed = again, None, canned.strip(), True
    if parsed is None:
        stages.append(ToolStage(STAGE_CALL_PARSED, FAIL, f"llama.cpp refused the call: {error}", {"call_text": canned}))
        return skip_rest(STAGE_CALL_PARSED)
    calls = parsed.get("tool_calls") or []
    data = {"call_text": canned, "parsed": parsed, "trimmed": trimmed}
    if not calls:
        content = str(parsed.get("content") or "")[:120]
        stages.append(
            ToolStage(
                STAGE_CALL_PARSED,
                FAIL,
                f"llama.cpp parsed no tool call from {canned[:120]!r} (content: {content!r})",
                data,
            )
        )
        return skip_rest(STAGE_CALL_PARSED)
    call = calls[0]
    fn = call.get("function") or {}
    raw_args = fn.get("arguments")
    try:
        parsed_args = json.loads(raw_args) if isinstance(raw_args, str) else raw_args
    except json.JSONDecodeError as exc:
        stages.append(ToolStage(STAGE_CALL_PARSED, FAIL, f"parsed arguments are not JSON: {exc.msg}", data))
        return skip_rest(STAGE_CALL_PARSED)
    if fn.get("name") != tool.name or not isinstance(parsed_args, dict):
        stages.append(
            ToolStage(
                STAGE_CALL_PARSED,
                FAIL,
                f"llama.cpp parsed {fn.get('name')!r} with {json.dumps(parsed_args)[:80]}, "
                f"expected {tool.name!r} with an object",
                data,
            )
        )
        return skip_rest(STAGE_CALL_PARSED)
    rt.parsed_arguments = parsed_args
    same = parsed_args == args
    stages.append(
        ToolStage(
            STAGE_CALL_PARSED,
            PASS if same else WARN,
            f"llama.cpp parsed {tool.name}({json.dumps(parsed_args, ensure_ascii=False)[:120]})"
            + (" (only without the whitespace the template puts around the turn)" if trimmed else "")
            + ("" if same else f" — differs from what was written: {json.dumps(args)[:120]}"),
            data,
        )
    )

    # 2. what a host checks before dispatch
    errors = validate_arguments(tool.parameters, parsed_args)
    if errors:
        stages.append(
            ToolStage(
                STAGE_ARGS_VALID,
                FAIL,
                f"arguments break {tool.name}'s schema: {'; '.join(errors[:3])}",
                {"errors": errors},
            )
        )
        return skip_rest(STAGE_ARGS_VALID)
    stages.append(ToolStage(STAGE_ARGS_VALID, PASS, f"arguments match {tool.name}'s input schema"))

    # 3. dispatch
    result: ResultLike
    if dispatch is None or tool.server is None:
        result = DispatchResult(f"gguftpl-result-{uuid.uuid4().hex[:12]}")
        stages.append(
            ToolStage(
                STAGE_DISPATCH, SKIP, f"{tool.name} comes from {tool.source}, no server: using a synthetic result"
            )
        )
    else:
        try:
            result = dispatch(tool, parsed_args)
        except GGUFTplError as exc:
            stages.append(ToolStage(STAGE_DISPATCH, FAIL, str(exc)))
            return skip_rest(STAGE_DISPATCH)
        if result.is_error:
            # the call went through and came back; hosts hand the error text to the model like any result
            stages.append(
                ToolStage(
                    STAGE_DISPATCH,
                    WARN,
                    f"tools/call {tool.remote_name or tool.name} reached {tool.server or 'the server'}, which answered "
                    f"with an error (isError): {' '.join(result.text.split())[:160]!r}; the error text goes on to "
                    "the next turn, as hosts do (give --args for arguments the tool accepts)",
                    {"result": result.text, "is_error": True},
                )
            )
        else:
            stages.append(
                ToolStage(
                    STAGE_DISPATCH,
                    PASS,
                    f"tools/call {tool.remote_name or tool.name} on {tool.server or 'server'} returned "
                    f"{len(result.text)} chars: {' '.join(result.text.split())[:80]!r}",
                    {"result": result.text},
                )
            )
    rt.result_text = result.text

    # 4. the next turn must show the result to the model
    call_id = call.get("id") or f"call_{uuid.uuid4().hex[:8]}"
    assistant: Message = {
        "role": "assistant",
        "content": parsed.get("content") or "",
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": tool.name, "arguments": json.dumps(parsed_args)}}
        ],
    }
    tool_msg: Message = {"role": "tool", "tool_call_id": call_id, "name": tool.name, "content": result.text}
    second = [*msgs, assistant, tool_msg]
    try:
        prompt = engine.apply_template(second, oa)
    except GGUFTplError as exc:
        stages.append(ToolStage(STAGE_RESULT, FAIL, f"llama.cpp cannot render the turn after the call: {exc}"))
        return rt
    rt.second_turn_prompt = prompt
    if result.text.strip() and appears(result.text, prompt):
        at = prompt.find(result.text.strip()[:40])
        excerpt = prompt[max(0, at - 60) : at + 80] if at >= 0 else ""
        stages.append(
            ToolStage(STAGE_RESULT, PASS, f"the tool result is in the next prompt: …{excerpt!r}…", {"prompt": prompt})
        )
    else:
        stages.append(
            ToolStage(
                STAGE_RESULT,
                FAIL,
                f"the next prompt ({len(prompt)} chars) does not contain the tool result {result.text[:60]!r}",
                {"prompt": prompt},
            )
        )
    return rt


# ------------------------------------------------------------------------------------ all of it


@dataclass
class ToolCheckResult:
    stages: list[ToolStage]
    measurement: ToolMeasurement | None
    round_trip: RoundTrip | None

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.stages)


def run_tool_checks(
    engine: PromptEngine,
    parser: CallParser,
    tools: Sequence[ToolSpec],
    *,
    call_text: CallText | None = None,
    dispatch: Dispatch | None = None,
    context_length: int | None = None,
    max_share: float = DEFAULT_MAX_TOOL_SHARE,
    call: str | None = None,
    arguments: dict[str, Any] | None = None,
    messages: list[Message] | None = None,
) -> ToolCheckResult:
    """Schema reach, context budget, then the round trip for one tool (``call``, default the first).

    The round trip is not attempted when the chosen tool's schema does not reach the prompt: a model that
    never saw the tool cannot call it, and nothing must be dispatched to the user's server.
    """
    tool = pick_tool(tools, call)
    m = measure_tools(engine, tools, messages)
    stages = [tools_stage(tools), schema_stage(m), budget_stage(m, context_length, max_share)]
    reach = next(r for r in m.tools if r.name == tool.name)
    if not reach.ok:
        for name in (STAGE_CALL_PARSED, STAGE_ARGS_VALID, STAGE_DISPATCH, STAGE_RESULT):
            stages.append(ToolStage(name, SKIP, f"not reached: {tool.name}'s schema is not in the prompt"))
        return ToolCheckResult(stages, m, None)
    offered = list(tools)
    if context_length and m.all_tokens > context_length:
        # the full request cannot be served; still check the dialect and dispatch with this tool alone
        offered = [tool]
    rt = round_trip(engine, parser, call_text, offered, tool, arguments, dispatch, messages)
    if len(offered) < len(tools) and rt.stages:
        rt.stages[0].evidence += f" (with only {tool.name} offered: all {len(tools)} tools do not fit the context)"
    stages.extend(rt.stages)
    return ToolCheckResult(stages, m, rt)
