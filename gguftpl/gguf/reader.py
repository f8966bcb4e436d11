"""Header-only GGUF reader.

Parses the magic, version, key/value section and tensor infos, and stops at the data section: tensor
data is never read. Large arrays (vocabulary, merges, scores) are skipped, not decoded, and decoded only
when a caller asks for them (``LazyArray.decode``). Every length and count is checked against what is
left of the file before anything is allocated, so hostile input raises ``GGUFFormatError`` with the byte
offset, never a MemoryError, a hang or a raw ``struct.error``.

Why by hand: gguf-py's ``GGUFReader`` decodes every array element and tensor info and raises on unknown
quant types; this reader is 25x+ faster on real vocabularies (see scripts/bench.py).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from gguftpl import limits
from gguftpl.errors import GGUFFormatError
from gguftpl.gguf.format import FMT, GGML_TYPES, SIZE, ValueType
from gguftpl.gguf.lazyarray import MARK_EVERY, SHORT, LazyArray, short_block
from gguftpl.safeio import open_regular

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_ARRAY_DEPTH = 8
MAX_KV_COUNT = 1 << 20
"""More key/value pairs than this is refused (real GGUFs have under a hundred; a million cost ~300 MB)."""
MAX_TENSOR_COUNT = 1 << 20
"""More tensors than this is refused (the largest MoE models have tens of thousands)."""
MAX_DIMS = 8  # ggml uses 4; leave room for future formats, but bound it


# Arrays at or above this many elements are skipped and decoded on demand.
LAZY_ARRAY_THRESHOLD = 64


class ByteSource(Protocol):
    """Where header bytes come from. ``data`` holds bytes [0, available) of the file."""

    size: int | None  # total file size when known
    name: str

    @property
    def data(self) -> Any: ...  # bytes-like supporting struct.unpack_from

    @property
    def available(self) -> int: ...

    def ensure(self, end: int) -> None:
        """Make bytes [0, end) available, or raise GGUFFormatError if the file is shorter."""

    def read_range(self, start: int, end: int) -> bytes:
        """Bytes [start, end), for decoding a lazy array later."""

    def close(self) -> None: ...


class LocalSource:
    """A local file, read with ``pread`` into one buffer: only the header's bytes are ever read.

    Not memory-mapped: a file truncated under a mapping (a ``cp`` rewriting it in place) kills the process
    with SIGBUS at the next touch of a page past the new end, which no Python code can catch; a short read is
    an error line (``GGUFFormatError``) and the folder audit goes on (issue 27). The buffer is anonymous memory
    reserved for RESERVE bytes at once (a page is used only once read into), so the kernel copies each read
    straight into it and nothing read is copied again; each read about doubles what it holds, from READ_AHEAD,
    up to READ_STEP more at a time, and never past ``limits.MAX_HEADER_BYTES`` (the remote reader's bound too).
    Far less address space than the mapping of the whole file it replaces."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.name = os.fspath(path)
        # a FIFO or device named as the model must fail at once, not block open() or read for ever
        self._fh = open_regular(self.name, what="GGUF file", error=GGUFFormatError)
        self._fd = self._fh.fileno()
        self._filled = 0
        self._closed = False
        try:
            self.size: int | None = os.fstat(self._fd).st_size
            if self.size == 0:
                raise GGUFFormatError("empty file, not a GGUF", 0)
            self._cap = min(self.size, limits.MAX_HEADER_BYTES)
            # anonymous memory (the file cannot reach it), reserved at once: only the pages read into are used
            self._buf: Any = mmap.mmap(-1, min(self._cap, RESERVE))
            self._fill(min(self._cap, READ_AHEAD))
        except (OSError, ValueError) as exc:
            self._fh.close()
            raise GGUFFormatError(f"cannot read {self.name}: {exc}") from exc
        except BaseException:
            self._fh.close()
            raise

    @property
    def data(self) -> Any:
        return self._buf

    @property
    def available(self) -> int:
        return self._filled

    def ensure(self, end: int) -> None:
        assert self.size is not None
        if end <= self._filled:
            return
        if end > self.size:
            raise GGUFFormatError(f"truncated file: needs {end} bytes, has {self.size}", self.size)
        if end > self._cap:
            raise GGUFFormatError(f"header would be larger than {self._cap} bytes; refusing to read it")
        self._fill(min(self._cap, max(end, self._filled + min(self._filled, READ_STEP))))

    def _fill(self, target: int) -> None:
        """Read bytes [available, target) into the buffer; fewer than the size said means the file shrank."""
        if target > len(self._buf):
            self._grow(target)
        view = memoryview(self._buf)
        try:
            while self._filled < target:
                try:
                    got = os.preadv(self._fd, [view[self._filled : target]], self._filled)
                except OSError as exc:
                    raise GGUFFormatError(f"cannot read {self.name}: {exc.strerror or exc}", self._filled) from None
                if got <= 0:
                    raise _shrank(self._filled)
                self._filled += got
        finally:
            view.release()

    def _grow(self, size: int) -> None:
        """A header past RESERVE (no real one): a buffer twice as large, what was read copied into it."""
        bigger = mmap.mmap(-1, min(self._cap, max(size, 2 * len(self._buf))))
        bigger[: self._filled] = self._buf[: self._filled]
        self._buf.close()
        self._buf = bigger

    def read_range(self, start: int, end: int) -> bytes:
        if not self._closed and end <= self._filled:
            return self._buf[start:end]  # type: ignore[no-any-return]
        if self._closed:
            with open_regular(self.name, what="GGUF file", error=GGUFFormatError) as fh:
                return _pread_exactly(fh.fileno(), self.name, start, end)
        return _pread_exactly(self._fd, self.name, start, end)

    def close(self) -> None:
        self._closed = True
        try:
            self._buf.close()  # lazy arrays keep this source (their loader), not the header's bytes
        finally:
            self._fh.close()


READ_AHEAD = 1 << 20
"""The first read of a local header (all of a small file); each later one about doubles what is held."""
READ_STEP = 4 << 20
"""The most one later read adds (a 11.4 MB header is read as 12 MB, not 16)."""
RESERVE = 64 << 20
"""Address space a local header's buffer takes at first: real headers are under 32 MB (a 262k vocabulary with
its merges ~ 16 MB); a larger one is copied into a buffer twice as large, up to the bound."""


def _shrank(got: int) -> GGUFFormatError:
    return GGUFFormatError("the file shrank while being read (is another program writing it?)", got)


def _pread_exactly(fd: int, name: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of the open file ``fd``; a short read (the file shrank or was replaced) is an error."""
    try:
        first = os.pread(fd, end - start, start)  # nearly always all of it: returned as read, not copied
    except OSError as exc:
        raise GGUFFormatError(f"cannot read {name}: {exc.strerror or exc}", start) from None
    if len(first) == end - start:
        return first
    if not first:
        raise _shrank(start)
    out = bytearray(first)
    while len(out) < end - start:
        try:
            chunk = os.pread(fd, end - start - len(out), start + len(out))
        except OSError as exc:
            raise GGUFFormatError(f"cannot read {name}: {exc.strerror or exc}", start + len(out)) from None
        if not chunk:
            raise _shrank(start + len(out))
        out += chunk
    return bytes(out)


@dataclass
class KV:
    key: str
    type: ValueType
    value: Any  # scalar, str, list (small arrays) or LazyArray
    elem_type: ValueType | None  # for arrays
    offset: int  # where the key's length prefix starts
    end: int  # one past the value

    def decoded(self) -> Any:
        if isinstance(self.value, LazyArray):
            return self.value.decode()
        return self.value


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # relative to the data section
    info_offset: int  # where this info starts in the file

    @property
    def type_name(self) -> str:
        t = GGML_TYPES.get(self.ggml_type)
        return t[0] if t else f"UNKNOWN({self.ggml_type})"

    @property
    def nbytes(self) -> int | None:
        t = GGML_TYPES.get(self.ggml_type)
        if t is None:
            return None
        n = 1
        for d in self.shape:
            n *= d
        block, size = t[1], t[2]
        return n // block * size


@dataclass
class GGUFHeader:
    path: str
    version: int
    byteorder: str  # "<" little endian, ">" big endian
    tensor_count: int
    kv_count: int
    kv: dict[str, KV]
    tensors: list[TensorInfo]
    kv_start: int  # first KV pair
    kv_end: int  # end of the KV section == start of tensor infos
    tensor_info_end: int
    alignment: int
    data_offset: int
    file_size: int | None
    _source: ByteSource | None = field(default=None, repr=False, compare=False)

    def __contains__(self, key: str) -> bool:
        return key in self.kv

    def get(self, key: str, default: Any = None) -> Any:
        """The decoded value of ``key`` (arrays as lists), or ``default``."""
        kv = self.kv.get(key)
        return default if kv is None else kv.decoded()

    def keys(self) -> Iterator[str]:
        return iter(self.kv)

    def key_at(self, offset: int) -> str | None:
        """The key whose key/value bytes hold ``offset`` (where a decoding error was met)."""
        return next((k for k, kv in self.kv.items() if kv.offset <= offset < kv.end), None)

    @property
    def data_end(self) -> int | None:
        """Where the tensor data should end, from the tensor infos (None if a type is unknown)."""
        end = 0
        for t in self.tensors:
            nb = t.nbytes
            if nb is None:
                return None
            end = max(end, t.offset + nb)
        return self.data_offset + end

    def close(self) -> None:
        if self._source is not None:
            self._source.close()

    def __enter__(self) -> GGUFHeader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _BytesSource:
    def __init__(self, raw: bytes, name: str) -> None:
        self._raw = raw
        self.size: int | None = len(raw)
        self.name = name

    @property
    def data(self) -> bytes:
        return self._raw

    @property
    def available(self) -> int:
        return len(self._raw)

    def ensure(self, end: int) -> None:
        if end > len(self._raw):
            raise GGUFFormatError(f"truncated data: needs {end} bytes, has {len(self._raw)}", len(self._raw))

    def read_range(self, start: int, end: int) -> bytes:
        return self._raw[start:end]

    def close(self) -> None:
        pass


class _Cursor:
    def __init__(self, src: ByteSource, off: int, byteorder: str = "<") -> None:
        self.src = src
        self.off = off
        self.set_order(byteorder)

    def set_order(self, byteorder: str) -> None:
        self.bo = byteorder
        self._structs = {t: struct.Struct(byteorder + f) for t, f in FMT.items()}
        self._u64 = self._structs[ValueType.UINT64]
        self._u32 = self._structs[ValueType.UINT32]

    def remaining_from(self, off: int) -> int | None:
        return None if self.src.size is None else self.src.size - off

    def _need(self, n: int) -> None:
        end = self.off + n
        if end > self.src.available:
            self.src.ensure(end)

    def scalar(self, t: ValueType) -> Any:
        s = self._structs[t]
        self._need(s.size)
        (v,) = s.unpack_from(self.src.data, self.off)
        self.off += s.size
        return v

    def u32(self) -> int:
        return int(self.scalar(ValueType.UINT32))

    def u64(self) -> int:
        return int(self.scalar(ValueType.UINT64))

    def check_count(self, count: int, min_item: int, what: str, at: int) -> None:
        rem = self.remaining_from(self.off)
        if rem is not None and count * min_item > rem:
            raise GGUFFormatError(
                f"{what} count {count} needs at least {count * min_item} bytes, only {rem} remain", at
            )

    def string(self, what: str = "string") -> str:
        at = self.off
        n = self.u64()
        rem = self.remaining_from(self.off)
        if rem is not None and n > rem:
            raise GGUFFormatError(f"{what} length {n} exceeds the {rem} bytes that remain", at)
        self._need(n)
        raw = self.src.data[self.off : self.off + n]
        self.off += n
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GGUFFormatError(f"{what} is not valid UTF-8 ({exc.reason})", at + 8 + exc.start) from None

    def value_type(self) -> ValueType:
        at = self.off
        raw = self.u32()
        try:
            return ValueType(raw)
        except ValueError:
            raise GGUFFormatError(f"unknown value type {raw}", at) from None

    def value(self, t: ValueType, depth: int) -> tuple[Any, ValueType | None]:
        if t == ValueType.STRING:
            return self.string("string value"), None
        if t == ValueType.ARRAY:
            at = self.off
            if depth >= MAX_ARRAY_DEPTH:
                raise GGUFFormatError(f"arrays nested deeper than {MAX_ARRAY_DEPTH}", at)
            et = self.value_type()
            count = self.u64()
            lazy = count >= LAZY_ARRAY_THRESHOLD
            return self.array(et, count, depth + 1, lazy, at), et
        return self.scalar(t), None

    def array(self, et: ValueType, count: int, depth: int, lazy: bool, at: int) -> Any:
        min_item = SIZE.get(et, 8 if et == ValueType.STRING else 12)
        self.check_count(count, min_item, "array", at)
        if not lazy:
            return self.array_items(et, count, depth, lazy=False)
        start = self.off
        if et in FMT:
            n = count * SIZE[et]
            self._need(n)
            self.off += n
        elif et == ValueType.STRING:
            marks, short = self._skip_strings(count)
            return LazyArray(
                et, count, start, self.off, self.bo, self.src.read_range, _marks=tuple(marks), _short=tuple(short)
            )
        else:  # nested arrays: parse, they are rare and small
            self.array_items(et, count, depth, lazy=False)
        return LazyArray(et, count, start, self.off, self.bo, self.src.read_range)

    def array_items(self, et: ValueType, count: int, depth: int, lazy: bool) -> list[Any]:
        if et in FMT:
            size = SIZE[et]
            self._need(count * size)
            fmt = struct.Struct(f"{self.bo}{count}{FMT[et]}")
            vals = list(fmt.unpack_from(self.src.data, self.off))
            self.off += count * size
            return vals
        out: list[Any] = []
        for _ in range(count):
            if et == ValueType.STRING:
                out.append(self.string("array string"))
            else:
                at = self.off
                if depth >= MAX_ARRAY_DEPTH:
                    raise GGUFFormatError(f"arrays nested deeper than {MAX_ARRAY_DEPTH}", at)
                sub_t = self.value_type()
                sub_n = self.u64()
                out.append(self.array(sub_t, sub_n, depth + 1, lazy, at))
        return out

    def _skip_strings(self, count: int) -> tuple[list[int], list[bool]]:
        """Skip ``count`` strings; returns the offset of every MARK_EVERY-th (LazyArray.item uses them) and, per
        block of MARK_EVERY, whether every string in it is under 256 bytes (``lazyarray.short_block``)."""
        # The hot loop of a header read: 262k tokens + merges. A block of strings under 256 bytes each (nearly
        # every block of a real vocabulary) is walked by one regular-expression match in C; any other block by
        # the Python loop, one test per element: whether the next length prefix is still in the buffer.
        unpack = self._u64.unpack_from
        off = self.off
        if off + 8 > self.src.available:
            self.src.ensure(off + 8)
        data = self.src.data
        limit = self.src.available - 8
        marks: list[int] = []
        short: list[bool] = []
        for first in range(0, count, MARK_EVERY):  # a mark per block, no test per element
            marks.append(off)
            todo = min(MARK_EVERY, count - first)
            # a match stays inside the buffer and, but for the last block, leaves the next length prefix in it
            # (else the Python loop below reads on, as it does for any block and for a last, partial one)
            end = short_block(data, off, self.bo, limit + 8) if todo == MARK_EVERY else None
            if end is not None and (end <= limit or first + todo == count):
                off = end
                short.append(True)
                continue
            longest = 0
            for i in range(todo):
                (n,) = unpack(data, off)
                off += 8 + n
                if n > longest:
                    longest = n
                if off > limit:
                    self._past_buffer(off, n, count - first - i - 1)
                    data, limit = self.src.data, self.src.available - 8
            short.append(longest < SHORT)
        self.off = off
        return marks, short

    def _past_buffer(self, off: int, n: int, left: int) -> None:
        """The string of length ``n`` ending at ``off`` leaves no whole length prefix in the buffer: refuse a length
        the file cannot hold, else read on (to the next prefix while ``left`` strings follow)."""
        size = self.src.size
        at = off - n  # where the string's bytes start
        if size is not None and n > size - at:
            raise GGUFFormatError(f"array string length {n} exceeds the {size - at} bytes that remain", at - 8)
        self.src.ensure(off + 8 if left else off)


def read_header(path_or_source: str | os.PathLike[str] | ByteSource, keep_open: bool = False) -> GGUFHeader:
    """Read a GGUF header. Lazy arrays stay decodable after the source is closed (they re-read the file)."""
    src: ByteSource
    if isinstance(path_or_source, (str, os.PathLike)):
        src = LocalSource(path_or_source)
    else:
        src = path_or_source
    try:
        header = _parse(src)
    except GGUFFormatError:
        src.close()
        raise
    except (struct.error, OverflowError, MemoryError, IndexError, ValueError) as exc:  # defence in depth
        src.close()
        raise GGUFFormatError(f"malformed GGUF header ({type(exc).__name__}: {exc})") from None
    if not keep_open:
        src.close()
    else:
        header._source = src
    return header


def _parse(src: ByteSource) -> GGUFHeader:
    cur = _Cursor(src, 0, "<")
    version = _magic_and_version(cur, src)
    tensor_count = cur.u64()
    kv_count = cur.u64()
    kv_start = cur.off
    kvs = _read_kvs(cur, kv_count)
    kv_end = cur.off
    tensors = _read_tensor_infos(cur, tensor_count)
    tensor_info_end = cur.off
    alignment = _alignment(kvs)
    data_offset = -(-tensor_info_end // alignment) * alignment
    size = src.size
    if size is not None and tensor_count and data_offset > size:
        raise GGUFFormatError(f"truncated file: data section starts at {data_offset}, file has {size} bytes", size)
    for ti in tensors:
        if ti.offset % alignment:
            msg = f"tensor {ti.name!r} offset {ti.offset} is not aligned to {alignment}"
            raise GGUFFormatError(msg, ti.info_offset)
    return GGUFHeader(
        path=src.name,
        version=version,
        byteorder=cur.bo,
        tensor_count=tensor_count,
        kv_count=kv_count,
        kv=kvs,
        tensors=tensors,
        kv_start=kv_start,
        kv_end=kv_end,
        tensor_info_end=tensor_info_end,
        alignment=alignment,
        data_offset=data_offset,
        file_size=size,
    )


def _magic_and_version(cur: _Cursor, src: ByteSource) -> int:
    """Check the magic and read the version; a byte-swapped version means a big-endian file."""
    cur._need(4)
    magic = bytes(src.data[0:4])
    if magic != GGUF_MAGIC:
        raise GGUFFormatError(f"bad magic {magic!r}, not a GGUF file", 0)
    cur.off = 4
    version = cur.u32()
    if version in (2, 3):
        return version
    swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
    if swapped in (2, 3):
        cur.set_order(">")
        return swapped
    if version == 1:
        raise GGUFFormatError("GGUF version 1 is obsolete and not supported", 4)
    raise GGUFFormatError(f"unsupported GGUF version {version}", 4)


def _read_kvs(cur: _Cursor, kv_count: int) -> dict[str, KV]:
    if kv_count > MAX_KV_COUNT:  # real files hold under a hundred; each costs Python objects, bound them
        raise GGUFFormatError(f"key/value count {kv_count:,} exceeds the bound of {MAX_KV_COUNT:,}", 16)
    cur.check_count(kv_count, 8 + 4 + 1, "key/value", 16)
    kvs: dict[str, KV] = {}
    for _ in range(kv_count):
        at = cur.off
        key = cur.string("key")
        if key in kvs:
            raise GGUFFormatError(f"duplicate key {key!r}", at)
        t = cur.value_type()
        val, et = cur.value(t, depth=0)
        kvs[key] = KV(key, t, val, et, at, cur.off)
    return kvs


def _read_tensor_infos(cur: _Cursor, tensor_count: int) -> list[TensorInfo]:
    if tensor_count > MAX_TENSOR_COUNT:
        raise GGUFFormatError(f"tensor count {tensor_count:,} exceeds the bound of {MAX_TENSOR_COUNT:,}", 8)
    cur.check_count(tensor_count, 8 + 4 + 4 + 8, "tensor", 8)
    tensors: list[TensorInfo] = []
    for _ in range(tensor_count):
        at = cur.off
        name = cur.string("tensor name")
        n_dims = cur.u32()
        if n_dims > MAX_DIMS:
            raise GGUFFormatError(f"tensor {name!r} has {n_dims} dimensions (max {MAX_DIMS})", at)
        shape = tuple(cur.u64() for _ in range(n_dims))
        ggml_type = cur.u32()
        offset = cur.u64()
        tensors.append(TensorInfo(name, shape, ggml_type, offset, at))
    return tensors


_INT_TYPES = (ValueType.UINT32, ValueType.UINT64, ValueType.INT32, ValueType.UINT16, ValueType.UINT8)


def _alignment(kvs: dict[str, KV]) -> int:
    akv = kvs.get("general.alignment")
    if akv is None:
        return DEFAULT_ALIGNMENT
    if akv.type not in _INT_TYPES:
        raise GGUFFormatError("general.alignment is not an integer", akv.offset)
    alignment = int(akv.value)
    if alignment <= 0 or alignment & (alignment - 1):
        raise GGUFFormatError(f"general.alignment {alignment} is not a power of two", akv.offset)
    return alignment
