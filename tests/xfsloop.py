"""A loop-mounted XFS with reflinks, made in a temp folder, for the tests and the patch benchmark.

Needs root, mkfs.xfs (Debian's xfsprogs; .ci/run installs it) and a loop device; where any is missing
``xfs_loop`` raises ``Unavailable`` with the reason, so a test can skip saying why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


class Unavailable(Exception):
    """No loop-mounted XFS here; the message says why."""


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@contextlib.contextmanager
def xfs_loop(folder: Path, size: int = 1 << 30) -> Iterator[Path]:
    """Mount a fresh ``size``-byte (sparse) XFS with reflink=1 at ``folder/mnt``; unmount and remove it after."""
    if not sys.platform.startswith("linux"):
        raise Unavailable("a loop-mounted XFS needs Linux")
    if os.geteuid() != 0:
        raise Unavailable("mounting a loop XFS needs root")
    mkfs = shutil.which("mkfs.xfs") or ("/usr/sbin/mkfs.xfs" if os.path.exists("/usr/sbin/mkfs.xfs") else None)
    if mkfs is None:
        raise Unavailable("mkfs.xfs is not installed (Debian: apt-get install xfsprogs)")
    image, mnt = folder / "xfs.img", folder / "mnt"
    mnt.mkdir(parents=True, exist_ok=True)
    with open(image, "wb") as fh:
        fh.truncate(size)
    made = _run([mkfs, "-q", "-f", "-m", "reflink=1", str(image)])
    if made.returncode != 0:
        image.unlink()
        raise Unavailable(f"mkfs.xfs failed: {made.stderr.strip()[-300:]}")
    mounted = _run(["mount", "-o", "loop", str(image), str(mnt)])
    if mounted.returncode != 0:
        image.unlink()
        raise Unavailable(f"loop devices refused here (mount -o loop: {mounted.stderr.strip()[-300:]})")
    try:
        yield mnt
    finally:
        if _run(["umount", str(mnt)]).returncode != 0:
            _run(["umount", "-l", str(mnt)])  # something still holds it open: detach now, freed when let go
        with contextlib.suppress(OSError):
            image.unlink()


def used_bytes(path: Path) -> int:
    """Bytes in use on the filesystem holding ``path``, once the kernel has written what it holds and freed
    what was deleted (XFS frees a deleted file's blocks in the background: wait until the count settles)."""
    last = -1
    for _ in range(100):
        _syncfs(path)
        st = os.statvfs(path)
        used = (st.f_blocks - st.f_bfree) * st.f_frsize
        if used == last:
            return used
        last = used
        time.sleep(0.02)
    return last


def _syncfs(path: Path) -> None:
    """Write out this filesystem only (syncfs): os.sync would wait for every disk of a busy machine too."""
    import ctypes

    fd = os.open(path, os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)
