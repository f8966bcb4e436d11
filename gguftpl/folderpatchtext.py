"""A folder patch as text: the plan (once per distinct plan), one table row per file, the folder checks on
the result and the counts. Plain strings; the CLI prints them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gguftpl.gguf.shards import shard_info
from gguftpl.patchtext import _counts, plan_text

if TYPE_CHECKING:
    from gguftpl.folderpatch import FolderFile, FolderPatch

HEADERS = ("file", "templates changed", "proof", "findings before -> after")


def folder_text(result: FolderPatch) -> str:
    """The plans of the files patched, the table, the folder checks and the counts."""
    lines = _plan_lines(result)
    rows = [HEADERS] + [_row(f) for f in sorted(result.files, key=lambda f: f.name)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS) - 1)]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    lines += ["", f"folder checks (GT55x) on the result ({', '.join(result.output_folders)}):"]
    lines += [f"  {f.code} {f.severity.value:<7} {f.name}: {f.message}" for f in result.checks] or ["  none"]
    lines.append("")
    lines.append(_counts_line(result))
    return "\n".join(lines) + "\n"


def _plan_lines(result: FolderPatch) -> list[str]:
    """Each distinct plan once (its rows without the file name), with how many files it was carried out on."""
    groups: dict[tuple[tuple[str, str, str | None, str | None], ...], list[FolderFile]] = {}
    for f in result.files:
        if f.result is None:
            continue
        sig = tuple((it.action, it.name, it.old_sha256, it.new_sha256) for it in f.result.plan.items)
        groups.setdefault(sig, []).append(f)
    lines: list[str] = []
    for files in groups.values():
        first = files[0].result
        assert first is not None
        body = plan_text(first.plan).splitlines()[1:]
        up = first.plan.upstream
        src = f" templates from {up.label} ({up.origin})" if up else ""
        lines += [f"plan for {len(files)} file(s), {files[0].name} first:{src}", *body, ""]
    return lines


def _row(f: FolderFile) -> tuple[str, str, str, str]:
    shard = shard_info(f.name.replace("\\", "/")) if f.set_of else None
    name = f.name + (f" (shard {shard.number} of {shard.count})" if shard is not None else "")
    if f.error is not None:
        return name, f.status.upper(), f.error, "-"
    changes = ", ".join(f.changes) if f.changes else f.status
    findings = f"{_counts(f.before)} -> {_counts(f.after)}" if f.before is not None and f.after is not None else "-"
    return name, changes, f.proof or "-", findings


def _counts_line(result: FolderPatch) -> str:
    from gguftpl.folderpatch import ALREADY, COPIED, FAILED, PATCHED, UNCHANGED

    parts = [f"{result.count(s)} {s}" for s in (PATCHED, ALREADY, UNCHANGED, COPIED, FAILED) if result.count(s)]
    line = f"{len(result.files)} GGUF files: " + ", ".join(parts)
    if result.nothing_changed:
        line += "; nothing changed: every file " + ("that could be read " if result.failed else "")
        line += "already has these templates"
    return line
