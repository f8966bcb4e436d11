"""GT55x: consistency across the quants of one repo or output folder, each rule beside its check.

Every check reads a ``gguftpl.repo.facts.RepoFacts`` (one summary per quant, each model group's upstream)
and yields that rule's findings; ``gguftpl.repo.facts.check_repo`` runs them. Quants are compared only
within their model group. Every finding carries ``repo`` and ``quants`` in its extra data: which repo or
folder, and which quants it concerns, whatever the report format.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from gguftpl.findings import Finding, Location, Rule, Severity, check, make_finding, register
from gguftpl.repo.facts import QuantEntry, RepoFacts, freeze, majority, same_text, template_names
from gguftpl.safeio import printable

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


REPO_UNSAFE_NAME = register(
    Rule(
        "GT557",
        "repo-unsafe-file-name",
        Severity.ERROR,
        "The repo's file listing names a GGUF by a path that is not a file of the repo (`../../x.gguf`, an "
        "absolute path, control characters); it was not read.",
        why=(
            "Resolved against the repo's URL, `../../x.gguf` requests a file outside the repo on the Hub's host, "
            "with the user's token; a real Hub never lists such a name, so the listing (or a mirror) is hostile."
        ),
        example="The tree listing holds `../../x.gguf` beside `model-Q4_K_M.gguf`.",
        fix="Do not trust this repo or mirror; the other files were audited as usual.",
    )
)


# --------------------------------------------------------------------------------------------- checks


@check(REPO_UNSAFE_NAME, "repo")
def unsafe_names(repo: RepoFacts) -> Iterator[Finding]:
    for e in repo.quants:
        if e.unsafe:
            yield make_finding(
                REPO_UNSAFE_NAME,
                f"the listing names {printable(repr(e.name))}: {e.unsafe}; not requested",
                Location(file=repo.target),
                evidence=printable(e.name[:500]),
                name=e.name,
                **repo.concerning([]),
            )


@check(REPO_SPLIT_INCOMPLETE, "repo")
def split_incomplete(repo: RepoFacts) -> Iterator[Finding]:
    sets: dict[tuple[str, int], list[QuantEntry]] = {}
    for e in repo.quants:
        if e.shard is not None:
            sets.setdefault((e.shard.first, e.shard.count), []).append(e)
    for (first, count), shards in sorted(sets.items()):
        have = {e.shard.number for e in shards if e.shard is not None}
        missing = sorted(set(range(1, count + 1)) - have)
        if missing:
            what = "its first shard (which holds the metadata)" if 1 in missing else "shards"
            yield make_finding(
                REPO_SPLIT_INCOMPLETE,
                f"split GGUF {first} ({count} shards) is missing {what}: " + ", ".join(f"{n:05d}" for n in missing),
                Location(file=repo.target),
                evidence=f"present: {', '.join(f'{n:05d}' for n in sorted(have))}",
                missing=missing,
                **repo.concerning(shards),
            )


@check(REPO_MODELS_GROUPED, "repo")
def several_models(repo: RepoFacts) -> Iterator[Finding]:
    groups = repo.groups()
    if len(groups) > 1:
        desc = "; ".join(f"{g}: {len(v)} file(s)" for g, v in groups.items())
        yield make_finding(
            REPO_MODELS_GROUPED,
            f"{len(groups)} models by architecture and vocabulary; quants compared within each ({desc})",
            Location(file=repo.target),
            groups={g: [e.name for e in v] for g, v in groups.items()},
            **repo.concerning(e for v in groups.values() for e in v),
        )


@check(REPO_TEMPLATE_MISSING, "repo")
def template_missing(repo: RepoFacts) -> Iterator[Finding]:
    for group, members in _compared(repo):
        for tname in template_names(members):
            found = repo.majority(group, members, tname)
            assert found is not None
            majority_files = found[1]
            having = [e.name for e in members if tname in e.templates]
            key = _template_key(tname)
            for e in members:
                if tname not in e.templates:
                    yield make_finding(
                        REPO_TEMPLATE_MISSING,
                        f"{e.name} has no `{tname}` chat template ({key}); {len(having)} of "
                        f"{len(members)} quants of this model carry it (e.g. {having[0]})",
                        Location(file=e.label, key=key),
                        template=tname,
                        evidence=f"carried by: {', '.join(having)}",
                        fix=_copy_fix(majority_files[0], e.name, tname),
                        carried_by=having,
                        **repo.concerning(members),
                    )


@check(REPO_TEMPLATE_DIFFERS, "repo")
def template_differs(repo: RepoFacts) -> Iterator[Finding]:
    for group, members in _compared(repo):
        for tname in template_names(members):
            found = repo.majority(group, members, tname)
            assert found is not None
            text, majority_files = found
            carrying = sum(1 for e in members if tname in e.templates)
            key = _template_key(tname)
            for e in members:
                if tname in e.templates and not same_text(e.templates[tname], text):
                    yield make_finding(
                        REPO_TEMPLATE_DIFFERS,
                        f"{e.name}: the `{tname}` template differs from the one in {len(majority_files)} of "
                        f"{carrying} quants carrying it (e.g. {majority_files[0]})",
                        Location(file=e.label, key=key),
                        template=tname,
                        evidence=_diff_excerpt(text, e.templates[tname], majority_files[0], e.name),
                        fix=_copy_fix(majority_files[0], e.name, tname),
                        majority_files=majority_files,
                        **repo.concerning(members),
                    )


@check(REPO_SPECIAL_TOKENS_DIFFER, "repo")
def special_tokens_differ(repo: RepoFacts) -> Iterator[Finding]:
    for _, members in _compared(repo):
        roles = sorted({r for e in members for r in e.special})
        usual = {role: majority([(e.name, e.special.get(role)) for e in members]) for role in roles}
        for e in members:
            diffs = [
                f"{role}: {_fmt_tok(e.special.get(role))} (others: {_fmt_tok(usual[role])})"
                for role in roles
                if freeze(e.special.get(role)) != freeze(usual[role])
            ]
            if diffs:
                yield make_finding(
                    REPO_SPECIAL_TOKENS_DIFFER,
                    f"{e.name}: special tokens differ from the other quants: " + "; ".join(diffs),
                    Location(file=e.label),
                    evidence="\n".join(diffs),
                    fix=f"re-convert {e.name}, or set the token ids to match the other quants",
                    **repo.concerning(members),
                )


@check(REPO_UPSTREAM_DRIFT, "repo")
def upstream_drift(repo: RepoFacts) -> Iterator[Finding]:
    groups = repo.groups()
    for gname, up in sorted(repo.upstream.items()):
        members = groups.get(gname, [])
        if up.status != "checked" or not up.templates or up.repo is None:
            continue
        ups = up.templates
        missing: list[str] = []
        differing: list[str] = []
        evidence: list[str] = []
        for n in template_names(members, ups):
            found = repo.majority(gname, members, n)
            if n in ups and found is None:
                if up.complete:
                    missing.append(n)
            elif n in ups and found is not None and not same_text(found[0], ups[n]) and not _joined(n, found[0], ups):
                differing.append(n)
                evidence.append(_diff_excerpt(ups[n], found[0], f"{up.repo}:{n}", f"quants:{n}", limit=12))
        if missing or differing:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(f"`{n}`" for n in missing))
            if differing:
                parts.append("different " + ", ".join(f"`{n}`" for n in differing))
            yield make_finding(
                REPO_UPSTREAM_DRIFT,
                f"{gname}: the quants' templates drift from upstream {up.label}: " + "; ".join(parts),
                Location(file=repo.target),
                template=(missing + differing)[0],
                # a template upstream ships and no quant carries is the silent tool-calling failure
                severity=Severity.ERROR if missing else None,
                evidence="\n".join(evidence) or f"upstream templates: {', '.join(sorted(ups))}",
                fix=f"gguftpl patch QUANT.gguf --from-hub {shlex.quote(up.repo)} -o FIXED.gguf (for each quant)",
                upstream=up.repo,
                upstream_revision=up.revision,
                missing=missing,
                differing=differing,
                **repo.concerning(members),
            )


@check(REPO_UPSTREAM_UNKNOWN, "repo")
def upstream_unchecked(repo: RepoFacts) -> Iterator[Finding]:
    groups = repo.groups()
    for gname, up in sorted(repo.upstream.items()):
        if up.status == "unknown":
            message = f"no upstream model known for {gname}: the quants were compared only with each other"
        elif up.status == "unreachable":
            message = (
                f"upstream {up.repo} could not be read ({up.error}); the quants were compared only with each other"
            )
        else:
            continue
        yield make_finding(
            REPO_UPSTREAM_UNKNOWN, message, Location(file=repo.target), **repo.concerning(groups.get(gname, []))
        )


# --------------------------------------------------------------------------------------------- helpers


def _joined(name: str, text: str, ups: Mapping[str, str]) -> bool:
    """A default that is upstream's tool_use and default joined by ``patch --tools-in-default`` (``{% if tools
    %}`` tool_use ``{% else %}`` default) is upstream's own templates, not a drift from them."""
    if name != "default" or "tool_use" not in ups or "default" not in ups:
        return False
    from gguftpl.runtimes.toolsdefault import combine

    return same_text(text, combine(ups["default"], ups["tool_use"]))


def _compared(repo: RepoFacts) -> Iterator[tuple[str, list[QuantEntry]]]:
    """The model groups with at least two quants: the ones the quants are compared within."""
    for group, members in repo.groups().items():
        if len(members) >= 2:
            yield group, members


def _template_key(name: str) -> str:
    return "tokenizer.chat_template" if name == "default" else f"tokenizer.chat_template.{name}"


def _diff_excerpt(a: str, b: str, a_name: str, b_name: str, limit: int = 24) -> str:
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), fromfile=a_name, tofile=b_name, lineterm="", n=1))
    if len(lines) > limit:
        lines = lines[:limit] + [f"… ({len(lines) - limit} more diff lines)"]
    return "\n".join(lines)


def _copy_fix(source: str, target: str, tname: str) -> str:
    """Commands that copy template ``tname`` from the quant ``source`` into ``target`` (names in the repo)."""
    jinja = shlex.quote(f"{tname}.jinja")
    return (
        f"gguftpl inspect {shlex.quote(source)} --template {shlex.quote(tname)} --raw > {jinja} && "
        f"gguftpl patch {shlex.quote(target)} --template {shlex.quote(tname)}={jinja} -o FIXED.gguf"
    )


def _fmt_tok(v: Any) -> str:
    if v is None:
        return "absent"
    if isinstance(v, list) and len(v) == 2:
        return f"{v[0]} {v[1]!r}" if v[1] is not None else str(v[0])
    return str(v)
