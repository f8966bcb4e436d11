"""Hostile and corrupted headers: only GGUFFormatError, bounded memory, never a hang."""

from __future__ import annotations

import random
import resource
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gguftpl.errors import GGUFFormatError
from gguftpl.gguf.reader import ValueType, read_header
from gguftpl.gguf.writer import Typed, encode_kv, encode_string, write_gguf


def _header(kvs: list[bytes], n_tensors: int = 0, version: int = 3, bo: str = "<") -> bytes:
    return b"GGUF" + struct.pack(bo + "IQQ", version, n_tensors, len(kvs)) + b"".join(kvs)


def _expect_error(tmp_path, data: bytes, match: str) -> GGUFFormatError:
    p = tmp_path / "bad.gguf"
    p.write_bytes(data)
    with pytest.raises(GGUFFormatError, match=match) as info:
        read_header(p)
    return info.value


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "empty file"),
        (b"GGML\x03\x00\x00\x00", "bad magic"),
        (b"GGUF\x01\x00\x00\x00" + bytes(16), "version 1 is obsolete"),
        (b"GGUF\x07\x00\x00\x00" + bytes(16), "unsupported GGUF version 7"),
        (b"GGUF\x03\x00", "truncated"),
        (_header([])[:-3], "truncated"),
    ],
)
def test_basic_rejections(tmp_path, data, match):
    _expect_error(tmp_path, data, match)


def test_huge_declared_counts_and_lengths(tmp_path):
    # a key/value count of 2**60 in a tiny file
    err = _expect_error(tmp_path, b"GGUF" + struct.pack("<IQQ", 3, 0, 2**60), "key/value count")
    assert err.offset == 16
    # a string length larger than the file
    kv = struct.pack("<Q", 2**62) + b"abcdefgh"
    err = _expect_error(tmp_path, _header([kv]), "key length")
    assert err.offset == 24
    # an array of 2**40 uint32 in a tiny file
    kv = encode_string("a") + struct.pack("<IIQ", 9, 4, 2**40)
    _expect_error(tmp_path, _header([kv]), "array count")
    # an array of 2**40 strings
    kv = encode_string("a") + struct.pack("<IIQ", 9, 8, 2**40)
    _expect_error(tmp_path, _header([kv]), "array count")
    # tensor count far beyond the file
    _expect_error(tmp_path, _header([encode_kv("x", 1)], n_tensors=2**50), "tensor count")


def test_structure_errors(tmp_path):
    _expect_error(tmp_path, _header([encode_string("k") + struct.pack("<I", 77)]), "unknown value type 77")
    _expect_error(
        tmp_path,
        _header([encode_string("k") + struct.pack("<I", 8) + struct.pack("<Q", 2) + b"\xff\xfe"]),
        "not valid UTF-8",
    )
    bad_len = encode_string("k") + struct.pack("<IQ", 8, 100) + b"ab"
    _expect_error(tmp_path, _header([bad_len]), "string value length 100")
    _expect_error(tmp_path, _header([encode_kv("k", 1), encode_kv("k", 2)]), "duplicate key")
    _expect_error(tmp_path, _header([encode_kv("general.alignment", Typed(ValueType.UINT32, 48))]), "power of two")
    _expect_error(tmp_path, _header([encode_kv("general.alignment", Typed(ValueType.UINT32, 0))]), "power of two")
    # nested arrays deeper than the bound
    nested = struct.pack("<IQ", 9, 1) * 20
    _expect_error(tmp_path, _header([encode_string("k") + struct.pack("<I", 9) + nested]), "nested deeper")
    # tensor with 100 dimensions
    tinfo = encode_string("t") + struct.pack("<I", 100) + bytes(1000)
    _expect_error(tmp_path, _header([], n_tensors=1) + tinfo, "dimensions")


def test_big_endian_detected(tmp_path):
    p = tmp_path / "be.gguf"
    write_gguf(p, {"general.architecture": "llama", "n": Typed(ValueType.UINT32, 7)}, byteorder=">")
    h = read_header(p)
    assert h.byteorder == ">" and h.version == 3 and h.get("n") == 7


def _mutations(base: bytes, n: int, seed: int):
    rng = random.Random(seed)
    for _ in range(n):
        data = bytearray(base)
        kind = rng.randrange(4)
        if kind == 0:  # flip bytes
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif kind == 1:  # truncate
            data = data[: rng.randrange(len(data))]
        elif kind == 2:  # plant a huge u64 somewhere
            pos = rng.randrange(max(1, len(data) - 8))
            data[pos : pos + 8] = struct.pack("<Q", rng.choice([2**63, 2**40, 2**32 + 1, len(data) * 3]))
        else:  # duplicate a slice
            a = rng.randrange(len(data))
            b = min(len(data), a + rng.randint(1, 64))
            data[a:a] = data[a:b]
        yield bytes(data)


def _real_header_bytes(path, limit: int) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(limit)


def test_mutation_loop_over_real_headers(tmp_path, corpus_file):
    """Thousands of corrupted real headers: each read ends in a header or a GGUFFormatError."""
    bases = [
        _real_header_bytes(corpus_file("ggml-vocab-phi-3.gguf"), 200_000),
        _real_header_bytes(corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf"), 4096),
    ]
    tiny = tmp_path / "tiny.gguf"
    from tests.conftest import CHATML, build_gguf

    build_gguf(tiny, templates={"default": CHATML, "tool_use": CHATML})
    bases.append(tiny.read_bytes())
    p = tmp_path / "m.gguf"
    outcomes = {"ok": 0, "error": 0}
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for i, base in enumerate(bases):
        for data in _mutations(base, 1000, seed=i):
            p.write_bytes(data)
            try:
                h = read_header(p)
                for kv in h.kv.values():  # lazy arrays must decode or raise the same error
                    kv.decoded()
                outcomes["ok"] += 1
            except GGUFFormatError:
                outcomes["error"] += 1
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert outcomes["error"] > 1000 and sum(outcomes.values()) == 3000
    # KiB on Linux: corrupted lengths never made the reader allocate what they declared
    assert rss_after - rss_before < 200_000


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=0, max_size=512))
def test_random_bytes_after_magic(tmp_path, tail):
    p = tmp_path / "h.gguf"
    p.write_bytes(b"GGUF\x03\x00\x00\x00" + tail)
    try:
        read_header(p)
    except GGUFFormatError:
        pass
