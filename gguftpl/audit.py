"""Audit many GGUF files: read each header, analyse its chat templates, collect findings.

The expensive part (rendering templates) is done once per distinct template text: quants of one model
share the same templates, so a directory of 100 GGUFs costs little more than one. The facts are cached;
the rules run for every file, so each finding carries its own file's name.

A file that cannot be read is a finding for that file (GT001), never the end of the run. Only bad usage
(a path that does not exist, an unknown rule selector or engine: ``UsageError``) and a folder that cannot
be listed (``OSError``) raise.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gguftpl import limits
from gguftpl.analysis import run_checks, sort_findings
from gguftpl.auditcache import AnalysisCache
from gguftpl.errors import GGUFFormatError, GGUFTplError, UsageError
from gguftpl.findings import (
    Finding,
    Location,
    Rule,
    Severity,
    all_rules,
    get_rule,
    make_finding,
    selector_specificity,
)
from gguftpl.gguf.modelkind import ModelKind
from gguftpl.repair import upstream_templates
from gguftpl.rules.context import FileContext
from gguftpl.safeio import not_found
from gguftpl.templates.facts import TemplateFacts
from gguftpl.templates.factstore import disk_use

if TYPE_CHECKING:
    from gguftpl.repair import Repair
    from gguftpl.runtimes.view import RuntimeView
    from gguftpl.stores import StoreModel

__all__ = [
    "AuditOptions",
    "AuditRun",
    "FileAudit",
    "RuleFilter",
    "audit_file",
    "audit_header",
    "audit_paths",
    "collect_paths",
]

GGUF_SUFFIX = ".gguf"


@dataclass
class FileAudit:
    """What the audit found in one GGUF (local path, URL or any other header source)."""

    path: str
    """The label the user gave: a path as typed, a path found under a directory, or a URL."""
    templates: list[TemplateFacts] = field(default_factory=list)
    """The facts of each chat template in the file (``templates.facts.TemplateFacts``)."""
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    """Why the file could not be audited fully (the matching GT001/GT002 finding is in ``findings``)."""
    upstream_repo: str | None = None
    """The Hugging Face repo the file was converted from, when the metadata or catalog says so."""
    upstream_how: str = ""
    """How ``upstream_repo`` was found (metadata key or catalog), for the report."""
    seconds: float = 0.0
    cached: bool = False
    """True when the template analysis was reused from another file with the same templates."""
    notes: list[str] = field(default_factory=list)
    """What the reader did that the user should know (a later shard read through shard 1, …)."""
    runtimes: RuntimeView | None = None
    """Which template each runtime renders a tools request with (``runtimes.view``); None when unread."""
    repo_level: bool = False
    """Not a file: the entry that carries a repo's or folder's own findings (``--repo``, ``--repo-check``)."""
    upstream_own: dict[str, str] = field(default_factory=dict)
    """The file's templates that are upstream's own (``gguftpl.repair.upstream_templates``): name -> whose."""
    repair: Repair | None = None
    """The file's one repair of its tool calling (``gguftpl.repair``): what every fix line about lost tools says,
    and the report's last line; None when the file could not be audited."""
    kind: ModelKind | None = None
    """Chat, base, embedding or reranker, read from the header (``gguf.modelkind``); None when unread."""

    def max_severity(self) -> Severity | None:
        return max((f.severity for f in self.findings), key=lambda s: s.rank, default=None)


@dataclass
class AuditRun:
    """The result of one ``audit_paths`` call; formatters turn it into text, JSON, SARIF or annotations."""

    files: list[FileAudit] = field(default_factory=list)
    rules: dict[str, Rule] = field(default_factory=dict)
    """Metadata of every rule that produced a finding in this run (code -> Rule)."""
    seconds: float = 0.0
    analyses: int = 0
    """How many template sets were analysed (the rest came from the cache)."""
    llamacpp_checks: int = 0
    """How many distinct template texts llama.cpp was asked to load (the parse check, GT606)."""
    llamacpp_check: str = ""
    """``on``, ``off`` (``--engine hf-only``) or why the llama.cpp parse check was skipped."""

    @property
    def findings(self) -> list[Finding]:
        return [f for fa in self.files for f in fa.findings]

    @property
    def file_count(self) -> int:
        """Files audited (a repo's own entry is not a file)."""
        return sum(1 for fa in self.files if not fa.repo_level)

    @property
    def files_with_findings(self) -> int:
        return sum(1 for fa in self.files if fa.findings and not fa.repo_level)

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Severity}
        for f in self.findings:
            out[f.severity.value] += 1
        return out

    def failing(self, fail_on: Severity | str = Severity.ERROR) -> list[Finding]:
        """Findings at or above ``fail_on``."""
        threshold = Severity(fail_on).rank
        return [f for f in self.findings if f.severity.rank >= threshold]

    @property
    def unreadable(self) -> list[FileAudit]:
        """Files with a GT001 (no GGUF gguftpl can read: empty, truncated, another format, a vocabulary that is no
        UTF-8): bad input, reported with every other file and ending the run with exit 2 (none when GT001 is not
        selected: ``--ignore GT001``)."""
        return [fa for fa in self.files if any(f.code == "GT001" for f in fa.findings)]

    def exit_code(self, fail_on: Severity | str = Severity.ERROR, *, exit_zero: bool = False) -> int:
        """2 when a file could not be read as a GGUF (bad input, whatever ``exit_zero`` says); else 0 when
        nothing is at or above ``fail_on`` (or ``exit_zero``), 1 otherwise. Usage errors are raised earlier."""
        if self.unreadable:
            return 2
        return 0 if exit_zero or not self.failing(fail_on) else 1

    def rule(self, code: str) -> Rule | None:
        return self.rules.get(code) or _registered_rule(code)


# --- rule selection ---------------------------------------------------------------------------------


def _split_selectors(values: Iterable[str] | str | None) -> list[str] | None:
    """``["GT2,GT301", "GT4"]`` -> ``["GT2", "GT301", "GT4"]``; accepts one comma-separated string too."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for v in values:
        out.extend(p.strip().upper() for p in v.split(",") if p.strip())
    return out


class RuleFilter:
    """``--select`` / ``--ignore`` with code prefixes (``GT2`` = every GT2xx rule), resolved like ruff:
    the most specific matching selector wins, and on a tie ``ignore`` wins. ``ALL`` matches everything."""

    def __init__(self, select: Iterable[str] | str | None = None, ignore: Iterable[str] | str | None = None) -> None:
        sel = _split_selectors(select)
        self.select = sel if sel else None  # an empty --select means "no restriction"
        self.ignore = _split_selectors(ignore) or []
        known = [r.code for r in all_rules()]
        for s in (self.select or []) + self.ignore:
            if not any(selector_specificity(code, s) >= 0 for code in known):
                raise UsageError(f"unknown rule selector {s!r} (see `gguftpl rules`)")

    @staticmethod
    def _specificity(code: str, selectors: Sequence[str]) -> int:
        return max((selector_specificity(code, s) for s in selectors), default=-1)

    def __call__(self, code: str) -> bool:
        sel = 0 if self.select is None else self._specificity(code, self.select)
        if sel < 0:
            return False
        ign = self._specificity(code, self.ignore)
        return ign < sel


@dataclass(frozen=True)
class AuditOptions:
    """How an audit runs: which rules (``select``/``ignore``: codes or prefixes, comma-separated or one per
    item, ruff's precedence), which engine (``hf``: transformers' semantics, and llama.cpp when xllamacpp is
    installed; ``hf-only``; ``llamacpp``: also verify each local file through llama.cpp) and whether an
    unexpected error raises (``strict``, ``--debug``) instead of being reported as GT002."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    engine: str = "hf"
    strict: bool = False
    runtimes: tuple[str, ...] | None = None
    """Judge only these runtimes (profile ids or names: ``lmstudio``, ``vLLM``, ...): their engines are asked,
    the runtime view shows only them, and findings about other runtimes are left out (``audit --runtime``)."""

    def __post_init__(self) -> None:
        _check_engine(self.engine)
        if self.runtimes is not None:
            object.__setattr__(self, "runtimes", runtime_ids(self.runtimes))
        for name in ("select", "ignore"):  # a plain string or any iterable becomes a tuple of selectors
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        self.keep  # noqa: B018 - an unknown selector is a usage error now, not at the first finding

    @functools.cached_property
    def keep(self) -> RuleFilter:
        """The rule filter of ``select`` and ``ignore``."""
        return RuleFilter(self.select, self.ignore)


def runtime_ids(names: Iterable[str] | str) -> tuple[str, ...]:
    """Profile ids for ``names`` (ids or display names, any case, comma-separated or one per item); an unknown
    one is a usage error naming the known ones."""
    from gguftpl.runtimes.profiles import PROFILES

    by_name = {k.lower(): p.id for p in PROFILES for k in (p.id, p.name)}
    out: list[str] = []
    items = [names] if isinstance(names, str) else list(names)
    for name in (part.strip() for item in items for part in item.split(",") if part.strip()):
        found = by_name.get(name.lower())
        if found is None:
            raise UsageError(f"unknown runtime {name!r} (one of: {', '.join(p.id for p in PROFILES)})")
        if found not in out:
            out.append(found)
    if not out:
        raise UsageError("--runtime names no runtime")
    return tuple(out)


def runtime_engines(ids: Sequence[str] | None) -> tuple[str, ...] | None:
    """The other engines the runtimes ``ids`` render with (None: every one)."""
    if ids is None:
        return None
    from gguftpl.engines.registry import OTHER_ENGINES
    from gguftpl.runtimes.profiles import profile

    wanted = {e for i in ids for e in (profile(i).engine, *profile(i).also_engines)}
    return tuple(e for e in OTHER_ENGINES if e in wanted)


_RUNTIME_OF_RANGE = {"GT6": ("llama.cpp", "goose", "jan"), "GT7": ("ollama",)}
"""Rule ranges about one runtime: llama.cpp's own findings (verify stages, load), Ollama's."""


def for_runtimes(findings: list[Finding], view: Any, ids: Sequence[str]) -> list[Finding]:
    """The findings that concern the runtimes ``ids``: those naming one of them, those of a rule range about
    one of them, the tools findings of a template one of them renders a tools request with and loses the
    schemas, and every finding about the file or template itself (it breaks them all)."""
    rows = list(view.only(ids).rows)
    names = {r.name for r in rows} | set(ids)
    losing = {r.template for r in rows if r.tools_reach_prompt is not True}
    kept = []
    for f in findings:
        named = f.extra.get("runtimes") or ([f.extra["runtime"]] if f.extra.get("runtime") else None)
        about = _RUNTIME_OF_RANGE.get(f.code[:3])
        if named is not None:
            if not names.intersection(named):
                continue
        elif about is not None:
            if not set(about).intersection(ids):
                continue
        elif f.code.startswith("GT2") and f.template is not None and f.template not in losing:
            continue
        kept.append(f)
    return kept


# --- the audit ----------------------------------------------------------------------------------------


def _registered_rule(code: str) -> Rule | None:
    try:
        return get_rule(code)
    except KeyError:
        return None


_ENGINES = ("hf", "hf-only", "llamacpp")


def audit_header(
    header: Any,
    label: str,
    options: AuditOptions | None = None,
    *,
    cache: AnalysisCache | None = None,
    store: StoreModel | None = None,
) -> FileAudit:
    """Audit one already-read header (from a local file, an HTTP range read, …) reported as ``label``.

    With ``options.strict`` an unexpected exception from the analysis raises instead of being GT002.
    """
    start = time.perf_counter()
    options = options or AuditOptions()
    cache = cache if cache is not None else AnalysisCache()
    audit = FileAudit(path=label)
    with disk_use(cache.disk_use):  # Ollama's Go facts follow the audit's cache: --no-cache reads none
        _audit_into(audit, header, label, options, cache, store)
    audit.seconds = time.perf_counter() - start
    return audit


def _audit_into(
    audit: FileAudit, header: Any, label: str, options: AuditOptions, cache: AnalysisCache, store: StoreModel | None
) -> None:
    keep = options.keep
    try:
        cache.engines = runtime_engines(options.runtimes)
        loaded, audit.cached = cache.load(header, options.engine)
        audit.upstream_repo, audit.upstream_how = _upstream(loaded.upstream_repo, loaded.upstream_how, store)
        audit.templates = list(loaded.facts.templates)
        ctx = FileContext(
            file=label,
            tset=loaded.tset,
            vocab=loaded.vocab,
            templates=loaded.facts.templates,
            header=header,
            upstream_repo=audit.upstream_repo,
            upstream_how=audit.upstream_how,
            skipped=loaded.facts.skipped,
            max_analysed=limits.MAX_ANALYSED_TEXTS,
            store=store,
        )
        audit.kind = ctx.kind
        audit.upstream_own = upstream_templates(loaded.tset)
        audit.findings = _mark_upstream_own(run_checks(ctx, keep), audit.upstream_own)
        # the rules that read it computed it once; the report shows it (not for a model that answers no chat)
        audit.runtimes = ctx.runtimes if ctx.kind.generates else None
        audit.repair = ctx.repair if ctx.kind.generates else None
        if options.runtimes is not None and audit.runtimes is not None:
            audit.findings = for_runtimes(audit.findings, audit.runtimes, options.runtimes)
            audit.runtimes = audit.runtimes.only(options.runtimes)
            audit.repair = ctx.repair_for(audit.runtimes)  # the runtimes the user targets
    except UsageError:
        raise
    except Exception as exc:
        if options.strict and not isinstance(exc, GGUFTplError):
            raise
        audit.error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, GGUFTplError) else str(exc)
        # the header's own checks (key types, truncation) still hold when the templates could not be read
        header_checks = run_checks(FileContext(file=label, header=header), keep)
        from gguftpl.rules.container import audit_stopped

        stopped = audit_stopped(exc, audit.error, label, header)
        also = [f for f in header_checks if (f.code, f.location.key) != (stopped.code, stopped.location.key)]
        audit.findings = [f for f in [stopped, *also] if keep(f.code)]


def _upstream(repo: str | None, how: str, store: StoreModel | None) -> tuple[str | None, str]:
    """The upstream the file's metadata and the catalog give; when they give none, the repo of the Hugging Face
    cache folder the file was downloaded into (``models--ORG--REPO``: the store says where the file came from)."""
    if repo is not None or store is None or not store.upstream_repo:
        return repo, how
    from gguftpl.upstream.discover import is_quant_repo

    quant = is_quant_repo(store.upstream_repo)
    caveat = " (a GGUF repo; its templates may not be the original model's)" if quant else ""
    return store.upstream_repo, f"from the Hugging Face cache folder it was downloaded into{caveat}; {how}"


def _mark_upstream_own(findings: list[Finding], own: dict[str, str]) -> list[Finding]:
    """Findings in a template that is upstream's own (:func:`gguftpl.repair.upstream_templates`) say so in
    ``extra["from_upstream"]``: they come with upstream's template and are expected."""
    from dataclasses import replace

    if not own:
        return findings
    return [
        replace(f, extra={**f.extra, "from_upstream": own[f.template]}) if f.template in own else f for f in findings
    ]


def _first_bytes(path: str | os.PathLike[str], n: int = 16) -> str:
    from gguftpl.safeio import open_regular

    try:
        with open_regular(path) as fh:  # never blocks on a FIFO
            head = fh.read(n)
    except GGUFTplError as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    return f"first {len(head)} bytes: {head.hex(' ')}" if head else "empty file"


def _unreadable(label: str, path: str | os.PathLike[str], exc: GGUFFormatError, keep: RuleFilter) -> FileAudit:
    from gguftpl.rules.container import UNREADABLE_GGUF

    finding = make_finding(UNREADABLE_GGUF, str(exc), Location(file=label), evidence=_first_bytes(path))
    return FileAudit(path=label, error=str(exc), findings=[finding] if keep(finding.code) else [])


def audit_file(
    path: str | os.PathLike[str],
    options: AuditOptions | None = None,
    *,
    label: str | None = None,
    cache: AnalysisCache | None = None,
    store: StoreModel | None = None,
) -> FileAudit:
    """Audit one local GGUF file. An unreadable file gives a GT001 finding, not an exception. ``store``: the store
    model it was resolved from, whose runtime's own view of it (an Ollama manifest's TEMPLATE) the runtime view
    follows.

    A later shard of a split GGUF is audited through shard 1 in the same folder (reported under shard 1's
    path, with a note); a missing shard 1 is a GT555 finding for the file."""
    from gguftpl.gguf.open import MissingFirstShardError, local_shard, split_notes
    from gguftpl.gguf.reader import read_header

    label = label if label is not None else os.fspath(path)
    options = options or AuditOptions()
    keep = options.keep
    start = time.perf_counter()
    notes: list[str] = []
    try:
        ls = local_shard(path)
        if ls.shard is not None and not ls.shard.is_first:
            path, notes = ls.path, ls.notes
            label = os.path.join(os.path.dirname(label), os.path.basename(ls.path))
        header = read_header(path)
    except MissingFirstShardError as exc:
        audit = _missing_first_shard(label, exc, keep)
        audit.seconds = time.perf_counter() - start
        return audit
    except GGUFFormatError as exc:
        audit = _unreadable(label, path, exc, keep)
        audit.notes = notes
        audit.seconds = time.perf_counter() - start
        return audit
    try:
        audit = audit_header(header, label, options, cache=cache, store=store)
        audit.notes = notes + split_notes(header)
    finally:
        header.close()
    # llama.cpp's verify stages ask chat questions: an embedding model or a reranker gets GT005 instead
    if options.engine == "llamacpp" and audit.error is None and (audit.kind is None or audit.kind.generates):
        _add_llamacpp_findings(audit, path, label, keep)
    audit.seconds = time.perf_counter() - start
    return audit


def _missing_first_shard(label: str, exc: Exception, keep: RuleFilter) -> FileAudit:
    from gguftpl.rules.repo import REPO_SPLIT_INCOMPLETE

    finding = make_finding(REPO_SPLIT_INCOMPLETE, str(exc), Location(file=label))
    return FileAudit(path=label, error=str(exc), findings=[finding] if keep(finding.code) else [])


def _add_llamacpp_findings(audit: FileAudit, path: str | os.PathLike[str], label: str, keep: RuleFilter) -> None:
    """``--engine llamacpp``: what llama.cpp itself does with the file (verify stages 1-5 as GT6xx)."""
    from gguftpl.engines.llamacpp_session import LlamaCppLoadError
    from gguftpl.rules.llamacpp import LLAMACPP_LOAD_FAILED
    from gguftpl.verify.findings import llamacpp_findings

    try:
        repair = audit.repair.text() if audit.repair is not None else None
        found = llamacpp_findings(path, label, upstream_repo=audit.upstream_repo, repair=repair or None)
    except LlamaCppLoadError as exc:
        # one file llama.cpp refuses must not end the audit of the others: it is a finding about that file
        found = [make_finding(LLAMACPP_LOAD_FAILED, str(exc), Location(file=label), evidence="\n".join(exc.log[:20]))]
    extra = [f for f in found if keep(f.code)]
    audit.findings = sort_findings([*audit.findings, *extra], audit.templates)


def _raise(exc: OSError) -> None:
    raise exc


def collect_paths(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Files as given, directories expanded to every ``*.gguf`` below them (sorted); duplicates dropped,
    and so are further shards of a split GGUF already listed (shard 1, first when sorted, covers them).

    A path that does not exist, and a directory without a single GGUF, are usage errors: almost always a
    typo or the wrong folder, and silently auditing nothing would pass a CI job."""
    from gguftpl.gguf.shards import shard_info

    out: list[str] = []
    seen: set[str] = set()

    def add(p: str) -> None:
        # the shards of one split GGUF count once: shard 1 holds the metadata and speaks for the rest
        shard = shard_info(os.path.basename(p))
        real = os.path.realpath(os.path.join(os.path.dirname(p), shard.first) if shard else p)
        if real not in seen:
            seen.add(real)
            out.append(p)

    for raw in paths:
        p = os.fspath(raw)
        if os.path.isdir(p):
            found: list[str] = []
            for root, dirs, files in os.walk(p, onerror=_raise):  # an unlistable folder is an I/O error
                dirs.sort()
                found.extend(os.path.join(root, f) for f in files if f.lower().endswith(GGUF_SUFFIX))
            if not found:
                raise UsageError(f"no GGUF files (*{GGUF_SUFFIX}) in {p}")
            for f in sorted(found):
                add(f)
        elif os.path.exists(p):
            add(p)
        elif re.fullmatch(r"GT\d{1,3}", p, re.IGNORECASE):
            # `--ignore GT304 GT205` reads GT205 as a path: options take one value each
            raise UsageError(
                f"{not_found(p)} (to select or ignore several rules, separate them with commas "
                f"or repeat the option: --ignore GT304,{p.upper()})"
            )
        else:
            raise UsageError(not_found(p))
    return out


def _targets(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[str, str | None, Any]]:
    """(file, label, store model) for each file and folder (:func:`collect_paths`) and each model reference
    (``ollama://``, ``lmstudio://``, ``hf-cache://``: :func:`gguftpl.stores.resolve`, labelled with the reference)."""
    from gguftpl.stores import is_ref, resolve

    out: list[tuple[str, str | None, Any]] = []
    batch: list[str | os.PathLike[str]] = []  # paths between references: collected together, so deduplicated
    for raw in [*paths, None]:
        if raw is None or (isinstance(raw, str) and is_ref(raw)):
            out += [(f, None, None) for f in collect_paths(batch)] if batch else []
            batch = []
            if raw is not None:
                model = resolve(raw)
                out.append((model.path, model.ref, model))
        else:
            batch.append(raw)
    return out


def audit_paths(
    paths: Iterable[str | os.PathLike[str]],
    options: AuditOptions | None = None,
    *,
    cache: AnalysisCache | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> AuditRun:
    """Audit files, directories (recursively, ``*.gguf``) and model references (``ollama://NAME``, …, named
    after the reference). Raises ``UsageError`` for a missing path or an unknown selector, ``StoreError`` for a
    reference its store cannot give safely; every per-file problem is a finding in the returned run.
    ``progress(done, total, label)`` before each file (``done`` files audited so far) and once after the last."""
    start = time.perf_counter()
    options = options or AuditOptions()
    engine = options.engine
    cache = cache if cache is not None else AnalysisCache()
    misses_before, checks_before = cache.misses, cache.parse_checks
    run = AuditRun()
    with disk_use(cache.disk_use):  # a store blob's remembered digest too: --no-cache hashes it again
        todo = _targets(paths)
    for i, (p, label, store) in enumerate(todo):
        if progress is not None:
            progress(i, len(todo), label or str(p))
        run.files.append(audit_file(p, options, label=label, cache=cache, store=store))
    if progress is not None and todo:
        progress(len(todo), len(todo), todo[-1][1] or str(todo[-1][0]))
    run.analyses = cache.misses - misses_before
    run.llamacpp_checks = cache.parse_checks - checks_before
    run.llamacpp_check = (
        "off" if engine == "hf-only" else f"skipped: {cache.parse_skipped}" if cache.parse_skipped else "on"
    )
    run.rules = _rules_for(run.findings)
    run.seconds = time.perf_counter() - start
    return run


def _check_engine(engine: str) -> None:
    # hf: the analysis under transformers' semantics, plus llama.cpp's parse check of each template when
    # xllamacpp is installed; hf-only: without that check; llamacpp adds llama.cpp's own verdicts (verify)
    if engine not in _ENGINES:
        raise UsageError(f"unknown analysis engine {engine!r} (choose from {', '.join(_ENGINES)})")


def _rules_for(findings: Iterable[Finding]) -> dict[str, Rule]:
    out: dict[str, Rule] = {}
    for f in findings:
        if f.code not in out:
            rule = _registered_rule(f.code)
            if rule is not None:
                out[f.code] = rule
    return dict(sorted(out.items()))
