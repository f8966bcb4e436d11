"""Parse a chat template as transformers' jinja2 parses it, without running any of it.

The parser the AST walks (:mod:`gguftpl.templates.static`) and the bounded render worker
(:mod:`gguftpl.engines.transformers`) share: one environment (loopcontrols, ``{% generation %}``), one answer for
templates nested deeper than a recursive parser or compiler can follow.
"""

from __future__ import annotations

from typing import Any


def make_parse_env() -> Any:
    """A jinja2 environment that parses what transformers parses (loopcontrols, ``{% generation %}``)."""
    import jinja2
    import jinja2.ext
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationTag(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

    return ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )


_ENV: Any = None

NESTS_TOO_DEEPLY = "template nests too deeply"
"""The start of every parse error about nesting (jinja2's recursive parser, jinja2's compiler, Python's own
compiler): brackets, blocks or operators nested hundreds deep, which no real template does (the deepest
real one seen nests 29 levels)."""


def parse_template(text: str) -> Any:
    """Parse to a jinja2 AST. Raises jinja2's TemplateSyntaxError (with ``lineno``) on bad syntax, nesting
    too deep for the parser included.

    Parsing runs no template code: ``Environment.parse`` only builds the AST. Compiling it
    (``from_string``, ``compile``, ``jinja2.meta``) folds constant expressions, so ``{{ 'x' * 10**10 }}`` is
    evaluated while compiling: that only ever happens in the bounded render worker (:mod:`hfrender`)."""
    try:
        return _parse_env().parse(text)
    except RecursionError:
        raise nesting_error(text) from None
    except ValueError as exc:  # the lexer's int(): "Exceeds the limit (4300 digits) for integer string conversion"
        from jinja2 import TemplateSyntaxError

        raise TemplateSyntaxError(f"number literal too long ({exc})", _long_number_line(text)) from None


def _parse_env() -> Any:
    global _ENV
    if _ENV is None:
        _ENV = make_parse_env()
    return _ENV


def nesting_error(text: str) -> Any:
    """The TemplateSyntaxError for a template nested deeper than a recursive parser or compiler can follow,
    at the line where the brackets and blocks nest deepest."""
    from jinja2 import TemplateSyntaxError

    depth, line = _deepest(text)
    where = f" ({depth} levels of brackets and blocks)" if depth else ""
    return TemplateSyntaxError(f"{NESTS_TOO_DEEPLY} to parse{where}", line)


def is_nesting_failure(exc: BaseException) -> bool:
    """A compile failure that only nesting causes: recursion in jinja2's compiler, or Python's own limits on
    the code jinja2 generates (100 levels of indentation, 20 nested blocks)."""
    if isinstance(exc, RecursionError):
        return True
    msg = str(exc)
    return isinstance(exc, SyntaxError) and ("too many levels of indentation" in msg or "statically nested" in msg)


def _deepest(text: str) -> tuple[int, int]:
    """(deepest nesting of brackets and block tags, its line), from jinja2's lexer, which never recurses."""
    import re

    from jinja2 import TemplateSyntaxError

    blocks = re.compile(r"(if|for|macro|call|filter|with|generation|block|autoescape)$")
    depth = best = 0
    best_line = 1
    after_block_begin = False
    try:
        for lineno, kind, value in _parse_env().lex(text):
            if kind == "operator" and value in "([{":
                depth += 1
            elif kind == "operator" and value in ")]}":
                depth -= 1
            elif after_block_begin and kind == "name":
                depth += 1 if blocks.match(value) else -1 if value.startswith("end") else 0
            if kind != "whitespace":
                after_block_begin = kind == "block_begin"
            if depth > best:
                best, best_line = depth, lineno
    except (TemplateSyntaxError, ValueError, RecursionError):
        pass
    return best, best_line


def _long_number_line(text: str) -> int:
    import re

    m = re.search(r"\d{4000,}", text)
    return text.count("\n", 0, m.start()) + 1 if m else 1
