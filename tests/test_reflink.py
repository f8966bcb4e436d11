"""Patching at the cost of the header on a reflink filesystem (a loop-mounted XFS made by the test).

The tensor region is cloned, not copied: the output's data blocks are the source's own blocks, proven by
their extents (FIEMAP) without reading them; the output stays a GGUF that gguf-py and llama.cpp load.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from gguftpl.errors import PatchError
from gguftpl.gguf import reflink
from gguftpl.gguf.reader import read_header
from gguftpl.gguf.rewrite import BYTE_PROOF, CLONE_METHOD, PADDING_KEY, PADDING_TEXT, SHARED_PROOF, rewrite
from gguftpl.gguf.templateset import load_templateset
from gguftpl.gguf.writer import write_gguf
from gguftpl.patching import patch_templates
from tests.conftest import CHATML, ROOT, gguf_py_reader
from tests.xfsloop import used_bytes

HERMES_TOOL_USE = (
    ROOT / "upstream_templates" / "NousResearch" / "Hermes-2-Pro-Mistral-7B" / "tool_use.jinja"
).read_text(encoding="utf-8")
BLOCK = 4096


@pytest.fixture
def xfs(xfs_dir: Path, request: pytest.FixtureRequest) -> Path:
    """A fresh folder on the session's XFS for one test (removed after it: the filesystem is small)."""
    folder = xfs_dir / request.node.name.replace("/", "_").replace("[", "_").replace("]", "")
    folder.mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _random_gguf(path: Path, n_bytes: int, *, seed: int = 5, **write: object) -> Path:
    kv: dict[str, object] = {"general.architecture": "llama", "tokenizer.chat_template": CHATML}
    kv.update(write.pop("kv", {}))  # type: ignore[call-overload]
    data = random.Random(seed).randbytes(n_bytes)
    write_gguf(path, kv, [("blob", (n_bytes,), 24, data)], **write)  # type: ignore[arg-type]
    return path


def _data(path: Path) -> bytes:
    with read_header(path) as h:
        offset = h.data_offset
    return path.read_bytes()[offset:]


def _same_tensors_gguf_py(a: Path, b: Path) -> bool:
    """gguf-py parses both files and slices each tensor by its own arithmetic: same names, same bytes."""
    import numpy as np

    ta, tb = gguf_py_reader(a).tensors, gguf_py_reader(b).tensors
    return [t.name for t in ta] == [t.name for t in tb] and all(
        np.array_equal(x.data.view(np.uint8), y.data.view(np.uint8)) for x, y in zip(ta, tb, strict=True)
    )


def test_real_model_patched_on_xfs_shares_its_tensors_and_loads_in_llama_cpp(xfs, corpus_file):
    src = xfs / "smol.gguf"
    shutil.copyfile(corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf"), src)  # from ext4: a real copy
    out = xfs / "smol.tool_use.gguf"
    used = used_bytes(xfs)
    result = patch_templates(src, out, {"tool_use": HERMES_TOOL_USE})
    grew = used_bytes(xfs) - used
    p = result.proof
    assert p.copy_method == CLONE_METHOD and p.proof_method == SHARED_PROOF and p.data_identical
    assert p.data_bytes > 90_000_000 and p.data_bytes - p.shared_bytes < BLOCK
    assert (p.output_data_offset - p.source_data_offset) % BLOCK == 0
    assert PADDING_KEY in p.kv_added and "tokenizer.chat_template.tool_use" in p.kv_added
    # the new header (1.7 MB: SmolLM2's vocabulary) and the filesystem's bookkeeping, not 98 MB of tensors
    assert grew < p.output_data_offset + (256 << 10) and grew < 64 << 20, grew
    # independent of the writer: gguf-py reads every tensor and the templates of the padded file
    reader = gguf_py_reader(out)
    assert reader.data_offset == p.output_data_offset
    assert reader.fields["tokenizer.chat_template.tool_use"].contents() == HERMES_TOOL_USE
    assert _same_tensors_gguf_py(out, src)
    # and llama.cpp loads the real weights from it
    pytest.importorskip("xllamacpp")
    from gguftpl.engines.llamacpp_session import LlamaCppSession

    with LlamaCppSession(out, load_weights=True) as session:
        props = session.props()
    assert props["chat_template_tool_use"] == HERMES_TOOL_USE.removesuffix("\n")
    assert "<|im_start|>" in props["chat_template"]


def test_in_place_on_xfs_needs_no_second_copy_and_keeps_permissions(xfs):
    src = _random_gguf(xfs / "m.gguf", 48 << 20)
    data = _data(src)
    os.chmod(src, 0o600)
    os.chown(src, 1234, 5678)
    inode = src.stat().st_ino
    used = used_bytes(xfs)
    result = patch_templates(src, None, {"tool_use": HERMES_TOOL_USE}, in_place=True)
    assert used_bytes(xfs) - used < 1 << 20  # 48 MiB of tensors, no second copy
    assert result.proof.proof_method == SHARED_PROOF
    st = src.stat()
    assert st.st_ino != inode and (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o600, 1234, 5678)
    assert _data(src) == data


def test_padding_is_resized_on_every_patch_and_follows_alignment(xfs):
    """A second patch replaces the padding key (never two); an alignment wider than a block is kept; a
    big-endian file is padded in its own byte order."""
    src = _random_gguf(xfs / "m.gguf", 3 << 20, kv={"general.alignment": 65536})
    one, two = xfs / "one.gguf", xfs / "two.gguf"
    rewrite(src, one, set_kv={"tokenizer.chat_template.tool_use": HERMES_TOOL_USE})
    p = rewrite(one, two, set_kv={"tokenizer.chat_template.tool_use": "{{ 'short' }}"})
    assert p.copy_method == CLONE_METHOD and p.kv_changed == ["tokenizer.chat_template.tool_use", PADDING_KEY]
    with read_header(two) as h:
        assert list(h.kv).count(PADDING_KEY) == 1 and h.data_offset % 65536 == 0
        assert h.get(PADDING_KEY).rstrip(" ") == PADDING_TEXT
    assert _data(two) == _data(src)

    big = _random_gguf(xfs / "be.gguf", 2 << 20, byteorder=">")
    p = rewrite(big, xfs / "be2.gguf", set_kv={"tokenizer.chat_template": "{{ 'x' }}"})
    assert p.copy_method == CLONE_METHOD
    with read_header(xfs / "be2.gguf") as h:
        assert h.byteorder == ">" and h.get("tokenizer.chat_template") == "{{ 'x' }}"
    assert _data(xfs / "be2.gguf") == _data(big)


def test_padded_tiny_model_loads_in_llama_cpp(xfs, make_gguf, monkeypatch):
    """The smallest loadable model, padded (its tensors are under the clone threshold: lowered here)."""
    import gguftpl.gguf.rewrite as rw

    monkeypatch.setattr(rw, "CLONE_MIN", 0)
    src = xfs / "tiny.gguf"
    shutil.copyfile(make_gguf("tiny.gguf", templates={"default": CHATML}), src)
    out = xfs / "tiny.tool_use.gguf"
    p = patch_templates(src, out, {"tool_use": HERMES_TOOL_USE}).proof
    assert p.copy_method == CLONE_METHOD and p.proof_method == SHARED_PROOF
    assert _same_tensors_gguf_py(out, src)
    pytest.importorskip("xllamacpp")
    from gguftpl.engines.llamacpp_session import LlamaCppSession

    with LlamaCppSession(out, load_weights=True) as session:
        assert session.props()["chat_template_tool_use"] == HERMES_TOOL_USE.removesuffix("\n")


def test_a_copy_that_claims_to_be_a_clone_is_read_and_a_bad_one_is_caught(xfs, monkeypatch):
    """The extents prove a clone only when they are the source's blocks: a "clone" that really copied is
    proven by reading it (and the proof says so), one that copied wrong bytes fails and leaves nothing."""
    src = _random_gguf(xfs / "m.gguf", 2 << 20)
    real_clone = reflink.clone_range

    def copying_clone(src_fd, src_offset, length, dst_fd, dst_offset, flip=False):
        data = bytearray(os.pread(src_fd, length, src_offset))
        if flip:
            data[len(data) // 2] ^= 1
        os.pwrite(dst_fd, bytes(data), dst_offset)
        return True

    import gguftpl.gguf.rewrite as rw

    monkeypatch.setattr(rw, "clone_range", copying_clone)
    p = rewrite(src, xfs / "copied.gguf", set_kv={"tokenizer.chat_template": "{{ 'x' }}"})
    assert p.proof_method == BYTE_PROOF and p.data_identical
    monkeypatch.setattr(rw, "clone_range", lambda *a: copying_clone(*a, flip=True))
    with pytest.raises(PatchError, match="verification failed"):
        rewrite(src, xfs / "bad.gguf", set_kv={"tokenizer.chat_template": "{{ 'x' }}"})
    assert sorted(os.listdir(xfs)) == ["copied.gguf", "m.gguf"]
    # the real clone, for contrast, shares the blocks: the extents match
    monkeypatch.setattr(rw, "clone_range", real_clone)
    assert rewrite(src, xfs / "cloned.gguf", set_kv={"x": "y"}).proof_method == SHARED_PROOF


def test_extents_tell_a_clone_from_a_copy(xfs):
    src = _random_gguf(xfs / "m.gguf", 2 << 20)
    copy = xfs / "copy.gguf"
    with open(src, "rb") as a, open(copy, "wb") as b:
        b.write(a.read())  # same bytes, its own blocks
    os.sync()
    with open(src, "rb") as a, open(copy, "rb") as b:
        assert not reflink.shared_extents_match(a.fileno(), 0, b.fileno(), 0, 1 << 20)
        assert reflink.shared_extents_match(a.fileno(), 0, a.fileno(), 0, 1 << 20) is False  # not marked shared


def test_across_filesystems_the_tensors_are_copied_without_padding(xfs, tmp_path):
    src = _random_gguf(tmp_path / "m.gguf", 2 << 20)  # ext4 (or whatever holds tmp): not the XFS
    p = rewrite(src, xfs / "o.gguf", set_kv={"tokenizer.chat_template": "{{ 'x' }}"})
    assert p.copy_method != CLONE_METHOD and p.proof_method == BYTE_PROOF and p.shared_bytes == 0
    with read_header(xfs / "o.gguf") as h:
        assert PADDING_KEY not in h
    assert _data(xfs / "o.gguf") == _data(src)
    assert load_templateset(read_header(xfs / "o.gguf")).default.text == "{{ 'x' }}"
