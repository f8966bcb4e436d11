#!/usr/bin/env python3
"""Build the small committed GGUFs under samples/ (run again to regenerate them byte for byte).

Each reproduces a real situation with a real-looking tokenizer (ChatML control tokens, Hermes tool tokens)
on a one-block llama body that llama.cpp loads (tensors tiny, deterministic, distinguishable):

- hermes-2-pro-mistral-7b.chatml.gguf: the bartowski case. Default template is plain ChatML that never reads
  `tools`; the upstream `tool_use` template was lost in conversion.
- hermes-2-pro-mistral-7b.upstream.gguf: what conversion should have produced: upstream NousResearch's
  `default` + `tool_use` pair, named in `tokenizer.chat_templates`.
- no-template.gguf: a model with no chat template at all (runtimes silently fall back to ChatML).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gguftpl.gguf.reader import ValueType  # noqa: E402
from gguftpl.gguf.tinymodel import byte_level_vocab, tiny_llama_kv, tiny_llama_tensors, tokenizer_kv  # noqa: E402
from gguftpl.gguf.writer import Typed, write_gguf  # noqa: E402

SAMPLES = ROOT / "samples"
CATALOG = ROOT / "upstream_templates"

# Hermes 2 Pro (Mistral) vocabulary shape: SentencePiece control tokens, ChatML turn markers, Hermes tool tags
CONTROL = ["<unk>", "<s>", "</s>", "<|im_end|>", "<|im_start|>"]
USER_DEFINED = ["<tools>", "</tools>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


def hermes_vocab() -> tuple[list[str], list[int], list[str]]:
    tokens, types, merges = byte_level_vocab(CONTROL)
    for t in USER_DEFINED:
        tokens.append(t)
        types.append(4)
    return tokens, types, merges


def hermes_kv(name: str, templates: dict[str, str]) -> dict[str, Any]:
    tokens, types, merges = hermes_vocab()
    kv: dict[str, Any] = {
        **tiny_llama_kv(context_length=32768),
        "general.name": name,
        "general.basename": "Hermes-2-Pro-Mistral",
        "general.size_label": "7B",
    }
    kv.update(tokenizer_kv(tokens, types, merges, bos="<s>", eos="<|im_end|>", add_bos=True))
    kv["tokenizer.ggml.unknown_token_id"] = Typed(ValueType.UINT32, tokens.index("<unk>"))
    kv["tokenizer.ggml.padding_token_id"] = Typed(ValueType.UINT32, tokens.index("</s>"))
    named = sorted(n for n in templates if n != "default")
    if "default" in templates:
        kv["tokenizer.chat_template"] = templates["default"]
    for n in named:
        kv[f"tokenizer.chat_template.{n}"] = templates[n]
    if named:
        kv["tokenizer.chat_templates"] = Typed(ValueType.ARRAY, named, ValueType.STRING)
    return kv


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def build(dest: Path = SAMPLES) -> list[Path]:
    dest.mkdir(exist_ok=True)
    hermes = CATALOG / "NousResearch" / "Hermes-2-Pro-Mistral-7B"
    chatml = read(SAMPLES / "templates" / "bartowski-Hermes-2-Pro-Mistral-7B-GGUF.chat_template.jinja")
    n_vocab = len(hermes_vocab()[0])
    out = []

    path = dest / "hermes-2-pro-mistral-7b.chatml.gguf"
    write_gguf(path, hermes_kv("Hermes-2-Pro-Mistral-7B", {"default": chatml}), tiny_llama_tensors(n_vocab, seed=7))
    out.append(path)

    path = dest / "hermes-2-pro-mistral-7b.upstream.gguf"
    pair = {"default": read(hermes / "default.jinja"), "tool_use": read(hermes / "tool_use.jinja")}
    write_gguf(path, hermes_kv("Hermes-2-Pro-Mistral-7B", pair), tiny_llama_tensors(n_vocab, seed=7))
    out.append(path)

    path = dest / "no-template.gguf"
    tokens, types, merges = byte_level_vocab(["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"])
    kv = {**tiny_llama_kv(), "general.name": "no-template"}
    kv.update(tokenizer_kv(tokens, types, merges, bos="<bos>", eos="<eos>", eot="<end_of_turn>", add_bos=True))
    write_gguf(path, kv, tiny_llama_tensors(len(tokens), seed=11))
    out.append(path)
    return out


if __name__ == "__main__":
    for p in build():
        print(f"{p.relative_to(ROOT)}: {p.stat().st_size} bytes")
