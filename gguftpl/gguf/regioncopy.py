"""Copying a GGUF's tensor region into a new file with the kernel, compared block by block as it goes.

COPY_WORKERS threads each take the next COPY_CHUNK block: ``copy_file_range`` (the kernel falls back to
"pread/pwrite" where it cannot copy between the two files), start that block's writeback, then read it back
through a separate descriptor and compare it with the source. Every syscall and the memcmp release the GIL.
"""

from __future__ import annotations

import errno
import functools
import mmap
import os
from collections.abc import Callable
from typing import Any, Protocol

from gguftpl.errors import PatchError

COPY_CHUNK = 16 * 1024 * 1024
"""One worker's block: copied, sent to disk and compared before the worker takes the next one."""
COPY_WORKERS = 4
"""Blocks in flight. The fsync before the rename bounds the run by the disk; a single writeback stream
leaves it idle between requests, four keep it busy (measured in scripts/bench.py, see the README)."""
COMPARE_PIECE = 1024 * 1024
COPY_METHOD = "copy_file_range"
"""Where the kernel cannot copy between the two files it falls back to "pread/pwrite" by itself."""

ProgressFn = Callable[[int, int], None]


class Output(Protocol):
    """The not-yet-renamed output (``gguf.writer.AtomicFile``)."""

    readable_path: str

    def fileno(self) -> int: ...


def copy_region(
    src_path: str,
    out: Output,
    src_offset: int,
    out_offset: int,
    length: int,
    progress: ProgressFn | None,
    verify: bool,
) -> tuple[str, bool]:
    """Copy source bytes [src_offset, +length) to ``out`` at ``out_offset`` with the kernel, from
    COPY_WORKERS threads, one COPY_CHUNK block at a time. Each worker starts its block's writeback and then
    compares the block as the output now reads (through a separate descriptor) with the source region;
    every syscall and the memcmp release the GIL. Returns the copy method and that verdict."""
    copy = _RegionCopy(src_path, out, src_offset, out_offset, length, verify)
    try:
        copy.run(progress)
    finally:
        copy.close()
    os.lseek(copy.out_fd, out_offset + length, os.SEEK_SET)
    if progress is not None:
        progress(length, length)
    return copy.method, copy.identical


class _RegionCopy:
    """One region copied by COPY_WORKERS threads, each taking the next COPY_CHUNK block."""

    def __init__(self, src_path: str, out: Output, src_offset: int, out_offset: int, length: int, verify: bool) -> None:
        import ctypes
        import threading

        # a CDLL call releases the GIL
        self.memcmp = _libc_fn("memcmp", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
        if self.memcmp is None and verify:
            raise PatchError("the C library has no memcmp: cannot compare the copy with the source")
        self.src_offset, self.out_offset, self.length, self.verify = src_offset, out_offset, length, verify
        self.out_fd = out.fileno()
        _reserve(self.out_fd, out_offset + length)
        self.src_fd = os.open(src_path, os.O_RDONLY)
        self.check_fd = os.open(out.readable_path, os.O_RDONLY) if verify else -1
        self.n_blocks = -(-length // COPY_CHUNK)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.next = self.done = 0
        self.identical = True
        self.method = COPY_METHOD
        self.errors: list[BaseException] = []

    def run(self, progress: ProgressFn | None) -> None:
        import threading

        threads = [threading.Thread(target=self._work, name="gguftpl-copy", daemon=True) for _ in range(COPY_WORKERS)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.1)
                    if progress is not None:
                        progress(self.done, self.length)
        except BaseException:
            self.stop.set()  # Ctrl-C: each worker finishes its block and stops; atomic_output removes the file
            for t in threads:
                if t.ident is not None:
                    t.join()
            raise
        if self.errors:
            raise self.errors[0]

    def close(self) -> None:
        os.close(self.src_fd)
        if self.check_fd >= 0:
            os.close(self.check_fd)

    def _work(self) -> None:
        import ctypes

        bufs = (mmap.mmap(-1, COMPARE_PIECE), mmap.mmap(-1, COMPARE_PIECE))
        anchors = [ctypes.c_char.from_buffer(b) for b in bufs]
        addrs = (ctypes.addressof(anchors[0]), ctypes.addressof(anchors[1]))
        try:
            while not self.stop.is_set():
                with self.lock:
                    i = self.next
                    self.next = i + 1
                if i >= self.n_blocks:
                    return
                a = i * COPY_CHUNK
                n = min(COPY_CHUNK, self.length - a)
                self._copy_block(a, n, bufs[0])
                _start_writeback(self.out_fd, self.out_offset + a, n)
                ok = not self.verify or self._same(a, n, bufs, addrs)
                with self.lock:
                    self.done += n
                    self.identical = self.identical and ok
        except BaseException as exc:  # raised again in the calling thread
            self.errors.append(exc)
            self.stop.set()
        finally:
            del anchors
            for b in bufs:
                b.close()

    def _copy_block(self, a: int, n: int, buf: mmap.mmap) -> None:
        done = 0
        src_at, out_at = self.src_offset + a, self.out_offset + a
        while done < n:
            copied = 0
            if self.method == "copy_file_range":
                try:
                    copied = os.copy_file_range(self.src_fd, self.out_fd, n - done, src_at + done, out_at + done)
                except OSError as exc:
                    if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                        raise
                    self.method = "pread/pwrite"  # e.g. across filesystems on old kernels
                    continue
            else:
                k = min(len(buf), n - done)
                got = _pread_full(self.src_fd, buf, k, src_at + done)
                copied = os.pwritev(self.out_fd, [memoryview(buf)[:got]], out_at + done) if got else 0
            if copied <= 0:
                raise PatchError(f"source ended early while copying tensor data at byte {src_at + done}")
            done += copied

    def _same(self, a: int, n: int, bufs: tuple[mmap.mmap, mmap.mmap], addrs: tuple[int, int]) -> bool:
        pos = 0
        while pos < n:
            k = min(COMPARE_PIECE, n - pos)
            if _pread_full(self.src_fd, bufs[0], k, self.src_offset + a + pos) != k:
                return False
            if _pread_full(self.check_fd, bufs[1], k, self.out_offset + a + pos) != k:
                return False
            if self.memcmp(addrs[0], addrs[1], k) != 0:
                return False
            pos += k
        return True


def _reserve(fd: int, size: int) -> None:
    """Allocate the whole output before the workers write into it (Linux fallocate): blocks written
    out of order by several workers would otherwise be allocated piecemeal (139 extents instead of 18 for
    2 GiB on ext4), and a full disk fails here, before any copying. Filesystems without it are skipped."""
    import ctypes

    fn = _libc_fn("fallocate", ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong)
    if fn is None:
        return
    if fn(fd, 0, 0, size) != 0:
        err = ctypes.get_errno()
        if err not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise OSError(err, os.strerror(err))


_SYNC_FILE_RANGE_WRITE = 2


def _start_writeback(fd: int, offset: int, length: int) -> None:
    """Start writing a copied block to disk now (Linux sync_file_range, asynchronous), so the fsync before
    the rename finds little left to do. Best effort."""
    import ctypes

    fn = _libc_fn("sync_file_range", ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)
    if fn is not None:
        fn(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


@functools.cache
def _libc_fn(name: str, *argtypes: Any) -> Any:
    """The C library's ``name`` with its argument types (errno kept for ctypes.get_errno), looked up once;
    None where this libc lacks it (fallocate and sync_file_range are Linux-only)."""
    import ctypes

    try:
        fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = list(argtypes)
    fn.restype = ctypes.c_int
    return fn


def _pread_full(fd: int, buf: mmap.mmap, n: int, offset: int) -> int:
    view = memoryview(buf)
    got = 0
    try:
        while got < n:
            r = os.preadv(fd, [view[got:n]], offset + got)
            if r <= 0:
                break
            got += r
    finally:
        view.release()
    return got


def same_bytes(fd_a: int, offset_a: int, fd_b: int, offset_b: int, length: int) -> bool:
    """Whether ``length`` bytes of two files at the given offsets are equal, read COMPARE_PIECE at a time
    (the proof where the kernel's own sharing cannot be shown)."""
    done = 0
    while done < length:
        k = min(COMPARE_PIECE, length - done)
        a = os.pread(fd_a, k, offset_a + done)
        if len(a) != k or a != os.pread(fd_b, k, offset_b + done):
            return False
        done += k
    return True
