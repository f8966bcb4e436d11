"""GT0xx: the file itself (readable, complete, keys of the right type)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gguftpl.findings import Finding, Rule, Severity, check, register
from gguftpl.rules.context import FileContext

UNREADABLE_GGUF = register(
    Rule(
        "GT001",
        "unreadable-gguf",
        Severity.ERROR,
        "The file is not a GGUF that can be read (bad magic, truncated, hostile lengths).",
        why="Nothing can be checked, and a runtime will refuse or misread the file.",
        fix="Re-download or re-convert the file.",
    )
)

AUDIT_FAILED = register(
    Rule(
        "GT002",
        "audit-failed",
        Severity.ERROR,
        "The file was read but gguftpl could not finish checking its chat templates.",
        why=(
            "An audit that stops half-way would look clean. The file is reported instead, so a "
            "directory audit still covers every other file and the run does not pass by accident."
        ),
        example="A template set whose metadata cannot be interpreted (e.g. a chat template key holding a number).",
        fix="Run `gguftpl inspect FILE` to see the metadata, and `gguftpl --debug audit FILE` for the cause.",
    )
)


NOT_A_CHAT_MODEL = register(
    Rule(
        "GT005",
        "not-a-chat-model",
        Severity.INFO,
        "The file holds an embedding model or a reranker: it answers no chat request, so the rules about chat "
        "prompts and tool calling are not run for it.",
        why=(
            "llama.cpp serves such a model's embeddings or rerank scores, never a chat completion (its header's "
            "`ARCH.pooling_type`, or bidirectional attention without a chat template, says so). A missing chat "
            "template or dropped tools are no fault of it, and no template repair would make it call tools. The "
            "template's own parse and safety checks still run: llama-server parses a file's template at startup "
            "whatever the model."
        ),
        example="nomic-embed-text or bge GGUFs (`bert.attention.causal = false`, `nomic-bert.pooling_type = 1`).",
        fix="Nothing to fix; serve it with `llama-server --embedding` (or `--reranking`).",
    )
)

CHAT_ONLY: tuple[str, ...] = ("GT101", "GT104", "GT105", "GT106", "GT107", "GT2", "GT3", "GT501", "GT601", "GT602")
CHAT_ONLY += ("GT603", "GT604", "GT605", "GT7")
"""The rules that judge a template as a chat prompt for a model that answers (tools, roles, markers, the
ChatML fallback, other runtimes' prompts): skipped for a model that does not generate (GT005 says so)."""


def chat_only(code: str) -> bool:
    """``code`` is a rule about chat prompts, which does not apply to an embedding model or a reranker."""
    return code.startswith(CHAT_ONLY)


@check(NOT_A_CHAT_MODEL, "file")
def not_a_chat_model(ctx: FileContext) -> Iterator[Finding]:
    """GT005 once per file whose model kind (``ModelKind``, read from the header) does not generate text."""
    kind = ctx.kind
    if kind.generates:
        return
    yield ctx.finding(
        NOT_A_CHAT_MODEL,
        f"not a chat model: {kind.describe()}; the rules about chat prompts and tool calling were skipped",
        key=kind.key,
        kind=kind.kind,
    )


@check(UNREADABLE_GGUF, "file")
def invalid_utf8_tokens(ctx: FileContext) -> Iterator[Finding]:
    """GT001 for a token array that holds invalid UTF-8. The reader skips the vocabulary and decodes one token
    when asked, so reading the header never meets the bad byte; gguf-py and transformers refuse the file."""
    at = ctx.vocab.invalid_utf8 if ctx.vocab is not None else None
    if at is not None:
        yield ctx.finding(
            UNREADABLE_GGUF,
            f"array string is not valid UTF-8 at byte {at}: the token array cannot be decoded",
            key="tokenizer.ggml.tokens",
            evidence=f"in the value of tokenizer.ggml.tokens (byte {at:,})",
        )


def audit_stopped(exc: Exception, error: str, label: str, header: Any) -> Finding:
    """The finding for a file whose audit stopped after its header was read: GT001 when bytes decoded on
    demand (a vocabulary) are no readable GGUF either, with where; else GT002, gguftpl could not finish."""
    import shlex

    from gguftpl.errors import GGUFFormatError
    from gguftpl.findings import Location, make_finding

    if isinstance(exc, GGUFFormatError):
        key = header.key_at(exc.offset) if exc.offset is not None and hasattr(header, "key_at") else None
        where = f"in the value of {key} (byte {exc.offset:,})" if key else error
        return make_finding(UNREADABLE_GGUF, error, Location(file=label, key=key), evidence=where)
    fix = f"gguftpl --debug audit {shlex.quote(label)}"
    return make_finding(
        AUDIT_FAILED, f"could not finish checking the chat templates: {error}", Location(label), fix=fix
    )


METADATA_WRONG_TYPE = register(
    Rule(
        "GT003",
        "metadata-wrong-type",
        Severity.ERROR,
        "A metadata key that llama.cpp or the chat runtimes read holds a value of the wrong GGUF type.",
        why=(
            "llama.cpp checks key types strictly and refuses the whole file ('key tokenizer.ggml.eos_token_id "
            "has wrong type i32 but expected type u32'); a chat template that is not a string is ignored and "
            "the runtime falls back to ChatML, dropping tools."
        ),
        example="`tokenizer.ggml.eos_token_id` written as INT32 -1, `llama.context_length` as UINT64, "
        "`tokenizer.chat_template` as a number.",
        fix="Re-convert the file with a current converter, or rewrite the key with the expected type.",
    )
)


@check(METADATA_WRONG_TYPE, "file")
def metadata_wrong_type(ctx: FileContext) -> Iterator[Finding]:
    """GT003 for every known key whose stored type is not the one llama.cpp (or a runtime) reads."""
    from gguftpl.gguf.keytypes import T, expected_type, type_name

    kvs = getattr(ctx.header, "kv", None)
    if not isinstance(kvs, dict):
        return  # not a header at all: the audit reports that (GT002)
    arch_kv = kvs.get("general.architecture")
    arch = arch_kv.value if arch_kv is not None and isinstance(arch_kv.value, str) else None
    for key, kv in kvs.items():
        want = expected_type(key, arch)
        if want is None:
            continue
        vtype, elem = want
        if kv.type == vtype and (vtype != T.ARRAY or kv.elem_type == elem):
            continue
        got = type_name(kv.type, kv.elem_type)
        if key == "tokenizer.chat_template" or key.startswith("tokenizer.chat_template."):
            effect = "runtimes cannot use it as a chat template and fall back to a built-in one (usually ChatML)"
        elif key == "tokenizer.chat_templates":
            effect = "the list of named templates cannot be read"
        else:
            effect = f"llama.cpp refuses to load the file ('key {key} has wrong type')"
        yield ctx.finding(
            METADATA_WRONG_TYPE,
            f"stored as {got}, expected {type_name(vtype, elem)}: {effect}",
            key=key,
            evidence=f"{key}: {got} = {_preview(kv.value)}",
        )


def _preview(value: Any) -> str:
    if isinstance(value, (list, str)):
        text = repr(value[:8]) if isinstance(value, list) else repr(value[:80])
    elif hasattr(value, "__len__"):
        text = f"<{len(value)} elements>"
    else:
        text = repr(value)
    return text[:200]


TRUNCATED_TENSOR_DATA = register(
    Rule(
        "GT004",
        "truncated-tensor-data",
        Severity.ERROR,
        "The header is intact but the file ends before the tensor data its tensor infos describe.",
        why="An interrupted download or copy: the chat templates read fine, but llama.cpp refuses to load the "
        "model ('tensor data is not within the file bounds').",
        example="A 4 GB Q4_K_M whose download stopped at 3.1 GB.",
        fix="Download the file again and compare its size (and sha256) with the one the repo lists.",
    )
)


@check(TRUNCATED_TENSOR_DATA, "file")
def truncated_tensor_data(ctx: FileContext) -> Iterator[Finding]:
    """GT004 when the file is shorter than the end of the tensor data the header describes."""
    header = ctx.header
    size = getattr(header, "file_size", None)
    if not isinstance(size, int) or not getattr(header, "tensors", None):
        return
    end = header.data_end
    if end is None or end <= size:
        return
    yield ctx.finding(
        TRUNCATED_TENSOR_DATA,
        f"the tensor data should end at byte {end:,} but the file has {size:,} bytes "
        f"({end - size:,} missing): llama.cpp refuses to load it",
        evidence=f"{len(header.tensors)} tensors, data section at byte {header.data_offset:,}",
    )
