"""Static reading of a chat template: parse with jinja2 and follow data flow through the AST.

The question answered here is "does data derived from ``tools`` reach the rendered output?", not "does
the template mention ``tools``". Testing ``tools is defined`` or ``tools | length`` reads the variable
without rendering it; ``{{ tools | tojson }}``, ``{% for t in tools %}{{ t.function.name }}``, a macro
called with a tool that prints it, a ``set`` alias, a namespace attribute or a ``set`` block that is later
printed all render it.

The analysis is flow-insensitive (a name is tainted if any assignment anywhere taints it), with one
namespace per macro for its parameters and locals. That over-approximates a little, never misses a path
that exists in the AST.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gguftpl.engines.jinja2parse import (  # noqa: F401 - parse_template and the nesting names are read from here too
    NESTS_TOO_DEEPLY,
    is_nesting_failure,
    make_parse_env,
    nesting_error,
    parse_template,
)

# Filters whose result carries nothing of the value they were given (a number or a boolean).
_NON_PROPAGATING_FILTERS = frozenset({"length", "count", "wordcount"})
# Methods that mutate their receiver with their arguments (llama.cpp allows it; HF's sandbox refuses).
_MUTATORS = frozenset({"append", "extend", "update", "insert", "setdefault"})


@dataclass
class Sink:
    line: int
    expr: str
    """Source text of the line holding the output expression."""


@dataclass
class FlowResult:
    reads: bool
    """The source variable is referenced at all."""
    rendered: bool
    """Data derived from it reaches the template's output."""
    sinks: list[Sink] = field(default_factory=list)
    tests_only: list[int] = field(default_factory=list)
    """Lines where the source is read only to test it (``is defined``, ``| length``, comparisons)."""
    tainted_names: list[str] = field(default_factory=list)


def reads_name(ast: Any, name: str) -> bool:
    """Whether the template loads variable ``name`` anywhere (read from the AST: nothing is compiled)."""
    from jinja2 import nodes

    return any(isinstance(n, nodes.Name) and n.name == name and n.ctx == "load" for n in _iter_nodes(ast))


def _iter_nodes(ast: Any) -> Iterator[Any]:
    """Every node, depth first, without recursion (a 10,000-deep attribute chain parses fine)."""
    stack = [ast]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(list(node.iter_child_nodes())))


def _walk(node: Any) -> Iterator[Any]:
    yield node
    for child in node.iter_child_nodes():
        yield from _walk(child)


class _Flow:
    """Taint propagation from one source variable (``tools``, ``messages``, …)."""

    def __init__(self, ast: Any, source: str, lines: list[str]) -> None:
        from jinja2 import nodes

        self.n = nodes
        self.ast = ast
        self.source = source
        self.lines = lines
        self.tainted: set[tuple[str, str]] = {("", source)}
        self.macros: dict[str, Any] = {}
        self.locals: dict[str, set[str]] = {}
        self.memo: dict[tuple[str, frozenset[str]], bool] = {}
        self.active: set[tuple[str, frozenset[str]]] = set()
        self.changed = False
        # Jinja scopes a for loop's target and the `set`s in its body to the loop: a name reused by two
        # loops (`for tool in tools` / `for tool in message.tool_calls`) is two variables.
        self.frames: list[tuple[str, set[str]]] = []
        self.loop_bound: dict[int, set[str]] = {}
        for node in _walk(ast):
            if isinstance(node, nodes.For):
                self.loop_bound[id(node)] = self._names_bound_in_loop(node)
        for node in _walk(ast):
            if isinstance(node, nodes.Macro):
                self.macros[node.name] = node
                names = {a.name for a in node.args} | {"caller", "varargs", "kwargs"}
                for sub in _walk(node):
                    if isinstance(sub, nodes.Name) and sub.ctx in ("store", "param"):
                        names.add(sub.name)
                self.locals[node.name] = names

    def _names_bound_in_loop(self, loop: Any) -> set[str]:
        n = self.n
        names = {t.name for t in _walk(loop.target) if isinstance(t, n.Name)}

        def visit(body: list[Any]) -> None:
            for stmt in body:
                if isinstance(stmt, (n.Assign, n.AssignBlock)):
                    names.update(t.name for t in _walk(stmt.target) if isinstance(t, n.Name))
                elif isinstance(stmt, n.If):
                    visit(stmt.body)
                    for e in stmt.elif_:
                        visit(e.body)
                    visit(stmt.else_)
                elif isinstance(stmt, (n.For, n.Macro)):
                    continue
                elif hasattr(stmt, "body") and isinstance(stmt.body, list):
                    visit(stmt.body)

        visit(loop.body)
        return names

    # -- naming
    def _key(self, scope: str, name: str) -> tuple[str, str]:
        base = name.split(".", 1)[0]
        for frame, bound in reversed(self.frames):
            if base in bound and "." not in name:
                return (frame, name)
        if scope and base in self.locals.get(scope, ()):
            return (scope, name)
        return ("", name)

    def _bind(self, key: tuple[str, str]) -> None:
        if key not in self.tainted:
            self.tainted.add(key)
            self.changed = True

    def _bind_target(self, target: Any, scope: str) -> None:
        n = self.n
        if isinstance(target, n.Name):
            self._bind(self._key(scope, target.name))
        elif isinstance(target, (n.Tuple, n.List)):
            for item in target.items:
                self._bind_target(item, scope)
        elif isinstance(target, n.NSRef):
            self._bind(self._key(scope, f"{target.name}.{target.attr}"))

    def _is(self, scope: str, name: str) -> bool:
        return self._key(scope, name) in self.tainted

    # -- expressions
    def expr(self, node: Any, scope: str) -> bool:
        n = self.n
        if node is None:
            return False
        if isinstance(node, n.Name):
            return self._is(scope, node.name)
        if isinstance(node, (n.Const, n.TemplateData)):
            return False
        if isinstance(node, n.Getattr):
            if isinstance(node.node, n.Name) and self._is(scope, f"{node.node.name}.{node.attr}"):
                return True
            return self.expr(node.node, scope)
        if isinstance(node, n.Getitem):
            if (
                isinstance(node.node, n.Name)
                and isinstance(node.arg, n.Const)
                and isinstance(node.arg.value, str)
                and self._is(scope, f"{node.node.name}.{node.arg.value}")
            ):
                return True
            self.expr(node.arg, scope)
            return self.expr(node.node, scope)
        if isinstance(node, n.Filter):
            args = [self.expr(a, scope) for a in self._call_args(node)]
            if node.name in _NON_PROPAGATING_FILTERS:
                return False
            return self.expr(node.node, scope) or any(args)
        if isinstance(node, (n.Test, n.Compare, n.Not)):
            for child in node.iter_child_nodes():
                self.expr(child, scope)  # still visit, for macro calls with side effects on bindings
            return False
        if isinstance(node, n.CondExpr):
            self.expr(node.test, scope)
            a = self.expr(node.expr1, scope)
            b = self.expr(node.expr2, scope)
            return a or b
        if isinstance(node, n.Call):
            return self._call(node, scope)
        if isinstance(node, n.Keyword):
            return self.expr(node.value, scope)
        if isinstance(node, n.Pair):
            a = self.expr(node.key, scope)
            b = self.expr(node.value, scope)
            return a or b
        # Concat, BinExpr (+ ~ % * and/or), unary minus, List, Tuple, Dict, Slice, …: any tainted part.
        hit = False
        for child in node.iter_child_nodes():
            if self.expr(child, scope):
                hit = True
        return hit

    def _call_args(self, node: Any) -> list[Any]:
        out = list(node.args) + [k.value for k in node.kwargs]
        if node.dyn_args is not None:
            out.append(node.dyn_args)
        if node.dyn_kwargs is not None:
            out.append(node.dyn_kwargs)
        return out

    def _call(self, node: Any, scope: str) -> bool:
        n = self.n
        arg_taint = [self.expr(a, scope) for a in node.args]
        kw_taint = {k.key: self.expr(k.value, scope) for k in node.kwargs}
        dyn = self.expr(node.dyn_args, scope) or self.expr(node.dyn_kwargs, scope)
        callee = node.node
        if isinstance(callee, n.Name) and callee.name in self.macros:
            macro = self.macros[callee.name]
            params = [a.name for a in macro.args]
            hot: set[str] = set()
            for i, t in enumerate(arg_taint):
                if t:
                    hot.add(params[i] if i < len(params) else "varargs")
            for k, t in kw_taint.items():
                if t:
                    hot.add(k if k in params else "kwargs")
            if dyn:
                hot.update(params)
            return self._macro_emits(macro.name, frozenset(hot))
        if isinstance(callee, n.Name) and callee.name == "namespace":
            return any(arg_taint) or dyn  # tainted kwargs are bound per attribute by _assign
        if isinstance(callee, n.Getattr):
            receiver = self.expr(callee.node, scope)
            if callee.attr in _MUTATORS and (any(arg_taint) or any(kw_taint.values())):
                if isinstance(callee.node, n.Name):
                    self._bind(self._key(scope, callee.node.name))
                elif isinstance(callee.node, n.Getattr) and isinstance(callee.node.node, n.Name):
                    self._bind(self._key(scope, f"{callee.node.node.name}.{callee.node.attr}"))
            return receiver or any(arg_taint) or any(kw_taint.values()) or dyn
        self.expr(callee, scope)
        return any(arg_taint) or any(kw_taint.values()) or dyn

    def _macro_emits(self, name: str, params: frozenset[str]) -> bool:
        """Does a call to macro ``name`` output tainted data when exactly ``params`` are tainted?
        (Context-sensitive: a macro that prints its argument is tainted only where it gets tools.)"""
        key = (name, params)
        if key in self.memo:
            return self.memo[key]
        if key in self.active:
            return False  # recursion: the outer evaluation decides
        self.active.add(key)
        saved, saved_changed = self.tainted, self.changed
        self.tainted = {k for k in saved if k[0] != name and not k[0].startswith(name + "/")}
        self.tainted |= {(name, p) for p in params}
        result = False
        for _ in range(20):
            self.changed = False
            result = self.stmts(self.macros[name].body, name, None)
            if not self.changed:
                break
        self.tainted, self.changed = saved, saved_changed
        self.active.discard(key)
        self.memo[key] = result
        return result

    # -- statements
    def _assign(self, node: Any, scope: str) -> None:
        n = self.n
        value = node.node
        if (
            isinstance(node.target, n.Name)
            and isinstance(value, n.Call)
            and isinstance(value.node, n.Name)
            and value.node.name == "namespace"
        ):
            for kw in value.kwargs:
                if self.expr(kw.value, scope):
                    self._bind(self._key(scope, f"{node.target.name}.{kw.key}"))
            if value.args or value.dyn_args is not None or value.dyn_kwargs is not None:
                if self.expr(value, scope):
                    self._bind_target(node.target, scope)
            return
        if self.expr(value, scope):
            self._bind_target(node.target, scope)

    def stmts(self, body: Iterable[Any], scope: str, sinks: list[Sink] | None) -> bool:
        """Visit statements; return True if any output in them is tainted. ``sinks`` collects the
        tainted outputs that reach the final prompt (top level, outside ``set`` blocks and macros)."""
        n = self.n
        emits = False
        for node in body:
            if isinstance(node, n.Output):
                for child in node.nodes:
                    if isinstance(child, n.TemplateData):
                        continue
                    if self.expr(child, scope):
                        emits = True
                        if sinks is not None:
                            sinks.append(Sink(child.lineno, self._line(child.lineno)))
            elif isinstance(node, n.Assign):
                self._assign(node, scope)
            elif isinstance(node, n.AssignBlock):
                if self.stmts(node.body, scope, None) or (node.filter is not None and self.expr(node.filter, scope)):
                    self._bind_target(node.target, scope)
            elif isinstance(node, n.For):
                iter_tainted = self.expr(node.iter, scope)
                self.frames.append((f"{scope}/for{id(node)}", self.loop_bound.get(id(node), set())))
                try:
                    if iter_tainted:
                        self._bind_target(node.target, scope)
                    if node.test is not None:
                        self.expr(node.test, scope)
                    emits |= self.stmts(node.body, scope, sinks)
                finally:
                    self.frames.pop()
                emits |= self.stmts(node.else_, scope, sinks)
            elif isinstance(node, n.If):
                self.expr(node.test, scope)
                emits |= self.stmts(node.body, scope, sinks)
                for elif_ in node.elif_:
                    self.expr(elif_.test, scope)
                    emits |= self.stmts(elif_.body, scope, sinks)
                emits |= self.stmts(node.else_, scope, sinks)
            elif isinstance(node, n.With):
                for target, value in zip(node.targets, node.values, strict=False):
                    if self.expr(value, scope):
                        self._bind_target(target, scope)
                emits |= self.stmts(node.body, scope, sinks)
            elif isinstance(node, n.Macro):
                continue  # analysed on its own, in its own scope
            elif isinstance(node, n.CallBlock):
                body_emits = self.stmts(node.body, scope, None)
                call_emits = self.expr(node.call, scope)
                if call_emits or body_emits:
                    emits = True
                    if sinks is not None:
                        sinks.append(Sink(node.lineno, self._line(node.lineno)))
            elif isinstance(node, n.FilterBlock):
                emits |= self.stmts(node.body, scope, sinks)
            elif isinstance(node, n.ExprStmt):
                self.expr(node.node, scope)
            elif hasattr(node, "body") and isinstance(node.body, list):
                emits |= self.stmts(node.body, scope, sinks)
        return emits

    def _line(self, lineno: int) -> str:
        if 1 <= lineno <= len(self.lines):
            return self.lines[lineno - 1].strip()[:200]
        return ""

    def run(self) -> FlowResult:
        n = self.n
        sinks: list[Sink] = []
        for _ in range(50):  # fixpoint; each round can only add taint
            self.changed = False
            self.memo.clear()  # macro summaries depend on the (growing) top-level taint
            sinks = []
            self.stmts(self.ast.body, "", sinks)
            if not self.changed:
                break
        reads = reads_name(self.ast, self.source)
        tests_only: list[int] = []
        for node in _walk(self.ast):
            if isinstance(node, (n.Test, n.Compare)) or (
                isinstance(node, n.Filter) and node.name in _NON_PROPAGATING_FILTERS
            ):
                if any(isinstance(s, n.Name) and s.name == self.source for s in _walk(node)):
                    tests_only.append(node.lineno)
        seen: set[tuple[int, str]] = set()
        unique = []
        for s in sinks:
            if (s.line, s.expr) not in seen:
                seen.add((s.line, s.expr))
                unique.append(s)
        return FlowResult(
            reads=reads,
            rendered=bool(unique),
            sinks=unique,
            tests_only=sorted(set(tests_only)),
            # loop-scoped names are listed under their enclosing macro (or bare at top level)
            tainted_names=sorted({f"{a.split('/')[0]}:{b}" if a.split("/")[0] else b for a, b in self.tainted}),
        )


def data_flow(ast: Any, text: str, source: str = "tools") -> FlowResult:
    """Does data derived from variable ``source`` reach the output of the template ``ast``?"""
    return _Flow(ast, source, text.splitlines()).run()


def literal_text(ast: Any) -> list[str]:
    """Every literal string of the template: raw text between tags and string constants."""
    from jinja2 import nodes

    out: list[str] = []
    for node in _walk(ast):
        if isinstance(node, nodes.TemplateData):
            out.append(node.data)
        elif isinstance(node, nodes.Const) and isinstance(node.value, str):
            out.append(node.value)
    return out


def strftime_formats(text: str) -> list[str]:
    """The constant format strings the template passes to ``strftime_now`` (in order, once each)."""
    from jinja2 import nodes

    out: list[str] = []
    for node in parse_template(text).find_all(nodes.Call):
        if isinstance(node.node, nodes.Name) and node.node.name == "strftime_now" and node.args:
            arg = node.args[0]
            if isinstance(arg, nodes.Const) and isinstance(arg.value, str) and arg.value not in out:
                out.append(arg.value)
    return out
