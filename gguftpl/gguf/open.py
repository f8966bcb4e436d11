"""Open a GGUF header from a local path or, when the remote module supports it, a Hub URL."""

from __future__ import annotations

from typing import Any

from gguftpl.gguf.reader import GGUFHeader, read_header


def is_remote(path: str) -> bool:
    return path.startswith(("hf://", "https://", "http://"))


def open_header(path: str) -> tuple[GGUFHeader, str, dict[str, Any] | None]:
    """(header, label, remote stats or None). Remote reads need gguftpl.gguf.remote."""
    if is_remote(path):
        from gguftpl.gguf import remote

        return remote.open_remote_header(path)
    return read_header(path), path, None
