"""minijinja, configured the way each runtime that renders with it configures it (TGI, mistral.rs, Dynamo, ...).

``MinijinjaEngine(config)`` answers :class:`~gguftpl.engines.base.Engine` as ``minijinja/<id>``: it applies the
runtime's string rewrites, builds the runtime's environment (trim/lstrip, pycompat, its ``tojson``, its
functions) in the PyPI binding ``minijinja`` and hands the template what that runtime hands it. Every setting and
its source is in :mod:`gguftpl.engines.minijinja_profiles`; the worker side is
:mod:`gguftpl.engines.minijinja_render`.

Renders run in one persistent worker (:mod:`gguftpl.worker`, ops ``load``, ``render``, ``undeclared``) that
imports the binding before capping its address space. Four bounds hold: minijinja's own ``fuel`` (instructions
per render), the output cap (counted while the render emits, so a loop printing gigabytes stops within
megabytes), the per-item time limit (a render that outlives it kills the worker), and the address-space cap (a
template that builds a huge string makes the Rust allocator abort the worker: ``crashed``). The next request gets
a fresh worker; the later conversations of a template one of them stopped are not tried.

What is not modelled here but by the runtime's profile: how the runtime reshapes messages and tools before the
template (TGI flattens messages and appends a tool prompt: :func:`~gguftpl.engines.minijinja_profiles.
tgi_tool_prompt_applied`; mistral.rs parses tool-call arguments to maps and rewrites Gemma-4 tool turns; Dynamo
parses tool-call arguments and fills an empty ``parameters``), which named template it picks, and what it does
with the rendered text afterwards (TGI trims a trailing assistant turn).
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from gguftpl import worker
from gguftpl.engines.base import (
    CRASHED,
    OVERRUN,
    RENDER,
    UNAVAILABLE,
    Availability,
    EngineError,
    Rendered,
    RenderRequest,
    not_tried,
    trim_message,
    unavailable,
)
from gguftpl.engines.minijinja_profiles import (
    CONFIGS,
    TOJSON_BUILTIN,
    TOOLS_EMPTY,
    TOOLS_NONE,
    MinijinjaConfig,
    version_differences,
)
from gguftpl.worker import Op, Outcome, Worker, WorkerSpec, shared

BINDING = "minijinja"
"""The PyPI distribution (and import name) of the Rust binding."""
INSTALL_HINT = "pip install 'gguftpl'"
"""The binding is a core dependency of gguftpl."""
DEFAULT_TIMEOUT = 5.0
"""Seconds one render may take; real templates render in milliseconds."""
DEFAULT_FUEL = 30_000_000
"""minijinja instructions one render may run (under a second here). Every real template of tests/data, with every
probe conversation, runs in under 100,000."""
DEFAULT_MAX_OUTPUT = 1 << 20
"""Characters one render may produce."""
STARTUP_TIMEOUT = 120.0
_MEMORY_HEADROOM = 1024 << 20
"""Bytes of address space the worker may grow by after importing the binding."""


@functools.lru_cache(maxsize=1)
def _spec() -> WorkerSpec:
    target = "gguftpl.engines.minijinja_render"
    return WorkerSpec(
        "minijinja worker",
        ops={
            "load": Op(f"{target}:load_op"),
            "render": Op(f"{target}:render_op"),
            "undeclared": Op(f"{target}:undeclared_op"),
        },
        setup=(f"{target}:worker_setup",),
        memory_headroom=_MEMORY_HEADROOM,
        startup_timeout=STARTUP_TIMEOUT,
        env={"PYTHONWARNINGS": "ignore", "RUST_BACKTRACE": "0"},
    )


def get_worker() -> Worker:
    """This process's minijinja worker, shared by every configuration."""
    return shared(_spec())


@functools.lru_cache(maxsize=1)
def binding_version() -> str | None:
    """The installed binding's version, or None when it is not installed. Found without importing it or
    ``importlib.metadata`` (36 ms on a cold audit's path, before any worker starts): the ``dist-info`` folder
    beside the package names it. A binding that is there but does not import fails in its worker (``crashed``)."""
    import importlib.util
    import re
    from pathlib import Path

    try:
        spec = importlib.util.find_spec("minijinja")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    for root in spec.submodule_search_locations or ([str(Path(spec.origin).parent)] if spec.origin else []):
        for info in Path(root).parent.glob("minijinja-*.dist-info"):
            m = re.fullmatch(r"minijinja-([0-9][^-]*)\.dist-info", info.name)
            if m:
                return m.group(1)
    from importlib import metadata

    try:
        return metadata.version(BINDING)
    except metadata.PackageNotFoundError:
        return "unknown"


class MinijinjaEngine:
    """minijinja as ``config``'s runtime sets it up (:class:`~gguftpl.engines.base.Engine`)."""

    def __init__(
        self,
        config: MinijinjaConfig,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        fuel: int | None = DEFAULT_FUEL,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> None:
        self.config = config
        self.name = config.engine_name
        self.timeout = timeout
        self.fuel = fuel
        """None: no fuel bound (only time and memory)."""
        self.max_output = max_output

    def availability(self) -> Availability:
        version = binding_version()
        if version is None:
            return Availability(self.name, False, install_hint=INSTALL_HINT, detail="the minijinja binding is missing")
        detail = ""
        if version != self.config.minijinja_version:
            builtin = self.config.tojson == TOJSON_BUILTIN
            known = version_differences(self.config.minijinja_version, version, builtin)
            detail = (
                f"{self.config.runtime} pins minijinja {self.config.minijinja_version}; rendered with the binding's "
                f"{version}, so behaviour that changed between them may differ"
                + (f" (known: {'; '.join(known)})" if known else "")
            )
        return Availability(self.name, True, f"minijinja {version}", INSTALL_HINT, detail)

    def prestart(self) -> None:
        """Start the worker (one for every configuration) now without waiting, when the binding is installed."""
        if binding_version() is not None:
            get_worker().prestart()

    # ---------------------------------------------------------------------------------------------- Engine

    def load(self, template: str) -> EngineError | None:
        """None when the runtime compiles the template (after its rewrites); else minijinja's syntax error."""
        available = self.availability()
        if not available.installed:
            return EngineError(UNAVAILABLE, available.unknown_reason())
        item = {"config": self.config.to_dict(), "template": self.config.rewrite(template)}
        answer = _answer(get_worker().ask("load", item, self.timeout), self.timeout)
        return answer.error

    def render(self, template: str, requests: Sequence[RenderRequest]) -> list[Rendered]:
        """One answer per request, each bounded by fuel, time, output and memory; after one that a bound stopped
        (or that aborted the worker) the rest are not tried and say why, as the other engines' children do
        (:mod:`gguftpl.engines.childanswers`): each further try would cost the whole bound again."""
        available = self.availability()
        if not available.installed:
            return unavailable(available, len(requests))
        source = self.config.rewrite(template)
        out: list[Rendered] = []
        stopped: EngineError | None = None
        for r in requests:
            if stopped is not None:
                out.append(Rendered(None, not_tried(stopped)))
                continue
            answer = _answer(get_worker().ask("render", self._item(source, r), self.timeout), self.timeout)
            if answer.error is not None and answer.error.kind in (OVERRUN, CRASHED):
                stopped = answer.error
            out.append(answer)
        return out

    def undeclared_variables(self, template: str, nested: bool = True) -> set[str] | EngineError:
        """The variables the template reads, as minijinja's ``undeclared_variables(nested)`` names them (TGI
        decides from ``"tools" in ...`` whether to append the tools to the last message)."""
        item = {"config": self.config.to_dict(), "template": self.config.rewrite(template), "nested": nested}
        outcome = get_worker().ask("undeclared", item, self.timeout)
        if outcome.ok and isinstance(outcome.value, Mapping) and "names" in outcome.value:
            return {str(n) for n in outcome.value["names"]}
        return _answer(outcome, self.timeout).error or EngineError(RENDER, "no answer")

    # ---------------------------------------------------------------------------------------------- inputs

    def variables(self, request: RenderRequest) -> dict[str, Any]:
        """What the runtime hands the template for ``request`` (:class:`MinijinjaConfig` says which)."""
        cfg = self.config
        out: dict[str, Any] = {"messages": [dict(m) for m in request.messages]}
        tools = [dict(t) for t in request.tools] if request.tools is not None else None
        if tools is not None and not tools and cfg.empty_tools_absent:
            tools = None
        if tools is not None and cfg.tgi_tool_shape:
            from gguftpl.engines.minijinja_profiles import tgi_tools

            tools = tgi_tools(tools)
        if tools is not None:
            out["tools"] = tools
            for alias in cfg.tools_aliases:
                out[alias] = tools
            if cfg.builtin_tool_names:
                names = [str((t.get("function") or {}).get("name", "")) for t in tools]
                out["builtin_tools"] = [n for n in names if n in cfg.builtin_tool_names]
        elif cfg.tools_absent == TOOLS_NONE:
            out["tools"] = None
        elif cfg.tools_absent == TOOLS_EMPTY:
            out["tools"] = []
        agp = cfg.add_generation_prompt
        out["add_generation_prompt"] = request.add_generation_prompt if agp is None else agp
        given = dict(request.variables)
        if cfg.date_string_format is not None and "date_string" not in given:
            now = datetime.datetime.now(datetime.timezone.utc)
            out["date_string"] = now.strftime(cfg.date_string_format)
        for name, value in given.items():
            if cfg.forwarded_variables is None or name in cfg.forwarded_variables:
                out[name] = value
        for given_name, also in cfg.variable_aliases:
            if given_name in out:
                out[also] = out[given_name]
        return out

    def _item(self, source: str, request: RenderRequest) -> dict[str, Any]:
        config = self.config.to_dict()
        if self.config.tools_template_name and request.tools:
            config["template_name"] = self.config.tools_template_name  # the same text under its other name
        return {
            "config": config,
            "template": source,
            "variables": self.variables(request),
            "fuel": self.fuel,
            "max_output": self.max_output,
        }


def _answer(outcome: Outcome, timeout: float) -> Rendered:
    """The worker's answer as a :class:`Rendered`; a failed worker is an overrun or a crash, never a raise."""
    if outcome.ok and isinstance(outcome.value, Mapping):
        value = outcome.value
        if value.get("error"):
            err = EngineError.from_dict(value["error"])
            return Rendered(None, EngineError(err.kind, trim_message(err.message), err.line))
        text = value.get("text")
        return Rendered(text if isinstance(text, str) else "", None)
    if outcome.kind == worker.TIMEOUT:
        why = f"rendering took longer than {timeout:g} s and was stopped"
        return Rendered(None, EngineError(OVERRUN, why))
    if outcome.kind == worker.MEMORY:
        return Rendered(None, EngineError(OVERRUN, f"out of memory: {outcome.message}"))
    if outcome.kind == worker.START:
        return Rendered(None, EngineError(UNAVAILABLE, trim_message(outcome.message)))
    if outcome.kind in (worker.CRASHED, worker.EXITED, worker.GARBAGE):
        why = outcome.message
        if outcome.signal == "SIGABRT":  # Rust aborts the process when an allocation fails
            why += ": an allocation failed under the worker's memory cap, or the engine aborted"
        return Rendered(None, EngineError(CRASHED, trim_message(why)))
    return Rendered(None, EngineError(RENDER, trim_message(outcome.message or outcome.kind)))


def engine(config_id: str, **kwargs: Any) -> MinijinjaEngine:
    """The engine for one runtime's configuration (``tgi``, ``mistralrs``, ``dynamo``, ...)."""
    from gguftpl.engines.minijinja_profiles import config

    return MinijinjaEngine(config(config_id), **kwargs)


def engines(**kwargs: Any) -> list[MinijinjaEngine]:
    """One engine per configured runtime."""
    return [MinijinjaEngine(c, **kwargs) for c in CONFIGS.values()]
