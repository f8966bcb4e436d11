"""A bounded fuzz test of the header reader, cheap enough for every CI run (issue 14).

Hypothesis builds GGUF headers that are valid in shape (keys the audit reads, every value type, arrays on
both sides of the lazy-decoding threshold, tensor infos and some tensor data), then damages them the way
files get damaged and attacked: a truncation, flipped bytes, a planted huge length, a duplicated slice.
Whatever comes out, reading the header, decoding every value, measuring the tensor data and loading the
template set ends in a result or a GGUFFormatError (a GGUFTplError for the template set): never another
exception, never a hang, never memory in proportion to a declared length.

The examples are bounded (count and size) and derandomized, so the test is repeatable and takes seconds.
"""

from __future__ import annotations

import resource
import struct
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gguftpl.errors import GGUFFormatError, GGUFTplError
from gguftpl.gguf.reader import LAZY_ARRAY_THRESHOLD, ByteSource, ValueType, read_header
from gguftpl.gguf.writer import Typed, encode_kv, encode_string

KEYS = [
    "general.architecture",
    "general.alignment",
    "general.name",
    "llama.context_length",
    "tokenizer.chat_template",
    "tokenizer.chat_template.tool_use",
    "tokenizer.chat_templates",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.add_bos_token",
]
INTS = {
    ValueType.UINT8: (0, 255),
    ValueType.INT8: (-128, 127),
    ValueType.UINT16: (0, 2**16 - 1),
    ValueType.INT16: (-(2**15), 2**15 - 1),
    ValueType.UINT32: (0, 2**32 - 1),
    ValueType.INT32: (-(2**31), 2**31 - 1),
    ValueType.UINT64: (0, 2**64 - 1),
    ValueType.INT64: (-(2**63), 2**63 - 1),
}
text = st.text(max_size=24)


def scalar(t: ValueType) -> st.SearchStrategy[Any]:
    if t in INTS:
        lo, hi = INTS[t]
        return st.integers(lo, hi)
    if t == ValueType.BOOL:
        return st.booleans()
    if t in (ValueType.FLOAT32, ValueType.FLOAT64):
        return st.floats(width=32 if t == ValueType.FLOAT32 else 64)
    return text


SCALARS = [t for t in ValueType if t != ValueType.ARRAY]


@st.composite
def values(draw: st.DrawFn) -> Typed:
    t = draw(st.sampled_from(list(ValueType)))
    if t != ValueType.ARRAY:
        return Typed(t, draw(scalar(t)))
    et = draw(st.sampled_from(SCALARS))
    # both sides of the threshold: small arrays are decoded while reading, large ones on demand
    n = draw(st.sampled_from([0, 1, 3, LAZY_ARRAY_THRESHOLD - 1, LAZY_ARRAY_THRESHOLD, LAZY_ARRAY_THRESHOLD + 7]))
    return Typed(ValueType.ARRAY, draw(st.lists(scalar(et), min_size=n, max_size=n)), et)


@st.composite
def headers(draw: st.DrawFn) -> bytes:
    keys = draw(st.lists(st.sampled_from(KEYS) | text, max_size=6, unique=True))
    templates = st.builds(Typed, st.just(ValueType.STRING), text)  # mostly strings where templates go
    kvs = [
        encode_kv(k, draw(templates | values() if k.startswith("tokenizer.chat_template") else values())) for k in keys
    ]
    tensors = []
    offset = 0
    for i in range(draw(st.integers(0, 3))):
        shape = draw(st.lists(st.integers(1, 64), min_size=1, max_size=3))
        ggml_type = draw(st.sampled_from([0, 1, 2, 8, 12, 30, 9999]))  # F32, F16, Q4_0, Q8_0, Q4_K, BF16, unknown
        dims = struct.pack(f"<I{len(shape)}Q", len(shape), *shape)
        tensors.append(encode_string(f"t{i}") + dims + struct.pack("<IQ", ggml_type, offset))
        offset += 32 * draw(st.integers(0, 8))
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(tensors)
    head += bytes(-len(head) % 32)
    return head + bytes(draw(st.integers(0, offset + 64)))


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(headers()))
    for _ in range(draw(st.integers(0, 3))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["truncate", "flip", "huge", "duplicate"]))
        if kind == "truncate":
            del data[at:]
        elif kind == "flip":
            data[at] = draw(st.integers(0, 255))
        elif kind == "huge":
            data[at : at + 8] = struct.pack("<Q", draw(st.sampled_from([2**63, 2**40, 2**32 + 1, 3 * len(data)])))
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 64))]
    return bytes(data)


class Memory(ByteSource):
    """The bytes of a file, served as the local reader serves a mapped one."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.size: int | None = len(raw)
        self.name = "fuzz.gguf"

    @property
    def data(self) -> bytes:
        return self.raw

    @property
    def available(self) -> int:
        return len(self.raw)

    def ensure(self, end: int) -> None:
        if end > len(self.raw):
            raise GGUFFormatError(f"truncated file: needs {end} bytes, has {len(self.raw)}", len(self.raw))

    def read_range(self, start: int, end: int) -> bytes:
        return self.raw[start:end]

    def close(self) -> None:
        pass


OUTCOMES: dict[str, int] = {"header": 0, "format error": 0, "with a template": 0}


def read_all(raw: bytes) -> None:
    from gguftpl.gguf.templateset import load_templateset
    from gguftpl.rules.container import metadata_wrong_type, truncated_tensor_data
    from gguftpl.rules.context import FileContext

    try:
        header = read_header(Memory(raw))
        for kv in header.kv.values():
            kv.decoded()
        header.data_end  # noqa: B018 - computed from the tensor infos, never read
        ctx = FileContext(file="fuzz.gguf", header=header)
        list(metadata_wrong_type(ctx))
        list(truncated_tensor_data(ctx))
    except GGUFFormatError:
        OUTCOMES["format error"] += 1
        return
    OUTCOMES["header"] += 1
    try:
        tset = load_templateset(header)
        tset.invalid_token_utf8()  # the GT001 check's question
        if tset.templates:
            OUTCOMES["with a template"] += 1
    except GGUFTplError:
        pass


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(damaged())
def fuzz(raw: bytes) -> None:
    read_all(raw)


def test_a_damaged_header_is_a_result_or_a_format_error_in_bounded_memory() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    OUTCOMES.update(dict.fromkeys(OUTCOMES, 0))
    fuzz()
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # KiB on Linux
    # readable and unreadable headers both came up, and headers with templates in them
    assert all(OUTCOMES.values()), OUTCOMES
    assert grown < 100_000, f"the reader grew this process by {grown} KiB"


# a string array with checkpoints every few elements (the reader puts them every 4,096): any bytes, some valid
# text, some elements of 128 bytes or more (their length prefix is not ASCII)
elements = st.lists(
    st.binary(max_size=6) | st.text(max_size=6).map(str.encode) | st.text(min_size=64, max_size=90).map(str.encode),
    min_size=1,
    max_size=40,
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(elements, st.sampled_from("<>"), st.integers(1, 9))
def test_the_quick_utf8_check_finds_what_a_full_decode_finds(items: list[bytes], order: str, every: int) -> None:
    """LazyArray.first_invalid_utf8 (the GT001 check) against decoding every element."""
    from gguftpl.gguf.lazyarray import LazyArray, _decode_strings

    base = 1000
    raw = b"".join(struct.pack(order + "Q", len(s)) + s for s in items)
    starts = [base + sum(8 + len(s) for s in items[:i]) for i in range(len(items))]
    array = LazyArray(
        ValueType.STRING,
        len(items),
        base,
        base + len(raw),
        order,
        lambda a, b: raw[a - base : b - base],
        _marks=tuple(starts[::every]),
    )
    try:
        _decode_strings(raw, len(items), order, base)
        expected = None
    except GGUFFormatError as exc:
        expected = exc.offset
    assert array.first_invalid_utf8() == expected


# blocks of the reader's real size (4,096 strings): short ones (under 256 bytes, the regex walk and the split),
# long ones (the Python loop), empty strings and NULs (the split refuses them), invalid UTF-8 here and there
_block_items = st.lists(
    st.sampled_from([b"a", b"\xe2\x96\x81w", b"", b"x\x00y", b"\xff", b"z" * 255, b"q" * 256, "é".encode() * 70]),
    min_size=1,
    max_size=4,
)


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.lists(_block_items, min_size=1, max_size=3), st.integers(0, 4095), st.sampled_from("<>"))
def test_the_fast_skip_and_split_agree_with_the_python_loop(picks: list[list[bytes]], tail: int, order: str) -> None:
    """The header's skip pass (a regex per block of short strings), ``element_bytes`` (a split per such block)
    and ``joined_except`` (the fingerprint's bytes) against decoding every string one by one."""
    from gguftpl.gguf.lazyarray import MARK_EVERY, LazyArray, _decode_strings
    from gguftpl.gguf.reader import _BytesSource

    items: list[bytes] = []
    for block in picks:  # each block: its few odd strings, then plain ones to fill it
        items += block + [b"t%d" % (i % 97) for i in range(MARK_EVERY - len(block))]
    items += [b"u"] * tail
    arr = b"".join(struct.pack(order + "Q", len(s)) + s for s in items)
    kv = encode_string("tokenizer.ggml.tokens", order) + struct.pack(order + "I", ValueType.ARRAY)
    kv += struct.pack(order + "IQ", ValueType.STRING, len(items)) + arr
    data = b"GGUF" + struct.pack(order + "IQQ", 3, 0, 1) + kv
    lazy = read_header(_BytesSource(data, "mem")).kv["tokenizer.ggml.tokens"].value
    assert isinstance(lazy, LazyArray) and lazy.end == len(data)
    starts = [lazy.offset + sum(8 + len(s) for s in items[:i]) for i in range(0, len(items), MARK_EVERY)]
    assert list(lazy._marks) == starts
    assert lazy._short[: len(picks)] == tuple(all(len(s) < 256 for s in b) for b in picks)
    got = lazy.element_bytes()
    assert got == (items if order == "<" else None)
    try:
        _decode_strings(arr, len(items), order, lazy.offset)
        expected = None
    except GGUFFormatError as exc:
        expected = exc.offset
    skip = [0, len(items) - 1] if len(items) > 1 else [0]
    if expected is None:
        count, joined = lazy.joined_except(skip)
        kept = [s for i, s in enumerate(items) if i not in skip]
        assert (count, joined) == (len(kept), b"\x00".join(kept))
    else:
        try:
            lazy.joined_except(skip)
            raise AssertionError("an invalid string was joined")
        except GGUFFormatError as exc:
            assert exc.offset == expected
    assert lazy.first_invalid_utf8() == expected
