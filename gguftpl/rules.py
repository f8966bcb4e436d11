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

AUDIT_FAILED = register(
    Rule(
        "GT002",
        "audit-failed",
        Severity.ERROR,
        "The file was read but gguftpl could not finish checking its chat templates.",
        why=(
            "An audit that stops half-way would look clean. The file is reported instead, so a "
            "directory audit still covers every other file and the run does not pass by accident."
        ),
        example="A template set whose metadata cannot be interpreted (e.g. a chat template key holding a number).",
        fix="Run `gguftpl inspect FILE` to see the metadata, and `gguftpl --debug audit FILE` for the cause.",
    )
)
