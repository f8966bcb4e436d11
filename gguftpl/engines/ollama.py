"""``ollama``: what Ollama does with its Go chat template — Go ``text/template`` with Ollama's functions.

Ollama renders a model's TEMPLATE (for an imported GGUF, the curated Go template ``template.Named`` matched; see
:mod:`gguftpl.engines.ollama_registry`) with ``template/template.go`` @fb30760996871fa9460115c753afd2c60d4ab0f7:
``template.New("").Option("missingkey=zero").Funcs(funcs)`` (``json``, ``currentDate``, ``yesterdayDate``,
``toTypeScriptType``), ``{{ .Response }}`` appended when the template names neither ``.Messages`` nor
``.Response``, and ``Execute`` passing the messages whole (``.Messages``, ``.Tools``, ``.System``) when it names
``.Messages``, else one legacy ``.System``/``.Prompt``/``.Response`` execution per turn with the last cut at
``.Response``. That code, with ``api/types.go``'s types and their JSON and ``String()``, is reproduced in the small
Go program in ``ollama_go/`` (standard library only), built here by :func:`install` with the system's Go: its
``text/template`` is the engine (Ollama's release builds use a newer Go; the package's behaviour on templates has
been stable since 1.18). Requests go through Ollama's OpenAI layer first (:mod:`gguftpl.engines.ollama_request`).

The program runs as one persistent worker (:mod:`gguftpl.worker`'s frames) under RLIMIT_DATA and a soft Go
memory limit, each conversation under the adapter's time limit; output past :data:`MAX_OUTPUT` bytes stops the
render (``overrun``). A template that loops is killed at the deadline (``overrun``); a program that dies is
``crashed`` (Go's own out-of-memory is fatal, so it is ``crashed`` too); the next render gets a fresh worker.
Errors are Go's own text (``template: :3: unexpected "}" in operand``), the line read from it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from gguftpl import worker
from gguftpl.engines.base import (
    RENDER,
    UNAVAILABLE,
    Availability,
    EngineError,
    Rendered,
    RenderRequest,
    trim_message,
    unavailable,
)
from gguftpl.engines.childanswers import ChildEngine
from gguftpl.engines.ollama_build import NAME, OLLAMA_COMMIT, Built, built
from gguftpl.engines.ollama_build import install as _install
from gguftpl.engines.ollama_request import Refused, wire_request
from gguftpl.worker import Op, Worker, WorkerSpec

INSTALL_HINT = "gguftpl engines install ollama"
ENGINE_LABEL = "Go text/template"
CHILD = ChildEngine(ENGINE_LABEL, "the Go program", "ollama")
DEFAULT_TIMEOUT = 5.0
"""Seconds one conversation may take to render (real templates: well under a millisecond)."""
STARTUP_TIMEOUT = 30.0
MAX_OUTPUT = 1 << 20
"""Bytes one prompt may have."""
MEMORY_LIMIT = 1 << 30
"""Go's soft memory limit (``debug.SetMemoryLimit``): the collector works hard before the hard cap is near."""
DATA_LIMIT = 2 << 30
"""Bytes of writable private memory (RLIMIT_DATA) the Go process may hold."""
_OPS = ("load", "render", "version")


def install(timeout: float = 600.0) -> str:
    """Build the Go program into ``engine_dir("ollama")`` (``gguftpl engines install ollama``)."""
    return _install(timeout=timeout)


class OllamaEngine:
    """Go ``text/template`` with Ollama's functions and ``Execute``, as Ollama renders its Go templates."""

    name = NAME

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_output: int = MAX_OUTPUT,
        memory_limit: int = MEMORY_LIMIT,
        data_limit: int = DATA_LIMIT,
    ) -> None:
        self.timeout = timeout
        self.max_output = max_output
        self.memory_limit = memory_limit
        self.data_limit = data_limit

    def availability(self) -> Availability:
        """Installed only when the program built from this gguftpl's source is in ``engine_dir("ollama")``."""
        return self._found()[0]

    def load(self, template: str) -> EngineError | None:
        """None when Ollama's ``template.Parse`` accepts ``template``; else Go's error (``syntax``)."""
        found, program = self._found()
        if program is None:
            return EngineError(UNAVAILABLE, found.unknown_reason())
        return CHILD.load(self._worker(program), template, self.timeout)

    def render(self, template: str, requests: Sequence[RenderRequest]) -> list[Rendered]:
        """One :class:`Rendered` per request, in order. A request Ollama's OpenAI layer refuses is a ``render``
        error with its message; after one conversation overruns, the rest of this template's are not tried."""
        requests = list(requests)
        if not requests:
            return []
        found, program = self._found()
        if program is None:
            return unavailable(found, len(requests))
        out: list[Rendered | None] = []
        items: list[dict[str, Any]] = []
        for req in requests:
            try:
                items.append({"template": template, "requests": [wire_request(req)]})
                out.append(None)
            except Refused as exc:
                out.append(Rendered(None, EngineError(RENDER, trim_message(str(exc)))))
        answers = iter(CHILD.render(self._worker(program), items, self.timeout))
        return [r if r is not None else next(answers) for r in out]

    def template_vars(self, template: str) -> tuple[str, ...] | None:
        """``Template.Vars()`` as Ollama computes it (lowercased identifiers): ``tools`` among them is Ollama's
        tools capability, without which it refuses a tools request. None when it does not load or is not here."""
        _, program = self._found()
        if program is None:
            return None
        outcome = self._worker(program).ask("load", template, self.timeout)
        value = outcome.value if outcome.ok else None
        if isinstance(value, Mapping) and not value.get("error") and isinstance(value.get("vars"), list):
            return tuple(str(v) for v in value["vars"])
        return None

    def version(self) -> dict[str, Any] | None:
        """What the running worker says it is (``{"go", "ollama"}``), or None when not installed or silent."""
        _, program = self._found()
        if program is None:
            return None
        outcome = self._worker(program).ask("version", None, STARTUP_TIMEOUT)
        return dict(outcome.value) if outcome.ok and isinstance(outcome.value, Mapping) else None

    def prestart(self) -> None:
        """Start the worker now without waiting."""
        _, program = self._found()
        if program is not None:
            self._worker(program).prestart()

    def worker(self) -> Worker | None:
        """The shared worker this engine renders in (None when not installed)."""
        _, program = self._found()
        return self._worker(program) if program is not None else None

    # ---------------------------------------------------------------------------------------------- inside

    def _found(self) -> tuple[Availability, Built | None]:
        program = built()
        if isinstance(program, str):
            return Availability(NAME, False, install_hint=INSTALL_HINT, detail=program), None
        version = f"{ENGINE_LABEL} ({program.go_version}), Ollama template funcs @{OLLAMA_COMMIT[:8]}"
        return Availability(NAME, True, version=version, install_hint=INSTALL_HINT), program

    def _worker(self, program: Built) -> Worker:
        return worker.shared(_spec(str(program.binary), self.max_output, self.memory_limit, self.data_limit))


@functools.lru_cache(maxsize=8)
def _spec(binary: str, max_output: int, memory_limit: int, data_limit: int) -> WorkerSpec:
    """One worker per program and bounds (:func:`gguftpl.worker.shared` keeps one per name)."""
    return WorkerSpec(
        f"ollama worker ({binary}, {max_output} bytes, {memory_limit >> 20} MiB)",
        ops={op: Op(f"gguftpl-ollama:{op}") for op in _OPS},
        command=(binary, str(max_output), str(memory_limit)),
        data_limit=data_limit,
        startup_timeout=STARTUP_TIMEOUT,
        env={"GOMAXPROCS": "1", "GOTRACEBACK": "none"},
    )


ENGINE = OllamaEngine()
"""The engine with its default bounds."""
