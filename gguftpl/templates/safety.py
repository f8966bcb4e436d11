"""Static safety checks on a chat template: sandbox-escape shapes, hidden triggers, invisible Unicode.

None of these need rendering; they read the jinja2 AST and the raw text. Rendering is bounded separately
(hfrender).
"""

from __future__ import annotations

import operator
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gguftpl import limits
from gguftpl.templates.static import _walk, data_flow

# Globals that jinja2 provides and that SSTI payloads use as a path to Python internals. Chat templates
# never need them (``namespace`` is legitimate and only flagged through dunder access).
_GADGET_GLOBALS = frozenset(
    {"cycler", "joiner", "lipsum", "self", "config", "request", "url_for", "get_flashed_messages"}
)
_MAX_RANGE = 100_000
"""jinja2's sandbox limit (``jinja2.sandbox.MAX_RANGE``); Hugging Face inherits it."""
# Bidi controls (Trojan Source): these reorder what a reviewer sees.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


@dataclass
class Issue:
    kind: str
    """``dunder``, ``gadget``, ``range``, ``recursion``, ``trigger``, ``invisible``, ``bidi``, ``nul``, ``escape``,
    ``control``."""
    line: int | None
    column: int | None
    evidence: str
    detail: str = ""


def _line(lines: list[str], lineno: int | None) -> str:
    if lineno and 1 <= lineno <= len(lines):
        return lines[lineno - 1].strip()[:200]
    return ""


def sandbox_issues(ast: Any, text: str) -> list[Issue]:
    """Sandbox-escape shapes (``dunder``, ``gadget``), huge ``range()`` bounds (``range``) and macros that call
    themselves on every path (``recursion``)."""
    from jinja2 import nodes

    lines = text.splitlines()
    out: list[Issue] = unbounded_recursion(ast, lines)
    for node in _walk(ast):
        if isinstance(node, nodes.Getattr) and node.attr.startswith("_"):
            out.append(Issue("dunder", node.lineno, None, _line(lines, node.lineno), f"attribute {node.attr!r}"))
        elif (
            isinstance(node, nodes.Getitem)
            and isinstance(node.arg, nodes.Const)
            and isinstance(node.arg.value, str)
            and node.arg.value.startswith("__")
        ):
            out.append(Issue("dunder", node.lineno, None, _line(lines, node.lineno), f"item {node.arg.value!r}"))
        elif isinstance(node, nodes.Filter) and node.name == "attr":
            for a in node.args:
                if isinstance(a, nodes.Const) and isinstance(a.value, str) and a.value.startswith("_"):
                    out.append(Issue("dunder", node.lineno, None, _line(lines, node.lineno), f"|attr({a.value!r})"))
        elif isinstance(node, nodes.Name) and node.ctx == "load" and node.name in _GADGET_GLOBALS:
            out.append(Issue("gadget", node.lineno, None, _line(lines, node.lineno), f"global {node.name!r}"))
        elif isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name) and node.node.name == "range":
            for a in node.args:
                value = constant_int(a)
                if value is HUGE:
                    detail = f"range bound over 2**{limits.MAX_FOLDED_INT_BITS}"
                elif isinstance(value, int) and abs(value) > _MAX_RANGE:
                    detail = f"range bound {value}"
                else:
                    continue
                out.append(Issue("range", node.lineno, None, _line(lines, node.lineno), detail))
                break
    return out


def unbounded_recursion(ast: Any, lines: list[str]) -> list[Issue]:
    """Macros that call themselves, directly or through other macros, on every path through their body: once
    called, rendering never ends. transformers stops at Python's recursion limit; llama.cpp has none and
    overflows its C stack (SIGSEGV). A call under ``if``, inside a ``for`` body, a conditional expression or
    the right side of ``and``/``or`` may be a base case and is not counted."""
    from jinja2 import nodes

    macros = {m.name: m for m in _walk(ast) if isinstance(m, nodes.Macro)}
    calls = {name: _unconditional_calls(m.body, set(macros)) for name, m in macros.items()}
    out: list[Issue] = []
    reported: set[str] = set()
    for name, m in macros.items():
        cycle = [] if name in reported else _cycle_from(name, calls)
        if cycle:
            reported.update(cycle)  # one finding per cycle, at its first macro
            path = " -> ".join(cycle)
            detail = f"macro {name!r} calls itself on every path ({path}): rendering it never ends"
            out.append(Issue("recursion", m.lineno, None, _line(lines, m.lineno), detail))
    return out


def _unconditional_calls(body: list[Any], names: set[str]) -> set[str]:
    """Names of ``names`` called on every path through ``body`` (without recursion: a deep body is fine)."""
    from jinja2 import nodes

    found: set[str] = set()
    stack: list[Any] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (nodes.Macro, nodes.CallBlock)):
            if isinstance(node, nodes.CallBlock):
                stack.append(node.call)  # the call runs; its body only when the callee calls caller()
            continue
        if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name) and node.node.name in names:
            found.add(node.node.name)
        if isinstance(node, nodes.If):
            stack.append(node.test)  # the test always runs, the branches may not
        elif isinstance(node, nodes.For):
            stack.append(node.iter)
        elif isinstance(node, nodes.CondExpr):
            stack.append(node.test)
        elif isinstance(node, (nodes.And, nodes.Or)):
            stack.append(node.left)
        else:
            stack.extend(node.iter_child_nodes())
    return found


def _cycle_from(start: str, calls: dict[str, set[str]]) -> list[str]:
    """A path ``start -> … -> start`` through unconditional calls, or []."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        name, path = stack.pop()
        for callee in sorted(calls.get(name, ())):
            if callee == start:
                return [*path, start]
            if callee not in seen:
                seen.add(callee)
                stack.append((callee, [*path, callee]))
    return []


class _Huge:
    def __repr__(self) -> str:
        return "HUGE"


HUGE: Any = _Huge()
""":func:`constant_int` of an expression whose value is past ``limits.MAX_FOLDED_INT_BITS`` bits."""
_FOLDABLE = {"Add": operator.add, "Sub": operator.sub, "Mul": operator.mul, "FloorDiv": operator.floordiv}


def constant_int(node: Any, depth: int = 0) -> int | _Huge | None:
    """The integer a constant expression of integer literals and ``+ - * // **`` stands for, HUGE past the
    bound, None for anything else.

    Not jinja2's ``as_const``: that evaluates whatever is constant, and ``range('x' * 10**10)`` built a 10 GB
    string in this process (issue 14). Here only integers are computed, and a result is known to be HUGE
    from its operands' sizes before it is computed."""
    from jinja2 import nodes

    bits = limits.MAX_FOLDED_INT_BITS
    if depth > 64:
        return None
    if isinstance(node, nodes.Const):
        value = node.value
        if isinstance(value, int):
            return HUGE if value.bit_length() > bits else value
        return None
    if isinstance(node, (nodes.Neg, nodes.Pos)):
        inner = constant_int(node.node, depth + 1)
        return -inner if isinstance(node, nodes.Neg) and isinstance(inner, int) else inner
    name = type(node).__name__
    if name not in _FOLDABLE and name != "Pow":
        return None
    left, right = constant_int(node.left, depth + 1), constant_int(node.right, depth + 1)
    if left is None or right is None:
        return None
    if left is HUGE or right is HUGE:
        return HUGE if name != "FloorDiv" else None
    assert isinstance(left, int) and isinstance(right, int)
    if name == "Pow":
        if right < 0:
            return None  # a float
        if abs(left) > 1 and left.bit_length() * right > bits:
            return HUGE
        result = left**right
    elif name == "FloorDiv" and right == 0:
        return None
    else:
        result = _FOLDABLE[name](left, right)  # operands under the bound: at most twice its bits
    return HUGE if result.bit_length() > bits else result


def hidden_triggers(ast: Any, text: str) -> list[Issue]:
    """``{% if 'literal' in <message content> %}…text…{% endif %}``: text gated by a string literal
    compared against message data. Marker-shaped literals (``</think>``, ``<tool_call>``) and role names
    are how real templates parse content, and gate no prose; they are not reported."""
    from jinja2 import nodes

    lines = text.splitlines()
    flow = data_flow(ast, text, source="messages")
    tainted = {name for name in flow.tainted_names if ":" not in name}

    def from_messages(expr: Any) -> bool:
        for sub in _walk(expr):
            if isinstance(sub, nodes.Name) and (sub.name in tainted or sub.name == "messages"):
                return True
        return False

    def literal_vs_message(test: Any) -> str | None:
        for cmp in _walk(test):
            if not isinstance(cmp, nodes.Compare):
                continue
            operands = [cmp.expr] + [op.expr for op in cmp.ops]
            ops = {op.op for op in cmp.ops}
            if not ops & {"in", "notin", "eq", "ne"}:
                continue
            consts = [o for o in operands if isinstance(o, nodes.Const) and isinstance(o.value, str)]
            others = [o for o in operands if not isinstance(o, nodes.Const)]
            for c in consts:
                lit = c.value
                if not lit.strip() or _marker_like(lit) or lit in _ROLE_WORDS:
                    continue
                if any(from_messages(o) and _reads_content(o) for o in others):
                    return lit
        return None

    def gated_text(body: list[Any]) -> str:
        parts: list[str] = []
        for stmt in body:
            for sub in _walk(stmt):
                if isinstance(sub, nodes.Output):
                    for child in sub.nodes:
                        if isinstance(child, nodes.TemplateData):
                            parts.append(child.data)
                        elif isinstance(child, nodes.Const) and isinstance(child.value, str):
                            parts.append(child.value)
        return "".join(parts)

    out: list[Issue] = []
    for node in _walk(ast):
        if not isinstance(node, nodes.If):
            continue
        lit = literal_vs_message(node.test)
        if lit is None:
            continue
        gated = gated_text(node.body)
        if len(prose_words(gated, min_letters=1)) >= 3:
            out.append(
                Issue(
                    "trigger",
                    node.lineno,
                    None,
                    _line(lines, node.lineno),
                    f"trigger {lit!r} adds: {gated.strip()[:200]!r}",
                )
            )
    return out


_ROLE_WORDS = frozenset({"user", "assistant", "system", "tool", "ipython", "function", "developer", "model"})


def _marker_like(lit: str) -> bool:
    s = lit.strip()
    return (
        (s.startswith("<") and s.endswith(">"))
        or (s.startswith("[") and s.endswith("]"))
        or (s.startswith("<") or s.endswith(">"))
    )


def _reads_content(expr: Any) -> bool:
    from jinja2 import nodes

    for sub in _walk(expr):
        if isinstance(sub, nodes.Getattr) and sub.attr in ("content", "text"):
            return True
        if isinstance(sub, nodes.Getitem) and isinstance(sub.arg, nodes.Const) and sub.arg.value in ("content", "text"):
            return True
        if isinstance(sub, nodes.Name) and sub.name in ("content", "text", "message_content", "query"):
            return True
    return False


def invisible_characters(text: str) -> list[Issue]:
    out: list[Issue] = control_characters(text)
    nul_seen = False
    for lineno, line in enumerate(text.splitlines(), 1):
        for col, ch in enumerate(line, 1):
            if ch == "\x00":
                if not nul_seen:  # the first one decides what llama.cpp sees
                    nul_seen = True
                    out.append(
                        Issue(
                            "nul",
                            lineno,
                            col,
                            line.strip()[:200],
                            "U+0000 NUL: llama.cpp reads the template as a C string and stops here, so the rest "
                            "is rendered by transformers but never by llama.cpp",
                        )
                    )
            elif ch in _BIDI:
                out.append(
                    Issue("bidi", lineno, col, line.strip()[:200], f"U+{ord(ch):04X} {unicodedata.name(ch, '?')}")
                )
            elif unicodedata.category(ch) == "Cf" or ch in "\u3164\u115f\u1160\uffa0":
                out.append(
                    Issue("invisible", lineno, col, line.strip()[:200], f"U+{ord(ch):04X} {unicodedata.name(ch, '?')}")
                )
    return out


# C0 controls but tab, newline and CR of a CRLF (NUL is its own issue), DEL, the C1 controls, and a lone CR
_CONTROL_RE = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")
# what starts a terminal escape sequence: ESC, and the 8-bit CSI, OSC, DCS, PM and APC
TERMINAL_ESCAPES = frozenset("\x1b\x9b\x9d\x90\x9e\x9f")


def control_characters(text: str) -> list[Issue]:
    """One issue per distinct control character (kind ``escape`` for what starts a terminal escape sequence,
    else ``control``): where it first appears and how often.
    ``splitlines`` would split at most of them, so lines are counted by ``\\n`` here."""
    first: dict[str, tuple[int, int, int]] = {}
    counts: dict[str, int] = {}
    for m in _CONTROL_RE.finditer(text):
        ch = m.group(0)
        counts[ch] = counts.get(ch, 0) + 1
        if ch not in first:
            start = text.rfind("\n", 0, m.start()) + 1
            first[ch] = (text.count("\n", 0, m.start()) + 1, m.start() - start + 1, start)
    out = []
    for ch, (line, col, start) in first.items():
        end = text.find("\n", start)
        shown = text[start : end if end >= 0 else len(text)].strip()[:200]
        name = _control_name(ch)
        times = f", {counts[ch]:,} times" if counts[ch] > 1 else ""
        kind = "escape" if ch in TERMINAL_ESCAPES else "control"
        out.append(Issue(kind, line, col, shown, f"U+{ord(ch):04X} {name}{times}"))
    return out


_C0 = (
    "START OF HEADING|START OF TEXT|END OF TEXT|END OF TRANSMISSION|ENQUIRY|ACKNOWLEDGE|BELL|BACKSPACE|"
    "CHARACTER TABULATION|LINE FEED|LINE TABULATION|FORM FEED|CARRIAGE RETURN|SHIFT OUT|SHIFT IN|"
    "DATA LINK ESCAPE|DEVICE CONTROL ONE|DEVICE CONTROL TWO|DEVICE CONTROL THREE|DEVICE CONTROL FOUR|"
    "NEGATIVE ACKNOWLEDGE|SYNCHRONOUS IDLE|END OF TRANSMISSION BLOCK|CANCEL|END OF MEDIUM|SUBSTITUTE|ESCAPE|"
    "INFORMATION SEPARATOR FOUR|INFORMATION SEPARATOR THREE|INFORMATION SEPARATOR TWO|INFORMATION SEPARATOR ONE"
).split("|")
_C1 = {
    0x85: "NEXT LINE",
    0x90: "DEVICE CONTROL STRING",
    0x9B: "CONTROL SEQUENCE INTRODUCER",
    0x9D: "OPERATING SYSTEM COMMAND",
}


def _control_name(ch: str) -> str:
    """unicodedata has no names for control characters, only aliases: the Unicode alias, or the block."""
    code = ord(ch)
    if 0 < code < 0x20:
        return _C0[code - 1]
    if code == 0x7F:
        return "DELETE"
    return _C1.get(code, "C1 CONTROL")


def compared_literals(ast: Any, limit: int = 32) -> tuple[list[str], list[str]]:
    """String literals the template compares something against: (``in``/``not in`` literals,
    ``==``/``!=`` literals). Role words are left out: they are compared with roles, not content."""
    from jinja2 import nodes

    contains: dict[str, None] = {}
    equals: dict[str, None] = {}
    for cmp in _walk(ast):
        if not isinstance(cmp, nodes.Compare):
            continue
        operands = [cmp.expr] + [op.expr for op in cmp.ops]
        ops = {op.op for op in cmp.ops}
        for o in operands:
            if isinstance(o, nodes.Const) and isinstance(o.value, str) and o.value.strip():
                if o.value in _ROLE_WORDS:
                    continue
                if ops & {"in", "notin"}:
                    contains.setdefault(o.value, None)
                if ops & {"eq", "ne"}:
                    equals.setdefault(o.value, None)
    return list(contains)[:limit], list(equals)[:limit]


# Marker-shaped text: `<|…|>`, DeepSeek's fullwidth `<｜…｜>`, half-open `<|turn>` / `<turn|>`, XML-like tags
# without attributes (`<think>`, `</tool_call>`) and bracket tags (`[INST]`), each with the role name a turn
# header may carry after it (`<|im_start|>assistant`). They structure the prompt; they are not prose.
_MARKER = re.compile(
    r"(?:<\|[^<>|\s]{1,48}\|>|<｜[^<>｜]{1,48}｜>|<\|\w{1,48}>|<\w{1,48}\|>|</?[A-Za-z_][\w:.\-]{0,40}/?>"
    r"|\[/?[A-Z_]{2,24}\])(?:[ \t]*(?:" + "|".join(sorted(_ROLE_WORDS)) + r")\b)?"
)


def prose_words(text: str, sent: Iterable[str] = (), specials: Iterable[str] = (), min_letters: int = 2) -> list[str]:
    """Words of prose in ``text`` (those with at least ``min_letters`` letters) once the strings that were
    ``sent`` are taken out and control markers are not counted: the file's ``specials`` (its special-token
    texts, when known) and marker-shaped text. A switch that only opens or closes a block
    (an empty ``<think></think>``) adds no prose."""
    for s in sorted({x for x in (*sent, *specials) if x}, key=len, reverse=True):
        text = text.replace(s, " ")
    text = _MARKER.sub(" ", text)
    return [w for w in text.split() if sum(ch.isalpha() for ch in w) >= min_letters]


def trigger_words(extra: str, literals: list[str], specials: Iterable[str] = ()) -> list[str]:
    """Words of prose in ``extra`` once the literals that were sent are taken out (:func:`prose_words`)."""
    return prose_words(extra, literals, specials)
