"""GitHub Actions workflow commands: one ``::error``/``::warning``/``::notice`` annotation per finding.

Escaping follows the runner's rules (actions/toolkit ``command.ts``): in the message ``%``, ``\\r`` and
``\\n``; in properties also ``:`` and ``,``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gguftpl.report._common import GITHUB_LEVEL, fix_of, repo_context, where
from gguftpl.safeio import terminal_text

if TYPE_CHECKING:
    from gguftpl.audit import AuditRun
    from gguftpl.report.context import ReportContext


def escape_data(text: str) -> str:
    # the runner's escapes, then every other control or invisible character (an OSC title set in a file
    # name) shown as an escape, and a legacy `##[command]` inside the text defused
    one_line = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return terminal_text(one_line, commands=True)


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


class GitHubFormatter:
    name = "github"

    def format(self, run: AuditRun, context: ReportContext | None = None) -> str:
        lines: list[str] = []
        for fa in run.files:
            for f in fa.findings:
                # The template line is not a line of the (binary) GGUF, so it goes in the message rather
                # than in line=, where GitHub would point at the wrong place.
                at = where(f)
                place = f"{at} ({f.template})" if at and f.template else at or (f.template or "")
                message = f"{place}: {f.message}" if place else f.message
                repo = repo_context(f)  # an annotation has no properties: say which repo and quants
                if repo:
                    message += f"\n{repo}"
                fix = fix_of(run, f)
                if fix:
                    message += f"\nFix: {fix}"
                file = escape_property(f.location.file or fa.path)
                props = f"file={file},title={escape_property(f'{f.code} {f.name}')}"
                lines.append(f"::{GITHUB_LEVEL[f.severity]} {props}::{escape_data(message)}")
        return "".join(line + "\n" for line in lines)
