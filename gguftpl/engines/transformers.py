"""Render chat templates the way Hugging Face does, with a time and an output-size bound.

Templates come from untrusted files. transformers renders them in jinja2's ``ImmutableSandboxedEnvironment``,
which stops attribute tricks but not a loop that never ends, nor a template that prints gigabytes. So every
render runs in one persistent worker process (:mod:`gguftpl.worker`, op ``render``); the parent waits with a
timeout and the worker is killed when a render overruns. The worker counts output while it streams and caps
its own address space, so a megabyte-printing template fails fast with a clear error instead of eating the
machine.

Rendering itself is transformers' ``render_jinja_template`` rebuilt on jinja2 (:mod:`gguftpl.engines.transformers_env`,
proven byte-equal over the corpus), so the worker starts without importing transformers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from gguftpl import worker
from gguftpl.errors import TemplateError
from gguftpl.worker import Op, Outcome, Worker, WorkerSpec, shared

DEFAULT_TIMEOUT = 5.0
"""Seconds one render may take. Real templates render in milliseconds."""
DEFAULT_MAX_OUTPUT = 1 << 20
"""Characters one render may produce. Real prompts with tools are tens of kilobytes."""
STARTUP_TIMEOUT = 120.0
"""Seconds the worker may take to start and import jinja2 (slow on a busy 2-core machine)."""
_MEMORY_HEADROOM = 1536 << 20
"""Bytes of address space the worker may grow by after its imports."""


OVERRUN_KINDS = ("timeout", "too_large", "memory", "recursion")
"""Failure kinds that mean a bound stopped the render (time, output size, memory, recursion depth), not the
template's own error: a render bomb."""


class TemplateRenderError(TemplateError):
    """A template failed to parse or render. ``kind`` is one of ``syntax``, ``render``, ``security``,
    ``worker``, or an overrun (:data:`OVERRUN_KINDS`; ``recursion``: a render that recursed without end);
    ``line`` is the 1-based template line when known."""

    def __init__(
        self,
        message: str,
        *,
        kind: str = "render",
        line: int | None = None,
        exc_type: str | None = None,
        detail: str = "",
    ) -> None:
        self.kind = kind
        self.line = line
        self.exc_type = exc_type
        self.detail = detail
        where = f" (template line {line})" if line is not None else ""
        super().__init__(f"{message}{where}")

    @property
    def overran(self) -> bool:
        return self.kind in OVERRUN_KINDS


@functools.lru_cache(maxsize=1)
def _spec() -> WorkerSpec:
    return WorkerSpec(
        "render worker",
        ops={"render": Op("gguftpl.engines.transformers:_render_op")},
        setup=("gguftpl.engines.transformers:_worker_setup",),
        memory_headroom=_MEMORY_HEADROOM,
        startup_timeout=STARTUP_TIMEOUT,
        env={"PYTHONWARNINGS": "ignore"},
    )


def get_worker() -> Worker:
    """This process's render worker (:mod:`gguftpl.worker`), started on first use."""
    return shared(_spec())


def render_hf(
    template_text: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    bos_token: str = "",
    eos_token: str = "",
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_output: int = DEFAULT_MAX_OUTPUT,
    lenient: bool = False,
    **kwargs: Any,
) -> str:
    """Render ``template_text`` with transformers' own chat-template renderer, bounded in time and size.

    Raises :class:`TemplateRenderError` (a :class:`~gguftpl.errors.TemplateError`) with ``kind`` and
    ``line`` on any failure: syntax error, exception while rendering, sandbox violation, timeout, output
    larger than ``max_output`` characters, memory exhaustion.

    ``lenient=True`` renders in a sandbox with llama.cpp's leniencies (mutable lists, ``tojson`` on
    generators) instead of transformers' own: use it only to learn what a template would put in the
    prompt when transformers refuses it.
    """
    req = {
        "op": "render",
        "template": template_text,
        "messages": messages,
        "tools": tools,
        "add_generation_prompt": add_generation_prompt,
        "kwargs": {"bos_token": bos_token, "eos_token": eos_token, **kwargs},
        "max_output": max_output,
        "lenient": lenient,
    }
    try:
        json.dumps(req)
    except (TypeError, ValueError) as e:
        raise TemplateRenderError(f"render inputs are not JSON data: {e}", kind="worker") from None
    reply = _reply(get_worker().ask("render", req, timeout), timeout)
    if reply.get("ok"):
        return str(reply["text"])
    raise TemplateRenderError(
        reply.get("message") or "rendering failed",
        kind=reply.get("kind", "render"),
        line=reply.get("line"),
        exc_type=reply.get("type"),
    )


def _reply(outcome: Outcome, timeout: float) -> dict[str, Any]:
    """The worker's render reply; a render the worker could not finish raises."""
    if outcome.ok:
        return dict(outcome.value)
    if outcome.kind == worker.TIMEOUT:
        # overran: the only safe way to stop a render is to end the process, which the worker did
        raise TemplateRenderError(f"rendering took longer than {timeout:g} s and was stopped", kind="timeout")
    if outcome.kind == worker.START:
        raise TemplateRenderError(outcome.message, kind="worker")
    if outcome.kind in (worker.ERROR, worker.MEMORY):  # raised in the worker, outside the render's own handling
        kind = "memory" if outcome.kind == worker.MEMORY else "worker"
        return {"ok": False, "kind": kind, "type": outcome.error_type, "message": outcome.message, "line": None}
    raise TemplateRenderError("the render worker died while rendering (memory limit or crash)", kind="memory")


# ---------------------------------------------------------------------------------------------- worker side


def _worker_setup() -> None:
    import warnings

    warnings.simplefilter("ignore")
    from gguftpl.engines import transformers_env as jinja_env  # noqa: F401 - jinja2, imported once, before the memory cap


def _render_op(req: dict[str, Any]) -> dict[str, Any]:
    reply = _worker_render(req)
    try:
        json.dumps(reply, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError):  # e.g. a lone surrogate printed by the template
        return {"ok": False, "kind": "render", "type": "TypeError", "message": "unserialisable output", "line": None}
    return reply


def _template_line(exc: BaseException) -> int | None:
    import traceback

    line = getattr(exc, "lineno", None)
    if isinstance(line, int):
        return line
    # jinja2 rewrites tracebacks so frames of the template carry filename '<template>' and template lines.
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == "<template>":
            found = frame.lineno
    return found


def _failure(kind: str, exc: BaseException | None, message: str, line: int | None = None) -> dict[str, Any]:
    return {
        "ok": False,
        "kind": kind,
        "type": type(exc).__name__ if exc is not None else None,
        "message": message[:2000],
        "line": line,
    }


_COMPILE_FAILURES: dict[tuple[bytes, bool], dict[str, Any]] = {}
_MAX_COMPILE_FAILURES = 64


def _worker_render(req: dict[str, Any]) -> dict[str, Any]:
    text = req["template"]
    lenient = bool(req.get("lenient"))
    compiled = _compile(text, lenient)
    if isinstance(compiled, dict):
        return compiled
    return _render(compiled, req, int(req.get("max_output") or DEFAULT_MAX_OUTPUT))


def _compile(text: str, lenient: bool) -> Any:
    """The compiled template, or the failure dict. A template that fails to compile fails the same way every
    time, and compile caches only successes: without this memo an audit recompiled it for every probe (a
    50,000-term expression: ~2 s each, 30+ renders)."""
    from jinja2.exceptions import TemplateSyntaxError

    from gguftpl.engines import transformers_env as jinja_env

    key = (hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), lenient)
    failed = _COMPILE_FAILURES.get(key)
    if failed is not None:
        return failed
    try:
        return jinja_env.compile_template(text, lenient)
    except TemplateSyntaxError as e:
        failed = _failure("syntax", e, e.message or str(e), e.lineno)
    except MemoryError as e:
        failed = _failure("memory", e, "out of memory compiling")
    except (RecursionError, SyntaxError) as e:
        failed = _compile_nesting(text, e)
    except Exception as e:  # a hostile template can raise anything while compiling (constant folding)
        failed = _failure("render", e, str(e), _template_line(e))
    if len(_COMPILE_FAILURES) >= _MAX_COMPILE_FAILURES:
        _COMPILE_FAILURES.pop(next(iter(_COMPILE_FAILURES)))
    _COMPILE_FAILURES[key] = failed
    return failed


def _render(compiled: Any, req: dict[str, Any], limit: int) -> dict[str, Any]:
    """Render with transformers' inputs, streamed, so a template printing gigabytes stops at ``limit``."""
    from jinja2.exceptions import SecurityError

    from gguftpl.engines import transformers_env as jinja_env

    try:
        variables = jinja_env.template_inputs(
            req["messages"], req.get("tools"), bool(req.get("add_generation_prompt")), **req.get("kwargs", {})
        )
        parts: list[str] = []
        total = 0
        for chunk in jinja_env.render_chunks(compiled, variables):
            total += len(chunk)
            if total > limit:
                raise jinja_env.OutputTooLarge
            parts.append(chunk)
    except jinja_env.OutputTooLarge as e:
        return _failure("too_large", e, f"rendered output exceeded {limit} characters and was stopped")
    except MemoryError as e:
        return _failure("memory", e, "out of memory while rendering")
    except SecurityError as e:
        return _failure("security", e, str(e), _template_line(e))
    except RecursionError as e:  # a macro calling itself without end: llama.cpp has no limit and overflows its stack
        limit_calls = sys.getrecursionlimit()
        why = f"rendering recursed deeper than {limit_calls} calls (a macro calling itself without end)"
        return _failure("recursion", e, why, _template_line(e))
    except Exception as e:  # the template's own error: a verdict, not a crash
        return _failure("render", e, str(e), _template_line(e))
    return {"ok": True, "text": "".join(parts)}


def _compile_nesting(text: str, e: BaseException) -> dict[str, Any]:
    """A compile failure: nesting too deep for jinja2's compiler or for Python's (a syntax error, as the
    parse check says), or any other SyntaxError the generated code raised."""
    from gguftpl.engines.jinja2parse import is_nesting_failure, nesting_error

    if is_nesting_failure(e):
        err = nesting_error(text)
        return _failure("syntax", e, err.message.replace("to parse", "to compile"), err.lineno)
    return _failure("render", e, str(e))


# ---------------------------------------------------------------------------------------------- the adapter


class TransformersEngine:
    """transformers' ``apply_chat_template`` semantics (jinja2, :mod:`.transformers_env`) behind
    :mod:`gguftpl.engines.base`'s interface, every render in the bounded render worker."""

    name = "transformers"

    def availability(self) -> Any:
        from importlib.metadata import version

        from gguftpl.engines.base import Availability

        return Availability(self.name, True, f"jinja2 {version('jinja2')} as transformers sets it up")

    def load(self, template: str) -> Any:
        from gguftpl.engines.base import SYNTAX, EngineError
        from gguftpl.engines.jinja2parse import parse_template

        try:
            parse_template(template)  # parsing runs no template code (compiling would: that is the worker's)
        except Exception as e:  # TemplateSyntaxError, nesting
            return EngineError(SYNTAX, getattr(e, "message", None) or str(e), getattr(e, "lineno", None))
        return None

    def render(self, template: str, requests: Sequence[Any]) -> list[Any]:
        from gguftpl.engines.base import OVERRUN, RENDER, SYNTAX, EngineError, Rendered

        out = []
        for r in requests:
            variables = dict(r.variables)
            bos, eos = str(variables.pop("bos_token", "")), str(variables.pop("eos_token", ""))
            tools = [dict(t) for t in r.tools] if r.tools is not None else None
            try:
                text = render_hf(
                    template, [dict(m) for m in r.messages], tools, r.add_generation_prompt, bos, eos, **variables
                )
            except TemplateRenderError as e:
                kind = OVERRUN if e.overran else SYNTAX if e.kind == "syntax" else RENDER
                out.append(Rendered(None, EngineError(kind, str(e), e.line)))
                continue
            out.append(Rendered(text))
        return out


ENGINE = TransformersEngine()
