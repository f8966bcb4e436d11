"""GT3xx: special tokens: markers in the vocabulary, end of turn, BOS."""

from __future__ import annotations

from gguftpl.findings import Rule, Severity, register

MARKER_NOT_IN_VOCAB = register(
    Rule(
        "GT301",
        "marker-not-in-vocab",
        Severity.WARNING,
        "The template emits a control marker (`<|…|>`-shaped) that is not a token of the vocabulary.",
        why="The marker is tokenized as several plain-text pieces; the model was trained on a single "
        "control token and does not recognise the turn structure or tool markers.",
        example="`<|im_start|>` in a template of a model whose vocabulary has no such token.",
        fix="Use the template that belongs to this model's tokenizer.",
    )
)
MARKER_NOT_CONTROL = register(
    Rule(
        "GT302",
        "marker-not-control-token",
        Severity.WARNING,
        "A control marker the template emits is in the vocabulary but typed NORMAL, not CONTROL/USER_DEFINED.",
        why="llama.cpp only parses CONTROL and USER_DEFINED tokens out of prompt text; a NORMAL token may be "
        "split into pieces, so the model sees text instead of the marker.",
        example="`<|im_end|>` stored with token type 1.",
        fix="Re-convert the model with the right added-token types.",
    )
)
END_OF_TURN_NOT_EOG = register(
    Rule(
        "GT303",
        "end-of-turn-not-stop-token",
        Severity.WARNING,
        "The marker that ends an assistant turn in the template is not the EOS/EOT token.",
        why="Generation does not stop at the end of the turn unless the runtime guesses the marker (llama.cpp "
        "recognises a few well-known ones by text); the model keeps writing the next turn.",
        example="ChatML `<|im_end|>` while `tokenizer.ggml.eos_token_id` points at `</s>`.",
        fix="Set `tokenizer.ggml.eos_token_id` (or `eot_token_id`) to the end-of-turn token.",
    )
)
DOUBLE_BOS = register(
    Rule(
        "GT304",
        "double-bos",
        Severity.WARNING,
        "The template writes the BOS token while the tokenizer also adds one (`add_bos_token` is true).",
        why="Runtimes that tokenize the rendered prompt with BOS added get two BOS tokens, which degrades "
        "output. llama.cpp strips one leading BOS from the rendered prompt; Hugging Face does not.",
        example="`{{ bos_token }}{% for message in messages %}…` with `tokenizer.ggml.add_bos_token = true`.",
        fix="Drop `{{ bos_token }}` from the template or set `add_bos_token` to false.",
    )
)
