"""Open a GGUF header from a local path, a Hub file (``hf://``) or a URL.

A later shard of a local split GGUF (``NAME-00002-of-00003.gguf``, gguf-split's naming) is read through
its first shard in the same folder, as the remote reader does: the metadata lives in shard 1.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from gguftpl.errors import GGUFFormatError
from gguftpl.gguf.hubref import is_remote
from gguftpl.gguf.reader import GGUFHeader, read_header
from gguftpl.gguf.shards import ShardInfo, shard_info

__all__ = ["LocalShard", "MissingFirstShardError", "local_shard", "open_header", "split_notes"]


class MissingFirstShardError(GGUFFormatError):
    """A later shard of a split GGUF was asked for and shard 1 (which holds the metadata) is not beside it."""

    def __init__(self, message: str, shard: ShardInfo) -> None:
        super().__init__(message)
        self.shard = shard


@dataclass
class LocalShard:
    """Which local file to read for ``path``: itself, or shard 1 of its split set."""

    path: str
    """The file to read (shard 1 in the same folder for a later shard, else ``path`` unchanged)."""
    shard: ShardInfo | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path}
        if self.shard is not None:
            d["shard"] = self.shard.to_dict()
        if self.notes:
            d["notes"] = list(self.notes)
        return d


def local_shard(path: str | os.PathLike[str]) -> LocalShard:
    """Resolve a local path to the file holding its metadata (``MissingFirstShardError`` if shard 1 is absent)."""
    p = os.fspath(path)
    folder, base = os.path.split(p)
    info = shard_info(base)
    if info is None or info.is_first:
        return LocalShard(p, info)
    first = os.path.join(folder, info.first)
    shard = ShardInfo(info.number, info.count, first)
    if not os.path.isfile(first):
        raise MissingFirstShardError(
            f"{p} is shard {info.number} of {info.count}; a split GGUF keeps its metadata in the first shard, "
            f"and {first} is missing",
            shard,
        )
    note = (
        f"{base} is shard {info.number} of {info.count}; a split GGUF keeps its metadata in the first shard, "
        f"reading {info.first}"
    )
    return LocalShard(first, shard, [note])


def split_notes(header: GGUFHeader) -> list[str]:
    """A note when the header read says it is not the first shard (``split.no`` > 0)."""
    split_no, split_count = header.get("split.no"), header.get("split.count")
    if isinstance(split_no, int) and isinstance(split_count, int) and split_count > 1 and split_no != 0:
        return [f"split.no is {split_no}: this is not the first shard, its metadata may be incomplete"]
    return []


def open_header(path: str) -> tuple[GGUFHeader, str, dict[str, Any] | None]:
    """(header, label, extra or None). Remote reads give the ``"remote"`` dict; a local split GGUF gives
    ``{"path", "shard", "notes"}`` (a later shard is read through shard 1, which becomes the label)."""
    if is_remote(path):
        from gguftpl.gguf import remote

        return remote.open_remote_header(path)
    ls = local_shard(path)
    header = read_header(ls.path)
    ls.notes += split_notes(header)
    if ls.shard is None and not ls.notes:
        return header, path, None
    return header, ls.path, ls.to_dict()
