"""A GGUF array the header reader skipped: decoded on demand, whole or one element at a time."""

from __future__ import annotations

import functools
import itertools
import operator
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gguftpl.errors import GGUFFormatError
from gguftpl.gguf.format import FMT, SIZE, ValueType


def without_ids(items: Sequence[Any], skip: Sequence[int]) -> list[Any]:
    """``items`` in id order without the ids in ``skip`` (sorted, few): slices joined at C speed, not a loop over
    every element (a 262k vocabulary with a few hundred special tokens)."""
    pieces = []
    start = 0
    for i in skip:
        pieces.append(items[start:i])
        start = i + 1
    pieces.append(items[start:])
    return list(itertools.chain.from_iterable(pieces))


@dataclass
class LazyArray:
    """An array that was skipped while parsing; ``decode()`` reads and decodes it."""

    elem_type: ValueType
    count: int
    offset: int  # first element
    end: int  # one past the last element
    byteorder: str
    _loader: Callable[[int, int], bytes] = field(repr=False, compare=False)
    _cache: list[Any] | None = field(default=None, repr=False, compare=False)
    _marks: tuple[int, ...] = field(default=(), repr=False, compare=False)
    """String arrays: the offset of every MARK_EVERY-th element, recorded by the skip pass, so one element is
    found without decoding the rest (a 262k-token vocabulary decodes in ~0.3 s; one token in microseconds)."""
    _short: tuple[bool, ...] = field(default=(), repr=False, compare=False)
    _invalid: list[int | None] = field(default_factory=list, repr=False, compare=False)
    """``first_invalid_utf8``'s answer once known (the fingerprint and the UTF-8 rule both ask)."""
    _elements: list[list[bytes] | None] = field(default_factory=list, repr=False, compare=False)
    """``element_bytes``' answer once known."""
    """String arrays from the skip pass: per block of MARK_EVERY, whether every string in it is under SHORT bytes."""

    def __len__(self) -> int:
        return self.count

    def item(self, index: int) -> Any:
        """Element ``index`` (0 <= index < count), decoding only what it must."""
        if self._cache is not None:
            return self._cache[index]
        if self.elem_type in FMT:
            at = self.offset + index * SIZE[self.elem_type]
            return struct.unpack_from(
                self.byteorder + FMT[self.elem_type], self._loader(at, at + SIZE[self.elem_type])
            )[0]
        if self.elem_type != ValueType.STRING or not self._marks:
            return self.decode()[index]
        block, start = self._block(index >> MARK_SHIFT)
        off = _walk_strings(block, index & (MARK_EVERY - 1), self.byteorder)
        (n,) = struct.unpack_from(self.byteorder + "Q", block, off)
        return _decode_strings(block[off : off + 8 + n], 1, self.byteorder, start + off)[0]

    def find_string(self, text: str) -> int | None:
        """The first index whose element is exactly ``text`` (a string array), without decoding the rest."""
        if self._cache is not None or self.elem_type != ValueType.STRING or not self._marks:
            items = self.decode()
            return items.index(text) if text in items else None
        data = text.encode("utf-8", "surrogatepass")
        needle = struct.pack(self.byteorder + "Q", len(data)) + data
        raw = self.raw()
        at = raw.find(needle)
        while at >= 0:
            index = self._index_at(raw, at)
            if index is not None:
                return index
            at = raw.find(needle, at + 1)
        return None

    def first_invalid_utf8(self) -> int | None:
        """The file offset of the first byte that leaves an element of this string array invalid UTF-8, or
        None; for a 262k vocabulary a third of the time of decoding every element. The codec runs over a
        checkpoint's block of raw bytes at once, with the length prefixes of 128 or more (not ASCII) blanked:
        every other prefix is ASCII, a boundary the codec cannot read across, so an element is judged on its
        own bytes exactly as a decode of it alone would."""
        if self.elem_type != ValueType.STRING:
            return None
        if not self._invalid:
            self._invalid.append(self._first_invalid_utf8())
        return self._invalid[0]

    def _first_invalid_utf8(self) -> int | None:
        elements = self.element_bytes()
        if elements is not None:
            try:  # NUL is ASCII, a boundary the codec cannot read across: each element is judged on its own bytes
                b"\x00".join(elements).decode("utf-8")
                return None
            except UnicodeDecodeError:
                pass  # where exactly: below
        raw = self.raw()
        if not self._marks:  # not from the reader's skip pass: no checkpoints to work by
            try:
                _decode_strings(raw, self.count, self.byteorder, self.offset)
            except GGUFFormatError as exc:
                return exc.offset
            return None
        unpack = struct.Struct(self.byteorder + "Q").unpack_from
        starts = [m - self.offset for m in self._marks]
        view = memoryview(raw)
        for start, end in zip(starts, [*starts[1:], len(raw)], strict=True):
            block: Any = view[start:end]
            if not block.tobytes().isascii():  # every element of an all-ASCII block is valid
                block = bytearray(block)
                off = 0
                while off < len(block):
                    (n,) = unpack(block, off)
                    if n >= 128:
                        block[off : off + 8] = bytes(8)
                    off += 8 + n
            try:
                str(block, "utf-8")
            except UnicodeDecodeError as exc:
                return self.offset + start + exc.start
        return None

    def element_bytes(self) -> list[bytes] | None:
        """Every element's bytes as stored, undecoded (a string array from the reader's skip pass, little-endian),
        split at C speed where a block's strings are all under SHORT bytes with no NUL in them (every block of
        most vocabularies: ~25 ms for 262k tokens, a fifth of decoding them); None for any other array."""
        if not self._elements:
            self._elements.append(self._element_bytes())
        return self._elements[0]

    def _element_bytes(self) -> list[bytes] | None:
        if self.elem_type != ValueType.STRING or self.byteorder != "<":
            return None
        if not self._marks or len(self._marks) != -(-self.count // MARK_EVERY):
            return None  # not checkpoints of the reader's skip pass: no block sizes to split by
        raw = self.raw()
        starts = [m - self.offset for m in self._marks]
        out: list[bytes] = []
        for b, (start, end) in enumerate(zip(starts, [*starts[1:], len(raw)], strict=True)):
            n = min(MARK_EVERY, self.count - (b << MARK_SHIFT))
            block = raw[start:end]
            pieces = _split_short(block, n) if b < len(self._short) and self._short[b] else None
            if pieces is None:
                pieces = _raw_strings(block, n)
                if pieces is None:  # the bytes changed since the skip pass: the callers' own paths say how
                    return None
            out.extend(pieces)
        return out

    def joined_except(self, skip: Sequence[int]) -> tuple[int, bytes]:
        """(how many, the NUL-joined bytes of) every element but those at the sorted ids ``skip``, undecoded
        (``element_bytes``; the decoded list where there is none), each checked to be valid UTF-8 on the way: one
        that is not raises GGUFFormatError with its offset, as ``decode`` does."""
        elements = self.element_bytes()
        if elements is None:
            items = self.decode()
            elements = [str(x).encode("utf-8", "surrogatepass") for x in items]
        kept = without_ids(elements, skip)
        data = b"\x00".join(kept)
        try:  # NUL is ASCII, a boundary the codec cannot read across: each element is judged on its own bytes
            data.decode("utf-8")
            for i in skip:
                elements[i].decode("utf-8")
        except UnicodeDecodeError:
            bad = self.first_invalid_utf8()
            raise GGUFFormatError("array string is not valid UTF-8", bad) from None
        if not self._invalid:
            self._invalid.append(None)
        return len(kept), data

    def _block(self, mark: int) -> tuple[bytes, int]:
        start = self._marks[mark]
        end = self._marks[mark + 1] if mark + 1 < len(self._marks) else self.end
        return self._loader(start, end), start

    def _index_at(self, raw: bytes, at: int) -> int | None:
        """The index of the element starting at byte ``at`` of ``raw`` (the array's bytes), or None when ``at``
        falls inside an element."""
        import bisect

        absolute = self.offset + at
        mark = bisect.bisect_right(self._marks, absolute) - 1
        off = self._marks[mark] - self.offset
        unpack = struct.Struct(self.byteorder + "Q").unpack_from
        for i in range(MARK_EVERY):
            if off == at:
                return (mark << MARK_SHIFT) + i
            if off > at:
                return None
            (n,) = unpack(raw, off)
            off += 8 + n
        return None

    def raw(self) -> bytes:
        """The array's bytes as stored (elements, without the count)."""
        return self._loader(self.offset, self.end)

    def decode(self) -> list[Any]:
        if self._cache is None:
            raw = self.raw()
            if self.elem_type == ValueType.STRING:
                self._cache = _decode_strings(raw, self.count, self.byteorder, self.offset)
            else:  # fixed-size elements (lazy arrays are never nested)
                self._cache = [x[0] for x in struct.iter_unpack(self.byteorder + FMT[self.elem_type], raw)]
        return self._cache

    def numpy(self) -> Any:
        """Fixed-size element arrays as a numpy array (cheap for scores/token types)."""
        import numpy as np

        if self.elem_type not in FMT:
            raise TypeError("only fixed-size arrays convert to numpy")
        dtype = np.dtype(self.byteorder + FMT[self.elem_type])
        return np.frombuffer(self._loader(self.offset, self.end), dtype=dtype, count=self.count)


MARK_SHIFT = 12
MARK_EVERY = 1 << MARK_SHIFT
SHORT = 256
"""A string under this many bytes has a length prefix of one byte and seven zero bytes (little-endian; the zeros
first big-endian): what ``short_block`` walks and ``LazyArray.element_bytes`` splits at C speed."""
_Z7 = bytes(7)


@functools.lru_cache(maxsize=2)
def _short_pattern(byteorder: str) -> re.Pattern[bytes]:
    """MARK_EVERY strings in a row, each under SHORT bytes: one alternative per length, each beginning with its own
    literal byte (the regex engine tries an alternative only when that byte matches), atomic so a failure does
    not backtrack through the others."""
    alts = []
    for n in range(SHORT):
        prefix = bytes([n]) + _Z7 if byteorder == "<" else _Z7 + bytes([n])
        alts.append(re.escape(prefix) + (b".{%d}" % n if n else b""))
    return re.compile(b"(?:(?>" + b"|".join(alts) + b")){%d}" % MARK_EVERY, re.DOTALL)


def short_block(data: Any, off: int, byteorder: str, endpos: int) -> int | None:
    """The offset just past MARK_EVERY length-prefixed strings from ``off`` in ``data[:endpos]`` when every one is
    under SHORT bytes (one match in C, compiled once: ~4x faster than the Python loop); else None."""
    m = _short_pattern(byteorder).match(data, off, endpos)
    return m.end() if m is not None else None


def _walk_strings(raw: bytes, count: int, byteorder: str) -> int:
    """The offset in ``raw`` just past ``count`` length-prefixed strings."""
    unpack = struct.Struct(byteorder + "Q").unpack_from
    off = 0
    for _ in range(count):
        (n,) = unpack(raw, off)
        off += 8 + n
    return off


_DROP_LAST = operator.itemgetter(slice(None, -1))


def _split_short(block: bytes, count: int) -> list[bytes] | None:
    """The ``count`` strings of ``block``, every one under SHORT bytes (the skip pass checked), when none is empty
    or holds a NUL: each prefix is then its length byte and the only run of seven zeros, so a split at those runs
    leaves each string followed by the next one's length byte. None otherwise."""
    if block.count(0) != 7 * count:  # seven per prefix; an empty string or a NUL inside adds more
        return None
    pieces = (block + b"\x01" + _Z7).split(_Z7)  # [len0], [str0 len1], ..., [str(n-1) \x01], []
    if len(pieces) != count + 2:
        return None
    return list(map(_DROP_LAST, pieces[1 : count + 1]))


def _raw_strings(block: bytes, count: int) -> list[bytes] | None:
    """The ``count`` strings of ``block`` (little-endian), or None when they do not fill it exactly."""
    unpack = struct.Struct("<Q").unpack_from
    out = []
    off = 0
    try:
        for _ in range(count):
            (n,) = unpack(block, off)
            out.append(block[off + 8 : off + 8 + n])
            off += 8 + n
    except struct.error:
        return None
    return out if off == len(block) else None


def _decode_strings(raw: bytes, count: int, byteorder: str, base: int) -> list[str]:
    """A string array (a vocabulary, merges): the tight loop, bounds already checked by the skip pass,
    checked again here because the bytes are re-read and may have changed."""
    unpack = struct.Struct(byteorder + "Q").unpack_from
    out: list[str] = []
    append = out.append
    off = 0
    size = len(raw)
    try:
        for _ in range(count):
            (n,) = unpack(raw, off)
            off += 8
            if n > size - off:
                raise GGUFFormatError(f"array string length {n} exceeds the array", base + off - 8)
            append(raw[off : off + n].decode("utf-8"))
            off += n
    except UnicodeDecodeError as exc:  # the offset of the bad byte itself, as for a key or a string value
        raise GGUFFormatError(f"array string is not valid UTF-8 ({exc.reason})", base + off + exc.start) from None
    except struct.error:
        raise GGUFFormatError("truncated string array", base + off) from None
    return out
