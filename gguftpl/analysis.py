"""Analyse the chat templates of a GGUF: gather each template's facts once, then run every rule over them.

Facts (``templates.facts``, gathered by ``templates.gather``) are what was observed: the AST, the prompts
the probe conversations rendered. Rules (``gguftpl/rules/``) decide what is wrong. This module only
connects the two: which texts to gather (each distinct text once, at most ``limits.MAX_ANALYSED_TEXTS``), and
running the file- and template-scope checks over the result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gguftpl import limits
from gguftpl.findings import Finding
from gguftpl.rules.context import FileContext
from gguftpl.templates.facts import TemplateFacts, vocab_facts
from gguftpl.templates.factstore import FactsKey, facts_key
from gguftpl.templates.gather import gather_facts

if TYPE_CHECKING:
    from gguftpl.gguf.templateset import TemplateSet


def analyze_template_text(
    text: str,
    *,
    name: str = "default",
    bos_token: str = "",
    eos_token: str = "",
    key: str | None = None,
    llamacpp: bool = False,
    special_tokens: Mapping[str, str] | None = None,
    engines: Sequence[str] = (),
) -> TemplateFacts:
    """The facts of one template text (see :func:`template_findings` for what is wrong with it); with
    ``llamacpp`` llama.cpp renders the probes too (when xllamacpp is installed) and decides the verdicts.
    ``special_tokens``: the tokenizer's other special tokens (``{"sep_token": …}``), passed to transformers'
    renderer as transformers passes them."""
    return gather_facts(
        text,
        name=name,
        bos_token=bos_token,
        eos_token=eos_token,
        key=key,
        ask_llamacpp=llamacpp,
        special_tokens=special_tokens,
        engines=engines,
    )


def template_findings(facts: TemplateFacts, ctx: FileContext | None = None) -> list[Finding]:
    """What the template-scope rules find in one template's facts (outside any file unless ``ctx``)."""
    ctx = ctx or FileContext(file="", templates=(facts,))
    return sort_findings(run_template_checks(facts, ctx), [facts])


@dataclass(frozen=True)
class SetFacts:
    """The facts of every template of one file."""

    templates: tuple[TemplateFacts, ...]
    skipped: tuple[str, ...] = ()
    """Named templates not analysed (past ``limits.MAX_ANALYSED_TEXTS`` distinct texts)."""
    gathered: int = 0
    """Texts gathered now (the rest came from the memo)."""
    llamacpp_asked: int = 0
    """Of those, texts llama.cpp was asked to load."""


ENGINE_TEMPLATES = ("default", "tool_use")
"""The templates the other engines are asked about: the only ones any runtime reads."""


def gather_set(
    tset: TemplateSet,
    *,
    llamacpp_names: Collection[str] = (),
    memo: MutableMapping[FactsKey, TemplateFacts] | None = None,
    engines: Sequence[tuple[str, str]] = (),
) -> SetFacts:
    """Facts for each template of ``tset``: each distinct text gathered once (``memo`` shares them across
    files), llama.cpp asked about the ``llamacpp_names`` templates. A file with 10,000 named templates took
    minutes: past ``limits.MAX_ANALYSED_TEXTS`` distinct texts, named templates other than default/tool_use are
    skipped (and reported). ``engines``: (id, version) of the other engines asked about the default and
    ``tool_use`` templates (the ones runtimes read), part of each facts key."""
    from gguftpl.gguf.templateset import special_token_text, template_special_tokens

    memo = memo if memo is not None else {}
    bos, eos = special_token_text(tset, "bos"), special_token_text(tset, "eos")
    specials = template_special_tokens(tset)
    out: list[TemplateFacts] = []
    skipped: list[str] = []
    texts: set[str] = set()
    gathered = asked = 0
    for name, tpl in tset.templates.items():
        ask = name in llamacpp_names
        asked_engines = tuple(engines) if name in ENGINE_TEMPLATES else ()
        fkey = facts_key(tpl.sha256, bos, eos, ask, specials, asked_engines)
        if tpl.sha256 not in texts and len(texts) >= limits.MAX_ANALYSED_TEXTS and name not in ("default", "tool_use"):
            skipped.append(name)
            continue
        texts.add(tpl.sha256)
        facts = memo.get(fkey)
        if facts is None:
            facts = gather_facts(
                tpl.text,
                name=name,
                bos_token=bos,
                eos_token=eos,
                key=tpl.key,
                ask_llamacpp=ask,
                special_tokens=specials,
                engines=[e for e, _v in asked_engines],
            )
            memo[fkey] = facts
            gathered += 1
            asked += facts.llamacpp is not None
        if (facts.name, facts.key) != (name, tpl.key):
            facts = dataclasses.replace(facts, name=name, key=tpl.key)
        out.append(facts)
    return SetFacts(tuple(out), tuple(skipped), gathered, asked)


def run_checks(ctx: FileContext, keep: Callable[[str], bool] | None = None) -> list[Finding]:
    """Every file-scope check, then every template-scope check for each template, sorted; ``keep(code)``
    selects the rules to run."""
    from gguftpl.findings import checks

    keep = _for_kind(ctx, keep)
    found: list[Finding] = []
    for rule, fn in checks("file"):
        if keep is None or keep(rule.code):
            found.extend(fn(ctx))
    for t in ctx.templates:
        found.extend(run_template_checks(t, ctx, keep))
    return sort_findings(found, ctx.templates)


def _for_kind(ctx: FileContext, keep: Callable[[str], bool] | None) -> Callable[[str], bool] | None:
    """``keep`` less the chat-only rules when the file's model does not generate text (GT005 says so)."""
    if ctx.kind.generates:
        return keep
    from gguftpl.rules.container import chat_only

    return lambda code: not chat_only(code) and (keep is None or keep(code))


def run_template_checks(t: TemplateFacts, ctx: FileContext, keep: Callable[[str], bool] | None = None) -> list[Finding]:
    from gguftpl.findings import checks

    out: list[Finding] = []
    for rule, fn in checks("template"):
        if keep is None or keep(rule.code):
            out.extend(fn(t, ctx))
    return out


def sort_findings(findings: Iterable[Finding], templates: Iterable[Any]) -> list[Finding]:
    """File-level findings first, then by template (file order), severity, code, line, column, message."""
    order = {getattr(t, "name", None): i for i, t in enumerate(templates)}

    def key(f: Finding) -> tuple[Any, ...]:
        t = -1 if f.template is None else order.get(f.template, len(order))
        return (t, -f.severity.rank, f.code, f.location.line or 0, f.location.column or 0, f.message)

    return sorted(findings, key=key)


@dataclass(frozen=True)
class SetAnalysis:
    templates: list[TemplateFacts]
    findings: list[Finding]


def analyze_templateset(
    tset: TemplateSet,
    *,
    location_file: str,
    upstream_repo: str | None = None,
    header: Any = None,
    llamacpp_names: Collection[str] = (),
) -> SetAnalysis:
    """The facts of every template of ``tset`` and every finding about them, labelled ``location_file``."""
    facts = gather_set(tset, llamacpp_names=llamacpp_names)
    ctx = FileContext(
        file=location_file,
        tset=tset,
        vocab=vocab_facts(tset, facts.templates),
        templates=facts.templates,
        header=header,
        upstream_repo=upstream_repo,
        skipped=facts.skipped,
        max_analysed=limits.MAX_ANALYSED_TEXTS,
    )
    return SetAnalysis(list(facts.templates), run_checks(ctx))
