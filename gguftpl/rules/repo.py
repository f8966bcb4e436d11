"""GT55x: consistency across the quants of one repo or output folder."""

from __future__ import annotations

from gguftpl.findings import Rule, Severity, register

REPO_TEMPLATE_MISSING = register(
    Rule(
        "GT550",
        "repo-template-missing",
        Severity.ERROR,
        "A quant lacks a chat template that the other quants of the same model carry.",
        why=(
            "Users pick one file from a repo of quants. If that one lost its `tool_use` (or default) template "
            "in conversion, the runtime falls back to another template or to ChatML, and tool calling "
            "silently fails for that quant only (unsloth #2744)."
        ),
        example="Q4_K_M has `tokenizer.chat_template.tool_use`; Q5_K_M of the same model has none.",
        fix=(
            "Copy the template from a quant that has it: `gguftpl inspect OTHER.gguf --template tool_use --raw > "
            "t.jinja`, then `gguftpl patch FILE --template tool_use=t.jinja -o FIXED.gguf`, and re-upload."
        ),
    )
)

REPO_TEMPLATE_DIFFERS = register(
    Rule(
        "GT551",
        "repo-template-differs",
        Severity.WARNING,
        "The same-named chat template differs between quants of the same model.",
        why=(
            "Quantization does not change a model's chat format. Different templates across quants mean some "
            "files were converted at another time or from another source; their prompts differ."
        ),
        example="Q8_0 was converted before the upstream template fix; Q4_K_M after.",
        fix=(
            "Re-convert the odd quants, or give them the others' template "
            "(`gguftpl patch FILE --template NAME=t.jinja`) or upstream's (`gguftpl patch FILE --from-hub ORG/REPO`)."
        ),
    )
)

REPO_SPECIAL_TOKENS_DIFFER = register(
    Rule(
        "GT552",
        "repo-special-tokens-differ",
        Severity.WARNING,
        "Special tokens (BOS/EOS/EOT… ids or texts, add_bos/add_eos) differ between quants of the same model.",
        why="A different EOS id makes one quant run on past the end of its turn or stop early.",
        example="Q4_K_M has eos 2 `<|im_end|>`; Q6_K has eos 0 `<|endoftext|>`.",
        fix="Re-convert the odd quants from the same source and converter version as the others.",
    )
)

REPO_UPSTREAM_DRIFT = register(
    Rule(
        "GT553",
        "repo-upstream-drift",
        Severity.WARNING,
        "The quants' templates differ from the upstream model's (an error when upstream ships a template none carry).",
        why=(
            "A template upstream changed (or a named template such as `tool_use`) after conversion never "
            "reaches users of the GGUF repo, whichever quant they pick."
        ),
        example="Every quant embeds ChatML; upstream ships `default` and `tool_use`.",
        fix="Patch each quant from the Hub (`gguftpl patch FILE --from-hub ORG/REPO -o FIXED.gguf`) and re-upload.",
    )
)

REPO_UPSTREAM_UNKNOWN = register(
    Rule(
        "GT554",
        "repo-upstream-unchecked",
        Severity.INFO,
        "The repo's templates were not compared with an upstream model (unknown, or not reachable).",
        why="Consistency between quants says nothing about whether they all carry the right template.",
        example="No `general.base_model.*`/`general.source.*` keys and no catalog match; or the Hub is offline.",
        fix="Name the upstream with `--upstream ORG/REPO`, or run where the Hub is reachable.",
    )
)

REPO_SPLIT_INCOMPLETE = register(
    Rule(
        "GT555",
        "repo-split-incomplete",
        Severity.ERROR,
        "A split GGUF (`NAME-0000k-of-0000n.gguf`) is missing shards, or its first shard.",
        why="llama.cpp loads a split model from its first shard and needs every shard; the metadata is in shard 1.",
        example="`m-00001-of-00003.gguf` and `m-00003-of-00003.gguf`, no `m-00002-of-00003.gguf`.",
        fix="Upload the missing shards (gguf-split --merge / --split to regenerate them).",
    )
)

REPO_MODELS_GROUPED = register(
    Rule(
        "GT556",
        "repo-several-models",
        Severity.INFO,
        "The GGUFs belong to more than one model (by architecture and vocabulary); each is checked on its own.",
        why="Quants are only compared with quants of the same model; a projector or draft model is not a quant.",
        example="`model-Q4_K_M.gguf` (llama) next to `mmproj-model-f16.gguf` (clip).",
        fix=(
            "Nothing, if the other model belongs there (a vision projector, a draft model); otherwise publish it "
            "in its own repo."
        ),
    )
)
