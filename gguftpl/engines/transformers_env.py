"""transformers' chat-template rendering, rebuilt on jinja2 alone.

transformers (``transformers/utils/chat_template_utils.py``, 5.x: ``_cached_compile_jinja_template`` and
``render_jinja_template``) renders a chat template in an ``ImmutableSandboxedEnvironment`` with
``trim_blocks``, ``lstrip_blocks``, ``loopcontrols`` and a ``{% generation %}`` block tag; its globals are a
``tojson`` that does not escape HTML, ``raise_exception``, ``strftime_now``, a ``dict`` without attribute
tricks and a ``namespace`` that refuses underscore names; every input is rebuilt from plain JSON types and a
message's reasoning is aliased under ``thinking`` and ``reasoning_content``. Importing transformers costs
1.7 s of every cold audit; this module costs jinja2's import. ``tests/test_jinja_env.py`` renders every
corpus template with the probe conversations through both and requires byte-equal prompts, so a change in
transformers' behaviour shows up there.

``lenient=True`` keeps all of that but adds llama.cpp's leniencies (mutable lists, a ``tojson`` that takes
generators, an unbounded ``range``): used only to learn what a template would print when transformers
refuses it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
"""Names a message's reasoning is passed under; the first is the standard one templates read."""


class OutputTooLarge(Exception):
    """A render produced more than its bound of characters and was stopped while streaming."""


class _Generation(jinja2.ext.Extension):
    """``{% generation %}…{% endgeneration %}``: renders its body, as transformers' AssistantTracker does when
    no tracker is active (a call block, so the body gets a macro scope)."""

    tags = {"generation"}

    def parse(self, parser: Any) -> Any:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context: Any, caller: Any) -> str:
        return str(caller())


def _raise_exception(message: Any) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
) -> str:
    # jinja2's own tojson escapes HTML characters; transformers' does not, and exposes these options
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _lenient_tojson(
    x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
) -> str:
    def default(o: Any) -> Any:
        if hasattr(o, "__iter__") and not isinstance(o, (str, bytes, dict)):
            return list(o)  # llama.cpp's tojson takes `map` results
        raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")

    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys, default=default
    )


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


class _TemplateDict:
    """``dict(...)`` in a template, without attribute access to the dict type itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """``namespace(...)`` that refuses underscore-prefixed attributes (a path to CPython internals)."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 - jinja2's Namespace signature trick
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}. "
                "Please rename the attribute."
            )


def _environment(lenient: bool) -> jinja2.Environment:
    cls = SandboxedEnvironment if lenient else ImmutableSandboxedEnvironment
    env = cls(trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _lenient_tojson if lenient else _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    if lenient:
        # llama.cpp's range has no MAX_RANGE: jinja2's sandbox refusing range(10**9) at once hid a loop that
        # runs (and allocates) for minutes there. A lazy range runs into the time and size bounds instead.
        env.globals["range"] = range
    return env


@functools.lru_cache(maxsize=32)
def compile_template(text: str, lenient: bool = False) -> jinja2.Template:
    """The compiled template (cached, as transformers caches its compiles: an audit renders one template a
    dozen times). Raises jinja2's TemplateSyntaxError, or whatever a hostile template raises while compiling
    (constant folding evaluates expressions)."""
    return _environment(lenient).from_string(text)


def _plain(value: Any) -> Any:
    """A fresh copy made of plain JSON types (transformers rebuilds every input the template sees)."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return f"<{type(value).__name__}>"


def _alias_reasoning(messages: list[Any]) -> list[Any]:
    out = []
    for message in messages:
        if isinstance(message, dict):
            reasoning = next((message[k] for k in _REASONING_FIELDS if message.get(k) is not None), None)
            if reasoning is not None:
                message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def normalize_messages(messages: list[Any]) -> list[Any]:
    """What ``apply_chat_template`` does to a conversation before rendering it (transformers 5.x,
    ``_normalize_chat_messages``): drop every key whose value is None. OpenAI's API returns ``content: null``
    beside ``tool_calls``; many templates crash on None but handle a missing key."""
    out = []
    for message in messages:
        if not isinstance(message, dict):
            raise TypeError(f"Chat messages should be dicts, dataclasses or pydantic models, but got {message!r}.")
        out.append({k: v for k, v in message.items() if v is not None})
    return out


def template_inputs(
    messages: list[Any],
    tools: list[Any] | None,
    add_generation_prompt: bool,
    documents: list[Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """The variables a chat template sees, built the way transformers builds them."""
    chat = _plain(messages)
    for message in chat:
        if not isinstance(message, dict):
            raise TypeError(f"Chat messages should be dicts, dataclasses or pydantic models, but got {message!r}.")
    if documents is not None and any(not isinstance(d, dict) for d in documents):
        raise TypeError("Documents should be a list of dicts with 'title' and 'text' keys!")
    return {
        "messages": _alias_reasoning(chat),
        "tools": _plain(tools),
        "documents": _plain(documents),
        "add_generation_prompt": add_generation_prompt,
        **_plain(kwargs),
    }


def render_chunks(template: jinja2.Template, variables: dict[str, Any]) -> Iterator[str]:
    """The rendered prompt, streamed (so a caller can stop a template that prints gigabytes)."""
    ctx = template.new_context(variables)
    try:
        yield from template.root_render_func(ctx)
    except Exception:
        template.environment.handle_exception()  # re-raises with the template's own line numbers


def render(
    text: str,
    messages: list[Any],
    tools: list[Any] | None = None,
    add_generation_prompt: bool = False,
    *,
    max_output: int | None = None,
    lenient: bool = False,
    **kwargs: Any,
) -> str:
    """What ``transformers.utils.chat_template_utils.render_jinja_template`` renders for one conversation.
    Raises what the template raises, or OutputTooLarge past ``max_output`` characters."""
    template = compile_template(text, lenient)
    variables = template_inputs(messages, tools, add_generation_prompt, **kwargs)
    parts: list[str] = []
    total = 0
    for chunk in render_chunks(template, variables):
        total += len(chunk)
        if max_output is not None and total > max_output:
            raise OutputTooLarge(f"rendered output exceeded {max_output} characters and was stopped")
        parts.append(chunk)
    return "".join(parts)
