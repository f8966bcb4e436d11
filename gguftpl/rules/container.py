"""GT0xx: the file itself (readable, complete, keys of the right type)."""

from __future__ import annotations

from gguftpl.findings import Rule, Severity, register

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
