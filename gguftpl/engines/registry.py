"""Every engine by id, imported only when asked for, and whether each is installed (asked once per process).

The ids are the ones runtime profiles name (:mod:`gguftpl.runtimes.profiles`): a runtime's verdicts come from
its engine's adapter here and from no other.
"""

from __future__ import annotations

import functools
import importlib
import threading
from typing import TYPE_CHECKING

from gguftpl.errors import UsageError

if TYPE_CHECKING:
    from gguftpl.engines.base import Availability, Engine

_ADAPTERS: dict[str, tuple[str, str]] = {
    "transformers": ("gguftpl.engines.transformers", "ENGINE"),
    "llamacpp": ("gguftpl.engines.llamacpp", "ENGINE"),
    "hfjs": ("gguftpl.engines.hfjs", "ENGINE"),
    "minijinja/tgi": ("gguftpl.engines.minijinja", "tgi"),
    "minijinja/mistralrs": ("gguftpl.engines.minijinja", "mistralrs"),
    "minijinja/dynamo": ("gguftpl.engines.minijinja", "dynamo"),
    "ollama": ("gguftpl.engines.ollama", "ENGINE"),
}
"""Engine id -> (module, attribute or minijinja configuration) of its adapter."""

ENGINE_IDS = tuple(_ADAPTERS)
JINJA_ENGINES = tuple(e for e in ENGINE_IDS if e != "ollama")
"""Engines that render the GGUF's own Jinja text (Ollama's engine renders its Go TEMPLATE)."""
OTHER_JINJA_ENGINES = tuple(e for e in JINJA_ENGINES if e not in ("transformers", "llamacpp"))
"""The Jinja engines :func:`gguftpl.templates.enginefacts.ask_engines` asks (the facts gather transformers' and
llama.cpp's renders themselves)."""

OTHER_ENGINES = (*OTHER_JINJA_ENGINES, "ollama")
"""Every engine the facts ask beside transformers and llama.cpp (Ollama's on its curated Go template)."""

_LOCK = threading.Lock()


def get(engine_id: str) -> Engine:
    """The adapter of ``engine_id``; a :class:`~gguftpl.errors.UsageError` for an id no runtime uses."""
    where = _ADAPTERS.get(engine_id)
    if where is None:
        raise UsageError(f"unknown engine {engine_id!r} (one of: {', '.join(ENGINE_IDS)})")
    return _load(engine_id)


@functools.cache
def _load(engine_id: str) -> Engine:
    module, attr = _ADAPTERS[engine_id]
    mod = importlib.import_module(module)
    if module.endswith(".minijinja"):
        return mod.engine(attr)  # type: ignore[no-any-return]
    return getattr(mod, attr)  # type: ignore[no-any-return]


_AVAILABLE: dict[str, Availability] = {}


def availability(engine_id: str) -> Availability:
    """Is ``engine_id`` installed (its version, or why not and the command that installs it)? Asked of the
    adapter once per process."""
    with _LOCK:
        found = _AVAILABLE.get(engine_id)
    if found is None:
        try:
            found = get(engine_id).availability()
        except ImportError as exc:  # an adapter whose own imports fail is an engine that is not here
            from gguftpl.engines.base import Availability

            found = Availability(engine_id, False, detail=f"its adapter does not import ({exc})")
        with _LOCK:
            _AVAILABLE[engine_id] = found
    return found


def forget_availability() -> None:
    """Ask again next time (after ``gguftpl engines install``)."""
    with _LOCK:
        _AVAILABLE.clear()
