"""A converter's output folder made in code: one model's quants lacking ``tool_use`` (ChatML default), two of
them a gguf-split set, one truncated; for the folder-patch tests and ``scripts/bench.py patch-folder``."""

from __future__ import annotations

import random
from pathlib import Path

from tests.conftest import CHATML, build_gguf

UPSTREAM = "NousResearch/Hermes-2-Pro-Mistral-7B"
QUANTS = tuple(
    (
        "IQ1_M IQ2_XXS IQ2_XS IQ2_M IQ3_XXS IQ3_M Q2_K Q3_K_S Q3_K_M Q3_K_L IQ4_XS IQ4_NL Q4_0 Q4_K_S Q4_K_M Q5_0 "
        "Q5_K_S Q5_K_M Q6_K Q8_0 F16 BF16"
    ).split()
)
SPLIT = "Hermes-2-Pro-Mistral-7B-F32"
BROKEN = "Hermes-2-Pro-Mistral-7B-Q4_1.gguf"


def _kv(quant: str) -> dict[str, object]:
    # one conversion quantized many ways: the same name and source, a different file type (as llama-quantize)
    from gguftpl.gguf.reader import ValueType
    from gguftpl.gguf.writer import Typed

    file_type = Typed(ValueType.UINT32, (QUANTS + ("F32", "Q4_1")).index(quant) + 1)
    return {
        "general.name": "Hermes-2-Pro-Mistral-7B",
        "general.source.huggingface.repository": UPSTREAM,
        "general.file_type": file_type,
    }


def make_quant_folder(folder: Path, *, data_bytes: int = 0, quants: tuple[str, ...] = QUANTS[:21]) -> list[Path]:
    """``len(quants)`` single quants, a two-shard set and a truncated quant (24 files by default), each with
    ``data_bytes`` of tensor data besides the tiny model's (a blob tensor, for the benchmark). The paths."""
    from gguftpl.gguf.writer import write_gguf

    folder.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    block = random.Random(7).randbytes(1 << 20)  # repeated: randbytes stops at 256 MiB; cp and clones care not
    data = (block * (data_bytes // len(block) + 1))[:data_bytes]
    blob = [("blob", (data_bytes,), 24, data)] if data_bytes else []
    for q in quants:
        made.append(_quant(folder / f"Hermes-2-Pro-Mistral-7B-{q}.gguf", _kv(q), blob))
    first = folder / f"{SPLIT}-00001-of-00002.gguf"
    split_kv = {"split.no": 0, "split.count": 2, "split.tensors.count": 10 + len(blob)}
    made.append(_quant(first, {**_kv("F32"), **split_kv}, []))
    second = folder / f"{SPLIT}-00002-of-00002.gguf"
    tail = blob or [("blob", (4096,), 24, random.Random(8).randbytes(4096))]
    write_gguf(
        second, {"general.architecture": "llama", "split.no": 1, "split.count": 2, "split.tensors.count": 11}, tail
    )
    made.append(second)
    broken = _quant(folder / BROKEN, _kv("Q4_1"), blob)
    with open(broken, "r+b") as fh:  # a download cut short inside its header (its vocabulary)
        fh.truncate(4096)
    made.append(broken)
    return made


def _quant(path: Path, kv: dict[str, object], blob: list[tuple[str, tuple[int], int, bytes]]) -> Path:
    """``build_gguf``'s tiny llama (ChatML default, no tool_use) with ``kv`` added and the ``blob`` tensor."""
    if not blob:
        return build_gguf(path, templates={"default": CHATML}, extra_kv=kv)
    from gguftpl.gguf.tinymodel import byte_level_vocab, tiny_llama_kv, tiny_llama_tensors, tokenizer_kv
    from gguftpl.gguf.writer import write_gguf

    toks, types, merges = byte_level_vocab(("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"))
    full = {**tiny_llama_kv(), **tokenizer_kv(toks, types, merges, bos="<|im_start|>", eos="<|im_end|>", add_bos=False)}
    full.update({"tokenizer.chat_template": CHATML, **kv})
    write_gguf(path, full, [*tiny_llama_tensors(len(toks), seed=1), *blob])
    return path
