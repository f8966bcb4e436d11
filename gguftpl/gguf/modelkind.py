"""What kind of model a GGUF holds, read once from its header: a chat model, a base model without a chat
template, an embedding model or a reranker.

llama.cpp decides the same from the same keys (``src/llama-model.cpp`` reads ``%s.pooling_type`` and
``%s.attention.causal`` into ``hparams``; ``tools/server`` serves embeddings or rerank scores for a model whose
pooling type is not NONE). Its converter (``conversion/base.py`` ``_try_set_pooling_type``, ``qwen.py``'s reranker)
writes ``pooling_type`` only for sentence-transformers models: MEAN/CLS/LAST for an embedding model, RANK (with a
``rerank`` template and ``classifier.output_labels``) for a reranker. ``attention.causal = false`` marks an encoder
(BERT and its kin) but also a text-diffusion model (Dream, LLaDA) that chats, so it counts only when the file has no
chat template either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CHAT = "chat"
BASE = "base"
EMBEDDING = "embedding"
RERANKER = "reranker"
KINDS = (CHAT, BASE, EMBEDDING, RERANKER)

POOLING_TYPES = {0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}
"""llama.cpp's ``enum llama_pooling_type`` (include/llama.h)."""
_RANK = 4


@dataclass(frozen=True)
class ModelKind:
    """One of :data:`KINDS`, and the header keys that say so."""

    kind: str = CHAT
    reason: str = ""
    """The keys and values the kind was read from ('' for a chat model)."""
    key: str | None = None
    """The metadata key that decided it, when one did."""

    @property
    def generates(self) -> bool:
        """The model writes text (a chat or base model); an embedding model or a reranker never answers a chat
        request, so no rule about chat templates or tool calling applies to it."""
        return self.kind in (CHAT, BASE)

    def describe(self) -> str:
        """One line: ``an embedding model (nomic-bert-moe.pooling_type = 1, mean)``."""
        article = "an" if self.kind[0] in "aeiou" else "a"
        noun = {BASE: "base model without a chat template"}.get(self.kind, f"{self.kind} model")
        if self.kind == RERANKER:
            noun = "reranker"
        return f"{article} {noun}" + (f" ({self.reason})" if self.reason else "")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def model_kind(header: Any, has_template: bool) -> ModelKind:
    """The kind of the model in ``header`` (a :class:`gguftpl.gguf.reader.GGUFHeader` or anything with
    ``get(key)``); ``has_template``: the file carries any chat template (default or named)."""
    arch = header.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        return ModelKind(CHAT if has_template else BASE)
    pool_key = f"{arch}.pooling_type"
    pooling = _int(header.get(pool_key))
    if pooling == _RANK:
        return ModelKind(RERANKER, f"{pool_key} = {pooling}, rank: llama.cpp scores query/document pairs", pool_key)
    if pooling is not None and pooling in POOLING_TYPES and pooling != 0:
        name = POOLING_TYPES[pooling]
        return ModelKind(EMBEDDING, f"{pool_key} = {pooling}, {name}: llama.cpp pools it into embeddings", pool_key)
    causal_key = f"{arch}.attention.causal"
    if header.get(causal_key) is False and not has_template:
        return ModelKind(EMBEDDING, f"{causal_key} = false, an encoder, and no chat template", causal_key)
    if not has_template:
        return ModelKind(BASE, "no tokenizer.chat_template or named template", None)
    return ModelKind(CHAT)
