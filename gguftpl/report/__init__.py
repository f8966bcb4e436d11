"""Output formats for an audit: each one is a small class that turns an ``AuditRun`` into a string.

A run over remote files and repos passes a ``ReportContext`` too (``report/context.py``): the bytes each
remote read cost and a summary of each repo, which every format reports in its own way.

The CLI's ``--format`` choices are the keys of ``FORMATS``; a test checks the two stay in step.
Formatter modules are imported only when chosen.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from typing import TYPE_CHECKING, Any, Protocol

from gguftpl.errors import UsageError

if TYPE_CHECKING:
    from gguftpl.audit import AuditRun
    from gguftpl.report.context import ReportContext

__all__ = [
    "FORMATS",
    "Formatter",
    "format_names",
    "get_formatter",
    "load_formatter",
    "render",
    "tool_version",
    "write_atomic",
]


class Formatter(Protocol):
    name: str

    def format(self, run: AuditRun, context: ReportContext | None = None) -> str:
        """The whole report, ending with a newline."""


# format name -> "module:Class" under gguftpl.report
FORMATS: dict[str, str] = {
    "text": "text:TextFormatter",
    "json": "json:JSONFormatter",
    "sarif": "sarif:SARIFFormatter",
    "github": "github:GitHubFormatter",
    "html": "html:HTMLFormatter",
}


def format_names() -> list[str]:
    return list(FORMATS)


def get_formatter(name: str, **options: Any) -> Formatter:
    """The formatter for ``name``; ``options`` go to its constructor (e.g. ``color=True`` for text)."""
    formatter: Formatter = load_formatter(FORMATS, name, "output format", **options)
    return formatter


def load_formatter(registry: dict[str, str], name: str, what: str, **options: Any) -> Any:
    """The formatter ``registry`` names for ``name`` (``module:Class`` under gguftpl.report, imported only now),
    built with ``options``; an unknown name is a usage error naming ``what`` and the choices."""
    target = registry.get(name)
    if target is None:
        raise UsageError(f"unknown {what} {name!r} (choose from {', '.join(registry)})")
    module_name, cls_name = target.split(":")
    return getattr(importlib.import_module(f"gguftpl.report.{module_name}"), cls_name)(**options)


def render(run: AuditRun, fmt: str, context: ReportContext | None = None, **options: Any) -> str:
    return get_formatter(fmt, **options).format(run, context)


def tool_version() -> str:
    from gguftpl import __version__  # not importlib.metadata: its imports cost a warm audit 20 ms

    return __version__


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder, fsync and rename: a reader sees the old
    report or the new one, never half of one."""
    import stat

    path = os.fspath(path)
    if not path:  # abspath('') is the working folder: the temp file went one folder up, the rename failed
        raise UsageError("-o: the output path is empty")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        # /dev/null, /dev/stdout, a FIFO: write into it; renaming over it would replace the device node
        _write_special(path, text)
        return
    if st is not None:
        with open(path, "rb") as fh:
            if fh.read(4) == b"GGUF":  # `audit model.gguf -o model.gguf` must not destroy the model
                raise UsageError(f"refusing to overwrite {path} with a report: it is a GGUF file")
    from gguftpl.safeio import check_output_folder

    check_output_folder(path)
    fd, tmp = tempfile.mkstemp(prefix=".gguftpl-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _write_special(path: str, text: str) -> None:
    # O_NONBLOCK: a FIFO nobody reads fails at once (ENXIO) instead of blocking the audit for ever
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"cannot write the report to {path}: {exc.strerror or exc}") from None
    os.set_blocking(fd, True)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
