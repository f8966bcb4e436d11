"""Where engines that are not Python packages live once installed: the Node.js package of ``@huggingface/jinja``
and the Go worker of Ollama's templates. ``$GGUFTPL_ENGINES_DIR``, else beside the Python environment gguftpl runs
in (``<sys.prefix>/share/gguftpl/engines``): a new venv starts without them, removing the venv removes them, and
no home folder is needed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV = "GGUFTPL_ENGINES_DIR"


def engines_dir() -> Path:
    """The folder installed engines go in (not created here)."""
    configured = os.environ.get(ENV)
    if configured:
        return Path(configured).expanduser().absolute()
    return Path(sys.prefix) / "share" / "gguftpl" / "engines"


def engine_dir(name: str) -> Path:
    """One engine's own folder under :func:`engines_dir`."""
    return engines_dir() / name
