"""What a template engine's foreign child says, read the same way for every such engine.

``hfjs`` (``@huggingface/jinja`` under Node.js) and ``ollama`` (Go ``text/template`` in a small Go program) run as
children that speak :mod:`gguftpl.worker`'s frames: ``load`` answers ``{"error": null | {...}}``, ``render``
answers one ``[Rendered.to_dict()]`` per item. A worker failure (a bound hit, a child that died, one that
would not start) is turned into the template's :class:`~gguftpl.engines.base.EngineError` here, and a batch of
conversations stops at the first that overran (each further try would cost the whole time limit again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gguftpl import worker
from gguftpl.engines.base import (
    CRASHED,
    OVERRUN,
    RENDER,
    UNAVAILABLE,
    EngineError,
    Rendered,
    not_tried,
    trim_message,
)
from gguftpl.worker import Outcome, Worker


@dataclass(frozen=True)
class ChildEngine:
    """How an engine's messages name it."""

    engine: str
    """The engine itself: ``@huggingface/jinja``, ``Go text/template``."""
    process: str
    """The program that runs it: ``Node.js``, ``the Go program``."""
    worker: str
    """The adapter's id, for an answer that is not the protocol's: ``hfjs``, ``ollama``."""

    def garbage(self) -> EngineError:
        return EngineError(CRASHED, f"the {self.worker} worker answered garbage")

    def failure(self, outcome: Outcome, timeout: float) -> EngineError:
        """What a worker failure means for the template: a bound it hit, or an engine that died or is not here."""
        kind = outcome.kind
        if kind == worker.TIMEOUT:
            return EngineError(OVERRUN, f"{self.engine} took longer than {timeout:g} s and was stopped")
        if kind == worker.MEMORY:
            return EngineError(OVERRUN, trim_message(f"{self.engine} ran out of memory: {outcome.message}"))
        if kind == worker.START:
            return EngineError(UNAVAILABLE, trim_message(outcome.message))
        if kind == worker.ERROR:  # the request was no JSON data, or the worker refused the item's shape
            return EngineError(RENDER, trim_message(f"{self.engine} was not asked: {outcome.message}"))
        why = f" ({outcome.signal})" if outcome.signal else (f" ({outcome.exit_code})" if kind == worker.EXITED else "")
        return EngineError(CRASHED, f"{self.process} running {self.engine} {kind}{why}")

    def engine_error(self, d: Any) -> EngineError:
        """The engine's own error, as the child sent it."""
        if not isinstance(d, Mapping):
            return self.garbage()
        err = EngineError.from_dict(d)
        return EngineError(err.kind, trim_message(err.message), err.line)

    def load(self, w: Worker, template: str, timeout: float) -> EngineError | None:
        """The ``load`` op: None when the engine parses ``template``, else its error."""
        outcome = w.ask("load", template, timeout)
        if not outcome.ok:
            return self.failure(outcome, timeout)
        error = outcome.value.get("error") if isinstance(outcome.value, Mapping) else None
        return self.engine_error(error) if error else None

    def render(self, w: Worker, items: Sequence[Any], timeout: float) -> list[Rendered]:
        """The ``render`` op, one conversation per item under ``timeout``; after one stops the engine, the rest
        are not tried and say why."""
        if not items:
            return []
        out: list[Rendered] = []
        stopped: EngineError | None = None
        for outcome in w.ask_many("render", items, timeout, skip_rest=True):
            if outcome.kind == worker.SKIPPED and stopped is not None:
                out.append(Rendered(None, not_tried(stopped)))
                continue
            rendered = self._rendered(outcome, timeout)
            if not outcome.ok:
                stopped = rendered.error
            out.append(rendered)
        return out

    def _rendered(self, outcome: Outcome, timeout: float) -> Rendered:
        if not outcome.ok:
            return Rendered(None, self.failure(outcome, timeout))
        value = outcome.value
        if not (isinstance(value, list) and len(value) == 1 and isinstance(value[0], Mapping)):
            return Rendered(None, self.garbage())
        answer = value[0]
        error = answer.get("error")
        if error:
            return Rendered(None, self.engine_error(error))
        text = answer.get("text")
        return Rendered(text) if isinstance(text, str) else Rendered(None, self.garbage())
