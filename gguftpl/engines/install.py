"""Install the engines that are not Python packages, and list what every engine's state is.

``hfjs`` (``@huggingface/jinja`` from the npm registry at the pinned version and integrity hash, run by Node.js)
and ``ollama`` (a small Go program built from its source with the system's Go toolchain) go under
:func:`gguftpl.engines.home.engines_dir`; transformers, llama.cpp (``xllamacpp``) and minijinja are Python
packages that pip installs (extras of gguftpl).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gguftpl.errors import UsageError

INSTALLABLE = {"hfjs": "gguftpl.engines.hfjs", "ollama": "gguftpl.engines.ollama"}
"""Engine id -> the adapter module whose ``install()`` puts it in place."""


@dataclass(frozen=True)
class EngineState:
    engine: str
    installed: bool
    version: str
    hint: str
    """How to install it, when it is not."""
    detail: str = ""


def states() -> list[EngineState]:
    """Every engine, installed or not (asked afresh)."""
    from gguftpl.engines import registry

    registry.forget_availability()
    out = []
    for eid in registry.ENGINE_IDS:
        a = registry.availability(eid)
        out.append(EngineState(eid, a.installed, a.version, a.install_hint, a.detail))
    return out


def install(names: Sequence[str], *, timeout: float = 600.0) -> list[str]:
    """Install ``names`` (``all``: every installable engine); one summary line each. Raises the engine's
    :class:`~gguftpl.errors.EngineInstallError` when an install fails."""
    import importlib

    from gguftpl.engines import registry

    wanted = list(INSTALLABLE) if "all" in names else list(dict.fromkeys(names))
    for name in wanted:
        if name not in INSTALLABLE:
            if name in registry.ENGINE_IDS or name == "minijinja":
                raise UsageError(f"{name} is a Python package: pip installs it (`gguftpl engines` shows how)")
            raise UsageError(f"unknown engine {name!r} (installable: {', '.join(INSTALLABLE)}, or all)")
    lines = []
    for name in wanted:
        lines.append(str(importlib.import_module(INSTALLABLE[name]).install(timeout=timeout)))
    registry.forget_availability()
    return lines
