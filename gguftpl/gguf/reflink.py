"""Sharing a GGUF's tensor region between two files instead of copying it (XFS, btrfs: reflinks).

``clone_range`` asks the filesystem to make the output's blocks the source's own blocks (FICLONERANGE):
no data is read or written, and the output takes no new space until one of the two files is changed. The
range must start on a filesystem block in both files, so the writer pads the new header until its data
offset differs from the source's by a whole number of blocks (gguf/rewrite.py).

``shared_extents_match`` proves such a clone without reading it: FIEMAP maps both ranges to physical
blocks, and a clone is exactly two files whose ranges map to the same blocks.
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass

FICLONERANGE = 0x4020940D
"""_IOW(0x94, 13, struct file_clone_range): src_fd (s64), src_offset, src_length, dest_offset (u64)."""
FS_IOC_FIEMAP = 0xC020660B
"""_IOWR('f', 11, struct fiemap)."""
_FIEMAP_HEAD = struct.Struct("=QQIIII")  # fm_start, fm_length, fm_flags, fm_mapped_extents, fm_extent_count, reserved
_FIEMAP_EXTENT = struct.Struct("=QQQQQIIII")  # logical, physical, length, 2 reserved u64, flags, 3 reserved u32
_FIEMAP_FLAG_SYNC = 0x1
_EXTENT_LAST = 0x1
_EXTENT_SHARED = 0x2000
_EXTENT_UNWRITTEN = 0x800
# a physical address that does not name the data's own blocks: unknown, delayed, encoded, inline or tail-packed
_EXTENT_OPAQUE = 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x200 | 0x400
_EXTENTS_PER_CALL = 512

CLONE_UNSUPPORTED = frozenset(
    {errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.ETXTBSY, errno.EBADF}
)
"""FICLONERANGE's answers for "not here" (another filesystem, no reflink support, misaligned range): the
writer copies instead. Anything else (ENOSPC, EIO) is a real failure."""


def block_size(fd: int) -> int:
    """The filesystem block that clones are counted in (the unit FICLONERANGE offsets must be multiples of)."""
    return os.fstatvfs(fd).f_bsize


def clone_range(src_fd: int, src_offset: int, length: int, dst_fd: int, dst_offset: int) -> bool:
    """Share source bytes [src_offset, +length) as the output's [dst_offset, +length). Offsets must be
    block-aligned and the range must end on a block or at the source's end. False where the filesystem
    cannot (see CLONE_UNSUPPORTED); OSError for a real failure."""
    import fcntl

    arg = struct.pack("=qQQQ", src_fd, src_offset, length, dst_offset)
    try:
        fcntl.ioctl(dst_fd, FICLONERANGE, arg)
    except OSError as exc:
        if exc.errno in CLONE_UNSUPPORTED:
            return False
        raise
    return True


@dataclass(frozen=True)
class Extent:
    """One mapped piece of a range: where it starts relative to the range, on disk, how long, and how."""

    start: int
    physical: int
    length: int
    unwritten: bool
    shared: bool


def extents(fd: int, offset: int, length: int) -> list[Extent] | None:
    """The extents of file bytes [offset, +length), relative to ``offset``, clipped to the range, adjacent
    pieces merged. None where FIEMAP is not supported or an extent's physical address is not its data's."""
    import fcntl

    out: list[Extent] = []
    pos, end = offset, offset + length
    while pos < end:
        buf = bytearray(_FIEMAP_HEAD.size + _FIEMAP_EXTENT.size * _EXTENTS_PER_CALL)
        _FIEMAP_HEAD.pack_into(buf, 0, pos, end - pos, _FIEMAP_FLAG_SYNC, 0, _EXTENTS_PER_CALL, 0)
        try:
            fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
        except OSError:
            return None
        mapped = _FIEMAP_HEAD.unpack_from(buf, 0)[3]
        if mapped == 0:
            break  # the rest is a hole
        last = False
        for i in range(mapped):
            logical, physical, n, _r1, _r2, flags, *_ = _FIEMAP_EXTENT.unpack_from(
                buf, _FIEMAP_HEAD.size + i * _FIEMAP_EXTENT.size
            )
            if flags & _EXTENT_OPAQUE:
                return None
            _append(out, logical, physical, n, flags, offset, end)
            pos = max(pos, logical + n)
            last = bool(flags & _EXTENT_LAST)
        if last:
            break
    return out


def _append(out: list[Extent], logical: int, physical: int, n: int, flags: int, offset: int, end: int) -> None:
    lo, hi = max(logical, offset), min(logical + n, end)
    if lo >= hi:
        return
    ext = Extent(
        lo - offset, physical + (lo - logical), hi - lo, bool(flags & _EXTENT_UNWRITTEN), bool(flags & _EXTENT_SHARED)
    )
    if out:
        prev = out[-1]
        if (
            prev.start + prev.length == ext.start
            and prev.physical + prev.length == ext.physical
            and (prev.unwritten, prev.shared) == (ext.unwritten, ext.shared)
        ):
            out[-1] = Extent(prev.start, prev.physical, prev.length + ext.length, prev.unwritten, prev.shared)
            return
    out.append(ext)


def shared_extents_match(src_fd: int, src_offset: int, out_fd: int, out_offset: int, length: int) -> bool:
    """Whether the output's bytes [out_offset, +length) are the source's [src_offset, +length) by sharing:
    both ranges map to the same physical blocks piece for piece (holes in the same places), written or
    unwritten alike, and the output's pieces are marked shared. Reads no data."""
    ours = extents(out_fd, out_offset, length)
    theirs = extents(src_fd, src_offset, length)
    if ours is None or theirs is None or not ours:
        return False
    return ours == theirs and all(e.shared for e in ours)
