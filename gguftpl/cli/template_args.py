"""``--template NAME=PATH``: parsed and read once for ``patch FILE`` and ``patch DIR…`` alike."""

from __future__ import annotations

from gguftpl.errors import UsageError

__all__ = ["parse_template_args", "read_templates"]


def parse_template_args(values: tuple[str, ...]) -> dict[str, str]:
    """``NAME=PATH`` options as name -> path (each path checked and read later, by ``read_templates``)."""
    out: dict[str, str] = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--template takes NAME=PATH, got {v!r}")
        if name in out:  # which one was meant? the last silently won
            raise UsageError(f"--template {name}= given twice")
        out[name] = path
    return out


def read_templates(files: dict[str, str]) -> dict[str, str]:
    from gguftpl.safeio import read_text_bounded

    # a regular file of bounded size: a FIFO or /dev/zero would block or never end
    return {name: read_text_bounded(path, what="template file") for name, path in files.items()}
