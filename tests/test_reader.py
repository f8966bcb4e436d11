"""The header reader against gguf-py's reader on generated and real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gguftpl.gguf.reader import LazyArray, ValueType, read_header
from gguftpl.gguf.writer import Typed, write_gguf
from tests.conftest import CORPUS_FILES, gguf_py_reader


def _gguf_py_fields(path: Path, reader: object = None) -> dict[str, object]:
    import gguf

    reader = reader or gguf.GGUFReader(str(path))
    out: dict[str, object] = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        out[name] = field.contents()
    return out


def _norm(v: object) -> object:
    if isinstance(v, float):
        return round(v, 5)
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


@pytest.mark.parametrize("name", sorted(CORPUS_FILES))
def test_corpus_matches_gguf_py(corpus_file, name):
    path = corpus_file(name)
    ours = read_header(path)
    reader = gguf_py_reader(path)  # each file read once by gguf-py, into memory
    theirs = _gguf_py_fields(path, reader)
    assert set(ours.kv) == set(theirs)
    for key, value in theirs.items():
        assert _norm(ours.get(key)) == _norm(value), key
    assert [t.name for t in ours.tensors] == [t.name for t in reader.tensors]
    assert [t.shape for t in ours.tensors] == [tuple(int(x) for x in t.shape) for t in reader.tensors]
    if reader.tensors:
        assert ours.data_offset == reader.data_offset


def test_generated_all_types_roundtrip(tmp_path):
    kv = {
        "general.architecture": "llama",
        "u8": Typed(ValueType.UINT8, 200),
        "i8": Typed(ValueType.INT8, -5),
        "u16": Typed(ValueType.UINT16, 60000),
        "i16": Typed(ValueType.INT16, -30000),
        "u32": Typed(ValueType.UINT32, 4_000_000_000),
        "i32": Typed(ValueType.INT32, -2_000_000_000),
        "f32": Typed(ValueType.FLOAT32, 0.5),
        "b": Typed(ValueType.BOOL, True),
        "s": "héllo\nworld",
        "u64": Typed(ValueType.UINT64, 2**63 + 1),
        "i64": Typed(ValueType.INT64, -(2**62)),
        "f64": Typed(ValueType.FLOAT64, 1e300),
        "arr.small": Typed(ValueType.ARRAY, [1, 2, 3], ValueType.INT32),
        "arr.big": Typed(ValueType.ARRAY, list(range(1000)), ValueType.UINT16),
        "arr.strings": Typed(ValueType.ARRAY, [f"tok{i}" for i in range(500)], ValueType.STRING),
        "arr.nested": Typed(ValueType.ARRAY, [[1, 2], [3]], ValueType.ARRAY),
    }
    for order in ("<", ">"):
        path = tmp_path / f"all{order == '>'}.gguf"
        write_gguf(path, kv, [("t", (4, 2), 0, bytes(range(32)))], byteorder=order)
        h = read_header(path)
        assert h.byteorder == order
        assert isinstance(h.kv["arr.big"].value, LazyArray)
        assert h.get("arr.big") == list(range(1000))
        assert h.get("arr.strings")[499] == "tok499"
        assert h.get("arr.nested") == [[1, 2], [3]]
        assert h.get("s") == "héllo\nworld"
        assert h.get("u64") == 2**63 + 1 and h.get("f64") == 1e300 and h.get("i8") == -5
        assert h.tensors[0].shape == (4, 2) and h.data_offset % 32 == 0
        with open(path, "rb") as fh:
            fh.seek(h.data_offset)
            assert fh.read(32) == bytes(range(32))
    # gguf-py agrees on the little-endian file (it flattens nested arrays, so leave those out)
    theirs = _gguf_py_fields(tmp_path / "allFalse.gguf")
    del theirs["arr.nested"]
    for key, value in theirs.items():
        assert _norm(read_header(tmp_path / "allFalse.gguf").get(key)) == _norm(value), key


def test_unknown_tensor_type_is_not_fatal(tmp_path):
    path = tmp_path / "odd.gguf"
    write_gguf(path, {"general.architecture": "llama"}, [("x", (8,), 999, bytes(64))])
    h = read_header(path)
    assert h.tensors[0].type_name == "UNKNOWN(999)"
    assert h.tensors[0].nbytes is None
    import gguf

    with pytest.raises(Exception):  # noqa: B017 - gguf-py's reader fails here, which is why we have our own
        gguf.GGUFReader(str(path))


def test_ggml_type_table_matches_gguf_py():
    import gguf

    from gguftpl.gguf.format import GGML_TYPES

    for type_id, (name, block, size) in GGML_TYPES.items():
        q = gguf.GGMLQuantizationType(type_id)
        assert q.name == name
        assert gguf.GGML_QUANT_SIZES[q] == (block, size)


# --- issue 27 item 10: read with pread into a buffer of its own, never a mapping of the file -----------------


def _header_facts(h) -> tuple:
    tokens = h.kv["tokenizer.ggml.tokens"].decoded()
    return (h.kv_count, h.tensor_count, h.data_offset, len(tokens), tokens[:50], tokens[-50:], h.get("general.name"))


def test_a_header_read_in_small_pieces_is_the_same_header(corpus_file, monkeypatch: pytest.MonkeyPatch) -> None:
    """The buffer's first read, its later ones and a header larger than its first reservation (copied into a
    larger one) give exactly what one read of it all gives."""
    from gguftpl.gguf import reader

    path = corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf")
    want = _header_facts(read_header(path))
    monkeypatch.setattr(reader, "READ_AHEAD", 4096)
    monkeypatch.setattr(reader, "READ_STEP", 64 * 1024)
    monkeypatch.setattr(reader, "RESERVE", 100_000)
    assert _header_facts(read_header(path)) == want


def test_a_file_that_shrinks_while_read_is_a_format_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gguftpl.errors import GGUFFormatError
    from gguftpl.gguf import reader

    path = tmp_path / "m.gguf"
    tokens = [f"tok{i}" for i in range(5000)]
    write_gguf(path, {"general.architecture": "llama", "tokenizer.ggml.tokens": tokens})
    monkeypatch.setattr(reader, "READ_AHEAD", 4096)
    src = reader.LocalSource(path)  # has read its first 4096 bytes
    os.truncate(path, 10_000)  # as a cp over it does, before it writes again
    with pytest.raises(GGUFFormatError, match="shrank while being read") as err:
        read_header(src)
    assert err.value.offset == 10_000
    # a lazy array decoded after its header was closed re-reads the file: cut short, it is the same error
    write_gguf(path, {"general.architecture": "llama", "tokenizer.ggml.tokens": tokens})
    header = read_header(path)
    os.truncate(path, 10_000)
    with pytest.raises(GGUFFormatError, match="shrank while being read"):
        header.kv["tokenizer.ggml.tokens"].decoded()
