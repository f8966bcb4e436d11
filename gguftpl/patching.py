"""Put corrected chat templates into a GGUF: one pipeline for every source of templates.

plan (``gguftpl.patchplan``: the templates and the ``gguftpl.patch.*`` provenance keys) -> audit the input
-> write (``gguf.rewrite.rewrite``: tensor bytes identical and proven, atomic) -> prove (read the output
back: every template and provenance key as planned) -> audit the output -> before/after.

``patch_templates`` (templates given as text) and ``patch_from_upstream`` (a Hub repo or a catalog entry)
are one call each from Python; the CLI plans, prints the plan, then calls ``run_patch`` with the same plan.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gguftpl.beforeafter import AuditSummary, identity, summarize  # noqa: F401 - the before/after, read from here too
from gguftpl.errors import PatchError, UsageError
from gguftpl.gguf.conversion import conversion_key
from gguftpl.gguf.reader import read_header
from gguftpl.gguf.regioncopy import ProgressFn
from gguftpl.gguf.rewrite import RewriteProof, rewrite
from gguftpl.gguf.templateset import load_templateset
from gguftpl.patchoutput import output_permissions, resolve_output
from gguftpl.patchplan import (
    PROVENANCE_PREFIX,
    REMOVE,
    PatchPlan,
    add_provenance,
    plan_from_files,
    plan_from_upstream,
)

if TYPE_CHECKING:
    from gguftpl.audit import FileAudit
    from gguftpl.findings import Finding
    from gguftpl.repair import Repair
    from gguftpl.runtimes.toolsdefault import ToolsDefault
    from gguftpl.runtimes.view import RuntimeView
    from gguftpl.upstream.resolve import UpstreamSource


@dataclass(frozen=True)
class PatchOptions:
    """How a plan is carried out (what it writes is the plan's business)."""

    in_place: bool = False
    """Replace the input itself (still through a temp file and a rename)."""
    force: bool = False
    """Overwrite an existing output file."""
    provenance: bool = True
    """Record the ``gguftpl.patch.*`` provenance keys (used when planning)."""
    audit: bool = True
    """Audit the input before and the output after, for the before/after."""
    allow_new_errors: bool = False
    """Write even when the templates as planned add error findings of ``REFUSED_CODES`` (a sandbox escape, a
    template llama.cpp refuses, one that does not parse); refused by default, before anything is written."""


@dataclass(frozen=True)
class PatchResult:
    """What one patch did: the plan, where it wrote, the proof, and the audit before and after."""

    plan: PatchPlan
    output: str | None
    """The file written; None when nothing was (the upstream already agrees with the file)."""
    proof: RewriteProof | None
    """Tensor data and tensor infos compared byte for byte with the source (None when nothing was written)."""
    readback_ok: bool = False
    """Every template and provenance key read back from the output is as planned, removed ones are gone."""
    readback: dict[str, str] = field(default_factory=dict)
    """name -> sha256 of the templates in the output."""
    before: tuple[Finding, ...] | None = None
    """Every finding of the input's audit; None when not audited."""
    after: tuple[Finding, ...] | None = None
    """Every finding of the output's audit; None when not audited."""
    summary: AuditSummary | None = None
    """The before/after as counts, fixed and introduced findings; None when not audited."""
    tools_default: ToolsDefault | None = None
    """``--tools-in-default``: the new default and the rendering proof made before writing."""
    runtimes_before: RuntimeView | None = None
    """The input's runtime view: where the tools reach the prompt before (None when not audited)."""
    runtimes_after: RuntimeView | None = None
    """The output's runtime view: where they reach it after."""
    repair_after: Repair | None = None
    """The output's own repair (``gguftpl.repair``): ``needed`` is False when no runtime loses the tools any more."""
    upstream_own_after: dict[str, str] = field(default_factory=dict)
    """The output's templates that are upstream's own (``gguftpl.repair.upstream_templates``)."""

    @property
    def written(self) -> bool:
        return self.output is not None


# ---------------------------------------------------------------------------------------------- the pipeline


NOTHING_TO_CHANGE = "nothing to change: the file already has exactly these templates"


def run_patch(
    plan: PatchPlan,
    out: str | os.PathLike[str] | None,
    options: PatchOptions = PatchOptions(),
    *,
    progress: ProgressFn | None = None,
    tools_default: ToolsDefault | None = None,
    cache: Any = None,
) -> PatchResult:
    """Carry out ``plan``: write ``plan.path`` with it to ``out`` (or over the input with ``in_place``), prove
    the output, and audit before and after. A plan from upstream that changes no template writes nothing.
    ``tools_default`` is the proof of a ``--tools-in-default`` plan (:func:`plan_tools_in_default`), carried
    into the result. ``cache`` (an in-memory ``AnalysisCache``) is shared by the patches of one folder."""
    out_s = resolve_output(plan.path, out, in_place=options.in_place, force=options.force)
    if plan.agrees:
        return PatchResult(plan, None, None, tools_default=tools_default)  # upstream agrees: not an error
    if plan.writes_nothing:
        raise PatchError(NOTHING_TO_CHANGE)
    if not options.in_place:
        return _carry_out(plan, out_s, options, progress, tools_default, cache)
    from gguftpl.gguf.inplace import locked_in_place

    with locked_in_place(out_s, plan.planned_from):  # a second patch of the file waits, then finds it changed
        return _carry_out(plan, out_s, options, progress, tools_default, cache)


def _carry_out(
    plan: PatchPlan,
    out_s: str,
    options: PatchOptions,
    progress: ProgressFn | None,
    tools_default: ToolsDefault | None,
    cache: Any,
) -> PatchResult:
    """Audit the input, refuse new errors, write, read back, audit the output."""
    from gguftpl.auditcache import AnalysisCache

    # the three audits share what they learn of the templates they have in common, and the cache folder keeps
    # it for the audits that follow; but the gate's decision (GT1xx/GT4xx/GT606) and the fix lines never come
    # from the cache: every fact this patch acts on is gathered here (issue 27)
    cache = cache if cache is not None else AnalysisCache.on_disk(read_disk=False)
    input_audit = gate_patch(plan, out_s, options, cache)
    proof, readback = write_planned(plan, out_s, options, progress)
    return patch_result(plan, out_s, proof, readback, input_audit, options, cache, tools_default)


def gate_patch(plan: PatchPlan, out: str, options: PatchOptions, cache: Any) -> FileAudit:
    """Audit the input, and refuse a plan that adds error findings (unless ``allow_new_errors``): nothing is
    written yet. The input's audit, for the before/after."""
    input_audit = _audit(plan.path, cache)
    if not options.allow_new_errors:
        _refuse_new_errors(plan, out, tuple(input_audit.findings), cache)
    return input_audit


def write_planned(
    plan: PatchPlan, out: str, options: PatchOptions, progress: ProgressFn | None = None
) -> tuple[RewriteProof, dict[str, str]]:
    """Write the plan (atomically, tensor bytes proven) and read it back: (proof, name -> sha256 read back).
    Touches no audit: the writes of a folder run in threads."""
    proof = rewrite(
        plan.path,
        out,
        set_kv=plan.set_kv,
        remove=plan.remove_keys,
        overwrite=options.in_place or options.force,
        progress=progress,
        permissions=output_permissions(plan.path, in_place=options.in_place),
    )
    return proof, _read_back(plan, out)


def patch_result(
    plan: PatchPlan,
    out: str,
    proof: RewriteProof,
    readback: dict[str, str],
    input_audit: FileAudit,
    options: PatchOptions,
    cache: Any,
    tools_default: ToolsDefault | None = None,
) -> PatchResult:
    """Audit the output written and put the before/after together."""
    before = tuple(input_audit.findings) if options.audit else None
    output_audit = _audit(out, cache) if options.audit else None
    after = tuple(output_audit.findings) if output_audit is not None else None
    summary = summarize(before, after) if before is not None and after is not None else None
    return PatchResult(
        plan,
        out,
        proof,
        True,
        readback,
        before,
        after,
        summary,
        tools_default,
        input_audit.runtimes if options.audit else None,
        output_audit.runtimes if output_audit is not None else None,
        output_audit.repair if output_audit is not None else None,
        output_audit.upstream_own if output_audit is not None else {},
    )


def _audit(path: str, cache: Any = None) -> FileAudit:
    from gguftpl.audit import audit_file

    return audit_file(path, cache=cache)


REFUSED_CODES = ("GT102", "GT4", "GT606")
"""Error findings a patch may not add: a template that does not parse (GT102), an unsafe one (GT4xx: sandbox
escape, hidden trigger, render bomb, terminal escapes), one llama.cpp refuses to load (GT606). Tool-calling
findings (GT2xx) are what patches are there to fix; the before/after shows them."""


def _refuse_new_errors(plan: PatchPlan, out: str, before: Sequence[Finding], cache: Any) -> None:
    """Audit the templates as planned, before anything is written, and refuse a patch that adds error
    findings of ``REFUSED_CODES``: a repair that makes the file worse (an upstream ``tool_use`` that is a
    sandbox escape) must not be written and then reported as "1 error -> 6 error" with exit 0."""
    from gguftpl.audit import audit_header
    from gguftpl.findings import Severity

    planned = audit_header(_planned_header(plan), f"{plan.path} (as planned)", cache=cache)
    added = [
        f
        for f in summarize(before, planned.findings).introduced
        if f.severity is Severity.ERROR and f.code.startswith(REFUSED_CODES)
    ]
    if added:
        shown = ", ".join(f"{f.code} {f.name}" + (f" in {f.template}" if f.template else "") for f in added[:6])
        more = f" and {len(added) - 6} more" if len(added) > 6 else ""
        raise PatchError(
            f"refusing to write {out}: the new templates add {len(added)} error finding(s) ({shown}{more}); "
            "nothing was written (--allow-new-errors writes it anyway)"
        )


def _planned_header(plan: PatchPlan) -> Any:
    """The input's header with the plan's keys set and removed, in memory: what the audit reads of the
    output, without writing it (its arrays, untouched, still read from the input)."""
    from dataclasses import replace

    from gguftpl.gguf.reader import KV
    from gguftpl.gguf.writer import typed_value

    with read_header(plan.path) as header:
        kv = {k: v for k, v in header.kv.items() if k not in plan.remove_keys}
        for key, value in plan.set_kv.items():
            tv = typed_value(value)
            kv[key] = KV(key, tv.type, tv.value, tv.elem_type, -1, -1)
        # not a file: the audit's caches key on a file's raw bytes, which these are not
        return replace(header, kv=kv, kv_count=len(kv), path=f"{plan.path} (as planned)")


def _read_back(plan: PatchPlan, out: str) -> dict[str, str]:
    """name -> sha256 of the output's templates, after checking every template item and every other key
    set or removed (the provenance) is in the output as planned."""
    with read_header(out) as header:
        after = load_templateset(header)
        items_ok = all(
            (it.action == REMOVE and it.name not in after.templates)
            or (it.new_text is not None and it.name in after.templates and after.templates[it.name].text == it.new_text)
            for it in plan.items
        )
        # every other key is there; the provenance (strings) exactly: a float read back is not the one written
        keys_ok = all(
            k in header.kv and (not k.startswith(PROVENANCE_PREFIX) or header.get(k) == v)
            for k, v in plan.extra_kv.items()
        ) and not any(k in header.kv for k in plan.remove_keys)
    if not (items_ok and keys_ok):
        raise PatchError(f"read-back of {out} does not match the templates written")
    return {n: t.sha256 for n, t in after.templates.items()}


# ---------------------------------------------------------------------------------------------- one call each


def patch_templates(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str] | None,
    set_templates: Mapping[str, str] | None = None,
    remove: Sequence[str] = (),
    *,
    template_files: Mapping[str, str] | None = None,
    extra_kv: Mapping[str, Any] | None = None,
    in_place: bool = False,
    force: bool = False,
    provenance: bool = True,
    options: PatchOptions | None = None,
    progress: ProgressFn | None = None,
) -> PatchResult:
    """Write ``src`` with ``set_templates`` (name -> text) set and the ``remove`` names removed to ``out``
    (or over ``src`` with ``in_place``), recording provenance and auditing before and after.

    ``template_files`` (name -> path) names the files the texts were read from, for the provenance;
    ``extra_kv`` (key -> value or ``gguf.writer.Typed``) sets other metadata keys in the same rewrite.
    ``options`` gives every option at once (then leave ``in_place``, ``force`` and ``provenance`` alone)."""
    opts = _options(options, in_place=in_place, force=force, provenance=provenance)
    src_s = os.fspath(src)
    resolve_output(src_s, out, in_place=opts.in_place, force=opts.force)  # refuse unsafe outputs before any work
    plan = plan_from_files(
        src_s,
        set_templates or {},
        remove,
        template_files=template_files,
        provenance=opts.provenance,
        extra_kv=extra_kv,
    )
    return run_patch(plan, out, opts, progress=progress)


def patch_from_upstream(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    repo: str | None = None,
    revision: str | None = None,
    catalog: str | None = None,
    only: Sequence[str] | None = None,
    in_place: bool = False,
    provenance: bool = True,
    options: PatchOptions | None = None,
    progress: ProgressFn | None = None,
    tools_in_default: bool = False,
    accept_differences: bool = False,
    accept_family: bool = False,
) -> PatchResult:
    """Copy the chat templates of an upstream repo into ``src``, written to ``out`` (or over ``src`` with
    ``in_place``): from ``repo`` (``ORG/NAME[@REV]`` on the Hub, at ``revision``) or ``catalog`` (a bundled
    catalog entry ``ORG/NAME``, or ``"auto"`` for the one matching the GGUF). Every upstream template is
    written (or the ``only`` ones); the file's other templates are kept. A Hub that cannot be reached falls
    back to the catalog, saying so in ``result.plan.warnings``.

    ``tools_in_default`` is ``patch --from-catalog/--from-hub --tools-in-default``, the repair ``audit`` prints
    (``gguftpl.repair``): the default then carries upstream's tool_use for the runtimes that read nothing else,
    proven by rendering before anything is written (a prompt that differs raises ``PatchError`` unless
    ``accept_differences``). A named ``catalog`` entry that is not the file's upstream and whose vocabulary or
    special tokens differ is refused (``HubError``) unless ``accept_family``.

    ``options`` gives every option at once (then leave ``in_place`` and ``provenance`` alone). For
    ``--remove`` or no catalog fallback, plan with ``plan_upstream_patch`` and carry it out with ``run_patch``."""
    from gguftpl.upstream.resolve import UpstreamSource

    opts = _options(options, in_place=in_place, provenance=provenance)
    if not (repo or catalog):
        raise UsageError("name the upstream: repo='ORG/NAME' (the Hub) or catalog='ORG/NAME' (or 'auto')")
    if revision and not repo:
        raise UsageError("revision goes with repo")
    source = UpstreamSource(
        repo=repo,
        revision=revision,
        catalog=catalog,
        accept_family=accept_family,
        labels=("repo", "folder", "catalog"),
    )
    src_s = os.fspath(src)
    resolve_output(src_s, out, in_place=opts.in_place, force=opts.force)  # refuse unsafe outputs before any request
    if tools_in_default:
        return _carry_out_tools_in_default(src_s, out, source, opts, progress, accept_differences, only=only)
    if accept_differences:
        raise UsageError("accept_differences goes with tools_in_default")
    plan = plan_upstream_patch(src_s, source, only=only, provenance=opts.provenance)
    return run_patch(plan, out, opts, progress=progress)


def _carry_out_tools_in_default(
    src: str,
    out: str | os.PathLike[str] | None,
    source: UpstreamSource | None,
    opts: PatchOptions,
    progress: ProgressFn | None,
    accept_differences: bool,
    *,
    only: Sequence[str] | None = None,
) -> PatchResult:
    """Plan and prove ``--tools-in-default`` (after ``source``'s templates), refuse differences unless accepted,
    then write."""
    from gguftpl.errors import PatchError
    from gguftpl.runtimes.toolsdefault import refuse_unless_accepted

    plan, made = plan_tools_in_default(src, source, only=only, provenance=opts.provenance)
    if made is not None:
        try:
            refuse_unless_accepted(made, accept_differences)
        except PatchError as exc:
            raise PatchError(f"{exc}\n{made.proof.text()}") from None
    return run_patch(plan, out, opts, progress=progress, tools_default=made)


def _options(options: PatchOptions | None, **flags: bool) -> PatchOptions:
    if options is None:
        return PatchOptions(**flags)
    defaults = PatchOptions()
    changed = [k for k, v in flags.items() if v != getattr(defaults, k)]
    if changed:
        raise UsageError(f"give {', '.join(changed)} inside options, not beside it")
    return options


def plan_upstream_patch(
    src: str,
    source: UpstreamSource,
    *,
    only: Sequence[str] | None = None,
    remove: Sequence[str] = (),
    provenance: bool = True,
    resolve: Any = None,
) -> PatchPlan:
    """Resolve ``source`` for the GGUF ``src`` and plan copying its templates (see ``plan_from_upstream``).
    ``resolve(tset, source)`` resolves instead of ``resolve_upstream`` (a folder patch fetches upstream once)."""
    from gguftpl.upstream.resolve import resolve_upstream

    with read_header(src) as header:
        tset = load_templateset(header)
        # matching a catalog entry may read the vocabulary: the file is open
        up = (resolve or resolve_upstream)(tset, source)
    kept: tuple[str, ...] = ()
    if up.config.origin == "catalog" and not only:
        from gguftpl.keepworking import keep_working

        only, kept = keep_working(tset, up.config)
        if only == [] and not remove:  # every upstream template would replace a working one: nothing to copy
            from gguftpl.patchplan import plan_patch

            empty = plan_patch(tset.path, {}, ())
            return replace(empty, upstream=up.config, how_found=up.how, kept_working=kept)
    plan = plan_from_upstream(tset, up.config, only=only, remove=remove, provenance=provenance, how_found=up.how)
    return replace(plan, kept_working=kept) if kept else plan


# ---------------------------------------------------------------------------------------- --tools-in-default

TOOLS_IN_DEFAULT = "tools-in-default"
"""``gguftpl.patch.source`` (and ``template.default.source``) of a ``--tools-in-default`` patch, which also records
``gguftpl.patch.tools_in_default.{tool_use_sha256,default_sha256,proof}`` (and ``.accepted`` when differences
were accepted)."""


def plan_tools_in_default(
    src: str,
    source: UpstreamSource | None = None,
    *,
    only: Sequence[str] | None = None,
    remove: Sequence[str] = (),
    provenance: bool = True,
    llamacpp: bool = True,
    resolve: Any = None,
    made: dict[Any, Any] | None = None,
) -> tuple[PatchPlan, ToolsDefault | None]:
    """Plan ``patch --tools-in-default`` (after copying ``source``'s templates when given): the default becomes
    ``{% if tools %}`` + tool_use + ``{% else %}`` + default, proven by rendering (``runtimes.toolsdefault``)
    before anything is written; check ``result.proof`` (``refuse_unless_accepted``) before carrying it out.
    With ``source``, an upstream default that already renders the tools is written as it is (None for the
    proof). A folder patch passes ``resolve`` (see ``plan_upstream_patch``) and ``made``, a dict that keeps each
    proof by what it was made from (the texts, BOS, EOS and the conversion the file is), for the next quant."""
    from gguftpl.errors import PatchError
    from gguftpl.gguf.templateset import special_token_text
    from gguftpl.patchplan import plan_patch
    from gguftpl.runtimes.toolsdefault import (
        NothingToCarryError,
        NoToolUseError,
        no_tool_use_message,
        tools_in_default,
    )

    with read_header(src) as header:
        tset = load_templateset(header)
        conversion = conversion_key(header) if made is not None else None
    texts = {n: t.text for n, t in tset.templates.items()}
    base = (
        plan_upstream_patch(src, source, only=only, remove=remove, provenance=False, resolve=resolve)
        if source
        else None
    )
    if base is not None:
        texts.update({it.name: it.new_text for it in base.items if it.new_text is not None})
        for it in base.items:
            if it.action == REMOVE:
                texts.pop(it.name, None)
    bos, eos = special_token_text(tset, "bos"), special_token_text(tset, "eos")
    key = (tuple(sorted(texts.items())), bos, eos, llamacpp, conversion)
    try:
        if made is not None and conversion is not None and key in made:
            made_here = made[key]
        else:
            made_here = tools_in_default(src, texts, bos, eos, llamacpp=llamacpp)
            if made is not None and conversion is not None:
                made[key] = made_here
    except NothingToCarryError as exc:
        if base is None:
            raise PatchError(f"{exc}; {_the_files_repair(src)}") from None
        if not isinstance(exc, NoToolUseError):
            raise
        raise PatchError(no_tool_use_message(base)) from None  # not "bring upstream's": that is what was asked
    except PatchError as exc:
        if base is None or "already puts the tool schemas" not in str(exc):
            raise
        return (add_provenance(base) if provenance else base), None  # upstream's default carries the tools
    written = {it.name: it.new_text for it in base.items if it.new_text is not None} if base is not None else {}
    plan = plan_patch(src, {**written, "default": made_here.new_default}, remove)
    if base is not None:
        plan = replace(plan, upstream=base.upstream, how_found=base.how_found)
    if provenance:
        plan = _tools_provenance(add_provenance(plan) if base is not None else plan, made_here, layered=base is None)
    return plan, made_here


def _the_files_repair(src: str) -> str:
    """What to run instead of a ``--tools-in-default`` that has nothing to carry: the file's one repair, as
    ``audit`` prints it (never a placeholder, never the command just given: that one has no tool_use to read)."""
    from gguftpl.audit import audit_file

    fa = audit_file(src)
    if fa.repair is None:
        kind = f"not a chat model: {fa.kind.describe()}" if fa.kind is not None else "the file could not be audited"
        return f"{kind}, so no template repair applies"
    if not fa.repair.needed:
        return "every runtime already gets the tools: nothing to repair"
    if fa.repair.command:
        return f"its repair: {fa.repair.command}"
    return fa.repair.advice


def _tools_provenance(plan: PatchPlan, made: ToolsDefault, *, layered: bool) -> PatchPlan:
    """The ``--tools-in-default`` keys. Alone (``layered``), the keys of an earlier patch stay (they still describe
    the templates this one left alone) except those about the default; after an upstream copy, the copy's keys
    stay and the default's are restated."""
    from gguftpl.gguf.templateset import sha256_text
    from gguftpl.patchplan import provenance_kv

    p = PROVENANCE_PREFIX
    kv = dict(plan.extra_kv) if not layered else provenance_kv(plan)
    if layered:
        kv[p + "source"] = TOOLS_IN_DEFAULT
    kv.pop(p + "template.default.status", None)  # a catalog status described upstream's default, not this one
    kv[p + "template.default.source"] = TOOLS_IN_DEFAULT
    kv[p + "tools_in_default.tool_use_sha256"] = sha256_text(made.tool_use)
    kv[p + "tools_in_default.default_sha256"] = sha256_text(made.default)
    kv[p + "tools_in_default.proof"] = made.proof.summary()
    if made.proof.differences:
        kv[p + "tools_in_default.accepted"] = f"{len(made.proof.differences)} differing prompts accepted"
    ours = (p + "template.default.", p + "tools_in_default.")
    stale = [k for k in plan.previous_provenance if k not in kv and (not layered or k.startswith(ours))]
    keys = [k for k in plan.remove_keys if not k.startswith(p)] + stale  # templates removed, then provenance
    set_kv = {k: v for k, v in plan.set_kv.items() if not k.startswith(p)}
    return replace(plan, extra_kv=kv, set_kv={**set_kv, **kv}, remove_keys=keys)


def patch_tools_in_default(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    repo: str | None = None,
    revision: str | None = None,
    catalog: str | None = None,
    accept_differences: bool = False,
    options: PatchOptions | None = None,
    progress: ProgressFn | None = None,
) -> PatchResult:
    """Make the default template carry the tools for runtimes that read only the default (Ollama, LM Studio,
    vLLM), after copying upstream's templates from ``repo`` or ``catalog`` when given: proven by rendering
    before it is written; a prompt that differs refuses the patch (``PatchError``, with the differences)
    unless ``accept_differences``."""
    from gguftpl.upstream.resolve import UpstreamSource

    opts = options or PatchOptions()
    if revision and not repo:
        raise UsageError("revision goes with repo")
    source = (
        UpstreamSource(repo=repo, revision=revision, catalog=catalog, labels=("repo", "folder", "catalog"))
        if repo or catalog
        else None
    )
    src_s = os.fspath(src)
    resolve_output(src_s, out, in_place=opts.in_place, force=opts.force)
    return _carry_out_tools_in_default(src_s, out, source, opts, progress, accept_differences)
