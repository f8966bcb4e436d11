"""What an audit of remote files and repos adds to its report, beside the findings.

Every formatter takes it as ``format(run, context)``: the ``"remote"`` object of each file read over HTTP
(bytes, requests, revision, shard notes) and one summary per Hub repo or folder audited as a set of quants
(target, files, model groups, upstream). JSON and SARIF carry both; text gives a footer; each GT55x
finding names its repo and quants itself (its ``repo``/``quants`` extra data), in every format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ReportContext"]


@dataclass(frozen=True)
class ReportContext:
    remote: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """File label -> its ``"remote"`` object, for every header read over HTTP."""
    repos: tuple[Mapping[str, Any], ...] = ()
    """One ``"repo"`` object per Hub repo or folder audited as a set of quants."""

    def remote_totals(self) -> dict[str, int] | None:
        """Files, bytes and requests over HTTP in the whole run; None when nothing was read remotely."""
        if not self.remote:
            return None
        return {
            "files": len(self.remote),
            "bytes_fetched": sum(int(r.get("bytes_fetched", 0)) for r in self.remote.values()),
            "requests": sum(int(r.get("requests", 0)) for r in self.remote.values()),
        }

    def notes(self) -> list[tuple[str, str]]:
        """(file label, note) for what the remote reader did that the user should know (a shard followed)."""
        return [(label, note) for label, info in self.remote.items() for note in info.get("notes", [])]
