"""Every bound gguftpl puts on untrusted input, in one place.

Templates, GGUF headers, Hub answers and MCP servers come from strangers; each bound here keeps one of
them from costing unbounded time or memory. Real inputs stay far below every one (the docstrings say by
how much). Code reads them as ``limits.NAME`` at call time, so a test can lower one with monkeypatch.
"""

from __future__ import annotations

# --- chat templates

MAX_TEMPLATE_BYTES = 4 * 1024 * 1024
"""A template over this many UTF-8 bytes is reported (GT404) and neither parsed nor rendered: a 50 MB
"template" cost 20 s and 400 MB; real ones are under 100 KB."""

MAX_FOLDED_INT_BITS = 256
"""Bits of an integer the static analysis computes from a template's constant expression (a ``range()``
bound): past it the value is only known to be huge. Real bounds are a few digits; ``2**(2**40)`` computed in
full would take this process's memory and time."""

MAX_ANALYSED_TEXTS = 64
"""Distinct template texts one file's analysis renders; real files carry one to four. A file with 10,000
named templates took minutes."""


# --- the process

INTERRUPT_GRACE = 10.0
"""Seconds a SIGINT or SIGTERM gives the command to clean up and exit (worker processes stopped, a stand-in
model removed: under a second) before the process ends without it: a main thread stuck in C code cannot run
Python's handler (``gguftpl.interrupts``)."""
