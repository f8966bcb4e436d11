"""The header reader against gguf-py's reader on generated and real files."""

from __future__ import annotations

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
