"""Verification through llama.cpp itself: its Jinja engine, its template choice, its tool-call parser.

Everything runs in llama.cpp's own server (``xllamacpp``, in-process, listening on 127.0.0.1 only on a port
the kernel picks); nothing here imitates llama.cpp. llama.cpp needs a loadable model, so by default the
session serves a stand-in (:mod:`gguftpl.standin`: the file's tokenizer keys on a zero-weight body) built in
a temporary folder and deleted afterwards; ``load_weights=True`` serves the real file.

``verify`` runs five stages, each PASS/FAIL/SKIP with evidence (``VerifyResult.stages``; more can be
appended, the tool checks of :mod:`gguftpl.toolcheck` are):

1. template selection: which template llama.cpp uses for a request with tools (``tool_use`` if loaded, else
   the default, else its built-in ChatML fallback: FAIL) and its capability probe (``chat_template_caps``);
   a template llama.cpp cannot parse makes the file unloadable: FAIL with llama.cpp's own error.
2. schema in prompt: the canary tool's name and parameter description are in ``/apply-template``'s prompt.
3. call parsed: a canary call cut out of llama.cpp's render of a history that contains it (so in the
   template's own dialect and spacing), prefilled as the reply, is parsed into that call by llama.cpp.
4. result rendered: the canary tool result is in the next turn's prompt.
5. engine agreement: llama.cpp's prompts for stages 2 and 4 equal transformers' (see ``compare_engines``
   for exactly what is normalised), or the first difference is shown.

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
from dataclasses import dataclass, field
from typing import Any

from gguftpl.errors import GGUFTplError, LlamaCppError, UsageError

INSTALL_HINT = "pip install 'gguftpl[llamacpp]'"
HTTP_TIMEOUT = 300.0
"""Seconds for one request to the in-process server (a real 70B prompt evaluation can be slow)."""
STANDIN_N_CTX = 32768
REAL_N_CTX = 8192
"""Context for ``load_weights``: enough for a prompt with tools, without a giant KV cache."""

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
        raise LlamaCppError(
            f"llama.cpp verification needs the xllamacpp package, which is not installed: {INSTALL_HINT}"
        ) from exc
    return xllamacpp


def llamacpp_available() -> bool:
    try:
        require_xllamacpp()
    except LlamaCppError:
        return False
    return True


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
        n_ctx: int | None = None,
        verbosity: int | None = None,
    ) -> None:
        if path is None and not templates:
            raise UsageError("LlamaCppSession needs a GGUF path or templates")
        if load_weights and (path is None or templates is not None):
            raise UsageError("load_weights serves the file itself: it takes a path and no replacement templates")
        self.path = os.fspath(path) if path is not None else None
        self.load_weights = load_weights
        self.chat_template = chat_template
        self.templates = dict(templates) if templates is not None else None
        self.n_ctx = n_ctx or (REAL_N_CTX if load_weights else STANDIN_N_CTX)
        env_v = os.environ.get("GGUFTPL_LLAMACPP_VERBOSITY")
        self.verbosity = verbosity if verbosity is not None else int(env_v) if env_v and env_v.isdigit() else 0
        self.standin: Any = None
        """The :class:`gguftpl.standin.StandIn` served, or None with ``load_weights``."""
        self.timings: dict[str, float] = {}
        self._srv: Any = None
        self._base = ""
        self._tmp: str | None = None
        self._props: dict[str, Any] | None = None
        self._eos_id: int | None = None
        self._loop_ready = False
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy

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
                from gguftpl.standin import build_standin

                self._tmp = tempfile.mkdtemp(prefix="gguftpl-standin-")
                model_path = os.path.join(self._tmp, "standin.gguf")
                self.standin = build_standin(self.path, model_path, templates=self.templates)
            elif self.path is not None and not os.path.isfile(self.path):
                raise UsageError(f"no such file: {self.path}")
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

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        if self._srv is None:
            raise LlamaCppError("the llama.cpp session is not running")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self._base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with self._opener.open(req, timeout=HTTP_TIMEOUT) as r:
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

    def template_for(self, tools: Sequence[Any] | None) -> tuple[str, str]:
        """(name, text) of the template llama.cpp renders a request with: ``tool_use`` when the request
        has tools and one is loaded, else the default (the file's, an override, or llama.cpp's fallback)."""
        props = self.props()
        if tools and props.get("chat_template_tool_use"):
            return "tool_use", str(props["chat_template_tool_use"])
        return "default", str(props.get("chat_template") or "")

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


# ---------------------------------------------------------------------------------------- call dialect

_REPLY_MARK = "qz7gguftplreplymark"


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class CallText:
    """A tool call written the way the template writes it, cut out of llama.cpp's own render."""

    text: str
    """What the model would emit after the generation prompt ('' when the template writes no call)."""
    with_call: str = ""
    """llama.cpp's render of the conversation with the call turn (followed by a user turn)."""
    content_none: bool = False
    """The call rendered only with the assistant ``content`` set to None."""
    history_text: str = ""
    """When ``text`` is a variant (below) that llama.cpp parses: the call as the history render writes it."""
    variants: list[str] = field(default_factory=list)
    """Other readings of the same render a model may emit instead (tried in order when ``text`` does not
    parse): with the end-of-call marker the template writes before its end of turn kept, as the template
    writes the call when its turn is the last message, and without the empty reasoning block the template
    writes for a turn that had no reasoning."""
    call_id: str = ""
    """Set when the template writes the call's ``id`` where the function name belongs (Kimi K2 Thinking's
    ``<|tool_call_begin|>{{ tool_call.id }}``): the id the call was rendered with instead, one that carries
    the name. Empty when the call's own id was used."""


_NAMED_IDS = ("functions.{name}:0", "{name}")
"""Ids that carry the function name, tried when a template writes the id in place of the name:
``functions.NAME:INDEX`` is the form llama.cpp's parser reads a name out of and gives back as the id."""


def call_text_from_template(
    session: LlamaCppSession,
    messages: list[Message],
    tools: list[dict[str, Any]],
    call: dict[str, Any],
) -> CallText:
    """See :func:`_call_text`. A template may write the call's ``id`` and not its name (the name travels
    inside ids shaped like ``functions.NAME:0``); then the call is rendered again with such an id, and the
    one used is kept in ``call_id``."""
    ct = _call_text(session, messages, tools, call)
    name = str((call.get("function") or {}).get("name") or "")
    cid = str(call.get("id") or "")
    if name and cid and ct.text and name not in ct.text and cid in ct.text:
        for shape in _NAMED_IDS:
            named = shape.format(name=name)
            alt = _call_text(session, messages, tools, {**call, "id": named})
            if name in alt.text:
                alt.call_id = named
                return alt
    return ct


def _call_text(
    session: LlamaCppSession,
    messages: list[Message],
    tools: list[dict[str, Any]],
    call: dict[str, Any],
) -> CallText:
    """Render ``messages`` + an assistant turn carrying ``call`` + a user turn through llama.cpp, and the
    same with a plain reply instead; the call text is what follows the generation prompt in the first, up
    to where the conversation continues, less the end-of-turn text (which a model emits as an
    end-of-generation token, never as content). Compared marker by marker, so ``<|START_ACTION|>`` is never
    split against ``<|START_RESPONSE|>``. The exact spacing matters (RESEARCH §4:
    ``<tool_call>{…}</tool_call>`` is not parsed where the template writes newlines)."""
    fn = call.get("function", {})
    values = [str(v) for v in _arg_values(fn.get("arguments"))] or [str(fn.get("name", ""))]
    p0 = session.apply_template(messages, tools)
    first: CallText | None = None
    # what follows the call turn: a user turn, or (templates that insist on alternation) the tool's result
    for after in ({"role": "user", "content": "Thanks."}, _tool_result_for(call)):
        try:
            reply = session.apply_template([*messages, {"role": "assistant", "content": _REPLY_MARK}, after], tools)
        except LlamaCppError:
            reply = ""
        for content in ("", None):
            turn = {"role": "assistant", "content": content, "tool_calls": [call]}
            try:
                p1 = session.apply_template([*messages, turn, after], tools)
            except LlamaCppError:
                continue
            text, kept = _cut_call(p0, p1, reply)
            ct = CallText(text, p1, content is None)
            if text and all(v in text for v in values):
                ct.variants = _call_variants(session, messages, tools, [*messages, turn, after], p0, reply, text, kept)
                return _prefer_parsed(session, messages, tools, call, ct)
            first = first or ct
    return first or CallText("")


_REASON_MARK = "qz7gguftplreasonmark"


def _call_variants(
    session: LlamaCppSession,
    messages: list[Message],
    tools: list[dict[str, Any]],
    history: list[Message],
    p0: str,
    reply: str,
    text: str,
    kept: str,
) -> list[str]:
    """Other texts for the same call. llama.cpp's parser is learnt from what the template writes after the
    generation prompt, which history need not share: a template may strip a closing marker the model does
    emit (``<|END_ACTION|>``, ``<|call|>``) only because an end-of-turn follows, or write an empty
    reasoning block (``<|START_THINKING|><|END_THINKING|>``) the model never writes before a call."""
    out: list[str] = []
    bodies = [text] + ([kept] if kept != text else [])
    bodies += [b for b in _last_turn_call(session, messages, tools, history[len(messages)]) if b not in bodies]
    objects = _object_arguments(history[len(messages)])
    if objects is not None:
        bodies += [b for b in _last_turn_call(session, messages, tools, objects) if b not in bodies]
    # the reasoning block: render the same turn with reasoning; if it is the text with a marker inserted,
    # what surrounds the marker up to the next control piece is an empty block the model does not write
    turn = dict(history[len(messages)])
    turn["reasoning_content"] = _REASON_MARK
    try:
        p1r = session.apply_template([*messages, turn, *history[len(messages) + 1 :]], tools)
    except LlamaCppError:
        p1r = ""
    with_reason, _ = _cut_call(p0, p1r, reply) if p1r else ("", "")
    at = with_reason.find(_REASON_MARK)
    if at >= 0 and text.startswith(with_reason[:at]):
        pieces = _PIECE.findall(with_reason[at + len(_REASON_MARK) :])
        close = next((i for i, pc in enumerate(pieces) if pc.strip()), None)
        if close is not None:
            empty = with_reason[:at] + "".join(pieces[: close + 1])
            bodies += [b[len(empty) :].lstrip() for b in list(bodies) if b.startswith(empty)]
    for b in bodies[1:]:
        if b.strip() and b not in out and b != text:
            out.append(b)
    return out


def _prefer_parsed(
    session: LlamaCppSession, messages: list[Message], tools: list[dict[str, Any]], call: dict[str, Any], ct: CallText
) -> CallText:
    """With a session that parses (not a bare prompt engine): the first of the text and its variants that
    llama.cpp's parser turns back into ``call`` (as is, or without the whitespace around it) becomes
    ``text``; the history rendering is kept in ``history_text``."""
    if not ct.variants or not callable(getattr(session, "parse_completion", None)):
        return ct
    fn = call.get("function") or {}
    args = fn.get("arguments")
    try:
        want = {"name": fn.get("name"), "arguments": json.loads(args) if isinstance(args, str) else args}
    except ValueError:
        return ct
    for cand in [ct.text, *ct.variants]:
        if any(
            _call_matches(_parse_call(session, messages, tools, t), want) for t in dict.fromkeys((cand, cand.strip()))
        ):
            if cand != ct.text:
                rest = [v for v in ct.variants if v != cand]
                return CallText(cand, ct.with_call, ct.content_none, ct.text, rest)
            return ct
    return ct


def _object_arguments(turn: Message) -> Message | None:
    """The turn with JSON-string call arguments decoded, as llama.cpp hands them to a template (None: no
    string arguments)."""
    calls = []
    changed = False
    for c in turn.get("tool_calls") or []:
        fn = dict(c.get("function") or {})
        if isinstance(fn.get("arguments"), str):
            try:
                fn["arguments"] = json.loads(fn["arguments"])
                changed = True
            except ValueError:
                pass
        calls.append({**c, "function": fn})
    return {**turn, "tool_calls": calls} if changed else None


def _last_turn_call(
    session: LlamaCppSession, messages: list[Message], tools: list[dict[str, Any]], turn: Message
) -> list[str]:
    """The call as the template writes it when the call turn is the LAST message, which is how llama.cpp's
    differential parser renders it (a template may write history calls differently, e.g. with the call id
    only when another turn follows). llama.cpp's /apply-template refuses a final assistant turn with tool
    calls, so jinja2 with Hugging Face semantics and llama.cpp's variables renders the three prompts."""
    from gguftpl.templates.hfrender import TemplateRenderError, render_hf

    template = session.template_for(tools)[1]
    kw: dict[str, Any] = {
        "tools": tools,
        "bos_token": session.bos_token,
        "eos_token": session.eos_token,
        "date_string": llamacpp_date_string(),
        "enable_thinking": True,
    }
    try:
        gen = render_hf(template, messages, add_generation_prompt=True, **kw)
        last = render_hf(template, [*messages, turn], add_generation_prompt=False, **kw)
        reply = render_hf(
            template, [*messages, {"role": "assistant", "content": _REPLY_MARK}], add_generation_prompt=False, **kw
        )
    except (TemplateRenderError, LlamaCppError):
        return []
    return [b for b in dict.fromkeys(_cut_call(gen, last, reply)) if b.strip()]


def _tool_result_for(call: dict[str, Any]) -> Message:
    from gguftpl.templates import probes

    name = str((call.get("function") or {}).get("name", ""))
    return {"role": "tool", "tool_call_id": call.get("id", probes.CANARY_CALL_ID), "name": name, "content": "ok"}


_PIECE = re.compile(
    r"<\|[^<>\s]{0,40}?\|>|<｜[^<>]{0,40}?｜>|<\|\w+>|<\w+\|>|</?[A-Za-z_][\w:.\-]*(?:=[^<>\s]*)?>"
    r"|\[/?[A-Z_]+\]|\w+|\s|.",
    re.DOTALL,
)
_CONTROL_END = re.compile(r"(?:<\|[^<>|\s]{1,48}\|>|<｜[^<>｜]{1,48}｜>|<\|\w{1,48}>|<\w{1,48}\|>|</s>)\s*$")


def _common_pieces(a: list[str], b: list[str]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _cut_call(gen_prompt: str, with_call: str, with_reply: str) -> tuple[str, str]:
    """The call text, and the same before a trailing control marker was taken for the end of turn."""
    pg, pc, pr = _PIECE.findall(gen_prompt), _PIECE.findall(with_call), _PIECE.findall(with_reply)
    start = _common_pieces(pg, pc)
    # the generation prompt may differ earlier (a system note only it carries) yet end with the same header
    # the history turn starts with: drop that overlap, the model does not write its own header
    rest = pg[start:]
    for k in range(min(len(rest), len(pc) - start), 0, -1):
        if rest[-k:] == pc[start : start + k] and "".join(rest[-k:]).strip():
            start += k
            break
    # the conversation after the turn is the same in both renders: trim the common tail
    tail = _common_pieces(pc[::-1], pr[::-1])
    body = "".join(pc[start : max(start, len(pc) - tail)])
    reply = "".join(pr[: len(pr) - tail])
    at = reply.find(_REPLY_MARK)
    eot = reply[at + len(_REPLY_MARK) :] if at >= 0 else ""
    if eot and body.endswith(eot):
        return body[: -len(eot)], body[: -len(eot)]
    # an end-of-turn the plain reply does not share (e.g. <|eom_id|> after a call): a control marker
    return _CONTROL_END.sub("", body), body


def _arg_values(args: Any) -> list[Any]:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return [args]
    if isinstance(args, dict):
        return [v for v in args.values() if isinstance(v, (str, int, float)) and str(v)]
    return []


# ---------------------------------------------------------------------------------------------- verify

PASS, FAIL, SKIP = "pass", "fail", "skip"

STAGE_SELECTION = "template selection"
STAGE_SCHEMA = "schema in prompt"
STAGE_CALL = "call parsed"
STAGE_RESULT = "result rendered"
STAGE_AGREEMENT = "engine agreement"
CORE_STAGES = (STAGE_SELECTION, STAGE_SCHEMA, STAGE_CALL, STAGE_RESULT, STAGE_AGREEMENT)


@dataclass
class Stage:
    name: str
    status: str
    """``pass``, ``fail``, ``skip`` (tool checks may also give ``warn``)."""
    evidence: str
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status != FAIL

    def to_dict(self, with_data: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "status": self.status, "evidence": self.evidence}
        if with_data:
            d["data"] = self.data
        return d


@dataclass
class VerifyResult:
    path: str
    stages: list[Stage]
    template: str | None = None
    """Name of the template llama.cpp used with tools (``default``, ``tool_use``) or ``fallback``."""
    standin: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    load_weights: bool = False
    """True when llama.cpp loaded the real file, False for a stand-in."""

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.stages)

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def to_dict(self, with_data: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "path": self.path,
            "stages": [s.to_dict(with_data) for s in self.stages],
            "ok": self.ok,
            "template": self.template,
            "load_weights": self.load_weights,
        }
        if self.standin is not None:
            d["standin"] = self.standin
        return d


def _excerpt(text: str, at: int = -1, radius: int = 120, limit: int = 400) -> str:
    if at < 0:
        return text if len(text) <= limit else text[: limit // 2] + " … " + text[-limit // 2 :]
    return text[max(0, at - radius) : at + radius]


def llamacpp_date_string() -> str:
    """``date_string`` as llama.cpp passes it to every template (today, ``%d %b %Y``)."""
    return time.strftime("%d %b %Y")


def verify_file(
    path: str | os.PathLike[str],
    *,
    load_weights: bool = False,
    tools: Sequence[Any] | None = None,
    dispatch: Any = None,
    call: str | None = None,
    arguments: dict[str, Any] | None = None,
    max_tool_share: float | None = None,
    session: LlamaCppSession | None = None,
) -> VerifyResult:
    """Run the five llama.cpp stages on ``path`` (and the tool checks of :mod:`gguftpl.toolcheck` when
    ``tools`` is given: :class:`gguftpl.tools.ToolSpec` objects or OpenAI ``tools`` entries). ``session``
    reuses a running one; ``dispatch`` runs the round-trip call (e.g. ``ToolSources.dispatch``)."""
    path = os.fspath(path)
    if session is None:
        _check_regular(path)
    if tools and isinstance(tools[0], Mapping):
        from gguftpl.tools import tools_from_json

        tools = tools_from_json(list(tools), "<tools>")
    t0 = time.perf_counter()
    if session is None:
        bombs = _render_bombs(path)
        if not bombs and tools:
            # the tool stages render the user's tools in llama.cpp: a template may blow up only on those
            from gguftpl.tools import openai_tools

            bombs = _render_bombs(path, tools=openai_tools(tools))
        if bombs:
            return _bomb_result(path, bombs, time.perf_counter() - t0, load_weights)
        try:
            s = LlamaCppSession(path, load_weights=load_weights)
            s.start()
        except LlamaCppLoadError as exc:
            if not any("chat template" in line for line in exc.log):
                raise
            return _rejected_result(path, exc, time.perf_counter() - t0, load_weights)
        with s:
            result = _verify(s, path)
            if tools:
                result.stages.extend(_tool_stages(s, tools, dispatch, call, arguments, max_tool_share))
    else:
        result = _verify(session, path)
        if tools:
            result.stages.extend(_tool_stages(session, tools, dispatch, call, arguments, max_tool_share))
        s = session
    result.timings = {**s.timings, "total_s": time.perf_counter() - t0}
    result.load_weights = s.load_weights
    return result


def _check_regular(path: str) -> None:
    """A missing file, a directory, a FIFO (llama.cpp would block opening it) or a device: one line."""
    from gguftpl.safeio import open_regular

    open_regular(path, what="GGUF file").close()


def _render_bombs(
    path: str,
    messages: list[Message] | None = None,
    tools: list[dict[str, Any]] | None = None,
    also_load: Sequence[str] = (),
) -> list[str]:
    """Templates of ``path`` that transformers' bounded renderer had to stop (time, output size, memory,
    recursion) on ``messages``/``tools`` (default: the probe conversation). llama.cpp renders with no such
    limits, inside this process: such a template would hang, eat the memory, or overflow the C stack and
    kill the process (a self-calling macro, thousands of nested brackets). Rendered with llama.cpp's
    leniencies so a template that only llama.cpp accepts still gets as far as it would there. Then the
    templates llama.cpp will load (default, tool_use and ``also_load``) are loaded in the parse-check child:
    one that hangs or crashes it there is a bomb too."""
    from gguftpl.gguf.reader import read_header
    from gguftpl.templates import probes
    from gguftpl.templates.hfrender import TemplateRenderError, render_hf
    from gguftpl.templates.templateset import load_templateset, sha256_text, special_token_text

    try:
        header = read_header(path)
    except GGUFTplError:
        return []  # the session reports an unreadable file in its own words
    msgs = messages if messages is not None else probes.tools_conversation()
    tl = tools if tools is not None else probes.canary_tools()
    tset = load_templateset(header)
    # llama.cpp passes the file's own bos/eos texts: `bos_token * 10**7` is empty without them, 120 MB with
    bos, eos = special_token_text(tset, "bos"), special_token_text(tset, "eos")
    bombs: list[str] = []
    verdicts: dict[str, str | None] = {}  # by text: a file whose default is its tool_use waited twice
    for name, tpl in tset.templates.items():
        if tpl.text not in verdicts:
            verdicts[tpl.text] = None
            try:
                render_hf(tpl.text, msgs, tl or None, True, bos, eos, lenient=True)
            except TemplateRenderError as exc:
                if exc.kind in ("timeout", "too_large", "memory") or exc.exc_type == "RecursionError":
                    verdicts[tpl.text] = f"transformers' bounded renderer had to stop: {exc}"
        if verdicts[tpl.text] is not None:
            bombs.append(f"{name}: {verdicts[tpl.text]}")
    if bombs:
        return bombs
    # Loading renders the template too, on llama.cpp's own probe inputs (two tools, parallel calls, …) that no
    # conversation of ours reproduces: a template that loops only on those hung this process for good. So the
    # templates llama.cpp will load are first loaded in the parse-check child, bounded in time and memory.
    loaded = {name: tpl.text for name, tpl in tset.templates.items() if name in (*_LOADED, *also_load)}
    verdicts = parse_check(list(loaded.values()), timeout=LOAD_CHECK_TIMEOUT) if loaded else {}
    for name, text in loaded.items():
        error = verdicts.get(sha256_text(text))
        if error and error.startswith(_LLAMACPP_OWN_VERDICTS):
            bombs.append(f"{name}: {error}")
    return bombs


_LOADED = ("default", "tool_use")
"""The templates llama.cpp loads from a GGUF (a file's other named templates stay unread)."""
_LLAMACPP_OWN_VERDICTS = ("llama.cpp crashed", "llama.cpp did not finish")
LOAD_CHECK_TIMEOUT = 20.0
"""Seconds verify and render wait for a template to load in the parse-check child before calling it a hang
(a plain load takes 0.1-0.7 s)."""


def _bomb_result(path: str, bombs: list[str], seconds: float, load_weights: bool = False) -> VerifyResult:
    stages = [
        Stage(
            STAGE_SELECTION,
            FAIL,
            "not run through llama.cpp: "
            + "; ".join(bombs[:3])
            + ". llama.cpp renders without limits, so this template would hang or crash it",
            {"template": "render-bomb", "bombs": bombs},
        )
    ]
    for name in CORE_STAGES[1:]:
        stages.append(Stage(name, SKIP, "not reached: the template is not safe to render in llama.cpp"))
    return VerifyResult(path, stages, template="render-bomb", timings={"total_s": seconds}, load_weights=load_weights)


def _rejected_result(path: str, exc: LlamaCppLoadError, seconds: float, load_weights: bool = False) -> VerifyResult:
    """llama.cpp refuses the file at load because of its chat template: llama-server would exit at startup."""
    errors = [line for line in exc.log if "consider" not in line and "for example" not in line]
    stages = [
        Stage(
            STAGE_SELECTION,
            FAIL,
            "llama.cpp refuses to load this file: it cannot parse a chat template, so llama-server exits at "
            "startup (and a runtime that falls back renders something else): " + " | ".join(errors[:3]),
            {"template": "rejected", "llamacpp_log": exc.log},
        )
    ]
    for name in CORE_STAGES[1:]:
        stages.append(Stage(name, SKIP, "not reached: llama.cpp cannot load the file"))
    return VerifyResult(path, stages, template="rejected", timings={"total_s": seconds}, load_weights=load_weights)


def _tool_stages(
    s: LlamaCppSession,
    tools: Sequence[Any],
    dispatch: Any,
    call: str | None,
    arguments: dict[str, Any] | None,
    max_tool_share: float | None,
) -> list[Stage]:
    from gguftpl import toolcheck

    ctx = None
    if s.path is not None:
        from gguftpl.gguf.reader import read_header
        from gguftpl.templates.templateset import load_templateset

        ctx = load_templateset(read_header(s.path)).context_length
    kw: dict[str, Any] = {}
    if max_tool_share is not None:
        kw["max_share"] = max_tool_share
    res = toolcheck.run_tool_checks(
        s, s, list(tools), dispatch=dispatch, context_length=ctx, call=call, arguments=arguments, **kw
    )
    return [Stage(f"tools: {t.name}", t.status, t.evidence, dict(t.data)) for t in res.stages]


def _file_templates(s: LlamaCppSession) -> dict[str, str]:
    if s.templates is not None:
        return dict(s.templates)
    if s.path is None:
        return {}
    from gguftpl.gguf.reader import read_header
    from gguftpl.templates.templateset import load_templateset

    return {n: t.text for n, t in load_templateset(read_header(s.path)).templates.items()}


def verify_session(s: LlamaCppSession, label: str | None = None) -> VerifyResult:
    """The five stages on a running session (its file, or its bare templates)."""
    return _verify(s, label or s.path or "<templates>")


def _verify(s: LlamaCppSession, path: str) -> VerifyResult:
    from gguftpl.templates import probes

    file_templates = _file_templates(s)
    tools = probes.canary_tools()
    msgs = probes.tools_conversation()
    stages: list[Stage] = []
    result = VerifyResult(path, stages)
    if s.standin is not None:
        result.standin = {
            "vocab": s.standin.vocab,
            "n_vocab": s.standin.n_vocab,
            "added_tokens": s.standin.added_tokens,
            "notes": s.standin.notes,
        }

    # 1. which template llama.cpp uses with tools, and what its capability probe says
    name, text = s.template_for(tools)
    caps = s.caps
    caps_txt = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in sorted(caps.items()))
    from gguftpl.templates.templateset import sha256_text

    if s.chat_template is not None:
        src = "the --chat-template override"
    elif name == "tool_use":
        src = "tokenizer.chat_template.tool_use (llama.cpp uses it for every request with tools)"
    elif "default" in file_templates:
        src = "tokenizer.chat_template" + (
            "; the file has no tool_use template" if "tool_use" not in file_templates else ""
        )
    else:
        src = None
    data1 = {"template": name, "sha256": sha256_text(text), "caps": caps, "file_templates": sorted(file_templates)}
    if src is None:
        result.template = "fallback"
        stages.append(
            Stage(
                STAGE_SELECTION,
                FAIL,
                "the file has no chat template: llama.cpp silently falls back to its built-in ChatML "
                f"({len(text)} bytes, sha256 {sha256_text(text)[:12]}); capabilities: {caps_txt}",
                {**data1, "template": "fallback", "fallback_text": text},
            )
        )
    else:
        result.template = name
        stages.append(Stage(STAGE_SELECTION, PASS, f"llama.cpp uses {src}; capabilities: {caps_txt}", data1))

    # 2. the canary's name and parameter description reach llama.cpp's prompt
    prompt: str | None = None
    try:
        prompt = s.apply_template(msgs, tools)
    except LlamaCppError as exc:
        stages.append(Stage(STAGE_SCHEMA, FAIL, f"llama.cpp cannot render the tools request: {exc}"))
    if prompt is not None:
        has_name = probes.CANARY_TOOL_NAME in prompt
        has_desc = probes.CANARY_PARAM_TOKEN in prompt
        data2 = {"prompt": prompt, "name_found": has_name, "description_found": has_desc}
        if has_name and has_desc:
            at = prompt.find(probes.CANARY_PARAM_TOKEN)
            line = prompt.count("\n", 0, at) + 1
            stages.append(
                Stage(
                    STAGE_SCHEMA,
                    PASS,
                    f"the canary tool {probes.CANARY_TOOL_NAME!r} and its parameter description are in the "
                    f"prompt (line {line}): …{_excerpt(prompt, at, 60)}…",
                    data2,
                )
            )
        else:
            missing = [w for w, ok in (("name", has_name), ("parameter description", has_desc)) if not ok]
            stages.append(
                Stage(
                    STAGE_SCHEMA,
                    FAIL,
                    f"llama.cpp dropped the tools: the canary's {' and '.join(missing)} never reach the prompt "
                    f"(supports_tools={caps.get('supports_tools')}); prompt: {_excerpt(prompt)!r}",
                    data2,
                )
            )

    # 3. a call written in the template's own dialect is parsed back by llama.cpp
    call = probes.tool_call()
    stage3, ct = _call_stage(s, msgs, tools, call)
    stages.append(stage3)

    # 4. the tool result comes back in the next turn's prompt
    round_trip = [*msgs, {"role": "assistant", "content": "" if not ct.content_none else None, "tool_calls": [call]}]
    round_trip.append(probes.tool_result_message())
    rt_prompt: str | None = None
    try:
        rt_prompt = s.apply_template(round_trip, tools)
    except LlamaCppError as exc:
        stages.append(Stage(STAGE_RESULT, FAIL, f"llama.cpp cannot render the tool-result turn: {exc}"))
    if rt_prompt is not None:
        at = rt_prompt.find(probes.CANARY_RESULT)
        if at >= 0:
            stages.append(
                Stage(
                    STAGE_RESULT,
                    PASS,
                    f"the tool result {probes.CANARY_RESULT!r} is in the second-turn prompt: "
                    f"…{_excerpt(rt_prompt, at, 80)}…",
                    {"prompt": rt_prompt},
                )
            )
        else:
            stages.append(
                Stage(
                    STAGE_RESULT,
                    FAIL,
                    f"the tool result never reaches the second-turn prompt: {_excerpt(rt_prompt)!r}",
                    {"prompt": rt_prompt},
                )
            )

    # 5. llama.cpp's prompt equals the Hugging Face-semantics prompt for the same requests
    stages.append(
        _agreement_stage(s, text, [("tools request", msgs, prompt), ("tool round trip", round_trip, rt_prompt)], tools)
    )
    return result


def _call_stage(
    s: LlamaCppSession, msgs: list[Message], tools: list[dict[str, Any]], call: dict[str, Any]
) -> tuple[Stage, CallText]:
    """Stage 3: cut the call out of llama.cpp's render of history, prefill it, let llama.cpp parse it."""

    fn = call["function"]
    expected_args = fn["arguments"]
    try:
        ct = call_text_from_template(s, msgs, tools, call)
    except LlamaCppError as exc:
        return Stage(STAGE_CALL, FAIL, f"llama.cpp cannot render a conversation with a tool call: {exc}"), CallText("")
    data: dict[str, Any] = {"call_text": ct.text, "content_none": ct.content_none}
    if ct.call_id:
        data["call_id"] = ct.call_id
    # text of the turn that carries neither the name nor an argument is the turn's own scaffolding
    # ('ASSISTANT: ', '[TOOL_CALLS]'), not a call written without its name
    call_written = fn["name"] in ct.text or any(str(v) in ct.text for v in _arg_values(expected_args))
    if ct.text.strip() and fn["name"] not in ct.text and call_written:
        return (
            Stage(
                STAGE_CALL,
                FAIL,
                f"the template writes the call without the function's name ({ct.text!r}), so a model's call "
                "cannot say which tool it calls",
                data,
            ),
            ct,
        )
    if not call_written:
        shown = f"the turn renders as {ct.text!r}" if ct.text.strip() else f"inserted text: {ct.text!r}"
        return (
            Stage(
                STAGE_CALL,
                FAIL,
                "the template writes no text for an assistant tool call (neither the function's name nor its "
                f"arguments; {shown}), so there is no call format for llama.cpp to parse",
                data,
            ),
            ct,
        )
    also = (
        f" (history writes the call as {ct.history_text!r}, which llama.cpp does not parse: the model's own turn "
        "differs)"
        if ct.history_text
        else ""
    )
    if ct.call_id:
        also += (
            f" (the template writes the call's id where the name belongs: the name reaches history only when "
            f"ids carry it, as {ct.call_id!r}; with an id like {call.get('id')!r} it is lost)"
        )
    if ct.history_text:
        data["history_text"] = ct.history_text
    first = _parse_call(s, msgs, tools, ct.text)
    attempt = first
    if not _call_matches(first, fn) and ct.text.strip() != ct.text:
        # the whitespace around a turn belongs to the template's layout; a model need not emit it
        attempt = _parse_call(s, msgs, tools, ct.text.strip())
        if _call_matches(attempt, fn):
            data.update(parsed=attempt[0], trimmed=True)
            return (
                Stage(
                    STAGE_CALL,
                    PASS,
                    f"llama.cpp parsed {ct.text.strip()!r} into {fn['name']}({json.dumps(attempt[1])}) (the call "
                    f"as the template writes it, {ct.text!r}, parses only without its surrounding whitespace){also}",
                    data,
                ),
                ct,
            )
        attempt = first
    parsed, args, error = attempt
    if error is not None:
        return Stage(STAGE_CALL, FAIL, f"llama.cpp's parser rejected {ct.text!r}: {error}", data), ct
    assert parsed is not None
    data["parsed"] = parsed
    got = [(c.get("function") or {}) for c in parsed.get("tool_calls") or []]
    if _call_matches(attempt, fn):
        return (
            Stage(STAGE_CALL, PASS, f"llama.cpp parsed {ct.text!r} into {fn['name']}({json.dumps(args)}){also}", data),
            ct,
        )
    if not got:
        content = str(parsed.get("content") or "")
        reasoning = str(parsed.get("reasoning_content") or "")
        # llama.cpp may read the call as the model's reasoning (a template whose reasoning turn and call
        # turn open alike): say where the call went, not only what was left as content
        where = (
            f"it took the call as reasoning ({reasoning!r}) and left content {content!r}"
            if fn["name"] in reasoning
            else f"it came back as content {content!r}"
        )
        return (
            Stage(STAGE_CALL, FAIL, f"llama.cpp parsed no tool call from {ct.text!r}; {where}", data),
            ct,
        )
    return (
        Stage(
            STAGE_CALL,
            FAIL,
            f"llama.cpp parsed {ct.text!r} into {json.dumps(got)}, expected one call "
            f"{fn['name']}({json.dumps(expected_args)})",
            data,
        ),
        ct,
    )


_Parse = tuple[Any, Any, Any]
"""(parsed message or None, its first call's arguments, error or None)."""


def _parse_call(s: LlamaCppSession, msgs: list[Message], tools: list[dict[str, Any]], text: str) -> _Parse:
    try:
        parsed = s.parse_completion(msgs, tools, text)
    except LlamaCppError as exc:
        return None, None, exc
    calls = parsed.get("tool_calls") or []
    args: Any = None
    if calls:
        raw = (calls[0].get("function") or {}).get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            args = raw
    return parsed, args, None


def _call_matches(attempt: _Parse, fn: dict[str, Any]) -> bool:
    parsed, args, error = attempt
    if error is not None or parsed is None:
        return False
    calls = parsed.get("tool_calls") or []
    return len(calls) == 1 and (calls[0].get("function") or {}).get("name") == fn["name"] and args == fn["arguments"]


@dataclass
class Agreement:
    identical: bool
    normalised: list[str]
    """What was normalised before comparing (see :func:`compare_engines`)."""
    hf_prompt: str | None
    llama_prompt: str
    first_difference: int | None = None
    hf_error: str | None = None


def first_difference(a: str, b: str) -> int | None:
    if a == b:
        return None
    return _common_prefix(a, b)


def compare_engines(
    s: LlamaCppSession,
    template_text: str,
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    llama_prompt: str | None = None,
) -> Agreement:
    """Render the same request with llama.cpp and with Hugging Face semantics (``render_hf``) and compare.

    Normalised, and only this: (1) HF gets the variables llama.cpp passes to every template — the same
    ``bos_token``/``eos_token`` strings llama.cpp reports, ``date_string`` (today, ``%d %b %Y``) and
    ``enable_thinking`` (llama.cpp's value is not reported: both ``false`` and ``true`` are tried, and the
    one used is named); (2) llama.cpp drops a leading BOS text from the prompt (it adds BOS as a token),
    so a leading ``bos_token`` is removed from the HF prompt when llama.cpp's does not start with it;
    (3) when the prompts still differ and the template prints the clock (``strftime_now`` with a format
    whose text changes within the last minutes, e.g. ``%H:%M:%S``), every text that format gives for an
    instant of that window is masked in both prompts: the engines rendered at different seconds.
    """
    from gguftpl.templates.hfrender import TemplateRenderError, render_hf

    window_end = time.time()
    if llama_prompt is None:
        llama_prompt = s.apply_template(messages, tools)
    bos, eos = s.bos_token, s.eos_token
    best: Agreement | None = None
    for thinking in (False, True):
        norm = [f"date_string={llamacpp_date_string()!r}", f"enable_thinking={str(thinking).lower()}"]
        try:
            hf = render_hf(
                template_text,
                messages,
                tools=tools,
                add_generation_prompt=True,
                bos_token=bos,
                eos_token=eos,
                date_string=llamacpp_date_string(),
                enable_thinking=thinking,
            )
        except TemplateRenderError as exc:
            return Agreement(False, norm, None, llama_prompt, None, str(exc))
        if bos and hf.startswith(bos) and not llama_prompt.startswith(bos):
            hf = hf[len(bos) :]
            norm.append("leading bos_token removed from the HF prompt")
        lp = llama_prompt
        if hf != lp:
            masked = _mask_clock(template_text, [hf, lp], window_end - CLOCK_WINDOW_S, time.time() + 2)
            if masked is not None:
                (hf, lp), formats = masked
                norm.append(f"clock text of strftime_now({', '.join(map(repr, formats))}) masked")
        ag = Agreement(hf == lp, norm, hf, lp, first_difference(hf, lp))
        if ag.identical:
            return ag
        if best is None or (ag.first_difference or 0) > (best.first_difference or 0):
            best = ag
    assert best is not None
    return best


CLOCK_WINDOW_S = 600
"""How far back ``compare_engines`` looks for the instant llama.cpp rendered a prompt it was handed."""


def _mask_clock(template_text: str, prompts: list[str], start: float, end: float) -> tuple[list[str], list[str]] | None:
    """``prompts`` with every text of a clock-dependent ``strftime_now(FORMAT)`` call of the template (a
    constant FORMAT whose output changes between ``start`` and ``end``) replaced by ``<strftime_now(FORMAT)>``,
    and those formats; None when the template prints no such clock text or none of it is in the prompts."""
    from jinja2 import TemplateSyntaxError

    from gguftpl.templates.static import strftime_formats

    try:
        formats = strftime_formats(template_text)
    except (TemplateSyntaxError, RecursionError):  # a template jinja2 cannot parse: nothing to mask
        return None
    out = list(prompts)
    used: list[str] = []
    for fmt in formats:
        texts: set[str] = set()
        t = int(start)
        while t <= end:
            texts.add(time.strftime(fmt, time.localtime(t)))
            t += 1
        if len(texts) < 2:
            continue  # a date-only format: both engines print the same text
        mask = f"<strftime_now({fmt!r})>"
        hit = False
        for text in sorted((x for x in texts if x.strip()), key=len, reverse=True):
            if any(text in p for p in out):
                hit = True
                out = [p.replace(text, mask) for p in out]
        if hit:
            used.append(fmt)
    return (out, used) if used else None


def _agreement_stage(
    s: LlamaCppSession,
    template_text: str,
    requests: list[tuple[str, list[Message], str | None]],
    tools: list[dict[str, Any]],
) -> Stage:
    checked: list[dict[str, Any]] = []
    for label, msgs, lp in requests:
        if lp is None:
            continue
        ag = compare_engines(s, template_text, msgs, tools, lp)
        entry = {"request": label, "identical": ag.identical, "normalised": ag.normalised}
        if ag.hf_error is not None:
            entry["hf_error"] = ag.hf_error
            return Stage(
                STAGE_AGREEMENT,
                FAIL,
                f"{label}: llama.cpp renders it, transformers (HF semantics) cannot: {ag.hf_error}",
                {"requests": [*checked, entry]},
            )
        if not ag.identical:
            at = ag.first_difference or 0
            assert ag.hf_prompt is not None
            line = ag.llama_prompt.count("\n", 0, at) + 1
            entry.update(first_difference=at, llama=ag.llama_prompt[at : at + 80], hf=ag.hf_prompt[at : at + 80])
            return Stage(
                STAGE_AGREEMENT,
                FAIL,
                f"{label}: the prompts differ from character {at} (line {line}): llama.cpp "
                f"{ag.llama_prompt[max(0, at - 20) : at + 60]!r} vs HF {ag.hf_prompt[max(0, at - 20) : at + 60]!r} "
                f"(normalised: {'; '.join(ag.normalised)})",
                {"requests": [*checked, entry], "llama_prompt": ag.llama_prompt, "hf_prompt": ag.hf_prompt},
            )
        checked.append(entry)
    if not checked:
        return Stage(STAGE_AGREEMENT, SKIP, "llama.cpp rendered no request to compare")
    return Stage(
        STAGE_AGREEMENT,
        PASS,
        "llama.cpp and transformers (HF semantics) render byte-identical prompts for "
        + " and ".join(c["request"] for c in checked)
        + f" (normalised: {'; '.join(checked[0]['normalised'])})",
        {"requests": checked},
    )


# ---------------------------------------------------------------------------------------------- render

DEFAULT_MESSAGES: list[Message] = [
    {"role": "system", "content": "You are a helpful assistant with access to tools."},
    {"role": "user", "content": "What is the weather in Paris right now, in Celsius?"},
]
"""The sample conversation (``samples/conversation.json``; a test keeps the two equal)."""
DEFAULT_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "Name of the city, e.g. Paris."},
                    "unit": {
                        "type": "string",
                        "enum": ["celsius", "fahrenheit"],
                        "description": "Temperature unit to report in.",
                    },
                },
                "required": ["city"],
            },
        },
    }
]
"""The sample tool (``samples/tools.json``)."""

ENGINES = ("hf", "llamacpp")


def load_messages_file(path: str | os.PathLike[str]) -> list[Message]:
    """A conversation file: a list of messages, or an object with a ``messages`` list."""
    from gguftpl.safeio import read_json_file

    data = read_json_file(path, what="conversation file")  # FIFOs, huge or deeply nested files: one line
    msgs = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) and "role" in m for m in msgs):
        raise UsageError(f"{os.fspath(path)}: expected a list of messages with a 'role' (or {{'messages': [...]}})")
    return msgs


@dataclass(frozen=True)
class ToolSpan:
    """Where one piece of a tool definition landed in a rendered prompt."""

    tool: str
    kind: str
    """``name``, ``description``, ``property`` or ``property-description``."""
    text: str
    start: int
    """Character offset in the prompt (-1: not found)."""
    line: int
    """1-based line (0: not found)."""

    @property
    def found(self) -> bool:
        return self.start >= 0


def locate_tools(prompt: str, tools: Sequence[dict[str, Any]]) -> list[ToolSpan]:
    """Find each tool's name, description and parameter names/descriptions in ``prompt``."""
    from gguftpl.toolcheck import schema_items
    from gguftpl.tools import tools_from_json

    spans: list[ToolSpan] = []
    for spec in tools_from_json(list(tools), "<tools>"):
        for item in schema_items(spec):
            at = prompt.find(item.text)
            if at < 0 and item.kind.endswith("description"):
                # json.dumps escapes quotes and non-ASCII: look for the escaped form too
                esc = json.dumps(item.text)[1:-1]
                at = prompt.find(esc)
                text = esc if at >= 0 else item.text
            else:
                text = item.text
            line = prompt.count("\n", 0, at) + 1 if at >= 0 else 0
            spans.append(ToolSpan(spec.name, item.kind, text, at, line))
    return spans


@dataclass
class RenderResult:
    prompt: str
    engine: str
    template: str
    """Template name (``default``, ``tool_use``, …, ``fallback``, or ``override``)."""
    tools: list[dict[str, Any]]
    spans: list[ToolSpan]
    notes: list[str] = field(default_factory=list)


def select_template(templates: Mapping[str, str], tools: Sequence[Any] | None, name: str | None) -> str | None:
    """The template name llama.cpp would render a request with: ``tool_use`` when the request has tools
    and the file has one, else ``default``; an explicit ``name`` wins. None: the file has none."""
    if name is not None:
        if name not in templates:
            have = ", ".join(sorted(templates)) or "none"
            raise UsageError(f"--template {name}: the file has no such template (has: {have})")
        return name
    if tools and "tool_use" in templates:
        return "tool_use"
    return "default" if "default" in templates else None


def render_prompt(
    path: str | os.PathLike[str],
    *,
    engine: str = "hf",
    template: str | None = None,
    messages: list[Message] | None = None,
    tools: list[dict[str, Any]] | None = None,
    load_weights: bool = False,
    add_generation_prompt: bool = True,
) -> RenderResult:
    """The exact prompt an engine renders for ``messages`` and ``tools`` (defaults: the sample ones).

    ``hf``: transformers semantics (``render_hf``) on the template llama.cpp would choose (or ``template``),
    with the file's BOS/EOS texts. ``llamacpp``: llama.cpp's own engine (``/apply-template``) on a stand-in
    (or the real file with ``load_weights``); ``template`` is passed as a ``--chat-template`` override.
    """
    from gguftpl.gguf.reader import read_header
    from gguftpl.templates.templateset import load_templateset, special_token_text

    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")
    path = os.fspath(path)
    _check_regular(path)
    msgs = list(messages if messages is not None else DEFAULT_MESSAGES)
    tl = list(tools if tools is not None else DEFAULT_TOOLS)
    tset = load_templateset(read_header(path))
    texts = {n: t.text for n, t in tset.templates.items()}
    name = select_template(texts, tl, template)
    notes: list[str] = []
    if engine == "hf":
        from gguftpl.errors import TemplateError
        from gguftpl.templates.hfrender import render_hf

        if name is None:
            raise TemplateError(
                f"{path} has no chat template: transformers refuses to render; llama.cpp silently falls back "
                "to ChatML (see it with --engine llamacpp)"
            )
        prompt = render_hf(
            texts[name],
            msgs,
            tools=tl or None,
            add_generation_prompt=add_generation_prompt,
            bos_token=special_token_text(tset, "bos"),
            eos_token=special_token_text(tset, "eos"),
        )
        used = name
    else:
        override = texts[name] if template is not None and name is not None else None
        bombs = _render_bombs(path, msgs, tl, also_load=[name] if override is not None and name else [])
        if bombs:
            from gguftpl.errors import TemplateError

            raise TemplateError(
                "not rendered in llama.cpp, which has no time, size or recursion limits: " + "; ".join(bombs[:3])
            )
        with LlamaCppSession(path, load_weights=load_weights, chat_template=override) as s:
            prompt = s.apply_template(msgs, tl or None, add_generation_prompt=add_generation_prompt)
            used, _ = s.template_for(tl)
            if override is not None:
                used = name or "override"
            elif not texts:
                used = "fallback"
                notes.append("the file has no chat template: llama.cpp rendered with its built-in ChatML fallback")
            if tl and not s.caps.get("supports_tools"):
                notes.append("llama.cpp's capability probe: supports_tools=false (it drops the tools)")
    return RenderResult(prompt, engine, used, tl, locate_tools(prompt, tl) if tl else [], notes)


# ----------------------------------------------------------------------------------------------- bench


def bench_verify(path: str | os.PathLike[str], *, load_weights: bool = False) -> dict[str, Any]:
    """Time and peak memory of one ``verify_file`` run in a fresh process (so peak RSS is this run's).

    Returns ``{"path", "load_weights", "seconds", "peak_rss_mib", "ok", "stages"}``; used by scripts/bench.py.
    """
    import subprocess
    import sys

    code = (
        "import json, resource, sys, time\n"
        "from gguftpl.llamacpp import verify_file\n"
        "t = time.perf_counter()\n"
        "r = verify_file(sys.argv[1], load_weights=sys.argv[2] == '1')\n"
        "dt = time.perf_counter() - t\n"
        "rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
        "print(json.dumps({'seconds': dt, 'peak_rss_mib': rss, 'ok': r.ok, "
        "'stages': [s.status for s in r.stages], 'timings': r.timings}))\n"
    )
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error"}
    proc = subprocess.run(
        [sys.executable, "-c", code, os.fspath(path), "1" if load_weights else "0"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise LlamaCppError(f"bench run failed: {proc.stderr.strip().splitlines()[-1:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"path": os.fspath(path), "load_weights": load_weights, **res}


# -------------------------------------------------------------------------------------------- findings

_STAGE_RULES = {
    STAGE_SELECTION: "LLAMACPP_CHATML_FALLBACK",
    STAGE_SCHEMA: "LLAMACPP_TOOLS_DROPPED",
    STAGE_CALL: "LLAMACPP_CALL_NOT_PARSED",
    STAGE_RESULT: "LLAMACPP_RESULT_NOT_RENDERED",
    STAGE_AGREEMENT: "LLAMACPP_HF_MISMATCH",
}


def findings_from_result(result: VerifyResult, label: str | None = None, upstream_repo: str | None = None) -> list[Any]:
    """Failed core stages as GT6xx findings (tool-check stages are not findings)."""
    import shlex

    from gguftpl import rules
    from gguftpl.findings import Location, make_finding
    from gguftpl.templates.templateset import template_key

    label = label or result.path
    out = []
    for st in result.stages:
        if st.status != FAIL or st.name not in _STAGE_RULES:
            continue
        rule = getattr(rules, _STAGE_RULES[st.name])
        if st.name == STAGE_SELECTION and result.template == "rejected":
            rule = rules.LLAMACPP_TEMPLATE_REJECTED
        if st.name == STAGE_SELECTION and result.template == "render-bomb":
            rule = rules.LLAMACPP_RENDER_BOMB
        tname = result.template if result.template not in (None, "fallback", "rejected", "render-bomb") else None
        loc = Location(file=label, key=template_key(tname) if tname else None)
        fix = (
            f"gguftpl patch {shlex.quote(label)} --from-hub {upstream_repo or 'REPO'} -o FIXED.gguf"
            " && gguftpl verify FIXED.gguf"
        )
        out.append(
            make_finding(
                rule,
                f"llama.cpp verification, stage {st.name!r}: {st.evidence.splitlines()[0][:300]}",
                loc,
                template=tname,
                evidence=st.evidence[:1200],
                fix=fix if rule.code != "GT604" else None,
                stage=st.name,
            )
        )
    return out


def llamacpp_findings(
    path: str | os.PathLike[str],
    label: str | None = None,
    *,
    load_weights: bool = False,
    upstream_repo: str | None = None,
) -> list[Any]:
    """``audit --engine llamacpp``: run :func:`verify_file` and turn failed stages 1–5 into GT6xx findings
    located at ``label`` (default: the path). Raises LlamaCppError when xllamacpp is missing."""
    result = verify_file(path, load_weights=load_weights)
    return findings_from_result(result, label or os.fspath(path), upstream_repo)


# --- parse check: can llama.cpp load this template text at all? ---------------------------------------

PARSE_CHECK_TIMEOUT = 60.0
"""Seconds one template may take to load in the parse-check worker (a plain load takes 0.1-0.7 s); past it
the worker is killed and the template reported as hanging llama.cpp."""

_PARSE_N_CTX = 512  # the stand-in only has to load; a small KV cache loads faster


def _template_rejection(log: Sequence[str]) -> str:
    """llama.cpp's own words for why it refused a template, without its generic advice lines."""
    keep = [line for line in log if "consider" not in line and "for example" not in line]
    keep = [line for line in keep if "exiting due to" not in line and "failed to initialize" not in line]
    specific = [line for line in keep if not line.endswith("std::exception")]
    keep = specific or keep
    return " | ".join(keep[:3]) or " | ".join(log[:3])


def _parse_one(text: str) -> dict[str, Any]:
    """In the worker: load a byte-level stand-in whose default template is ``text``. Loading is where
    llama-server fails ("chat template parsing error"): llama.cpp parses the template and renders it to
    probe its capabilities and build its tool-call parser."""
    try:
        with LlamaCppSession(templates={"default": text}, n_ctx=_PARSE_N_CTX):
            return {"error": None}
    except LlamaCppLoadError as exc:
        if any("chat template" in line for line in exc.log):
            return {"error": _template_rejection(exc.log), "log": exc.log[:20]}
        return {"unchecked": str(exc)}
    except Exception as exc:  # noqa: BLE001 - any other failure: this text could not be checked
        return {"unchecked": f"{type(exc).__name__}: {exc}"}


def _memory_bounded(load: Any, text: str) -> dict[str, Any]:
    """``load(text)``, judged by how far it raised this process's peak memory: llama.cpp swallows the
    std::bad_alloc of its load-time render under the address-space cap and loads anyway, and the caller,
    which renders without the cap, would then take all of the machine's memory."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    answer = load(text)
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024  # KiB on Linux
    if grew > _PARSE_MEMORY_HEADROOM // 2:
        return {
            "error": f"llama.cpp did not finish loading this template within {_PARSE_MEMORY_HEADROOM >> 30} GiB "
            "of memory (it renders the template at load without limits): llama-server would exhaust the "
            "memory at startup",
            "restart": True,
        }
    return dict(answer)


def _parse_worker() -> None:
    """The parse-check child process: one JSON request per line on stdin, one answer per line on the
    original stdout. llama.cpp's own prints go to stderr (its fd 1 is pointed there), never into the
    protocol. Exits when stdin closes (the audit finished or died)."""
    import sys

    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _cap_address_space(_PARSE_MEMORY_HEADROOM)
    for line in sys.stdin:
        try:
            text = json.loads(line)["text"]
        except (ValueError, KeyError, TypeError) as exc:
            answer: dict[str, Any] = {"unchecked": f"bad request: {exc}"}
        else:
            answer = _memory_bounded(_parse_one, text)
        out.write(json.dumps(answer) + "\n")
        out.flush()
        if answer.get("restart"):
            break  # its peak memory stays high: a fresh worker measures the next template


_PARSE_MEMORY_HEADROOM = 1 << 30
"""Bytes of address space the parse-check child may grow by after its imports: a stand-in load needs tens of
MB, a template that renders gigabytes at load grew it by 24 GB in 100 s (the machine's memory, not ours)."""


def _cap_address_space(headroom: int) -> None:
    from gguftpl.safeio import cap_address_space

    try:
        import xllamacpp  # noqa: F401 - its libraries count as the start, not as growth
    except ImportError:
        return  # as before: no xllamacpp, no llama.cpp to bound
    cap_address_space(headroom)


def _signal_name(code: int) -> str:
    import signal

    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class _ParseChecker:
    """One child process for every parse check of this process, started on first use and reused.

    llama.cpp renders the template while loading it (capability probe, tool-call parser generation), with
    no limits: a self-calling macro or deeply nested brackets overflow its C stack and kill the process
    (SIGSEGV, measured), a huge loop never returns. In a child, that costs a restart and becomes the
    template's verdict, never the audit's crash or hang. Answers are memoised by sha256 of the text."""

    def __init__(self) -> None:
        import threading

        self._proc: Any = None
        self._buf = b""
        self._eof = False
        self._lock = threading.Lock()
        self.memo: dict[str, str | None] = {}
        self.loads = 0
        """Template texts sent to llama.cpp (memo hits not counted)."""
        self.restarts = 0
        """Workers started after one crashed or hung."""
        self.unchecked: dict[str, str] = {}
        """sha256 -> why that text could not be checked (not a verdict about the template)."""
        self._tmp: str | None = None

    def _start(self) -> Any:
        import subprocess
        import sys

        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._proc is not None:
            self.restarts += 1
        self._buf = b""
        # the worker's stand-ins go in a folder of ours: a worker killed for hanging (or crashed) cannot remove
        # its own, and each one left a 300 KB folder in /tmp
        self._remove_tmp()
        self._tmp = tempfile.mkdtemp(prefix="gguftpl-parse-check-")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", "from gguftpl.llamacpp import _parse_worker; _parse_worker()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "GGUFTPL_LLAMACPP_VERBOSITY": "0", "TMPDIR": self._tmp},
        )
        return self._proc

    def _remove_tmp(self) -> None:
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    def _readline(self, proc: Any, timeout: float) -> bytes | None:
        """One answer line; None on timeout (``self._eof`` False) or when the worker died (True)."""
        import select

        self._eof = False

        deadline = time.monotonic() + timeout
        fd = proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                self._eof = True  # the worker died
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _kill(self) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
        code = proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        self._remove_tmp()
        self._proc = proc  # kept so the next start counts as a restart
        return code

    def _ask(self, text: str, timeout: float) -> dict[str, Any]:
        proc = self._start()
        try:
            proc.stdin.write((json.dumps({"text": text}) + "\n").encode())
            proc.stdin.flush()
        except OSError:
            pass  # a dead worker: the read below sees EOF
        line = self._readline(proc, timeout)
        if line is not None:
            try:
                answer = dict(json.loads(line))
            except ValueError:
                self._kill()
                return {"unchecked": "the parse-check worker answered garbage"}
            if answer.get("restart"):
                self._kill()  # the worker ends itself; wait for it so the next text gets a fresh one
            return answer
        hung = not self._eof
        code = self._kill()
        if hung:
            return {
                "error": f"llama.cpp did not finish loading this template in {timeout:g} s (it renders the "
                "template at load without limits): llama-server would hang at startup"
            }
        if code is not None and code < 0:
            return {
                "error": f"llama.cpp crashed ({_signal_name(code)}) while loading this template (it renders "
                "the template at load without limits): llama-server would crash at startup"
            }
        return {"unchecked": f"the parse-check worker exited ({code}) before answering"}

    def check(self, texts: Sequence[str], timeout: float) -> dict[str, str | None]:
        from gguftpl.templates.templateset import sha256_text

        out: dict[str, str | None] = {}
        with self._lock:
            for text in texts:
                sha = sha256_text(text)
                if sha in out:
                    continue
                if sha not in self.memo and sha not in self.unchecked:
                    self.loads += 1
                    answer = self._ask(text, timeout)
                    if "unchecked" in answer:
                        self.unchecked[sha] = str(answer["unchecked"])
                    else:
                        self.memo[sha] = answer.get("error")
                out[sha] = self.memo.get(sha)
        return out

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            self._remove_tmp()
            return
        try:
            proc.stdin.close()  # the worker's loop ends on EOF
            proc.wait(timeout=5)
        except BaseException:  # noqa: BLE001 - at exit, anything (a Ctrl-C printed a traceback): make sure it is gone
            proc.kill()
            proc.wait()
        finally:
            self._remove_tmp()


_CHECKER: _ParseChecker | None = None


def _parse_checker() -> _ParseChecker:
    global _CHECKER
    if _CHECKER is None:
        import atexit

        _CHECKER = _ParseChecker()
        atexit.register(_CHECKER.close)
    return _CHECKER


def parse_check(texts: Sequence[str], *, timeout: float = PARSE_CHECK_TIMEOUT) -> dict[str, str | None]:
    """sha256 of each text -> llama.cpp's error when it refuses to load that text as a chat template,
    None when it loads it (or the text could not be checked: see :func:`parse_check_stats`).

    Each text is loaded once per process (memoised by sha256) as the template of a tiny byte-level
    stand-in in a child process, so a template that crashes or hangs llama.cpp is a verdict, not a crash
    of the caller. Raises LlamaCppError when xllamacpp is not installed."""
    require_xllamacpp()
    return _parse_checker().check(list(texts), timeout)


def parse_check_prestart() -> None:
    """Start the parse-check worker now, so its start overlaps the caller's own work (no-op without
    xllamacpp or when it runs already)."""
    if llamacpp_available():
        checker = _parse_checker()
        with checker._lock:
            checker._start()


def parse_check_stats() -> dict[str, Any]:
    """How many texts this process sent to llama.cpp, worker restarts, and texts left unchecked."""
    c = _parse_checker()
    return {"loads": c.loads, "restarts": c.restarts, "unchecked": dict(c.unchecked)}
