"""Every rule gguftpl can report, in one place so codes stay unique and documented.

Checkers import the Rule objects from here and build findings with ``findings.make_finding``.
"""

from __future__ import annotations

from gguftpl.findings import Rule, Severity, register

# GT0xx: the file itself
UNREADABLE_GGUF = register(
    Rule(
        "GT001",
        "unreadable-gguf",
        Severity.ERROR,
        "The file is not a GGUF that can be read (bad magic, truncated, hostile lengths).",
        why="Nothing can be checked, and a runtime will refuse or misread the file.",
        fix="Re-download or re-convert the file.",
    )
)
