"""Writing GGUFs: the value encoding, small files from scratch (samples, test fixtures, llama.cpp stand-ins),
and the atomic output every GGUF gguftpl writes goes through (rewrites: gguf/rewrite.py).

An output is written to an unnamed temporary file in the destination folder (``O_TMPFILE``; a named
dot-file where the filesystem lacks it), given its permissions, fsynced, and renamed over the target: an
interrupted or killed run leaves no file at the target.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import struct
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from gguftpl.errors import PatchError
from gguftpl.gguf.format import FMT, ValueType
from gguftpl.gguf.reader import DEFAULT_ALIGNMENT, GGUF_MAGIC, TensorInfo
from gguftpl.safeio import check_output_folder


@dataclass(frozen=True)
class Typed:
    """A metadata value with an explicit GGUF type (``elem_type`` for arrays)."""

    type: ValueType
    value: Any
    elem_type: ValueType | None = None


def typed_value(value: Any) -> Typed:
    """Infer a GGUF type for a plain Python value; ints become INT32/UINT32/INT64 by range."""
    if isinstance(value, Typed):
        return value
    if isinstance(value, bool):
        return Typed(ValueType.BOOL, value)
    if isinstance(value, int):
        return Typed(_int_type(value), value)
    if isinstance(value, float):
        return Typed(ValueType.FLOAT32, value)
    if isinstance(value, str):
        return Typed(ValueType.STRING, value)
    if isinstance(value, (list, tuple)):
        if not value:
            return Typed(ValueType.ARRAY, [], ValueType.STRING)
        first = typed_value(value[0])
        et = first.type
        if et in (ValueType.INT32, ValueType.UINT32, ValueType.INT64):
            et = ValueType.INT32 if all(-(2**31) <= int(v) < 2**31 for v in value) else ValueType.INT64
        return Typed(ValueType.ARRAY, list(value), et)
    raise TypeError(f"cannot infer a GGUF type for {type(value).__name__}")


def _int_type(v: int) -> ValueType:
    if 0 <= v < 2**32:
        return ValueType.UINT32
    if -(2**31) <= v < 2**31:
        return ValueType.INT32
    return ValueType.INT64 if v < 0 else ValueType.UINT64


def encode_string(s: str, bo: str = "<") -> bytes:
    raw = s.encode("utf-8")
    return struct.pack(bo + "Q", len(raw)) + raw


def encode_value(tv: Typed, bo: str = "<") -> bytes:
    """Type tag is not included: the bytes that follow it."""
    t = tv.type
    if t == ValueType.STRING:
        return encode_string(tv.value, bo)
    if t == ValueType.ARRAY:
        et = tv.elem_type if tv.elem_type is not None else typed_value(tv.value).elem_type
        assert et is not None
        items = list(tv.value)
        head = struct.pack(bo + "IQ", int(et), len(items))
        if et in FMT:
            return head + struct.pack(f"{bo}{len(items)}{FMT[et]}", *items)
        if et == ValueType.STRING:
            return head + b"".join(encode_string(s, bo) for s in items)
        if et == ValueType.ARRAY:
            # each element is itself (elem type, count, items), exactly what encode_value gives an array
            return head + b"".join(encode_value(typed_value(sub), bo) for sub in items)
        raise TypeError(f"unsupported array element type {et!r}")
    if t in FMT:
        return struct.pack(bo + FMT[t], tv.value)
    raise TypeError(f"unsupported value type {t!r}")


def encode_kv(key: str, value: Any, bo: str = "<") -> bytes:
    tv = typed_value(value)
    return encode_string(key, bo) + struct.pack(bo + "I", int(tv.type)) + encode_value(tv, bo)


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    data: bytes


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def write_gguf(
    path: str | os.PathLike[str],
    kv: Mapping[str, Any] | Iterable[tuple[str, Any]],
    tensors: Sequence[TensorSpec | tuple[str, Sequence[int], int, bytes]] = (),
    *,
    version: int = 3,
    byteorder: str = "<",
) -> None:
    """Write a complete GGUF (small files: samples, fixtures, stand-ins). Values are plain Python values
    (types inferred) or ``Typed``. ``general.alignment`` in ``kv`` sets the alignment."""
    items = list(kv.items()) if isinstance(kv, Mapping) else list(kv)
    specs = [t if isinstance(t, TensorSpec) else TensorSpec(t[0], tuple(t[1]), t[2], t[3]) for t in tensors]
    alignment = DEFAULT_ALIGNMENT
    for k, v in items:
        if k == "general.alignment":
            alignment = int(v.value if isinstance(v, Typed) else v)
    bo = byteorder
    out = bytearray()
    out += GGUF_MAGIC + struct.pack(bo + "IQQ", version, len(specs), len(items))
    for k, v in items:
        out += encode_kv(k, v, bo)
    offset = 0
    offsets = []
    sizes = []
    for t in specs:
        # empty data with a known type reserves the declared size (zeros, sparse on disk): for benchmarks
        size = len(t.data) or TensorInfo(t.name, t.shape, t.ggml_type, 0, 0).nbytes or 0
        offsets.append(offset)
        sizes.append(size)
        offset = _align(offset + size, alignment)
    for t, off in zip(specs, offsets, strict=True):
        out += encode_string(t.name, bo) + struct.pack(bo + "I", len(t.shape))
        out += struct.pack(f"{bo}{len(t.shape)}Q", *t.shape) + struct.pack(bo + "IQ", t.ggml_type, off)
    out += b"\0" * (_align(len(out), alignment) - len(out))
    data_offset = len(out)
    end = data_offset + (offsets[-1] + sizes[-1] if specs else 0)
    with atomic_output(path, overwrite=True) as fh:
        fh.write(out)
        for t, off in zip(specs, offsets, strict=True):
            if t.data:
                os.lseek(fh.fileno(), data_offset + off, os.SEEK_SET)
                fh.write(t.data)
        os.ftruncate(fh.fileno(), end)


# --------------------------------------------------------------------------------------------- atomic output


@dataclass
class AtomicFile:
    fh: IO[bytes]
    readable_path: str
    """A path that reads the not-yet-renamed output (for verification before it goes live)."""

    def write(self, data: bytes | bytearray | memoryview) -> int:
        return self.fh.write(data) or 0

    def fileno(self) -> int:
        return self.fh.fileno()

    def flush(self) -> None:
        self.fh.flush()


def current_umask() -> int:
    """This process's umask, read without changing it where Linux shows it (/proc/self/status)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


@dataclass(frozen=True)
class Permissions:
    """The mode bits and owner an output gets just before it goes live (``-1``: the running user's)."""

    mode: int
    uid: int = -1
    gid: int = -1

    @classmethod
    def new_file(cls, base: int = 0o644) -> Permissions:
        """A new file's: ``base`` less the umask."""
        return cls(base & ~current_umask())

    @classmethod
    def kept(cls, st: os.stat_result) -> Permissions:
        """Exactly those of the file ``st`` describes: its mode bits, owner and group."""
        return cls(stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)

    @classmethod
    def like(cls, st: os.stat_result) -> Permissions:
        """A new file made from the file ``st`` describes: its read/write/execute bits less the umask, never
        more than it has; owned by the running user."""
        return cls.new_file(stat.S_IMODE(st.st_mode) & 0o777)


def _apply_permissions(fd: int, perms: Permissions) -> None:
    """Give the output ``perms``. Where the owner or group cannot be kept (not root), drop the bits that
    would then mean someone else: set-user-ID with another owner, the group's bits with another group."""
    mode = perms.mode
    if perms.uid >= 0 or perms.gid >= 0:
        try:
            os.fchown(fd, perms.uid, perms.gid)
        except PermissionError:
            mode &= ~stat.S_ISUID
            try:
                os.fchown(fd, -1, perms.gid)  # a group the user is in can be kept
            except PermissionError:
                mode &= ~(stat.S_ISGID | stat.S_IRWXG)
    os.fchmod(fd, mode)  # after fchown, which clears set-user-ID and set-group-ID


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike[str], *, overwrite: bool, permissions: Permissions | None = None
) -> Iterator[AtomicFile]:
    """Yield a binary file that becomes ``path`` only when the block succeeds (permissions, fsync, rename).

    Uses an unnamed O_TMPFILE inode where possible, so even SIGKILL leaves nothing behind; else a hidden
    temp file in the same folder (private until it is complete), removed on any error or interrupt.
    ``permissions`` default to a new file's (0644 less the umask).
    """
    perms = permissions if permissions is not None else Permissions.new_file()
    target = os.path.abspath(os.fspath(path))
    folder = check_output_folder(target, error=PatchError)
    if not overwrite and os.path.lexists(target):
        raise PatchError(f"{path} exists; use --force to overwrite it")
    if os.path.lexists(target) and not os.path.isfile(target):
        # the rename would destroy a device node, FIFO or folder instead of writing into it
        raise PatchError(f"{path} exists and is not a regular file; refusing to replace it")
    fd = -1
    tmp_name: str | None = None
    o_tmpfile = getattr(os, "O_TMPFILE", 0)
    if o_tmpfile:
        try:
            fd = os.open(folder, o_tmpfile | os.O_WRONLY, 0o600)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
                raise
            fd = -1
    if fd < 0:
        # a short name of its own, not the target's plus a suffix: a target name near NAME_MAX must still work
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=TEMP_PREFIX, suffix=".tmp")
    fh = os.fdopen(fd, "wb", buffering=0)
    readable = tmp_name if tmp_name is not None else f"/proc/self/fd/{fd}"
    try:
        yield AtomicFile(fh, readable)
        fh.flush()
        _apply_permissions(fh.fileno(), perms)
        os.fsync(fh.fileno())
        if tmp_name is None:
            tmp_name = _link_unnamed(fh.fileno(), folder)  # a name next to the target, then renamed into place
        os.replace(tmp_name, target)
        tmp_name = None
        _fsync_dir(folder)
    finally:
        fh.close()
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)


TEMP_PREFIX = ".gguftpl-"
"""The temporary names in the output's folder: ``.gguftpl-`` + 8 random characters + ``.tmp`` (21 bytes, whatever
the output's name: one of 255 bytes still fits the filesystem's limit)."""


def _link_unnamed(fd: int, folder: str) -> str:
    """Give the unnamed O_TMPFILE inode ``fd`` a short random name in ``folder``; returns it."""
    # linkat(AT_SYMLINK_FOLLOW) on /proc/self/fd/N; a dir fd makes CPython use linkat, not link
    proc_fd = os.open("/proc/self/fd", os.O_RDONLY)
    try:
        for _ in range(100):
            name = os.path.join(folder, TEMP_PREFIX + secrets.token_hex(4) + ".tmp")
            try:
                os.link(str(fd), name, src_dir_fd=proc_fd, follow_symlinks=True)
            except FileExistsError:
                continue
            return name
    finally:
        os.close(proc_fd)
    raise PatchError(f"cannot name the output in {folder}: every temporary name tried exists")


def _fsync_dir(folder: str) -> None:
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
