"""A whole file copied unchanged, atomically and proven: the later shards of a split GGUF written beside
their patched first shard (``gguftpl patch DIR -o OUTDIR``).

Shared with the source where the filesystem can (one FICLONERANGE for the file, proven by FIEMAP: both
files map to the same physical extents), else copied by the kernel and compared byte for byte.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gguftpl.errors import PatchError
from gguftpl.gguf.reflink import clone_range, shared_extents_match
from gguftpl.gguf.regioncopy import copy_region, same_bytes
from gguftpl.gguf.rewrite import BYTE_PROOF, CLONE_METHOD, SHARED_PROOF
from gguftpl.gguf.writer import Permissions, atomic_output

__all__ = ["CopyProof", "copy_proven"]


@dataclass(frozen=True)
class CopyProof:
    source: str
    output: str
    size: int
    copy_method: str
    """``reflink (FICLONERANGE)`` or the kernel copy's method."""
    proof_method: str
    """SHARED_PROOF (same physical extents) or BYTE_PROOF (every byte compared)."""
    identical: bool


def copy_proven(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], *, overwrite: bool, permissions: Permissions | None
) -> CopyProof:
    """Copy ``src`` to ``dst`` (through a temp file and a rename), proven identical before the rename;
    ``PatchError`` (and no output) when it is not."""
    src_s, dst_s = os.fspath(src), os.fspath(dst)
    size = os.path.getsize(src_s)
    try:
        with atomic_output(dst_s, overwrite=overwrite, permissions=permissions) as out:
            src_fd = os.open(src_s, os.O_RDONLY)
            try:
                fd = out.fileno()
                if size and clone_range(src_fd, 0, size, fd, 0):
                    os.lseek(fd, size, os.SEEK_SET)
                    method, proof, same = CLONE_METHOD, SHARED_PROOF, True
                    check = os.open(out.readable_path, os.O_RDONLY)
                    try:
                        if not shared_extents_match(src_fd, 0, check, 0, size):
                            proof, same = BYTE_PROOF, same_bytes(src_fd, 0, check, 0, size)
                    finally:
                        os.close(check)
                else:
                    method, same = copy_region(src_s, out, 0, 0, size, None, True) if size else ("none", True)
                    proof = BYTE_PROOF
                if not same:
                    raise PatchError(f"copy of {src_s} differs from the source; nothing written")
            finally:
                os.close(src_fd)
    except OSError as exc:
        raise PatchError(f"copying {src_s} to {dst_s} failed: {exc.strerror or exc}; no output was left") from exc
    return CopyProof(src_s, dst_s, size, method, proof, same)
