"""Render chat templates the way Hugging Face does, with a time and an output-size bound.

Templates come from untrusted files. transformers renders them in jinja2's ``ImmutableSandboxedEnvironment``,
which stops attribute tricks but not a loop that never ends, nor a template that prints gigabytes. So every
render runs in one persistent worker process (:mod:`gguftpl.worker`, op ``render``) that has imported
transformers once; the parent waits with a timeout and the worker is killed when a render overruns. The worker
counts output while it streams and caps its own address space, so a megabyte-printing template fails fast
with a clear error instead of eating the machine.

Rendering itself is transformers' ``render_jinja_template`` (same environment, filters, globals).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from typing import Any

from gguftpl import worker
from gguftpl.errors import TemplateError
from gguftpl.worker import Op, Outcome, Worker, WorkerSpec, shared

DEFAULT_TIMEOUT = 5.0
"""Seconds one render may take. Real templates render in milliseconds."""
DEFAULT_MAX_OUTPUT = 1 << 20
"""Characters one render may produce. Real prompts with tools are tens of kilobytes."""
STARTUP_TIMEOUT = 120.0
"""Seconds the worker may take to import transformers (slow on a busy 2-core machine)."""
_MEMORY_HEADROOM = 1536 << 20
"""Bytes of address space the worker may grow by after its imports."""


class TemplateRenderError(TemplateError):
    """A template failed to parse or render. ``kind`` is one of ``syntax``, ``render``, ``security``,
    ``timeout``, ``too_large``, ``memory``, ``worker``; ``line`` is the 1-based template line when known."""

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


@functools.lru_cache(maxsize=1)
def _spec() -> WorkerSpec:
    return WorkerSpec(
        "render worker",
        ops={"render": Op("gguftpl.templates.hfrender:_render_op")},
        setup=("gguftpl.templates.hfrender:_worker_setup",),
        memory_headroom=_MEMORY_HEADROOM,
        startup_timeout=STARTUP_TIMEOUT,
        env={
            "TRANSFORMERS_VERBOSITY": "error",
            "TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM", "false"),
            "PYTHONWARNINGS": "ignore",
        },
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
    from transformers.utils import chat_template_utils  # noqa: F401 - imported once, before the memory cap


def _render_op(req: dict[str, Any]) -> dict[str, Any]:
    reply = _worker_render(req)
    try:
        json.dumps(reply, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError):  # e.g. a lone surrogate printed by the template
        return {"ok": False, "kind": "render", "type": "TypeError", "message": "unserialisable output", "line": None}
    return reply


class _OutputTooLarge(Exception):
    pass


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


_COMPILE_FAILURES: dict[tuple[bytes, bool], dict[str, Any]] = {}
_MAX_COMPILE_FAILURES = 64


def _worker_render(req: dict[str, Any]) -> dict[str, Any]:
    import jinja2
    from jinja2.exceptions import SecurityError, TemplateSyntaxError
    from transformers.utils import chat_template_utils as ctu

    text = req["template"]
    limit = int(req.get("max_output") or DEFAULT_MAX_OUTPUT)
    lenient = bool(req.get("lenient"))
    # A template that fails to compile fails the same way every time; transformers caches only successes,
    # so without this an audit recompiled it for every probe (a 50,000-term expression: ~2 s each, 30+ renders).
    key = (hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), lenient)
    failed = _COMPILE_FAILURES.get(key)
    if failed is not None:
        return failed
    try:
        compiled = _lenient_compile(text) if lenient else ctu._compile_jinja_template(text)
    except TemplateSyntaxError as e:
        failed = {
            "ok": False,
            "kind": "syntax",
            "type": type(e).__name__,
            "message": e.message or str(e),
            "line": e.lineno,
        }
    except MemoryError:
        failed = {
            "ok": False,
            "kind": "memory",
            "type": "MemoryError",
            "message": "out of memory compiling",
            "line": None,
        }
    except Exception as e:  # a hostile template can raise anything while compiling (constant folding)
        failed = {
            "ok": False,
            "kind": "render",
            "type": type(e).__name__,
            "message": str(e)[:2000],
            "line": _template_line(e),
        }
    if failed is not None:
        if len(_COMPILE_FAILURES) >= _MAX_COMPILE_FAILURES:
            _COMPILE_FAILURES.pop(next(iter(_COMPILE_FAILURES)))
        _COMPILE_FAILURES[key] = failed
        return failed

    def bounded_render(*args: Any, **kw: Any) -> str:
        # Template.render, streamed, so a template printing gigabytes stops at `limit` characters.
        ctx = compiled.new_context(dict(*args, **kw))
        parts: list[str] = []
        total = 0
        try:
            for chunk in compiled.root_render_func(ctx):
                total += len(chunk)
                if total > limit:
                    raise _OutputTooLarge
                parts.append(chunk)
        except _OutputTooLarge:
            raise
        except Exception:
            return compiled.environment.handle_exception()
        return compiled.environment.concat(parts)  # type: ignore[attr-defined,no-any-return]

    try:
        if lenient:
            rendered = bounded_render(
                messages=req["messages"],
                tools=req.get("tools"),
                documents=None,
                add_generation_prompt=bool(req.get("add_generation_prompt")),
                **req.get("kwargs", {}),
            )
        else:
            if isinstance(compiled, jinja2.Template):
                compiled.render = bounded_render  # type: ignore[method-assign]
            out = ctu.render_jinja_template(
                conversations=[req["messages"]],
                tools=req.get("tools"),
                chat_template=text,
                add_generation_prompt=bool(req.get("add_generation_prompt")),
                **req.get("kwargs", {}),
            )
            rendered = out[0][0]  # (prompts, generation indices); annotated `str` upstream
    except _OutputTooLarge:
        return {
            "ok": False,
            "kind": "too_large",
            "type": "OutputTooLarge",
            "message": f"rendered output exceeded {limit} characters and was stopped",
            "line": None,
        }
    except MemoryError:
        return {
            "ok": False,
            "kind": "memory",
            "type": "MemoryError",
            "message": "out of memory while rendering",
            "line": None,
        }
    except RecursionError as e:
        return {"ok": False, "kind": "render", "type": "RecursionError", "message": str(e), "line": _template_line(e)}
    except SecurityError as e:
        return {
            "ok": False,
            "kind": "security",
            "type": type(e).__name__,
            "message": str(e)[:2000],
            "line": _template_line(e),
        }
    except Exception as e:
        return {
            "ok": False,
            "kind": "render",
            "type": type(e).__name__,
            "message": str(e)[:2000],
            "line": _template_line(e),
        }
    if len(rendered) > limit:
        return {
            "ok": False,
            "kind": "too_large",
            "type": "OutputTooLarge",
            "message": f"rendered output exceeded {limit} characters",
            "line": None,
        }
    return {"ok": True, "text": rendered}


_LENIENT_ENV: Any = None


def _lenient_compile(text: str) -> Any:
    """transformers' environment with llama.cpp's leniencies: mutable lists (``append``) and a ``tojson``
    that accepts generators (``map`` results). Still sandboxed: attribute access rules are jinja2's."""
    global _LENIENT_ENV
    if _LENIENT_ENV is None:
        import jinja2.ext
        from jinja2.sandbox import SandboxedEnvironment
        from transformers.utils import chat_template_utils as ctu

        from gguftpl.templates.static import make_parse_env

        reference = ctu._compile_jinja_template("").environment
        gen_ext = next(type(e) for e in make_parse_env().extensions.values() if "generation" in e.tags)
        env = SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[gen_ext, jinja2.ext.loopcontrols])
        env.globals.update({k: reference.globals[k] for k in ("raise_exception", "strftime_now", "dict", "namespace")})
        # llama.cpp's range has no MAX_RANGE: jinja2's sandbox refusing range(10**9) at once hid a loop that
        # runs (and allocates) for minutes there. A lazy range runs into the time and size bounds instead.
        env.globals["range"] = range

        def tojson(
            x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
        ) -> str:
            def default(o: Any) -> Any:
                if hasattr(o, "__iter__") and not isinstance(o, (str, bytes, dict)):
                    return list(o)
                raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")

            return json.dumps(
                x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys, default=default
            )

        env.filters["tojson"] = tojson
        _LENIENT_ENV = env
    return _lenient_from_string(text)


@functools.lru_cache(maxsize=16)
def _lenient_from_string(text: str) -> Any:
    # as transformers caches its own compiles: a lenient audit renders one template a dozen times
    return _LENIENT_ENV.from_string(text)
