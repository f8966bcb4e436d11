"""``patch --from-catalog`` keeps the file's templates that already put the tool schemas in the prompt (issue 25
item 7): a catalog entry is another model's text, and a working template is not replaced unless ``--only`` names
it. Whether a template works is decided as the audit decides it, by rendering, never by its AST alone."""

from __future__ import annotations

from typing import Any


def renders_tools_here(tset: Any, name: str, text: str) -> bool:
    """The template puts the tool schemas in the prompt as the audit decides it: rendered with a canary tool by
    llama.cpp (when installed) and transformers, with the file's BOS and EOS; the AST alone would keep Command R's
    tool_use, which reads ``tool.name`` and so renders no OpenAI-shaped tool."""
    from gguftpl.analysis import analyze_template_text
    from gguftpl.gguf.templateset import special_token_text
    from gguftpl.runtimes.view import reaches

    bos, eos = special_token_text(tset, "bos"), special_token_text(tset, "eos")
    return bool(reaches(analyze_template_text(text, name=name, bos_token=bos, eos_token=eos, llamacpp=True)))


def keep_working(tset: Any, config: Any) -> tuple[list[str] | None, tuple[str, ...]]:
    """``--from-catalog`` never replaces a template of the file that already puts the tool schemas in the prompt
    with another text (``--only NAME`` asks for it): the names to copy (None for all) and the names kept, with a
    warning per kept one."""
    kept = [
        name
        for name, t in tset.templates.items()
        if name in config.templates and config.templates[name] != t.text and renders_tools_here(tset, name, t.text)
    ]
    if not kept:
        return None, ()
    for name in kept:
        config.warnings.append(
            f"kept the file's {name} template: it already puts the tool schemas in the prompt, and the catalog's "
            f"{config.repo_id} would replace it (--only {name} replaces it anyway)"
        )
    rest = [n for n in config.templates if n not in kept]
    return rest or [], tuple(kept)
