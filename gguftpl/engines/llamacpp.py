"""The bounded load check: can llama.cpp load this template text at all, and does loading it end?

llama.cpp renders the template while loading it (capability probe, tool-call parser generation), with no
limits: a self-calling macro or deeply nested brackets overflow its C stack and kill the process (SIGSEGV,
measured), a huge loop never returns. So every text is loaded as the template of a tiny byte-level stand-in
in the parse-check child (:mod:`gguftpl.worker`, op ``load``); a crash or hang costs a restart and becomes the
template's verdict, never the caller's crash or hang. Answers are memoised by sha256 of the text.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gguftpl import worker
from gguftpl.worker import Op, Outcome, Worker, WorkerSpec

PARSE_CHECK_TIMEOUT = 60.0
"""Seconds one template may take to load in the parse-check worker (a plain load takes 0.1-0.7 s); past it
the worker is killed and the template reported as hanging llama.cpp."""
_PARSE_N_CTX = 512  # the stand-in only has to load; a small KV cache loads faster
_PARSE_MEMORY_HEADROOM = 1 << 30
"""Bytes of address space the parse-check child may grow by after its imports: a stand-in load needs tens of
MB, a template that renders gigabytes at load grew it by 24 GB in 100 s (the machine's memory, not ours)."""
_CRASHED_OR_HUNG = ("llama.cpp crashed", "llama.cpp did not finish")

SPEC = WorkerSpec(
    "parse-check worker",
    # llama.cpp swallows the std::bad_alloc of its load-time render under the address-space cap and loads
    # anyway; the caller, which renders without the cap, would then take all of the machine's memory: so the
    # child's peak growth is the verdict
    ops={
        "load": Op("gguftpl.engines.llamacpp:_load_op", peak_growth_limit=_PARSE_MEMORY_HEADROOM // 2),
        "apply": Op("gguftpl.engines.llamacpp:_apply_op", peak_growth_limit=_PARSE_MEMORY_HEADROOM // 2),
    },
    setup=("gguftpl.engines.llamacpp:_child_setup",),
    memory_headroom=_PARSE_MEMORY_HEADROOM,
    env={"GGUFTPL_LLAMACPP_VERBOSITY": "0"},
    # the child's stand-ins go in a folder of ours: a child killed for hanging (or crashed) cannot remove its
    # own, and each one left a 300 KB folder in /tmp
    private_tmp="gguftpl-parse-check-",
    # killed at close, not asked to end: the stand-ins are in that folder, which we remove, and waiting for
    # llama.cpp's server threads to end took 70-135 ms of every command's exit
    exit_grace=0.0,
)


def crashed_or_hung(error: str) -> bool:
    """True when a parse-check error says llama.cpp crashed or did not finish (not that it refused the text)."""
    return error.startswith(_CRASHED_OR_HUNG)


def parse_check(texts: Sequence[str], *, timeout: float = PARSE_CHECK_TIMEOUT) -> dict[str, str | None]:
    """sha256 of each text -> llama.cpp's error when it refuses to load that text as a chat template,
    None when it loads it (or the text could not be checked: see :func:`parse_check_stats`).

    Each text is loaded once per process (memoised by sha256) as the template of a tiny byte-level
    stand-in in a child process, so a template that crashes or hangs llama.cpp is a verdict, not a crash
    of the caller. Raises LlamaCppError when xllamacpp is not installed."""
    from gguftpl.engines.llamacpp_session import require_xllamacpp

    require_xllamacpp()
    return _VERDICTS.check(list(texts), timeout)


def parse_check_prestart() -> None:
    """Start the parse-check worker now, so its start overlaps the caller's own work (no-op without
    xllamacpp or when it runs already)."""
    from gguftpl.engines.llamacpp_env import llamacpp_available

    if llamacpp_available():
        parse_check_worker().prestart()


def parse_check_stats() -> dict[str, Any]:
    """How many texts this process sent to llama.cpp, worker restarts, and texts left unchecked."""
    v = _VERDICTS
    return {"loads": v.loads, "restarts": parse_check_worker().stats.restarts, "unchecked": dict(v.unchecked)}


def parse_check_worker() -> Worker:
    """This process's parse-check child (started on first use, closed at exit)."""
    return worker.shared(SPEC)


# ---------------------------------------------------------------------------------------------- parent


RENDER_TIMEOUT = 5.0
"""Seconds llama.cpp may take to render one probe conversation (real templates take milliseconds)."""


@dataclass(frozen=True)
class Probe:
    """One conversation for llama.cpp to render (``POST /apply-template``)."""

    name: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    add_generation_prompt: bool = True


def llamacpp_renders(
    text: str,
    specials: tuple[str, str],
    probes: Sequence[Probe],
    *,
    timeout: float = PARSE_CHECK_TIMEOUT,
    render_timeout: float = RENDER_TIMEOUT,
) -> dict[str, Any]:
    """What llama.cpp does with ``text`` as a file's default template whose BOS and EOS are ``specials``:
    ``{"error": refusal}`` when it will not load it, ``{"unchecked": why}`` when it could not be asked, else
    ``{"error": None, "caps": {...}, "renders": {probe name: {"text": prompt} | {"error": message}}}``. All of
    it in the parse-check child: the load under ``timeout``, each render under ``render_timeout``; after a render
    that overran, the later probes are not rendered (``{"error": …"not rendered"}``)."""
    from gguftpl.engines.llamacpp_env import NOT_INSTALLED, llamacpp_available
    from gguftpl.errors import LlamaCppError
    from gguftpl.gguf.templateset import sha256_text

    if not llamacpp_available():  # only the worker imports xllamacpp
        raise LlamaCppError(NOT_INSTALLED)
    pool = parse_check_worker()
    base = {"text": text, "bos": specials[0], "eos": specials[1]}
    loaded = _answer(pool.ask("load", base, timeout), timeout)
    with _VERDICTS.lock:  # the load verdict is parse_check's too: one load counted, one verdict remembered
        _VERDICTS.loads += 1
        if "unchecked" not in loaded:
            _VERDICTS.memo[sha256_text(text)] = loaded.get("error")
    if loaded.get("error") or "unchecked" in loaded:
        return {k: v for k, v in loaded.items() if k in ("error", "unchecked")}
    items = [
        {**base, "messages": p.messages, "tools": p.tools, "add_generation_prompt": p.add_generation_prompt}
        for p in probes
    ]
    renders: dict[str, Any] = {}
    for probe, outcome in zip(probes, pool.ask_many("apply", items, render_timeout, skip_rest=True), strict=True):
        if outcome.ok and isinstance(outcome.value, dict):
            renders[probe.name] = outcome.value
        elif outcome.kind == worker.TIMEOUT:
            renders[probe.name] = {"error": f"llama.cpp did not finish rendering in {render_timeout:g} s", "overran": 1}
        elif outcome.kind == worker.SKIPPED:
            renders[probe.name] = {"error": "not rendered: an earlier probe overran", "overran": 1}
        else:
            renders[probe.name] = {"error": _answer(outcome, render_timeout).get("error") or outcome.message}
    return {"error": None, "caps": loaded.get("caps") or {}, "specials": loaded.get("specials"), "renders": renders}


@dataclass
class _Verdicts:
    memo: dict[str, str | None] = field(default_factory=dict)
    loads: int = 0
    """Template texts sent to llama.cpp (memo hits not counted)."""
    unchecked: dict[str, str] = field(default_factory=dict)
    """sha256 -> why that text could not be checked (not a verdict about the template)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, texts: list[str], timeout: float) -> dict[str, str | None]:
        from gguftpl.gguf.templateset import sha256_text

        with self.lock:
            todo = {}
            for text in texts:
                sha = sha256_text(text)
                if sha not in self.memo and sha not in self.unchecked:
                    todo[sha] = text
            self.loads += len(todo)
            outcomes = parse_check_worker().ask_many("load", [{"text": t} for t in todo.values()], timeout)
            for sha, outcome in zip(todo, outcomes, strict=True):
                answer = _answer(outcome, timeout)
                if "unchecked" in answer:
                    self.unchecked[sha] = str(answer["unchecked"])
                else:
                    self.memo[sha] = answer.get("error")
            return {sha: self.memo.get(sha) for sha in map(sha256_text, texts)}


_VERDICTS = _Verdicts()


def _answer(outcome: Outcome, timeout: float) -> dict[str, Any]:
    """The child's answer, or the verdict its failure stands for."""
    if outcome.ok and isinstance(outcome.value, dict):
        return outcome.value
    why = "(it renders the template at load without limits)"
    if outcome.kind == worker.TIMEOUT:
        return {
            "error": f"llama.cpp did not finish loading this template in {timeout:g} s {why}: llama-server "
            "would hang at startup"
        }
    if outcome.kind == worker.CRASHED:
        return {
            "error": f"llama.cpp crashed ({outcome.signal}) while loading this template {why}: llama-server "
            "would crash at startup"
        }
    if outcome.kind == worker.MEMORY and outcome.error_type is None:
        return {
            "error": f"llama.cpp did not finish loading this template within {_PARSE_MEMORY_HEADROOM >> 30} GiB "
            f"of memory {why}: llama-server would exhaust the memory at startup"
        }
    if outcome.kind == worker.EXITED:
        return {"unchecked": f"the parse-check worker exited ({outcome.exit_code}) before answering"}
    if outcome.kind == worker.GARBAGE or outcome.ok:
        return {"unchecked": "the parse-check worker answered garbage"}
    return {"unchecked": outcome.message}


# ---------------------------------------------------------------------------------------------- child


def _close_session() -> None:
    global _SESSION
    if _SESSION is not None:
        session, _SESSION = _SESSION[1], None
        session.close()


def _child_setup() -> None:
    import atexit

    atexit.register(_close_session)  # the server's threads end before the interpreter does
    try:
        import xllamacpp  # noqa: F401 - its libraries count as the start, not as growth
    except ImportError:
        pass  # the load answers "unchecked" in its own words


_SESSION: tuple[tuple[str, str, str], Any] | None = None
"""The stand-in loaded last, kept open for the ``apply`` requests that follow its ``load``."""


def _session(item: dict[str, Any]) -> Any:
    """The session serving ``item``'s template (loaded now unless it is the one loaded last)."""
    global _SESSION
    from gguftpl.engines.llamacpp_session import LlamaCppSession

    key = (str(item["text"]), str(item.get("bos") or ""), str(item.get("eos") or ""))
    if _SESSION is not None and _SESSION[0] == key:
        return _SESSION[1]
    if _SESSION is not None:
        old, _SESSION = _SESSION[1], None
        old.close()
    session = LlamaCppSession(templates={"default": key[0]}, specials=(key[1], key[2]), n_ctx=_PARSE_N_CTX)
    session.start()
    _SESSION = (key, session)
    return session


def _load_op(item: dict[str, Any]) -> dict[str, Any]:
    """Load a byte-level stand-in whose default template is ``item["text"]``. Loading is where llama-server
    fails ("chat template parsing error"): llama.cpp parses the template and renders it to probe its
    capabilities and build its tool-call parser. Answers the capabilities it found."""
    from gguftpl.engines.llamacpp_session import LlamaCppLoadError

    try:
        session = _session(item)
        return {"error": None, "caps": session.caps, "specials": [session.bos_token, session.eos_token]}
    except LlamaCppLoadError as exc:
        if any("chat template" in line for line in exc.log):
            return {"error": _template_rejection(exc.log), "log": exc.log[:20]}
        return {"unchecked": str(exc)}
    except Exception as exc:  # noqa: BLE001 - any other failure: this text could not be checked
        return {"unchecked": f"{type(exc).__name__}: {exc}"}


def _apply_op(item: dict[str, Any]) -> dict[str, Any]:
    """The prompt llama.cpp renders for ``item``'s conversation, or its error."""
    from gguftpl.errors import LlamaCppError

    try:
        session = _session(item)
        prompt = session.apply_template(
            item["messages"], item.get("tools"), add_generation_prompt=bool(item.get("add_generation_prompt", True))
        )
    except LlamaCppError as exc:
        return {"error": str(exc)}
    return {"text": prompt}


def _template_rejection(log: Sequence[str]) -> str:
    """llama.cpp's own words for why it refused a template, without its generic advice lines."""
    keep = [line for line in log if "consider" not in line and "for example" not in line]
    keep = [line for line in keep if "exiting due to" not in line and "failed to initialize" not in line]
    specific = [line for line in keep if not line.endswith("std::exception")]
    keep = specific or keep
    return " | ".join(keep[:3]) or " | ".join(log[:3])


# ---------------------------------------------------------------------------------------------- the adapter


class LlamaCppEngine:
    """llama.cpp's own Jinja engine behind :mod:`gguftpl.engines.base`'s interface: the template loaded as a
    stand-in's default (BOS/EOS from the request's variables) and each request rendered by ``/apply-template``,
    all in the bounded parse-check child."""

    name = "llamacpp"

    def availability(self) -> Any:
        from gguftpl.engines.base import Availability
        from gguftpl.engines.llamacpp_env import INSTALL_HINT, llamacpp_available

        if not llamacpp_available():
            return Availability(self.name, False, install_hint=INSTALL_HINT, detail="xllamacpp is not installed")
        from importlib.metadata import PackageNotFoundError, version

        try:
            return Availability(self.name, True, f"xllamacpp {version('xllamacpp')}")
        except PackageNotFoundError:
            return Availability(self.name, True, "xllamacpp")

    def load(self, template: str) -> Any:
        from gguftpl.engines.base import CRASHED, SYNTAX, EngineError

        error = parse_check([template]).get(_sha(template))
        if error is None:
            return None
        return EngineError(CRASHED if crashed_or_hung(error) else SYNTAX, error)

    def render(self, template: str, requests: Sequence[Any]) -> list[Any]:
        from gguftpl.engines.base import OVERRUN, RENDER, SYNTAX, EngineError, Rendered, unavailable

        available = self.availability()
        if not available.installed:
            return unavailable(available, len(requests))
        variables = requests[0].variables if requests else {}
        specials = (str(variables.get("bos_token", "")), str(variables.get("eos_token", "")))
        asked = [
            Probe(str(i), [dict(m) for m in r.messages], _tools(r.tools), r.add_generation_prompt)
            for i, r in enumerate(requests)
        ]
        answer = llamacpp_renders(template, specials, asked)
        if answer.get("error") or answer.get("unchecked"):
            err = EngineError(
                SYNTAX if answer.get("error") else OVERRUN, str(answer.get("error") or answer.get("unchecked"))
            )
            return [Rendered(None, err) for _ in requests]
        out = []
        for i in range(len(requests)):
            r = answer["renders"].get(str(i)) or {}
            if isinstance(r.get("text"), str):
                out.append(Rendered(r["text"]))
            else:
                out.append(Rendered(None, EngineError(OVERRUN if r.get("overran") else RENDER, str(r.get("error")))))
        return out


def _sha(text: str) -> str:
    from gguftpl.gguf.templateset import sha256_text

    return sha256_text(text)


def _tools(tools: Any) -> list[dict[str, Any]] | None:
    return [dict(t) for t in tools] if tools is not None else None


ENGINE = LlamaCppEngine()
