"""The real weights served by llama.cpp in a bounded child process (``verify --live``).

A real model generates for seconds to minutes inside llama.cpp, where Python cannot interrupt it: in this
process a Ctrl-C would wait for the generation to end and no time limit could be kept. So the weights are
loaded in a child (:mod:`gguftpl.worker`, the one place that starts children) that serves llama.cpp on
127.0.0.1, and this process talks to it over HTTP like any client. A request that overruns its time limit
returns here on time; closing the session (or a Ctrl-C, which closes it on the way out) kills the child and
the generation with it. Every other request is the same as in
:class:`~gguftpl.engines.llamacpp_session.LlamaCppSession`.
"""

from __future__ import annotations

import os
from typing import Any

from gguftpl.engines.llamacpp_session import HTTP_TIMEOUT, LlamaCppLoadError, LlamaCppSession
from gguftpl.errors import LlamaCppError, UsageError

LOAD_TIMEOUT = 900.0
"""Seconds the child may take to load the weights (a 70B file from a cold disk takes minutes)."""

_SERVED: list[LlamaCppSession] = []
"""In the child: the session being served (kept alive between requests)."""


def _worker_spec() -> Any:
    from gguftpl.worker import Op, WorkerSpec

    # no address-space cap: the model's size is the user's choice; time is bounded per request instead
    return WorkerSpec(
        name="llama.cpp model worker",
        ops={"serve": Op("gguftpl.engines.llamacpp_child:serve")},
        setup=("gguftpl.engines.llamacpp_child:preload",),
    )


def preload() -> None:
    """Child setup: import llama.cpp before the first request, so a missing xllamacpp fails the start."""
    from gguftpl.engines.llamacpp_session import require_xllamacpp

    require_xllamacpp()


def serve(item: dict[str, Any]) -> dict[str, Any]:
    """In the child: load ``item["path"]`` with its real weights and serve it; the answer is the server's
    address (or llama.cpp's refusal, with its log)."""
    s = LlamaCppSession(item["path"], load_weights=True, n_ctx=item.get("n_ctx"), n_threads=item.get("n_threads"))
    try:
        s.start()
    except LlamaCppLoadError as exc:
        return {"error": str(exc), "log": exc.log}
    _SERVED.append(s)
    return {"url": s.base_url, "load_s": s.timings.get("load_s", 0.0)}


class ChildSession(LlamaCppSession):
    """A :class:`LlamaCppSession` on the real weights, served from a child process. A context manager."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        load_timeout: float = LOAD_TIMEOUT,
    ) -> None:
        super().__init__(path, load_weights=True, n_ctx=n_ctx, n_threads=n_threads)
        self.load_timeout = load_timeout
        self._worker: Any = None

    def start(self) -> None:
        if self._worker is not None:
            return
        from gguftpl.worker import Worker

        assert self.path is not None
        if not os.path.isfile(self.path):
            raise UsageError(f"no such file: {self.path}")
        self._worker = Worker(_worker_spec())
        try:
            item = {"path": self.path, "n_ctx": self.n_ctx, "n_threads": self.n_threads}
            out = self._worker.ask("serve", item, self.load_timeout)
        except BaseException:
            self.close()
            raise
        if not out.ok:
            self.close()
            raise LlamaCppError(f"llama.cpp could not load {self.path} in its child process: {out.message}")
        answer = out.value
        if "error" in answer:
            self.close()
            raise LlamaCppLoadError(str(answer["error"]), [str(line) for line in answer.get("log") or []])
        self._base = str(answer["url"])
        self._srv = self._worker  # marks the session as running for the requests of the base class
        self._loop_ready = True
        self.timings["load_s"] = float(answer.get("load_s") or 0.0)
        self.timings["child_s"] = out.seconds

    def close(self) -> None:
        """Kill the child (a generation still running ends with it)."""
        worker, self._worker = self._worker, None
        self._srv = None
        if worker is not None:
            worker.close()

    @property
    def child_pid(self) -> int | None:
        return self._worker.pid if self._worker is not None else None

    def chat_completion(self, body: dict[str, Any], timeout: float = HTTP_TIMEOUT) -> dict[str, Any]:
        """``POST /v1/chat/completions``, waiting at most ``timeout`` seconds for the answer."""
        res = self._request("POST", "/v1/chat/completions", body, timeout=timeout)
        if not isinstance(res, dict):
            raise LlamaCppError(f"llama.cpp /v1/chat/completions: unexpected answer {str(res)[:200]}")
        if "error" in res:
            err = res["error"]
            raise LlamaCppError(f"llama.cpp: {err.get('message') if isinstance(err, dict) else err}")
        return res
