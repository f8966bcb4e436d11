"""Rewriting the metadata of an existing GGUF, its tensor data kept byte-identical and proven so.

Every untouched key/value pair and the tensor infos are copied as raw bytes, so the only bytes that change
are the ones asked for. The output goes through ``gguf.writer.atomic_output`` (a temporary file renamed over
the target): an interrupted or killed run leaves no file at the target and never touches the input.

The tensor region is shared with the source where the filesystem can (XFS, btrfs: a reflink costs the
header, not the data): GGUF data only has to stay aligned, so the new header carries a padding key
(PADDING_KEY) sized until the new data offset differs from the old one by whole filesystem blocks, and the
blocks are cloned; the proof is then that both files map the region to the same physical extents. Elsewhere
(ext4, another filesystem, a small file) the region is copied by the kernel and compared byte for byte
(gguf/regioncopy.py), and no padding key is written.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gguftpl.errors import GGUFFormatError, PatchError
from gguftpl.gguf.format import PADDING_KEY
from gguftpl.gguf.reader import GGUF_MAGIC, GGUFHeader, read_header
from gguftpl.gguf.reflink import block_size, clone_range, shared_extents_match
from gguftpl.gguf.regioncopy import ProgressFn, copy_region, same_bytes
from gguftpl.gguf.writer import AtomicFile, Permissions, atomic_output, encode_kv

PADDING_TEXT = "reflink padding: the tensor data starts where the source's blocks can be shared"
CLONE_MIN = 1024 * 1024
"""Tensor data below this is copied: a clone saves nothing there, and the file keeps no padding key."""

BYTE_PROOF = "compared byte for byte with the source"
SHARED_PROOF = "shared with the source (same physical extents by FIEMAP; not read)"
CLONE_METHOD = "reflink (FICLONERANGE)"


@dataclass
class RewriteProof:
    source: str
    output: str
    data_bytes: int
    source_data_offset: int
    output_data_offset: int
    data_identical: bool
    """Tensor data region of the output identical to the source region, by ``proof_method``."""
    tensor_infos_identical: bool
    copy_method: str
    kv_changed: list[str]
    kv_removed: list[str]
    kv_added: list[str]
    proof_method: str = BYTE_PROOF
    """How ``data_identical`` was established: BYTE_PROOF (every byte read and compared), or SHARED_PROOF
    for a clone (the output's data blocks are the source's own blocks)."""
    shared_bytes: int = 0
    """Bytes of tensor data shared with the source rather than copied (a reflink; 0 for a copy)."""


def rewrite(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    set_kv: Mapping[str, Any] | None = None,
    remove: Iterable[str] = (),
    overwrite: bool = False,
    progress: ProgressFn | None = None,
    verify: bool = True,
    permissions: Permissions | None = None,
) -> RewriteProof:
    """Copy ``src`` to ``dst`` with metadata keys set or removed; everything else byte-identical.

    ``set_kv`` values are plain values or ``Typed``; a key already in the file keeps its position.
    New keys are appended in the order given. ``permissions`` are the output's mode and owner (default:
    0644 less the umask). Raises PatchError / GGUFFormatError; on any error the output is not created and
    the input is never modified.
    """
    set_kv = dict(set_kv or {})
    remove_set = set(remove)
    if "general.alignment" in set_kv or "general.alignment" in remove_set:
        raise PatchError("changing general.alignment would move every tensor; refused")
    header = read_header(src)
    try:
        _check_copyable(header)
        src_path = os.fspath(src)
        edit = _Edit.read(header, src_path, set_kv, remove_set)
        try:
            with atomic_output(dst, overwrite=overwrite, permissions=permissions) as out:
                proof = _write(edit, header, src_path, out, progress, verify)
                proof.output = os.fspath(dst)
                if verify:
                    # before the rename: a failed proof leaves no output behind
                    out.flush()
                    verify_rewrite(proof, header, out.readable_path, proof.data_identical)
        except OSError as exc:
            # full disk, file-size limit, I/O error: atomic_output has already removed the temporary file
            raise PatchError(
                f"writing {os.fspath(dst)} failed: {exc.strerror or exc}; no output was left and the input is untouched"
            ) from exc
    finally:
        header.close()
    return proof


@dataclass
class _Edit:
    """The output's key/value pairs as encoded bytes (untouched ones as read) and its tensor infos."""

    parts: list[tuple[str, bytes]]
    tensor_infos: bytes
    changed: list[str]
    removed: list[str]
    added: list[str]

    @classmethod
    def read(cls, header: GGUFHeader, src_path: str, set_kv: Mapping[str, Any], remove: set[str]) -> _Edit:
        """Untouched key/values copied as raw bytes, set keys re-encoded in place, new keys appended in the
        order given."""
        bo = header.byteorder
        edit = cls([], b"", [], [], [])
        with open(src_path, "rb") as sfh:
            for key, kv in header.kv.items():
                if key in remove:
                    edit.removed.append(key)
                elif key in set_kv:
                    edit.parts.append((key, encode_kv(key, set_kv[key], bo)))
                    edit.changed.append(key)
                else:
                    sfh.seek(kv.offset)
                    edit.parts.append((key, sfh.read(kv.end - kv.offset)))
            for key, value in set_kv.items():
                if key not in header.kv:
                    edit.parts.append((key, encode_kv(key, value, bo)))
                    edit.added.append(key)
            sfh.seek(header.kv_end)
            edit.tensor_infos = sfh.read(header.tensor_info_end - header.kv_end)
        return edit

    def head(self, header: GGUFHeader) -> bytes:
        """The output's header up to its data section, padded to the alignment (no padding key)."""
        head = self._unaligned(header, self.parts)
        return head + b"\0" * (-len(head) % header.alignment)

    def padded_head(self, header: GGUFHeader, step: int) -> bytes:
        """The header with PADDING_KEY last among the keys (an old one dropped), sized so that its data
        offset is the source's plus a whole number of ``step``s (a multiple of the alignment too, so the
        tensor infos end exactly there)."""
        bo = header.byteorder
        parts = [(k, raw) for k, raw in self.parts if k != PADDING_KEY]
        bare = len(self._unaligned(header, [*parts, (PADDING_KEY, encode_kv(PADDING_KEY, PADDING_TEXT, bo))]))
        target = header.data_offset + math.ceil((bare - header.data_offset) / step) * step
        padding = (PADDING_KEY, encode_kv(PADDING_KEY, PADDING_TEXT + " " * (target - bare), bo))
        head = self._unaligned(header, [*parts, padding])
        assert len(head) == target and target % header.alignment == 0
        return head

    def _unaligned(self, header: GGUFHeader, parts: list[tuple[str, bytes]]) -> bytes:
        bo = header.byteorder
        head = bytearray(GGUF_MAGIC + struct.pack(bo + "IQQ", header.version, header.tensor_count, len(parts)))
        for _key, raw in parts:
            head += raw
        head += self.tensor_infos
        return bytes(head)

    def proof(self, header: GGUFHeader, src_path: str, head_len: int, method: str, padded: bool) -> RewriteProof:
        """The proof's frame (data and tensor infos not yet judged); the padding key counted as changed or
        added when the header carries one."""
        changed, removed, added = list(self.changed), list(self.removed), list(self.added)
        if padded:
            changed, removed, added = ([k for k in ks if k != PADDING_KEY] for ks in (changed, removed, added))
            (changed if PADDING_KEY in header.kv else added).append(PADDING_KEY)
        data_len = _data_length(header)
        return RewriteProof(
            src_path, "", data_len, header.data_offset, head_len, False, False, method, changed, removed, added
        )


def _write(
    edit: _Edit, header: GGUFHeader, src_path: str, out: AtomicFile, progress: ProgressFn | None, verify: bool
) -> RewriteProof:
    """Write the output's header and tensor data: shared with the source where the filesystem can, else
    copied by the kernel. Returns the proof with ``data_identical`` judged (True when not verifying)."""
    data_len = _data_length(header)
    if data_len >= CLONE_MIN:
        proof = _write_clone(edit, header, src_path, out, verify)
        if proof is not None:
            if progress is not None:
                progress(data_len, data_len)
            return proof
    head = edit.head(header)
    out.write(head)
    proof = edit.proof(header, src_path, len(head), "none", padded=False)
    # no tensor data: nothing to differ (the length check in verify_rewrite still applies)
    proof.data_identical = True
    if data_len:
        proof.copy_method, proof.data_identical = copy_region(
            src_path, out, header.data_offset, len(head), data_len, progress, verify
        )
    return proof


def _write_clone(edit: _Edit, header: GGUFHeader, src_path: str, out: AtomicFile, verify: bool) -> RewriteProof | None:
    """Share the source's whole blocks of tensor data with the output and copy the few bytes before the
    first of them; None (nothing written) where the filesystem cannot share them."""
    fd = out.fileno()
    bsize = block_size(fd)
    head = edit.padded_head(header, math.lcm(bsize, header.alignment))
    old, new, data_len = header.data_offset, len(head), _data_length(header)
    lead = -old % bsize  # the source's data before its first whole block (the output's is at the same place)
    if lead >= data_len:
        return None
    src_fd = os.open(src_path, os.O_RDONLY)
    try:
        _pwrite_all(fd, head, 0)
        if not clone_range(src_fd, old + lead, data_len - lead, fd, new + lead):
            os.ftruncate(fd, 0)
            return None
        _pwrite_all(fd, os.pread(src_fd, lead, old), new)
        os.lseek(fd, new + data_len, os.SEEK_SET)
        proof = edit.proof(header, src_path, new, CLONE_METHOD, padded=True)
        proof.shared_bytes = data_len - lead
        proof.data_identical = True
        if verify:
            proof.proof_method, proof.data_identical = _prove_clone(src_fd, old, out.readable_path, new, data_len, lead)
    finally:
        os.close(src_fd)
    return proof


def _prove_clone(src_fd: int, old: int, out_path: str, new: int, data_len: int, lead: int) -> tuple[str, bool]:
    """The copied lead compared byte for byte; the cloned rest by its extents, or byte for byte where the
    filesystem does not show them (then the proof says so)."""
    check_fd = os.open(out_path, os.O_RDONLY)
    try:
        if not same_bytes(src_fd, old, check_fd, new, lead):
            return BYTE_PROOF, False
        if shared_extents_match(src_fd, old + lead, check_fd, new + lead, data_len - lead):
            return SHARED_PROOF, True
        return BYTE_PROOF, same_bytes(src_fd, old + lead, check_fd, new + lead, data_len - lead)
    finally:
        os.close(check_fd)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def _check_copyable(h: GGUFHeader) -> None:
    if h.file_size is None:
        raise PatchError("can only rewrite local files")
    if h.tensor_count == 0:
        return
    end = h.data_end
    if end is not None and end > h.file_size:
        raise GGUFFormatError(
            f"truncated file: tensor data should end at byte {end}, file has {h.file_size} bytes", h.file_size
        )


def _data_length(h: GGUFHeader) -> int:
    assert h.file_size is not None
    if h.tensor_count == 0 or h.data_offset >= h.file_size:
        return 0
    return h.file_size - h.data_offset


def verify_rewrite(proof: RewriteProof, src_header: GGUFHeader, output_path: str, data_identical: bool) -> None:
    """Re-read the output with the header reader; ``data_identical`` is the data proof's verdict."""
    with read_header(output_path) as out_h:
        if out_h.data_offset != proof.output_data_offset:
            raise PatchError(f"output data offset {out_h.data_offset} != expected {proof.output_data_offset}")
        src_infos = [(t.name, t.shape, t.ggml_type, t.offset) for t in src_header.tensors]
        out_infos = [(t.name, t.shape, t.ggml_type, t.offset) for t in out_h.tensors]
        proof.tensor_infos_identical = src_infos == out_infos
        out_len = (out_h.file_size or 0) - out_h.data_offset if out_h.tensor_count else 0
    if out_len != proof.data_bytes:
        raise PatchError(f"output tensor data is {out_len} bytes, source has {proof.data_bytes}")
    proof.data_identical = data_identical
    if not (proof.data_identical and proof.tensor_infos_identical):
        raise PatchError("verification failed: output tensors differ from the source")
