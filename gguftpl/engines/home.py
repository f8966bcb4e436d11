"""Where engines that are not Python packages live once installed: the Node.js package of ``@huggingface/jinja``
and the Go worker of Ollama's templates. ``$GGUFTPL_ENGINES_DIR``, else beside the Python environment gguftpl runs
in (``<sys.prefix>/share/gguftpl/engines``): a new venv starts without them, removing the venv removes them, and
no home folder is needed."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
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


@contextlib.contextmanager
def install_lock(path: Path) -> Iterator[None]:
    """One installer at a time per lock file (``flock``; where there is none, installers still swap whole folders
    or rename whole files, so a reader never sees half an install)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
