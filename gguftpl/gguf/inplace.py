"""The lock around ``patch --in-place``: two patches of one file never both write, one change lost.

A patch plans from the file it reads, then renames its output over it. Two at once would both plan from the
same file and the second rename would silently drop the first's change. So the patch takes an exclusive
``flock`` on the file before it writes (waiting while another patch holds it) and then checks that the path
still names the very file it planned from (device, inode, size, mtime): the other patch renamed a new file
over it, or any program changed it, and this one stops with one line, nothing written.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator

from gguftpl.errors import PatchError

FileIdentity = tuple[int, int, int, int]


def file_identity(path: str | os.PathLike[str]) -> FileIdentity:
    """What tells this file from the one that may replace it: device, inode, size, modification time (ns)."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@contextlib.contextmanager
def locked_in_place(path: str, planned_from: FileIdentity | None) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (waiting for another patch of it to finish) and refuse to go on
    when it is no longer the file ``planned_from`` describes."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system: no lock, the check below still holds
        fcntl = None  # type: ignore[assignment]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise PatchError(f"cannot open {path} to lock it: {exc.strerror or exc}") from None
    try:
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel when this process ends, however it ends
        except OSError as exc:
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):  # a filesystem without locks
                raise PatchError(f"cannot lock {path}: {exc.strerror or exc}") from None
        try:
            now: FileIdentity | None = file_identity(path)
        except OSError:
            now = None
        if planned_from is not None and now != planned_from:
            raise PatchError(
                f"{path} changed while this patch was being planned (another patch --in-place of it finished "
                "first?): nothing written; run the patch again"
            )
        yield
    finally:
        os.close(fd)
