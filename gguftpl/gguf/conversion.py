"""Which quants are one conversion: the same metadata but for what quantizing and splitting change.

The repo audit decodes a vocabulary once per conversion with it, and a folder patch makes a
``--tools-in-default`` proof once per conversion.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from gguftpl.errors import GGUFFormatError, HubError

__all__ = ["conversion_key"]

# Metadata that differs between quants of one model and that the summary never reads.
_PER_QUANT_KEYS = ("general.file_type", "general.quantization_version")
_PER_QUANT_PREFIXES = ("quantize.", "split.")


def conversion_key(header: Any) -> str | None:
    """sha256 of the raw metadata pairs except the per-quant ones: equal for quants of one conversion, so
    the second quant of a model skips decoding its vocabulary. None when the bytes cannot be re-read."""
    start, end = header.kv_start, header.kv_end
    try:
        src = getattr(header, "_source", None)
        if src is not None:  # remote headers: the bytes are still in the buffer
            raw = src.read_range(start, end)
        elif os.path.isfile(header.path):
            with open(header.path, "rb") as fh:
                fh.seek(start)
                raw = fh.read(end - start)
        else:
            return None
    except (OSError, GGUFFormatError, HubError):
        return None
    if len(raw) != end - start:
        return None
    h = hashlib.sha256(header.byteorder.encode())
    for kv in header.kv.values():
        if kv.key in _PER_QUANT_KEYS or kv.key.startswith(_PER_QUANT_PREFIXES):
            continue
        h.update(raw[kv.offset - start : kv.end - start])
    return h.hexdigest()
