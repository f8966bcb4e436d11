"""Checks with the tools a user really runs: does each schema reach the prompt, what do the tools cost in
tokens, and does one call survive the whole host round trip (:mod:`gguftpl.verify.roundtrip`)?

Everything here talks to llama.cpp through the small :class:`~gguftpl.verify.roundtrip.PromptEngine` protocol
(the llama.cpp session satisfies it), so each check is driven by the real components and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gguftpl.verify.result import FAIL, PASS, SKIP, WARN, Stage
from gguftpl.verify.roundtrip import (
    ROUND_TRIP_STAGES,
    CallParser,
    CallText,
    Dispatch,
    Message,
    PromptEngine,
    RoundTrip,
    pick_tool,
    probe_messages,
    round_trip,
)
from gguftpl.verify.schema import SchemaItem, appears, inserted_text, schema_items
from gguftpl.verify.tools import ToolSpec, openai_tools

DEFAULT_MAX_TOOL_SHARE = 0.5

STAGE_TOOLS = "tools listed"
STAGE_SCHEMA = "schema in prompt"
STAGE_BUDGET = "context budget"


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


def tools_stage(tools: Sequence[ToolSpec]) -> Stage:
    """Where the tools came from, and what a model will struggle with even when the template is right:
    names the OpenAI API refuses, tools or parameters without a description."""
    from gguftpl.verify.tools import name_is_portable

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
        return Stage(STAGE_TOOLS, WARN, text + "; " + "; ".join(notes), data)
    return Stage(STAGE_TOOLS, PASS, text, data)


def _has_description(tool: ToolSpec, prop: SchemaItem) -> bool:
    return any(it.kind == "property-description" and it.path == prop.path for it in schema_items(tool))


def schema_stage(m: ToolMeasurement) -> Stage:
    bad = [r for r in m.tools if not r.ok]
    per_tool = {
        r.name: {"items": r.total, "missing": [f"{it.kind} {it.path or '(tool)'}: {it.text[:60]}" for it in r.missing]}
        for r in m.tools
    }
    data = {"tools": per_tool, "tools_total": len(m.tools), "tools_incomplete": len(bad)}
    if not m.tools:
        return Stage(STAGE_SCHEMA, SKIP, "no tools given", data)
    if not bad:
        n_items = sum(r.total for r in m.tools)
        return Stage(
            STAGE_SCHEMA,
            PASS,
            ("the tool reaches" if len(m.tools) == 1 else f"all {len(m.tools)} tools reach")
            + f" the prompt in full ({n_items} names and descriptions checked)",
            data,
        )
    if m.all_prompt == m.base_prompt:
        names = ", ".join(r.name for r in m.tools[:3]) + (", …" if len(m.tools) > 3 else "")
        return Stage(
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
    return Stage(STAGE_SCHEMA, FAIL, f"{lead}; {first.name}: missing {what}{more}", data)


def budget_stage(m: ToolMeasurement, context_length: int | None, max_share: float = DEFAULT_MAX_TOOL_SHARE) -> Stage:
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
        return Stage(STAGE_BUDGET, WARN, desc + "; the GGUF gives no context length to compare with", data)
    share = m.tool_tokens / context_length
    data["share"] = share
    desc += f"; {share:.1%} of the {context_length}-token context"
    if m.all_tokens > context_length:
        return Stage(
            STAGE_BUDGET,
            FAIL,
            desc + f" — the prompt with all tools ({m.all_tokens} tokens) does not fit: llama.cpp refuses the "
            "request before the model sees it",
            data,
        )
    if share > max_share:
        return Stage(
            STAGE_BUDGET,
            WARN,
            desc + f" — more than the {max_share:.0%} allowed (--max-tool-share): drop tools or split servers",
            data,
        )
    return Stage(STAGE_BUDGET, PASS, desc, data)


# ------------------------------------------------------------------------------------ all of it


@dataclass
class ToolCheckResult:
    stages: list[Stage]
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
        for name in ROUND_TRIP_STAGES:
            stages.append(Stage(name, SKIP, f"not reached: {tool.name}'s schema is not in the prompt"))
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
