"""Reading a store without trusting it: every path resolved and kept inside the store, every read bounded, every
content-addressed blob checked against its name.

- :func:`inside` resolves symlinks (a loop is an error) and refuses a target outside the store's folder, before
  anything is opened: nothing outside the store is read.
- :func:`read_small` reads a manifest or a small layer under a size cap.
- :func:`check_blob` checks a weights blob: the size its manifest gives, no holes (a sparse "blob", the shape
  of a download never finished, would cost gigabytes of hashing for nothing), and its sha256, streamed in 1 MiB
  chunks. A verified digest is remembered in gguftpl's cache folder under the file's (device, inode, size,
  mtime, ctime), so a warm run hashes nothing; ctime changes whenever the file does and cannot be set back.
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Callable
from contextvars import ContextVar

from gguftpl.errors import StoreError
from gguftpl.safeio import open_regular, printable

__all__ = [
    "MAX_HOLE_BYTES",
    "MAX_MANIFEST_BYTES",
    "MAX_LAYER_BYTES",
    "check_blob",
    "follow",
    "inside",
    "read_small",
    "sha256_of",
]

MAX_MANIFEST_BYTES = 4 << 20
"""A manifest larger than this is refused (Ollama's are 1-2 KB; a safetensors import with one layer per tensor
stays well under it)."""
MAX_LAYER_BYTES = 4 << 20
"""A template, system, params or config layer larger than this is refused (real ones are bytes to kilobytes)."""
MAX_HOLE_BYTES = 1 << 20
"""A blob with more unallocated bytes than this is refused as sparse: a finished download has none."""
_CHUNK = 1 << 20
HASH_PROGRESS: ContextVar[Callable[[int, int, str], None] | None] = ContextVar("gguftpl_hash_progress", default=None)
"""Set by a front end to see a long sha256 check advance: called with (bytes done, blob size, which blob) every
:data:`_PROGRESS_STEP` bytes of a blob of :data:`_PROGRESS_FROM` bytes or more (a 40 GB blob takes minutes)."""
_PROGRESS_FROM = 256 << 20
_PROGRESS_STEP = 64 << 20
HASHED = [0]
"""Bytes :func:`check_blob` hashed in this process (a verified digest remembered costs none)."""
_CACHE_KIND = "digests"


def follow(path: str, what: str) -> str:
    """``path`` with every symlink resolved; :class:`StoreError` for a loop or a missing file."""
    try:
        return os.path.realpath(path, strict=True)
    except FileNotFoundError:
        raise StoreError(f"{what} not found: {printable(path)}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(f"{what} {printable(path)} is a symlink loop") from None
        raise StoreError(f"cannot read {what} {printable(path)}: {exc.strerror or exc}") from None


def inside(path: str, root: str, what: str) -> str:
    """``path`` with every symlink resolved; :class:`StoreError` for a loop, a missing file, or a target outside
    ``root`` (itself resolved). Only metadata is read."""
    try:
        real = os.path.realpath(path, strict=True)
        top = os.path.realpath(root, strict=True)
    except FileNotFoundError:
        raise StoreError(f"{what} not found: {printable(path)}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(f"{what} {printable(path)} is a symlink loop") from None
        raise StoreError(f"cannot read {what} {printable(path)}: {exc.strerror or exc}") from None
    if os.path.commonpath([real, top]) != top:
        raise StoreError(f"{what} {printable(path)} points outside the store ({printable(top)}): not read")
    return real


def read_small(path: str, root: str, what: str, limit: int = MAX_LAYER_BYTES) -> bytes:
    """The bytes of a manifest or a small layer inside ``root``, no more than ``limit`` of them."""
    real = inside(path, root, what)
    with open_regular(real, what=what, error=StoreError) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise StoreError(f"{what} {printable(path)} is {size} bytes, over the {limit >> 20} MiB cap: not read")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise StoreError(f"{what} {printable(path)} grew past the {limit >> 20} MiB cap while read")
    return data


def _hole_bytes(fd: int, size: int) -> int:
    """Bytes of ``fd`` that are holes (``SEEK_HOLE``/``SEEK_DATA``); 0 where the file system cannot say."""
    holes, offset = 0, 0
    try:
        while offset < size:
            hole = os.lseek(fd, offset, os.SEEK_HOLE)
            if hole >= size:
                break
            try:
                data = os.lseek(fd, hole, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
                data = size  # a hole up to the end
            holes += data - hole
            offset = data
    except (OSError, AttributeError):
        holes = 0
    os.lseek(fd, 0, os.SEEK_SET)  # SEEK_HOLE moved the offset the hash reads from
    return holes


def sha256_of(fh: object, progress: Callable[[int], None] | None = None) -> str:
    """The sha256 of an open file, read in 1 MiB chunks (memory bounded whatever the size)."""
    h = hashlib.sha256()
    read = fh.read  # type: ignore[attr-defined]
    done = 0
    while chunk := read(_CHUNK):
        h.update(chunk)
        done += len(chunk)
        if progress is not None:
            progress(done)
    return h.hexdigest()


def _cache():  # type: ignore[no-untyped-def]
    """The cache folder and whether a digest may be read back from it (not under ``--no-cache``)."""
    from gguftpl.templates.cachedisk import CacheFolder
    from gguftpl.templates.factstore import DISK_USE, cache_folder

    use = DISK_USE.get()
    if use == "off":
        return None, False
    try:
        folder = cache_folder()
    except Exception:  # noqa: BLE001 - a relative GGUFTPL_CACHE_DIR: the audit says so; here no cache
        return None, False
    return (CacheFolder(folder) if folder is not None else None), use == "on"


def _ticks(label: str, size: int) -> Callable[[int], None] | None:
    report = HASH_PROGRESS.get()
    if report is None or size < _PROGRESS_FROM:
        return None

    def tick(done: int) -> None:
        if done % _PROGRESS_STEP < _CHUNK or done == size:
            report(done, size, label)

    return tick


def check_blob(path: str, root: str, digest_hex: str, size: int | None, what: str) -> tuple[str, os.stat_result]:
    """``path`` resolved inside ``root`` once its sha256 is ``digest_hex`` (lowercase hex), its size ``size``
    (None: not known) and it has no holes; :class:`StoreError` (one line) otherwise."""
    real = inside(path, root, what)
    with open_regular(real, what=what, error=StoreError) as fh:
        st = os.fstat(fh.fileno())
        if size is not None and st.st_size != size:
            raise StoreError(
                f"{what} {printable(path)} is {st.st_size} bytes but its manifest says {size}: not the blob it names"
            )
        holes = _hole_bytes(fh.fileno(), st.st_size)
        if holes > MAX_HOLE_BYTES:
            raise StoreError(
                f"{what} {printable(path)} is sparse ({holes} of {st.st_size} bytes are holes): an unfinished "
                "download or not a real blob; not read"
            )
        key = f"{real}\0{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
        cache, read_back = _cache()
        if cache is not None and read_back and cache.read(_CACHE_KIND, key) == digest_hex:
            return real, st
        found = sha256_of(fh, _ticks(f"{what} {os.path.basename(real)[:19]}", st.st_size))
        HASHED[0] += st.st_size
    if found != digest_hex:
        raise StoreError(
            f"{what} {printable(path)} does not match its name: sha256 {found[:12]}…, expected {digest_hex[:12]}…"
        )
    if cache is not None:
        cache.write(_CACHE_KIND, key, found)
    return real, st
