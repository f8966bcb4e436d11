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
import hashlib
import os
import re
import shlex
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gguftpl import limits
from gguftpl.errors import GGUFFormatError, GGUFTplError, UsageError
from gguftpl.findings import Finding, Location, Rule, Severity, all_rules, get_rule, make_finding
from gguftpl.rules.context import FileContext
from gguftpl.templates.analysis import SetFacts, gather_set, run_checks, sort_findings
from gguftpl.templates.facts import TemplateFacts, VocabFacts, vocab_facts
from gguftpl.templates.factstore import FactsStore

if TYPE_CHECKING:
    from gguftpl.runtimes.view import RuntimeView

__all__ = [
    "AnalysisCache",
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

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Severity}
        for f in self.findings:
            out[f.severity.value] += 1
        return out

    def failing(self, fail_on: Severity | str = Severity.ERROR) -> list[Finding]:
        """Findings at or above ``fail_on``."""
        threshold = Severity(fail_on).rank
        return [f for f in self.findings if f.severity.rank >= threshold]

    def exit_code(self, fail_on: Severity | str = Severity.ERROR) -> int:
        """0 when nothing is at or above ``fail_on``, 1 otherwise (2 is for usage errors, raised earlier)."""
        return 1 if self.failing(fail_on) else 0

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
            if s != "ALL" and not any(code.startswith(s) for code in known):
                raise UsageError(f"unknown rule selector {s!r} (see `gguftpl rules`)")

    @staticmethod
    def _specificity(code: str, selectors: Sequence[str]) -> int:
        best = -1
        for s in selectors:
            if s == "ALL":
                best = max(best, 0)
            elif code.startswith(s):
                best = max(best, len(s))
        return best

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

    def __post_init__(self) -> None:
        _check_engine(self.engine)
        for name in ("select", "ignore"):  # a plain string or any iterable becomes a tuple of selectors
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        self.keep  # noqa: B018 - an unknown selector is a usage error now, not at the first finding

    @functools.cached_property
    def keep(self) -> RuleFilter:
        """The rule filter of ``select`` and ``ignore``."""
        return RuleFilter(self.select, self.ignore)


# --- analysis cache ---------------------------------------------------------------------------------


def _registered_rule(code: str) -> Rule | None:
    try:
        return get_rule(code)
    except KeyError:
        return None


@dataclass(frozen=True)
class _Loaded:
    """One file's template set and the facts the rules read, shared by files with the same metadata."""

    tset: Any
    upstream_repo: str | None
    upstream_how: str
    facts: SetFacts
    vocab: VocabFacts


class AnalysisCache:
    """Template facts shared across files and calls (e.g. a long-running process), so a template is rendered
    once however many files carry it; the rules, which are cheap, run for every file with its own name.

    Three levels: ``_facts`` maps (template text, bos, eos, llama.cpp asked) to its facts; ``_sets`` counts
    the template sets analysed; ``_by_header`` maps a hash of the raw metadata bytes (minus keys that differ
    between quants and that template sets never read) to everything loaded for that file, so a second
    quant of a model skips even decoding its vocabulary. ``on_disk()`` keeps the facts between runs too
    (``templates.factstore``)."""

    @classmethod
    def on_disk(cls) -> AnalysisCache:
        """A cache whose template facts persist in the user's cache folder (what the CLI uses)."""
        from gguftpl.templates.factstore import cache_folder

        return cls(FactsStore(cache_folder()))

    def __init__(self, store: FactsStore | None = None) -> None:
        self._facts = store if store is not None else FactsStore()
        self._sets: set[str] = set()
        self._by_header: dict[str, _Loaded] = {}
        self.hits = 0
        """Files whose template set was analysed before (either level)."""
        self.misses = 0
        """Template sets analysed."""
        self.header_hits = 0
        """Files answered from the raw-metadata level, without building a template set."""
        self.parse_checks = 0
        """Distinct template texts this cache asked llama.cpp about."""
        self.parse_skipped = ""
        """Why the llama.cpp parse check did not run (xllamacpp not installed), once it was wanted."""

    def load(self, header: Any, engine: str) -> tuple[_Loaded, bool]:
        """Everything the rules read about ``header``'s file, and whether its template set was seen before."""
        from gguftpl.templates.templateset import load_templateset

        header_key = _header_key(header, engine)
        found = self._by_header.get(header_key) if header_key else None
        if found is not None:
            self.hits += 1
            self.header_hits += 1
            return found, True
        tset = load_templateset(header)
        repo, how = _find_upstream(tset)
        names = self._llamacpp_names(engine)
        self._prestart(tset, names)
        facts = gather_set(tset, llamacpp_names=names, memo=self._facts)
        vocab = vocab_facts(tset, facts.templates)
        set_key = _set_key(tset, header, engine)
        seen = set_key in self._sets
        if seen:
            self.hits += 1
        else:
            self.misses += 1
            self._sets.add(set_key)
        self.parse_checks += facts.llamacpp_asked
        loaded = _Loaded(tset, repo, how, facts, vocab)
        if header_key:
            self._by_header[header_key] = loaded
        return loaded, seen

    def _prestart(self, tset: Any, names: tuple[str, ...]) -> None:
        """Start the render and llama.cpp workers at once when some template of ``tset`` has no facts yet, so
        the llama.cpp worker starts while the render worker probes (a warm run starts neither)."""
        from gguftpl.templates.templateset import special_token_text

        bos, eos = special_token_text(tset, "bos"), special_token_text(tset, "eos")
        keys = [(t.sha256, bos, eos, n in names) for n, t in tset.templates.items()]
        if all(self._facts.get(k) is not None for k in keys):
            return
        from gguftpl.templates.hfrender import get_worker

        get_worker().prestart()
        if names:
            from gguftpl.verify.parsecheck import parse_check_prestart

            parse_check_prestart()

    def _llamacpp_names(self, engine: str) -> tuple[str, ...]:
        """The templates llama.cpp is asked to load: those it reads, when xllamacpp is installed.
        ``--engine llamacpp`` loads the file itself, which reports a refused default, so only ``tool_use``
        is asked then (llama.cpp drops one it cannot parse silently)."""
        if engine == "hf-only" or self.parse_skipped:
            return ()
        from gguftpl.verify.llamaenv import llamacpp_available

        if not llamacpp_available():  # not installed: the audit goes on without llama.cpp
            from gguftpl.verify.llamaenv import NOT_INSTALLED

            self.parse_skipped = NOT_INSTALLED
            return ()
        from gguftpl.verify.choice import LOADED

        return LOADED if engine != "llamacpp" else LOADED[1:]

    def __len__(self) -> int:
        return len(self._sets)


def _set_key(tset: Any, header: Any, engine: str) -> str:
    """One analysis: the template names and texts, bos and eos, the engine, and the vocabulary (equal
    templates over another vocabulary are another analysis: the token rules read it)."""
    from gguftpl.templates.templateset import special_token_text

    h = hashlib.sha256(f"engine={engine}\n".encode())
    for role in ("bos", "eos"):
        h.update(f"{role}={special_token_text(tset, role)!r}\n".encode("utf-8", "surrogatepass"))
    for name, tpl in tset.templates.items():
        h.update(f"{name}={tpl.sha256}\n".encode("utf-8", "surrogatepass"))
    for key in _VOCAB_KEYS:
        h.update(_raw_value(header, key))
    return h.hexdigest()


# The arrays the token rules read through the template set, hashed as stored (never decoded for this).
_VOCAB_KEYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type")


def _raw_value(header: Any, key: str) -> bytes:
    from gguftpl.gguf.reader import LazyArray

    kv = getattr(header, "kv", {}).get(key)
    value = getattr(kv, "value", None)
    if isinstance(value, LazyArray):
        try:
            return hashlib.sha256(value.raw()).digest()
        except (OSError, GGUFTplError):
            return b"unreadable"
    return repr(value).encode("utf-8", "surrogatepass")


# Metadata that differs between quants of one model and that a template set never reads (a test checks
# that load_templateset gives equal template sets for files that differ only here).
_QUANT_KEYS = ("general.file_type", "general.quantization_version")
_QUANT_PREFIXES = ("quantize.", "split.")


def _header_key(header: Any, engine: str) -> str | None:
    """sha256 of the raw bytes of every metadata pair except the per-quant ones; None when the bytes
    cannot be re-read. Headers that kept their source (remote reads: the bytes stay in its buffer) are
    re-read from it, local files from their path."""
    path = getattr(header, "path", None)
    kvs = getattr(header, "kv", None)
    start, end = getattr(header, "kv_start", None), getattr(header, "kv_end", None)
    if not (isinstance(kvs, dict) and isinstance(start, int) and isinstance(end, int)):
        return None
    raw = _raw_metadata(getattr(header, "_source", None), path, start, end)
    if raw is None or len(raw) != end - start:
        return None
    h = hashlib.sha256(f"engine={engine}\nbyteorder={getattr(header, 'byteorder', '')}\n".encode())
    for kv in kvs.values():
        if kv.key in _QUANT_KEYS or kv.key.startswith(_QUANT_PREFIXES):
            continue
        h.update(raw[kv.offset - start : kv.end - start])
    return h.hexdigest()


def _raw_metadata(source: Any, path: Any, start: int, end: int) -> bytes | None:
    read_range = getattr(source, "read_range", None)
    if callable(read_range):
        try:
            data = read_range(start, end)
        except (OSError, GGUFTplError):
            data = None
        if isinstance(data, bytes):
            return data
    if not isinstance(path, str):
        return None
    try:
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as fh:
            fh.seek(start)
            return fh.read(end - start)
    except OSError:
        return None


# --- the audit ----------------------------------------------------------------------------------------


def _find_upstream(tset: Any) -> tuple[str | None, str]:
    """Ask the hub helper's discovery (metadata and bundled catalog only, no network) if it is installed."""
    try:
        from gguftpl.upstream.discover import find_upstream_repo
    except ImportError:
        return None, ""
    try:
        repo, how = find_upstream_repo(tset)
    except GGUFTplError as exc:
        return None, f"discovery failed: {exc}"
    return repo, how


_ENGINES = ("hf", "hf-only", "llamacpp")


def audit_header(
    header: Any,
    label: str,
    options: AuditOptions | None = None,
    *,
    cache: AnalysisCache | None = None,
) -> FileAudit:
    """Audit one already-read header (from a local file, an HTTP range read, …) reported as ``label``.

    With ``options.strict`` an unexpected exception from the analysis raises instead of being GT002.
    """
    from gguftpl.rules.container import AUDIT_FAILED

    start = time.perf_counter()
    options = options or AuditOptions()
    keep = options.keep
    cache = cache if cache is not None else AnalysisCache()
    audit = FileAudit(path=label)
    try:
        loaded, audit.cached = cache.load(header, options.engine)
        audit.upstream_repo, audit.upstream_how = loaded.upstream_repo, loaded.upstream_how
        audit.templates = list(loaded.facts.templates)
        ctx = FileContext(
            file=label,
            tset=loaded.tset,
            vocab=loaded.vocab,
            templates=loaded.facts.templates,
            header=header,
            upstream_repo=loaded.upstream_repo,
            skipped=loaded.facts.skipped,
            max_analysed=limits.MAX_ANALYSED_TEXTS,
        )
        audit.findings = run_checks(ctx, keep)
        audit.runtimes = ctx.runtimes  # the rules that read it computed it once; the report shows it
    except UsageError:
        raise
    except Exception as exc:
        if options.strict and not isinstance(exc, GGUFTplError):
            raise
        audit.error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, GGUFTplError) else str(exc)
        failed = make_finding(
            AUDIT_FAILED,
            f"could not finish checking the chat templates: {audit.error}",
            Location(file=label),
            fix=f"gguftpl --debug audit {shlex.quote(label)}",
        )
        # the header's own checks (key types, truncation) still hold when the templates could not be read
        header_checks = run_checks(FileContext(file=label, header=header), keep)
        audit.findings = [f for f in [failed, *header_checks] if keep(f.code)]
    audit.seconds = time.perf_counter() - start
    return audit


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
) -> FileAudit:
    """Audit one local GGUF file. An unreadable file gives a GT001 finding, not an exception.

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
        audit = audit_header(header, label, options, cache=cache)
        audit.notes = notes + split_notes(header)
    finally:
        header.close()
    if options.engine == "llamacpp" and audit.error is None:
        _add_llamacpp_findings(audit, path, label, keep)
    audit.seconds = time.perf_counter() - start
    return audit


def _missing_first_shard(label: str, exc: Exception, keep: RuleFilter) -> FileAudit:
    from gguftpl.rules.repo import REPO_SPLIT_INCOMPLETE

    finding = make_finding(REPO_SPLIT_INCOMPLETE, str(exc), Location(file=label))
    return FileAudit(path=label, error=str(exc), findings=[finding] if keep(finding.code) else [])


def _add_llamacpp_findings(audit: FileAudit, path: str | os.PathLike[str], label: str, keep: RuleFilter) -> None:
    """``--engine llamacpp``: what llama.cpp itself does with the file (verify stages 1-5 as GT6xx)."""
    from gguftpl.rules.llamacpp import LLAMACPP_LOAD_FAILED
    from gguftpl.verify.findings import llamacpp_findings
    from gguftpl.verify.session import LlamaCppLoadError

    try:
        found = llamacpp_findings(path, label, upstream_repo=audit.upstream_repo)
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

    A path that does not exist is a usage error: it is almost always a typo, and silently auditing
    nothing would pass."""
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
            for f in sorted(found):
                add(f)
        elif os.path.exists(p):
            add(p)
        elif re.fullmatch(r"GT\d{1,3}", p, re.IGNORECASE):
            # `--ignore GT304 GT205` reads GT205 as a path: options take one value each
            raise UsageError(
                f"no such file or directory: {p} (to select or ignore several rules, separate them with commas "
                f"or repeat the option: --ignore GT304,{p.upper()})"
            )
        else:
            raise UsageError(f"no such file or directory: {p}")
    return out


def audit_paths(
    paths: Iterable[str | os.PathLike[str]],
    options: AuditOptions | None = None,
    *,
    cache: AnalysisCache | None = None,
    progress: Callable[[FileAudit], None] | None = None,
) -> AuditRun:
    """Audit files and directories (recursively, ``*.gguf``). Raises ``UsageError`` for a missing path
    or an unknown selector; every per-file problem is a finding in the returned run."""
    start = time.perf_counter()
    options = options or AuditOptions()
    engine = options.engine
    cache = cache if cache is not None else AnalysisCache()
    misses_before, checks_before = cache.misses, cache.parse_checks
    run = AuditRun()
    todo = collect_paths(paths)
    for p in todo:
        fa = audit_file(p, options, cache=cache)
        run.files.append(fa)
        if progress is not None:
            progress(fa)
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
