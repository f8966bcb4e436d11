"""Audit many GGUF files: read each header, analyse its chat templates, collect findings.

The expensive part (rendering templates) is done once per distinct template set: quants of one model
share the same templates, so a directory of 100 GGUFs costs little more than one. Findings are cached
with a placeholder file name and re-labelled for every file that shares them.

A file that cannot be read is a finding for that file (GT001), never the end of the run. Only bad usage
(a path that does not exist, an unknown rule selector or engine: ``UsageError``) and a folder that cannot
be listed (``OSError``) raise.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shlex
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gguftpl.errors import GGUFFormatError, GGUFTplError, UsageError
from gguftpl.findings import Finding, Location, Rule, Severity, all_rules, get_rule, make_finding

__all__ = [
    "AnalysisCache",
    "AuditRun",
    "FileAudit",
    "RuleFilter",
    "audit_file",
    "audit_header",
    "audit_paths",
    "collect_paths",
]

GGUF_SUFFIX = ".gguf"

# Stands in for the file name while a template set is analysed, so the findings can be shared by every
# file with the same templates. Only characters shlex considers safe, so a fix command built around it is
# left unquoted and we can quote the real path ourselves.
_FILE_PLACEHOLDER = "@@gguftpl-file@@"


@dataclass
class FileAudit:
    """What the audit found in one GGUF (local path, URL or any other header source)."""

    path: str
    """The label the user gave: a path as typed, a path found under a directory, or a URL."""
    templates: list[Any] = field(default_factory=list)
    """One ``templates.analysis.TemplateReport`` per chat template in the file."""
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


# --- analysis cache ---------------------------------------------------------------------------------


def _registered_rule(code: str) -> Rule | None:
    try:
        return get_rule(code)
    except KeyError:
        return None


# Arrays the analysis may consult through the template set (token lookups), hashed rather than compared.
_VOCAB_KEYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type")


def _fingerprint(tset: Any, header: Any, upstream_repo: str | None, engine: str) -> str:
    """What the analysis can depend on: every public template-set field except where the file is, plus
    the vocabulary (two files with equal templates but different token lists must not share results)."""
    h = hashlib.sha256()
    h.update(f"engine={engine}\nupstream={upstream_repo}\n".encode())
    if not (dataclasses.is_dataclass(tset) and not isinstance(tset, type)):
        h.update(f"id={id(tset)}".encode())  # unknown shape: never share results
        return h.hexdigest()
    for f in dataclasses.fields(tset):
        if f.name == "path" or f.name.startswith("_"):
            continue
        value = getattr(tset, f.name)
        if f.name == "templates" and isinstance(value, dict):
            # the sha256 stands for the text
            value = sorted((n, getattr(t, "key", None), getattr(t, "sha256", None)) for n, t in value.items())
        h.update(f"{f.name}={value!r}\n".encode("utf-8", "surrogatepass"))
    get = getattr(header, "get", None)
    for key in _VOCAB_KEYS:
        value = get(key) if get is not None else None
        h.update(f"{key}={value!r}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _relabel_str(value: Any, label: str, quoted: str) -> Any:
    if isinstance(value, str) and _FILE_PLACEHOLDER in value:
        return value.replace(_FILE_PLACEHOLDER, quoted)
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, dict):
        return {k: _relabel_str(v, label, quoted) for k, v in value.items()}
    if isinstance(value, list):
        return [_relabel_str(v, label, quoted) for v in value]
    return value


def _relabel(finding: Finding, label: str) -> Finding:
    loc = finding.location
    file = label if loc.file in (_FILE_PLACEHOLDER, "") else loc.file.replace(_FILE_PLACEHOLDER, label)
    return dataclasses.replace(
        finding,
        location=dataclasses.replace(loc, file=file),
        message=_relabel_str(finding.message, label, label),
        evidence=_relabel_str(finding.evidence, label, label),
        # a fix is a command line: quote the path the way a shell needs it
        fix=_relabel_str(finding.fix, label, shlex.quote(label)),
        extra=_relabel_str(finding.extra, label, label),
    )


def _relabel_template(report: Any, label: str) -> Any:
    details = getattr(report, "details", None)
    if dataclasses.is_dataclass(report) and not isinstance(report, type) and isinstance(details, dict):
        return dataclasses.replace(report, details=_relabel_str(details, label, label))
    return report


@dataclass
class _Analysis:
    templates: list[Any]
    findings: list[Finding]


class AnalysisCache:
    """Template-set analyses keyed by a fingerprint of everything they read. Share one across calls (e.g.
    a long-running process) to skip files already seen.

    Two levels: ``_store`` maps a template-set fingerprint to its analysis; ``_by_header`` maps a hash of
    the raw metadata bytes (minus keys that differ between quants and that template sets never read) to
    that fingerprint, so a second quant of a model skips even decoding its vocabulary."""

    def __init__(self) -> None:
        self._store: dict[str, _Analysis] = {}
        self._by_header: dict[str, tuple[str, str | None, str]] = {}
        self.hits = 0
        """Files whose analysis came from the cache (either level)."""
        self.misses = 0
        """Template sets analysed."""
        self.header_hits = 0
        """Files answered from the raw-metadata level, without building a template set."""
        self.parse_verdicts: dict[str, str | None] = {}
        """sha256 of a template text -> llama.cpp's refusal (None: it loads), for the parse check."""
        self.parse_checks = 0
        """Distinct template texts this cache asked llama.cpp about."""
        self.parse_skipped = ""
        """Why the llama.cpp parse check did not run (xllamacpp not installed), once it was wanted."""

    def get_or_compute(self, key: str, compute: Callable[[], _Analysis]) -> tuple[_Analysis, bool]:
        found = self._store.get(key)
        if found is not None:
            self.hits += 1
            return found, True
        self.misses += 1
        result = compute()
        self._store[key] = result
        return result, False

    def lookup_header(self, header_key: str) -> tuple[_Analysis, str | None, str] | None:
        entry = self._by_header.get(header_key)
        if entry is None:
            return None
        key, repo, how = entry
        self.hits += 1
        self.header_hits += 1
        return self._store[key], repo, how

    def remember_header(self, header_key: str, key: str, repo: str | None, how: str) -> None:
        self._by_header[header_key] = (key, repo, how)

    def __len__(self) -> int:
        return len(self._store)


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

# The templates llama.cpp reads from a GGUF (llama_model_chat_template): the default, and tool_use for
# requests with tools. Other named templates (rag, …) never reach it.
_LLAMACPP_TEMPLATES = ("default", "tool_use")
# Templates the bounded renderer already had to stop: llama.cpp renders them at load without limits, so
# asking it would cost a crashed worker or the full timeout and say nothing new.
_BOMB_CODES = ("GT404", "GT405")
# How parse_check words a worker that crashed or hung, as opposed to llama.cpp's own refusal.
_LLAMACPP_OWN = ("llama.cpp crashed", "llama.cpp did not finish")


def _analyze(tset: Any, upstream_repo: str | None, engine: str, cache: AnalysisCache | None = None) -> _Analysis:
    from gguftpl.templates.analysis import analyze_templateset

    _check_engine(engine)
    if dataclasses.is_dataclass(tset) and not isinstance(tset, type) and hasattr(tset, "path"):
        tset = dataclasses.replace(tset, path=_FILE_PLACEHOLDER)
    result = analyze_templateset(tset, location_file=_FILE_PLACEHOLDER, upstream_repo=upstream_repo)
    findings = list(result.findings)
    if engine != "hf-only" and cache is not None:
        findings += _parse_check_findings(tset, findings, upstream_repo, engine, cache)
    return _Analysis(templates=list(result.templates), findings=findings)


def _parse_check_findings(
    tset: Any, findings: list[Finding], upstream_repo: str | None, engine: str, cache: AnalysisCache
) -> list[Finding]:
    """GT606 for each template llama.cpp refuses to load, asked once per distinct text (``cache``) and
    only when xllamacpp is installed. ``--engine llamacpp`` loads the file itself, which reports a refused
    default template, so only ``tool_use`` is asked then (llama.cpp drops one it cannot parse silently)."""
    from gguftpl.rules import LLAMACPP_TEMPLATE_REJECTED

    names = _LLAMACPP_TEMPLATES if engine != "llamacpp" else _LLAMACPP_TEMPLATES[1:]
    bombs = {f.template for f in findings if f.code in _BOMB_CODES}
    todo = {
        name: tpl
        for name, tpl in getattr(tset, "templates", {}).items()
        if name in names and name not in bombs and isinstance(getattr(tpl, "text", None), str)
    }
    if not todo or cache.parse_skipped:
        return []
    from gguftpl.errors import LlamaCppError
    from gguftpl.verify.parsecheck import parse_check

    ask = {t.sha256: t.text for t in todo.values() if t.sha256 not in cache.parse_verdicts}
    if ask:
        try:
            answers = parse_check(list(ask.values()))
        except LlamaCppError as exc:  # xllamacpp not installed: the audit goes on without this check
            cache.parse_skipped = str(exc)
            return []
        cache.parse_checks += len(ask)
        for sha in ask:
            cache.parse_verdicts[sha] = answers.get(sha)
    out = []
    for name, tpl in todo.items():
        error = cache.parse_verdicts.get(tpl.sha256)
        if error is None:
            continue
        if error.startswith(_LLAMACPP_OWN):
            what = f"the {name} template"  # the worker crashed or hung: the error says so
        elif name == "default":
            what = "llama.cpp refuses to load the file: llama-server exits at startup ('chat template parsing error')"
        else:
            what = (
                f"llama.cpp cannot use the {name} template: it drops one it cannot parse (requests with tools "
                "then get the default template) or fails every request with tools"
            )
        out.append(
            make_finding(
                LLAMACPP_TEMPLATE_REJECTED,
                f"{what}: {error[:300]}",
                Location(file=_FILE_PLACEHOLDER, key=getattr(tpl, "key", None)),
                template=name,
                evidence=f"llama.cpp, loading a stand-in model that carries this template: {error[:1200]}",
                fix=f"gguftpl patch {_FILE_PLACEHOLDER} --from-hub {upstream_repo or 'REPO'} -o FIXED.gguf"
                " && gguftpl verify FIXED.gguf",
                check="llamacpp-parse",
            )
        )
    return out


def _sort_key(templates: list[Any]) -> Callable[[Finding], tuple[Any, ...]]:
    order = {getattr(t, "name", None): i for i, t in enumerate(templates)}

    def key(f: Finding) -> tuple[Any, ...]:
        t = -1 if f.template is None else order.get(f.template, len(order))
        return (t, -f.severity.rank, f.code, f.location.line or 0, f.location.column or 0, f.message)

    return key


def audit_header(
    header: Any,
    label: str,
    *,
    select: Iterable[str] | str | None = None,
    ignore: Iterable[str] | str | None = None,
    engine: str = "hf",
    cache: AnalysisCache | None = None,
    rule_filter: RuleFilter | None = None,
    strict: bool = False,
) -> FileAudit:
    """Audit one already-read header (from a local file, an HTTP range read, …) reported as ``label``.

    ``strict`` re-raises unexpected exceptions from the analysis instead of reporting GT002 (``--debug``).
    """
    from gguftpl.metadata_check import truncation_findings, wrong_type_findings
    from gguftpl.rules import AUDIT_FAILED
    from gguftpl.templates.templateset import load_templateset

    start = time.perf_counter()
    _check_engine(engine)
    keep = rule_filter or RuleFilter(select, ignore)
    cache = cache if cache is not None else AnalysisCache()
    audit = FileAudit(path=label)
    try:
        header_key = _header_key(header, engine)
        hit = cache.lookup_header(header_key) if header_key else None
        if hit is not None:
            analysis, audit.upstream_repo, audit.upstream_how = hit
            audit.cached = True
        else:
            tset = load_templateset(header)
            audit.upstream_repo, audit.upstream_how = _find_upstream(tset)
            key = _fingerprint(tset, header, audit.upstream_repo, engine)
            analysis, audit.cached = cache.get_or_compute(
                key, lambda: _analyze(tset, audit.upstream_repo, engine, cache)
            )
            if header_key:
                cache.remember_header(header_key, key, audit.upstream_repo, audit.upstream_how)
        audit.templates = [_relabel_template(t, label) for t in analysis.templates]
        findings = [_relabel(f, label) for f in analysis.findings]
    except UsageError:
        raise
    except Exception as exc:
        if strict and not isinstance(exc, GGUFTplError):
            raise
        audit.error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, GGUFTplError) else str(exc)
        findings = [
            make_finding(
                AUDIT_FAILED,
                f"could not finish checking the chat templates: {audit.error}",
                Location(file=label),
                fix=f"gguftpl --debug audit {shlex.quote(label)}",
            )
        ]
    # per file and cheap, so outside the cached analysis; reported even when the analysis failed
    findings += wrong_type_findings(header, label) + truncation_findings(header, label)
    audit.findings = sorted((f for f in findings if keep(f.code)), key=_sort_key(audit.templates))
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
    from gguftpl.rules import UNREADABLE_GGUF

    finding = make_finding(UNREADABLE_GGUF, str(exc), Location(file=label), evidence=_first_bytes(path))
    return FileAudit(path=label, error=str(exc), findings=[finding] if keep(finding.code) else [])


def audit_file(
    path: str | os.PathLike[str],
    *,
    label: str | None = None,
    select: Iterable[str] | str | None = None,
    ignore: Iterable[str] | str | None = None,
    engine: str = "hf",
    cache: AnalysisCache | None = None,
    rule_filter: RuleFilter | None = None,
    strict: bool = False,
) -> FileAudit:
    """Audit one local GGUF file. An unreadable file gives a GT001 finding, not an exception.

    A later shard of a split GGUF is audited through shard 1 in the same folder (reported under shard 1's
    path, with a note); a missing shard 1 is a GT555 finding for the file."""
    from gguftpl.gguf.open import MissingFirstShardError, local_shard, split_notes
    from gguftpl.gguf.reader import read_header

    label = label if label is not None else os.fspath(path)
    keep = rule_filter or RuleFilter(select, ignore)
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
        audit = audit_header(header, label, engine=engine, cache=cache, rule_filter=keep, strict=strict)
        audit.notes = notes + split_notes(header)
    finally:
        header.close()
    if engine == "llamacpp" and audit.error is None:
        _add_llamacpp_findings(audit, path, label, keep)
    audit.seconds = time.perf_counter() - start
    return audit


def _missing_first_shard(label: str, exc: Exception, keep: RuleFilter) -> FileAudit:
    from gguftpl.rules import REPO_SPLIT_INCOMPLETE

    finding = make_finding(REPO_SPLIT_INCOMPLETE, str(exc), Location(file=label))
    return FileAudit(path=label, error=str(exc), findings=[finding] if keep(finding.code) else [])


def _add_llamacpp_findings(audit: FileAudit, path: str | os.PathLike[str], label: str, keep: RuleFilter) -> None:
    """``--engine llamacpp``: what llama.cpp itself does with the file (verify stages 1-5 as GT6xx)."""
    from gguftpl.rules import LLAMACPP_LOAD_FAILED
    from gguftpl.verify.findings import llamacpp_findings
    from gguftpl.verify.session import LlamaCppLoadError

    try:
        found = llamacpp_findings(path, label, upstream_repo=audit.upstream_repo)
    except LlamaCppLoadError as exc:
        # one file llama.cpp refuses must not end the audit of the others: it is a finding about that file
        found = [make_finding(LLAMACPP_LOAD_FAILED, str(exc), Location(file=label), evidence="\n".join(exc.log[:20]))]
    extra = [f for f in found if keep(f.code)]
    audit.findings = sorted([*audit.findings, *extra], key=_sort_key(audit.templates))


def _raise(exc: OSError) -> None:
    raise exc


def collect_paths(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Files as given, directories expanded to every ``*.gguf`` below them (sorted); duplicates dropped,
    and so are further shards of a split GGUF already listed (shard 1, first when sorted, covers them).

    A path that does not exist is a usage error: it is almost always a typo, and silently auditing
    nothing would pass."""
    from gguftpl.gguf.remote import shard_info

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
        else:
            raise UsageError(f"no such file or directory: {p}")
    return out


def audit_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    select: Iterable[str] | str | None = None,
    ignore: Iterable[str] | str | None = None,
    engine: str = "hf",
    cache: AnalysisCache | None = None,
    strict: bool = False,
    progress: Callable[[FileAudit], None] | None = None,
) -> AuditRun:
    """Audit files and directories (recursively, ``*.gguf``). Raises ``UsageError`` for a missing path
    or an unknown selector; every per-file problem is a finding in the returned run."""
    start = time.perf_counter()
    keep = RuleFilter(select, ignore)
    _check_engine(engine)
    cache = cache if cache is not None else AnalysisCache()
    misses_before, checks_before = cache.misses, cache.parse_checks
    run = AuditRun()
    todo = collect_paths(paths)
    if todo and engine != "hf-only" and not cache.parse_skipped:
        from gguftpl.verify.parsecheck import parse_check_prestart

        parse_check_prestart()  # the worker starts while the first files are read and analysed
    for p in todo:
        fa = audit_file(p, engine=engine, cache=cache, rule_filter=keep, strict=strict)
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
