"""GT50x: this GGUF against its upstream repo (``gguftpl diff``)."""

from __future__ import annotations

from gguftpl.findings import Rule, Severity, register

UPSTREAM_TEMPLATE_LOST = register(
    Rule(
        "GT501",
        "upstream-template-lost",
        Severity.ERROR,
        "The upstream repo ships a named chat template (e.g. `tool_use`) that this GGUF does not carry.",
        why="It was lost in conversion or re-quantisation. When the lost template is the one that reads `tools`, "
        "runtimes render a template that drops the tool schemas: tool calling silently fails.",
        example="Upstream `chat_template` is a list [default, tool_use]; the GGUF has only `tokenizer.chat_template`.",
        fix="Copy the upstream templates into the GGUF: `gguftpl patch FILE --from-hub REPO -o OUT.gguf`.",
    )
)
UPSTREAM_TEMPLATE_CHANGED = register(
    Rule(
        "GT502",
        "upstream-template-changed",
        Severity.WARNING,
        "A chat template differs from the same-named template of the upstream repo.",
        why="The GGUF was converted from an older revision or edited by hand; prompts differ from what the model "
        "was trained and evaluated with.",
        example="Upstream added `{{bos_token}}` after the GGUF was made.",
        fix="Review the diff (`gguftpl diff FILE`); adopt upstream with `gguftpl patch FILE --from-hub REPO`.",
    )
)
UPSTREAM_SPECIAL_TOKENS_DIFFER = register(
    Rule(
        "GT503",
        "upstream-special-tokens-differ",
        Severity.WARNING,
        "BOS/EOS ids or texts, or an added token's id, text or special status, differ from the upstream repo.",
        why="A wrong EOS id means generation never stops at the end of a turn; a special token stored as plain "
        "text is split into pieces and the model never sees the marker it was trained on.",
        example="Upstream eos `<|im_end|>` (32000); the GGUF's eos id points at `</s>` (2).",
        fix="Re-convert from upstream, or fix the ids with gguf-py's `gguf_set_metadata.py`.",
    )
)
