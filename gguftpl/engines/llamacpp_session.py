"""One in-process llama.cpp server for one GGUF: its Jinja engine, its template choice, its tool-call parser.

Everything runs in llama.cpp's own server (``xllamacpp``, in-process, listening on 127.0.0.1 only on a port
the kernel picks); nothing here imitates llama.cpp. llama.cpp needs a loadable model, so by default the
session serves a stand-in (:mod:`gguftpl.engines.llamacpp_standin`: the file's tokenizer on a zero-weight body) built in
a temporary folder and deleted afterwards; ``load_weights=True`` serves the real file.

Facts this module relies on (measured with xllamacpp 2026.10.11549, see RESEARCH §4–5):

- ``GET /props`` gives ``chat_template``, ``chat_template_tool_use`` (when the file has one),
  ``chat_template_caps`` (the capability probe of the template used with tools), ``bos_token``, ``eos_token``.
- ``POST /apply-template`` renders with llama.cpp's engine; it uses the ``tool_use`` template whenever the
  request has tools. A request whose last message is an assistant message carrying ``tool_calls`` is refused
  ("Cannot continue an assistant message that contains tool calls"), so a call turn is always followed by
  another message here.
- llama.cpp passes ``date_string`` (``%d %b %Y``, today) and ``enable_thinking`` to every template.
- ``handle_chat_completions`` with a prefilled assistant message runs llama.cpp's parser on it; a strong
  logit bias on EOS ends generation at once. ``max_tokens: 0`` does not stop generation (a token is still
  sampled and breaks the parse), so the bias is required. A text the parser rejects raises RuntimeError.
- Destroying a ``Server`` whose main loop has not started yet hangs for ever (llama.cpp's
  ``server_queue::start_loop`` sets ``running = true`` after ``terminate()`` already cleared it), so a
  session waits for one queued request (``GET /slots``) before it ever lets the server go.
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from gguftpl.engines.llamacpp_choice import TemplateChoice, choose_template
from gguftpl.engines.llamacpp_env import NOT_INSTALLED
from gguftpl.errors import GGUFTplError, LlamaCppError, UsageError

HTTP_TIMEOUT = 300.0
"""Seconds for one request to the in-process server (a real 70B prompt evaluation can be slow)."""
STANDIN_N_CTX = 32768
REAL_N_CTX = 8192
"""Context for ``load_weights``: enough for a prompt with tools, without a giant KV cache."""
STANDIN_THREADS = 1
"""CPU threads llama.cpp uses for a stand-in (a one-block model 16 wide: more threads gain nothing). Its default,
one per core, spin-waits between the steps of each prompt evaluation: on a busy 2-core machine verify's stand-in
stages took 4.5-6 s per template with two threads and 1.4 s with one."""

Message = dict[str, Any]


class LlamaCppLoadError(LlamaCppError):
    """llama.cpp refused to load the model (for a stand-in, almost always: a template it cannot parse)."""

    def __init__(self, message: str, log: list[str]) -> None:
        super().__init__(message)
        self.log = log


def _duplicate_token(path: str) -> tuple[int, int, str] | None:
    """Two token ids whose texts llama.cpp sees as one (its token map is keyed by the C string, so text after
    a NUL byte is lost), with that text; None when all differ or the file has no token list."""
    from gguftpl.gguf.reader import read_header

    try:
        item = read_header(path).kv.get("tokenizer.ggml.tokens")
    except GGUFTplError:
        return None  # llama.cpp reports an unreadable file in its own words
    tokens: Any = getattr(item, "value", None)
    if tokens is not None and hasattr(tokens, "decode"):  # a LazyArray: decoded only here, where it is needed
        tokens = tokens.decode()
    if not isinstance(tokens, list):
        return None
    seen: dict[str, int] = {}
    for i, text in enumerate(tokens):
        if not isinstance(text, str):
            return None
        key = text.split("\x00", 1)[0]
        if key in seen:
            return seen[key], i, key
        seen[key] = i
    return None


def _load_errors(xllamacpp: Any, params: Any) -> list[str]:
    """Load once more with llama.cpp's error log on, stderr (fd 2) captured, and return the error lines."""
    import sys

    params.verbosity = max(int(params.verbosity), 1)
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        try:
            try:
                srv = xllamacpp.Server(params)
            except RuntimeError:
                srv = None
            time.sleep(0.3)  # llama.cpp logs from its own thread
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        if srv is not None:  # loaded this time after all: release it properly
            _release(srv)
        log.seek(0)
        text = log.read().decode("utf-8", "replace")
    lines = []
    for line in text.splitlines():
        m = re.match(r"^[\d.]+ E (.*)$", line)
        if m:
            lines.append(" ".join(m.group(1).split()))
        elif lines and not re.match(r"^[\d.]+ [A-Z] ", line) and len(lines[-1]) < 600:
            lines[-1] += " " + line.strip()
    return lines


def _release(srv: Any) -> None:
    base = str(srv.listening_address)
    try:
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            (base if base.startswith("http") else f"http://{base}") + "/slots", timeout=HTTP_TIMEOUT
        ).read()
    except OSError:
        pass
    del srv


def require_xllamacpp() -> Any:
    """Import xllamacpp or raise LlamaCppError saying how to install it."""
    try:
        import xllamacpp
    except ImportError as exc:
        raise LlamaCppError(NOT_INSTALLED) from exc
    return xllamacpp


class LlamaCppSession:
    """One in-process llama.cpp server for one GGUF. A context manager::

        with LlamaCppSession("model.gguf") as s:
            s.props(); s.apply_template(msgs, tools); s.parse_completion(msgs, tools, text)

    ``chat_template`` overrides every template of the file, like llama-server's ``--chat-template``;
    ``templates`` (name -> text) replaces the file's templates in the stand-in (llama.cpp then picks among
    them as it would in a file that had them). ``template_only=True`` with ``templates`` and no ``path``
    serves a byte-level stand-in for bare template text.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        load_weights: bool = False,
        chat_template: str | None = None,
        templates: Mapping[str, str] | None = None,
        specials: tuple[str, str] | None = None,
        n_ctx: int | None = None,
        verbosity: int | None = None,
        n_threads: int | None = None,
    ) -> None:
        if path is None and not templates:
            raise UsageError("LlamaCppSession needs a GGUF path or templates")
        if load_weights and (path is None or templates is not None):
            raise UsageError("load_weights serves the file itself: it takes a path and no replacement templates")
        self.path = os.fspath(path) if path is not None else None
        self.load_weights = load_weights
        self.chat_template = chat_template
        self.templates = dict(templates) if templates is not None else None
        self.specials = specials
        """(bos, eos) texts for a template-only stand-in, so templates see the file's own ``bos_token`` and
        ``eos_token`` (an empty text: the stand-in's own)."""
        self.n_ctx = n_ctx or (REAL_N_CTX if load_weights else STANDIN_N_CTX)
        self.n_threads = n_threads if n_threads is not None or load_weights else STANDIN_THREADS
        """CPU threads for llama.cpp (None: its default, one per core; a stand-in: :data:`STANDIN_THREADS`)."""
        env_v = os.environ.get("GGUFTPL_LLAMACPP_VERBOSITY")
        self.verbosity = verbosity if verbosity is not None else int(env_v) if env_v and env_v.isdigit() else 0
        self.standin: Any = None
        """The :class:`gguftpl.engines.llamacpp_standin.StandIn` served, or None with ``load_weights``."""
        self.timings: dict[str, float] = {}
        self._srv: Any = None
        self._base = ""
        self._tmp: str | None = None
        self._props: dict[str, Any] | None = None
        self._names: list[str] | None = None
        self._eos_id: int | None = None
        self._template_specials: dict[str, str] | None = None
        self._loop_ready = False
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy

    def template_specials(self) -> dict[str, str]:
        """The file's special tokens other than bos/eos (``sep_token`` …) that transformers passes to its
        template and llama.cpp does not: the engine comparison gives them to the transformers side."""
        if self.path is None:
            return {}
        if self._template_specials is None:  # one header read per session, not one per compared request
            from gguftpl.gguf.reader import read_header
            from gguftpl.gguf.templateset import load_templateset, template_special_tokens

            self._template_specials = template_special_tokens(load_templateset(read_header(self.path)))
        return self._template_specials

    # ------------------------------------------------------------------------------------------ lifecycle

    def __enter__(self) -> LlamaCppSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        if self._srv is not None:
            return
        xllamacpp = require_xllamacpp()
        t0 = time.perf_counter()
        model_path = self.path
        try:
            if not self.load_weights:
                from gguftpl.engines.llamacpp_standin import build_standin

                self._tmp = tempfile.mkdtemp(prefix="gguftpl-standin-")
                model_path = os.path.join(self._tmp, "standin.gguf")
                self.standin = build_standin(self.path, model_path, templates=self.templates, specials=self.specials)
            elif self.path is not None:
                from gguftpl.safeio import check_regular

                check_regular(self.path, what="GGUF file")
            self.timings["standin_s"] = time.perf_counter() - t0
            p = xllamacpp.CommonParams()
            p.model.path = model_path
            p.n_ctx = self.n_ctx
            p.warmup = False
            p.hostnames = ["127.0.0.1"]
            p.port = 0
            p.ui = False
            p.verbosity = self.verbosity
            p.n_parallel = 1
            if self.n_threads:
                p.cpuparams.n_threads = p.cpuparams_batch.n_threads = self.n_threads
            if self.chat_template is not None:
                p.chat_template = self.chat_template
            t1 = time.perf_counter()
            dup = _duplicate_token(model_path) if model_path is not None else None
            if dup is not None:
                what = "the stand-in for " if not self.load_weights else ""
                line = (
                    f"tokens {dup[0]} and {dup[1]} have the same text {dup[2]!r} (up to any NUL byte): llama.cpp "
                    "aborts the whole process on such a vocabulary (GGML_ASSERT in llama-vocab.cpp)"
                )
                raise LlamaCppLoadError(f"llama.cpp could not load {what}{self.path}: {line}", [line])
            try:
                self._srv = xllamacpp.Server(p)
            except RuntimeError:
                # llama.cpp says why only in its log: load again with errors logged, and read them
                errors = _load_errors(xllamacpp, p)
                what = "the stand-in for " if not self.load_weights else ""
                reason = "; ".join(errors[:4]) or "no reason logged (set GGUFTPL_LLAMACPP_VERBOSITY=3)"
                raise LlamaCppLoadError(
                    f"llama.cpp could not load {what}{self.path or 'the template stand-in'}: {reason}", errors
                ) from None
            addr = str(self._srv.listening_address)
            self._base = addr if addr.startswith("http") else f"http://{addr}"
            # one request through the task queue: proves the main loop runs, so the server can be released
            self._request("GET", "/slots")
            self._loop_ready = True
            self.timings["load_s"] = time.perf_counter() - t1
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._srv is not None and not self._loop_ready:
            # releasing a server whose loop has not started hangs (see the module docstring): wait for it
            try:
                self._request("GET", "/slots")
            except LlamaCppError:
                pass
        srv, self._srv = self._srv, None
        if srv is not None:
            del srv  # ~Server terminates the loop and joins its threads
            gc.collect()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    @property
    def base_url(self) -> str:
        return self._base

    # ------------------------------------------------------------------------------------------- requests

    def _request(self, method: str, path: str, body: Any = None, timeout: float = HTTP_TIMEOUT) -> Any:
        if self._srv is None:
            raise LlamaCppError("the llama.cpp session is not running")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self._base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with self._opener.open(req, timeout=timeout) as r:
                raw_ok = r.read()
            return json.loads(raw_ok)
        except urllib.error.HTTPError as exc:
            raw = exc.read().decode("utf-8", "replace")
            try:
                msg = json.loads(raw)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                msg = raw[:300]
            raise LlamaCppError(f"llama.cpp {path}: {msg}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise LlamaCppError(f"llama.cpp server did not answer {path}: {exc}") from None
        except ValueError as exc:  # http.client errors and a body that is not JSON
            raise LlamaCppError(f"llama.cpp {path}: unreadable answer: {exc}") from None

    def props(self) -> dict[str, Any]:
        if self._props is None:
            self._props = dict(self._request("GET", "/props"))
        return self._props

    @property
    def caps(self) -> dict[str, bool]:
        return dict(self.props().get("chat_template_caps") or {})

    @property
    def bos_token(self) -> str:
        return str(self.props().get("bos_token") or "")

    @property
    def eos_token(self) -> str:
        return str(self.props().get("eos_token") or "")

    def template_names(self) -> list[str]:
        """Names of the templates the served file carries (``default``, ``tool_use``, ...), sorted."""
        if self._names is None:
            if self.standin is not None:
                self._names = sorted(self.standin.templates)
            elif self.templates is not None:
                self._names = sorted(self.templates)
            elif self.path is None:
                self._names = []
            else:
                from gguftpl.gguf.reader import read_header
                from gguftpl.gguf.templateset import load_templateset

                self._names = sorted(load_templateset(read_header(self.path)).templates)
        return self._names

    def loaded_templates(self) -> dict[str, str]:
        """The templates llama.cpp loaded, in its own words (``/props``): the default (the file's, or the
        ``--chat-template`` override; absent when llama.cpp fell back to ChatML) and ``tool_use`` (absent when
        the file has none, or llama.cpp dropped one it could not parse)."""
        props = self.props()
        out: dict[str, str] = {}
        if self.chat_template is not None or "default" in self.template_names():
            out["default"] = str(props.get("chat_template") or "")
        if props.get("chat_template_tool_use"):
            out["tool_use"] = str(props["chat_template_tool_use"])
        return out

    def template_for(self, tools: Sequence[Any] | None) -> TemplateChoice:
        """The template llama.cpp renders a request with (:func:`gguftpl.engines.llamacpp_choice.choose_template`)."""
        return choose_template(self.loaded_templates(), tools)

    def apply_template(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> str:
        """The prompt llama.cpp renders for this request (``POST /apply-template``)."""
        body: dict[str, Any] = {"messages": messages}
        if tools:
            body["tools"] = tools
        if not add_generation_prompt:
            body["add_generation_prompt"] = False
        if template_kwargs:
            body["chat_template_kwargs"] = dict(template_kwargs)
        return str(self._request("POST", "/apply-template", body)["prompt"])

    def tokenize(self, text: str, parse_special: bool = True) -> list[int]:
        res = self._request("POST", "/tokenize", {"content": text, "parse_special": parse_special})
        return [int(t) if not isinstance(t, dict) else int(t["id"]) for t in res["tokens"]]

    def eos_id(self) -> int:
        if self._eos_id is None:
            eos = self.eos_token
            ids = self.tokenize(eos, True) if eos else []
            if len(ids) != 1:
                raise LlamaCppError(f"llama.cpp reports EOS {eos!r}, which does not tokenize to one token ({ids})")
            self._eos_id = ids[0]
        return self._eos_id

    def chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        if self._srv is None:
            raise LlamaCppError("the llama.cpp session is not running")
        try:
            res = self._srv.handle_chat_completions(body)
        except RuntimeError as exc:
            raise LlamaCppError(f"llama.cpp: {exc}") from None
        if isinstance(res, str):
            res = json.loads(res)
        if isinstance(res, dict) and "error" in res:
            err = res["error"]
            raise LlamaCppError(f"llama.cpp: {err.get('message') if isinstance(err, dict) else err}")
        return dict(res)

    def parse_completion(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, canned_text: str
    ) -> Message:
        """llama.cpp's parser on ``canned_text`` as the model's reply: the text is prefilled as the assistant
        turn and a +100 logit bias on EOS ends generation before any token is added. Returns the parsed
        assistant message (``content``, ``tool_calls``…); raises LlamaCppError when the parser rejects it."""
        body: dict[str, Any] = {
            "messages": [*messages, {"role": "assistant", "content": canned_text}],
            "temperature": 0,
            "max_tokens": 4,
            "logit_bias": [[self.eos_id(), 100]],
        }
        if tools:
            body["tools"] = tools
        res = self.chat_completion(body)
        try:
            return dict(res["choices"][0]["message"])
        except (KeyError, IndexError, TypeError):
            raise LlamaCppError(f"llama.cpp returned no message: {json.dumps(res)[:300]}") from None
