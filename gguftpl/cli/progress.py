"""A one-line progress bar on stderr for audits that read many headers (``--repo``, ``--repo-check``)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from gguftpl.safeio import printable

__all__ = ["TerminalProgress"]


class TerminalProgress:
    """``[###.....] 3/20 name`` on one stderr line, only on a terminal; ``done()`` clears it.

    Called as ``progress(done, total, label)`` after each file (the library's ``Progress``)."""

    def __init__(self, stream: TextIO | Any = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self._width = 0

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.enabled:
            return
        n = len(str(total))
        bar_w = 20
        filled = bar_w * done // max(total, 1)
        line = f"[{'#' * filled}{'.' * (bar_w - filled)}] {done:>{n}}/{total} {printable(label)}"[:100]
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)

    def done(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
