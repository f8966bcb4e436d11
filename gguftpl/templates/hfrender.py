"""Render chat templates the way Hugging Face does, with a time and an output-size bound.

Templates come from untrusted files. transformers renders them in jinja2's ``ImmutableSandboxedEnvironment``,
which stops attribute tricks but not a loop that never ends, nor a template that prints gigabytes. So every
render runs in one persistent worker process (``python -m gguftpl.templates.hfrender``) that has imported
transformers once; the parent waits with a timeout and kills the worker when a render overruns. The worker
counts output while it streams and caps its own address space, so a megabyte-printing template fails fast
with a clear error instead of eating the machine.

Rendering itself is transformers' ``render_jinja_template`` (same environment, filters, globals).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import queue
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from gguftpl.errors import TemplateError

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


@dataclass
class RenderStats:
    renders: int = 0
    restarts: int = 0
    seconds: float = 0.0


# ---------------------------------------------------------------------------------------------- parent side


def _write_frame(stream: Any, obj: Any) -> None:
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    stream.write(struct.pack(">I", len(data)) + data)
    stream.flush()


def _read_frame(stream: Any) -> Any:
    head = stream.read(4)
    if len(head) < 4:
        raise EOFError
    (n,) = struct.unpack(">I", head)
    data = stream.read(n)
    if len(data) < n:
        raise EOFError
    return json.loads(data.decode("utf-8"))


class RenderWorker:
    """One worker process, restarted after a timeout or a crash. Thread-safe (one render at a time)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._replies: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self.stats = RenderStats()

    def _start(self) -> None:
        env = dict(os.environ)
        env["TRANSFORMERS_VERBOSITY"] = "error"
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        env["PYTHONWARNINGS"] = "ignore"
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "gguftpl.templates.hfrender"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        replies: queue.Queue[Any] = queue.Queue()
        self._replies = replies
        stdout = self._proc.stdout

        def pump() -> None:
            try:
                while True:
                    replies.put(_read_frame(stdout))
            except (EOFError, OSError, ValueError):
                replies.put(EOFError())

        threading.Thread(target=pump, name="gguftpl-render-pump", daemon=True).start()
        ready = self._get(STARTUP_TIMEOUT)
        if not isinstance(ready, dict) or not ready.get("ready"):
            self.close()
            raise TemplateRenderError(
                f"the render worker did not start: {ready.get('error') if isinstance(ready, dict) else ready}",
                kind="worker",
            )

    def _get(self, timeout: float) -> Any:
        try:
            return self._replies.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.kill()
        except OSError:
            pass
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def request(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                if self._proc is not None:
                    self.stats.restarts += 1
                    self.close()
                self._start()
            assert self._proc is not None and self._proc.stdin is not None
            t0 = time.perf_counter()
            try:
                _write_frame(self._proc.stdin, req)
            except OSError:
                self.close()
                raise TemplateRenderError("the render worker died", kind="worker") from None
            reply = self._get(timeout)
            self.stats.renders += 1
            self.stats.seconds += time.perf_counter() - t0
            if reply is None:
                # Overran: the only safe way to stop a render is to end the process.
                self.close()
                self.stats.restarts += 1
                raise TemplateRenderError(f"rendering took longer than {timeout:g} s and was stopped", kind="timeout")
            if isinstance(reply, EOFError):
                self.close()
                self.stats.restarts += 1
                raise TemplateRenderError(
                    "the render worker died while rendering (memory limit or crash)", kind="memory"
                )
            return reply


_WORKER: RenderWorker | None = None
_WORKER_LOCK = threading.Lock()


def get_worker() -> RenderWorker:
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = RenderWorker()
            atexit.register(_WORKER.close)
        return _WORKER


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
    reply = get_worker().request(req, timeout)
    if reply.get("ok"):
        return str(reply["text"])
    raise TemplateRenderError(
        reply.get("message") or "rendering failed",
        kind=reply.get("kind", "render"),
        line=reply.get("line"),
        exc_type=reply.get("type"),
    )


# ---------------------------------------------------------------------------------------------- worker side


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


def _worker_main() -> None:
    import warnings

    warnings.simplefilter("ignore")
    # Frames go to the real stdout; anything a library prints goes to stderr (DEVNULL).
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    try:
        from transformers.utils import chat_template_utils  # noqa: F401
    except Exception as e:  # report rather than die silently
        _write_frame(out, {"ready": False, "error": f"{type(e).__name__}: {e}"})
        return
    from gguftpl.safeio import cap_address_space

    cap_address_space(_MEMORY_HEADROOM)
    _write_frame(out, {"ready": True})
    while True:
        try:
            req = _read_frame(inp)
        except EOFError:
            return
        try:
            reply = _worker_render(req)
        except MemoryError:
            reply = {"ok": False, "kind": "memory", "type": "MemoryError", "message": "out of memory", "line": None}
        except Exception as e:
            reply = {"ok": False, "kind": "worker", "type": type(e).__name__, "message": str(e)[:2000], "line": None}
        try:
            _write_frame(out, reply)
        except (TypeError, ValueError):
            _write_frame(out, {"ok": False, "kind": "render", "type": "TypeError", "message": "unserialisable output"})


if __name__ == "__main__":
    _worker_main()
