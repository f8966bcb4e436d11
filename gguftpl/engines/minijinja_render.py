"""The minijinja worker's side: build an environment as a runtime does and render one conversation in it.

Runs only inside the bounded worker (:mod:`gguftpl.engines.minijinja`). The runtimes hand the template Rust
values made by serde (native minijinja maps and lists: immutable, no Python methods). The Python binding would
wrap a passed-in dict or list as a live Python object instead, on which ``messages.append(x)`` works and
``.copy()``/``.update()`` exist. So the conversation goes in as minijinja literals set at the top of the template
(:func:`prelude`), on the template's first line so every line number stays the template's own.

The custom ``tojson`` filters and functions are the Rust ones re-implemented (sources in
:mod:`gguftpl.engines.minijinja_profiles`); the builtin ``tojson`` is the binding's own, so its errors are
minijinja's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_ENVS: dict[str, Any] = {}
"""One environment per configuration id, built on first use."""

_RAISE_CALL = re.compile(r"\braise_exception\s*\(")
_DEFINES_RAISE = re.compile(r"\b(?:macro|set)\s+raise_exception\b")
"""A template that defines its own ``raise_exception`` keeps its calls as they are."""
_LSTRIP_AT_START = re.compile(r"^[^\S\r\n]+(?=\{[%#](?![-+]))")
"""Horizontal whitespace before the first block or comment tag of the template, which lstrip_blocks removes at
the start of a template: with the prelude before it on that line minijinja would no longer see a line start."""
_MAX_INDENT = 256


class RuntimeTemplateError(Exception):
    """An error one of the runtime's own Rust functions returns: ``kind`` as minijinja prints it."""

    def __init__(self, kind: str, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.detail = message
        self.line = line


def worker_setup() -> None:
    """Import the binding before the worker caps its address space."""
    import minijinja  # noqa: F401 - the Rust extension, loaded once


# ------------------------------------------------------------------------------------ the runtime's functions


def _json_indent(kwargs: Mapping[str, Any]) -> int | None:
    """``kwargs.get::<usize>("indent")`` as mistral.rs and Dynamo call it: any value that is no usize (none, a
    negative number, a string) is a failed get, which their code treats as "no indent"."""
    indent = kwargs.get("indent")
    if isinstance(indent, bool) or not isinstance(indent, int) or indent < 0:
        return None
    return indent


def tojson_python(value: Any, *args: Any, **kwargs: Any) -> str:
    """mistral.rs's ``tojson`` (chat_template.rs @9e922623): Python separators, no HTML escape, ``ensure_ascii``
    and any other keyword ignored, ``indent`` capped at 256."""
    import minijinja

    if args:
        raise RuntimeTemplateError("too many arguments", "too many arguments")
    indent = _json_indent(kwargs)
    if indent is not None and indent > _MAX_INDENT:
        why = f"tojson `indent` of {indent} exceeds the maximum of {_MAX_INDENT}"
        raise RuntimeTemplateError("invalid operation", why)
    if indent is not None:
        text = json.dumps(value, indent=" " * indent, ensure_ascii=False)
    else:
        text = json.dumps(value, separators=(", ", ": "), ensure_ascii=False)
    return str(minijinja.safe(text))


def tojson_compact_html(value: Any, *args: Any, **kwargs: Any) -> str:
    """Dynamo's ``tojson`` (tokcfg.rs @4c42d740): ``serde_json::to_string`` (no spaces) unless ``indent``, then
    ``< > & '`` escaped as minijinja's own filter does; other keywords ignored."""
    import minijinja

    if args:
        raise RuntimeTemplateError("too many arguments", "too many arguments")
    indent = _json_indent(kwargs)
    if indent is not None:
        text = json.dumps(value, indent=" " * indent, ensure_ascii=False)
    else:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
        text = text.replace(char, escaped)
    return str(minijinja.safe(text))


def length_none_is_zero(value: Any) -> int:
    """Dynamo's ``length`` override (formatters.rs @533b5042): none/undefined is 0, and so is any value without a
    length (``value.len().unwrap_or(0)``)."""
    if value is None or isinstance(value, (bool, int, float)):
        return 0
    try:
        return len(value)
    except TypeError:
        return 0


def _strftime_now(utc: bool) -> Any:
    def strftime_now(fmt: str, *_: Any) -> str:
        import datetime

        now = datetime.datetime.now(datetime.timezone.utc) if utc else datetime.datetime.now()
        return now.strftime(str(fmt))

    return strftime_now


def _raise_exception(kind: str) -> Any:
    def raise_exception(line: int, *args: Any) -> str:
        # the line comes from the call site (see with_call_lines); minijinja's message is the argument's text
        message = str(args[0]) if args else ""
        raise RuntimeTemplateError(kind, message, line)

    return raise_exception


def environment(config: Mapping[str, Any]) -> Any:
    """The runtime's environment (cached per configuration id)."""
    env = _ENVS.get(config["id"])
    if env is not None:
        return env
    import minijinja

    env = minijinja.Environment(
        trim_blocks=bool(config["trim_blocks"]),
        lstrip_blocks=bool(config["lstrip_blocks"]),
        pycompat=bool(config["pycompat"]),
    )
    if config["tojson"] == "python-separators":
        env.add_filter("tojson", tojson_python)
    elif config["tojson"] == "compact-html":
        env.add_filter("tojson", tojson_compact_html)
    if config["length_none_is_zero"]:
        env.add_filter("length", length_none_is_zero)
    # add_global registers a callable as a function (the binding's add_function, missing from its type stubs)
    if config["raise_exception"]:
        env.add_global("raise_exception", _raise_exception(str(config["raise_exception"])))
    if config["strftime_now"]:
        env.add_global("strftime_now", _strftime_now(config["strftime_now"] == "utc"))
    _ENVS[config["id"]] = env
    return env


# ------------------------------------------------------------------------------------ the conversation as literals


def literal(value: Any, sort_keys: bool) -> str:
    """``value`` (JSON data) as a minijinja expression that builds the same native value. ``sort_keys`` orders
    maps as a runtime without ``preserve_order`` iterates them (serde into a BTreeMap)."""
    if value is None:
        return "none"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # minijinja's string escapes are JSON's, surrogate pairs included
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: str(kv[0])) if sort_keys else list(value.items())
        return "{" + ", ".join(f"{json.dumps(str(k))}: {literal(v, sort_keys)}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v, sort_keys) for v in value) + "]"
    raise TypeError(f"not JSON data: {type(value).__name__}")


def prelude(variables: Mapping[str, Any], sort_keys: bool) -> str:
    """Set tags that define ``variables`` natively. ``+%}`` keeps trim_blocks from eating the template's own first
    newline; there is no newline of ours, so line numbers are the template's."""
    return "".join(
        f"{{%+ set {name} = {literal(value, sort_keys)} +%}}"
        for name, value in variables.items()
        if name.isidentifier()  # a Rust context could carry any key, but a template can only read identifiers
    )


def with_call_lines(template: str) -> str:
    """Each ``raise_exception(`` call given its line as a first argument, so the runtime's message can say where
    (the binding drops the position of an error a Python function raises). Lines do not move."""
    lines = template.split("\n")
    return "\n".join(_RAISE_CALL.sub(f"raise_exception({n}, ", line) for n, line in enumerate(lines, 1))


def compile_source(config: Mapping[str, Any], template: str) -> str:
    """The (already rewritten) template as this worker compiles it: lines tagged for ``raise_exception`` and the
    leading whitespace lstrip_blocks would strip at the template's start removed."""
    if config["raise_exception"] and not _DEFINES_RAISE.search(template):
        template = with_call_lines(template)
    if config["lstrip_blocks"]:
        template = _LSTRIP_AT_START.sub("", template, count=1)
    return template


# ---------------------------------------------------------------------------------------------- ops


def _error(kind: str, message: str, line: int | None) -> dict[str, Any]:
    return {"error": {"kind": kind, "message": message[:2000], "line": line}}


def _template_error(exc: Any) -> dict[str, Any]:
    """A binding ``TemplateError``: minijinja's own message (``kind: detail (in name:line)``) and line."""
    kind = str(getattr(exc, "kind", "") or "")
    message = str(getattr(exc, "message", "") or exc)
    line = getattr(exc, "line", None)
    if kind == "SyntaxError":
        return _error("syntax", message, line)
    if kind == "OutOfFuel":
        return _error("overrun", message, line)
    if message.startswith("panic during rendering"):
        return _error("crashed", message, line)
    return _error("render", message, line)


def _runtime_error(exc: RuntimeTemplateError, name: str) -> dict[str, Any]:
    where = f" (in {name}:{exc.line})" if exc.line is not None else ""
    return _error("render", f"{exc.kind}: {exc.detail}{where}", exc.line)


def load_op(item: Mapping[str, Any]) -> dict[str, Any]:
    """Compile the template as the runtime would: ``{}`` or ``{"error": ...}``."""
    import minijinja

    config = item["config"]
    env = environment(config)
    source = compile_source(config, item["template"])
    try:
        env.add_template(config["template_name"], source)
    except minijinja.TemplateError as exc:
        return _template_error(exc)
    except MemoryError:
        return _error("overrun", "out of memory compiling the template", None)
    env.remove_template(config["template_name"])
    return {}


def undeclared_op(item: Mapping[str, Any]) -> dict[str, Any]:
    """``template.undeclared_variables(nested)``, as TGI asks it (sorted names), or the compile error."""
    import minijinja

    config = item["config"]
    env = environment(config)
    try:
        names = env.undeclared_variables_in_str(item["template"], bool(item.get("nested", True)))
    except minijinja.TemplateError as exc:
        return _template_error(exc)
    return {"names": sorted(str(n) for n in names)}


EMITTED_FACTOR = 4
"""Characters of ``{{ … }}`` values one render may emit, as a multiple of its output cap, counted as they are
emitted: captured blocks and macro bodies count once where they are written and again where their result is, so
the count may exceed the output; a real prompt emits about its own size."""


class EmittedTooMuch(Exception):
    """A render emitted more than its bound of characters and was stopped while rendering."""


def _emission_counter(limit: int | None) -> Any:
    """A finalizer that counts the characters of every value a render emits and stops it past ``limit`` (None:
    no bound).
    Returning NotImplemented leaves the value to minijinja's own formatter, so the output is unchanged. Without
    it the binding builds the whole output before the cap is checked: ``{{ 'x' * 100000 }}`` in a 100,000-step
    loop (10 GB) ran to the address-space cap and aborted the worker, once per conversation."""
    emitted = 0

    def finalize(value: Any) -> Any:
        nonlocal emitted
        if limit is not None and isinstance(value, str):
            emitted += len(value)
            if emitted > limit:
                raise EmittedTooMuch(f"rendered output exceeded {limit // EMITTED_FACTOR} characters and was stopped")
        return NotImplemented

    return finalize


def render_op(item: Mapping[str, Any]) -> dict[str, Any]:
    """Render one conversation: ``{"text": ...}`` or ``{"error": ...}``. ``item`` carries the configuration, the
    rewritten template, the variables the runtime passes, the fuel and the output cap (checked on the output, and
    on what the render emits while it runs: :func:`_emission_counter`)."""
    import minijinja

    config = item["config"]
    env = environment(config)
    env.fuel = item.get("fuel")
    limit = int(item.get("max_output") or 0)
    env.finalizer = _emission_counter(limit * EMITTED_FACTOR if limit else None)  # a fresh count per render
    name = config["template_name"]
    try:
        head = prelude(item["variables"], sort_keys=not config["preserve_order"])
        text = env.render_str(head + compile_source(config, item["template"]), name)
    except EmittedTooMuch as exc:
        return _error("overrun", str(exc), None)
    except RuntimeTemplateError as exc:
        return _runtime_error(exc, name)
    except minijinja.TemplateError as exc:
        return _template_error(exc)
    except MemoryError:
        return _error("overrun", "out of memory while rendering", None)
    except RecursionError:
        return _error("overrun", "the template nests deeper than the worker's recursion limit", None)
    except Exception as exc:  # noqa: BLE001 - anything else a callback raised is the render's failure
        return _error("render", f"{type(exc).__name__}: {exc}", None)
    if limit and len(text) > limit:
        return _error("overrun", f"rendered output exceeded {limit} characters", None)
    return {"text": text}
