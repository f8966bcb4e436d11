"""gguf-split's file naming: where a file sits in a split set (``NAME-00002-of-00005.gguf``).

A split GGUF keeps its metadata in the first shard; local, remote and repo code all ask this module which
shard a name is and what the first one is called.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ShardInfo", "models_of", "shard_info"]

# gguf-split names shards "%s-%05d-of-%05d.gguf" (llama.cpp llama_split_path)
_SHARD_RE = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


@dataclass(frozen=True)
class ShardInfo:
    """Where a file sits in a gguf-split set."""

    number: int  # 1-based
    count: int
    first: str  # file name (or path) of shard 1

    @property
    def is_first(self) -> bool:
        return self.number == 1

    def to_dict(self) -> dict[str, int | str]:
        return {"number": self.number, "count": self.count, "first": self.first}


def shard_info(name: str) -> ShardInfo | None:
    """Shard position from gguf-split's file naming, or None for an unsplit file."""
    head, sep, base = name.rpartition("/")
    m = _SHARD_RE.match(base)
    if not m:
        return None
    no, count = int(m.group("no")), int(m.group("count"))
    if no < 1 or count < 1 or no > count:
        return None
    first = f"{m.group('stem')}-{1:05d}-of-{count:05d}.gguf"
    return ShardInfo(no, count, f"{head}{sep}{first}")


def models_of(names: list[str]) -> list[str]:
    """``names`` (file names or paths) without the later shards of a split GGUF whose first shard is among them:
    shard 1 holds the metadata and stands for the set; a later shard without its first is kept."""
    have = set(names)
    out = []
    for n in names:
        shard = shard_info(n)
        if shard is None or shard.is_first or shard.first not in have:
            out.append(n)
    return out
