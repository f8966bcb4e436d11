"""Audit every quant of a model at once (a Hub repo, headers read remotely, or a local folder), and audit
any mix of local files, remote files and repos into one report (``gguftpl audit``).

Each file is audited on its own (``gguftpl.audit.audit_header``); then the quants are compared with each
other and with upstream: their summaries and each model group's upstream (``gguftpl.repo.facts``,
``gguftpl.repo.upstream``) go through the GT55x checks (``gguftpl/rules/repo.py``). Split GGUFs are read
through their first shard only; gguf-split's file naming tells whether the set is complete.

Headers are read concurrently (``jobs`` threads): the work is waiting on the network, and the analysis of
one file overlaps the download of the next ones.
"""

from __future__ import annotations

import os
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from gguftpl.errors import GGUFFormatError, UsageError
from gguftpl.findings import Finding, Location, Rule, Severity, get_rule, make_finding
from gguftpl.gguf.httpsource import DEFAULT_INITIAL_CHUNK, DEFAULT_MAX_CHUNK
from gguftpl.gguf.hubref import HubFileRef, HubRepoRef, is_remote
from gguftpl.gguf.remote import GGUF_SUFFIX, RemoteRead, list_repo_ggufs, read_remote_header
from gguftpl.repo.facts import (
    QuantEntry,
    QuantSummary,
    RepoFacts,
    check_repo,
    plan_entries,
    summarize,
    unsafe_entry,
)
from gguftpl.repo.upstream import upstream_facts
from gguftpl.report.context import ReportContext

__all__ = [
    "Progress",
    "RepoAudit",
    "TargetsAudit",
    "audit_hub_repo",
    "audit_local_dir",
    "audit_remote_file",
    "audit_targets",
    "bench_remote_audit",
    "bench_repo_audit",
]

Progress = Callable[[int, int, str], None]
"""``progress(done, total, label)``: after each file of a repo or folder (``label`` the file just read), before
each local file and remote GGUF (``label`` the one about to be read)."""

Fetch = Callable[[QuantEntry], tuple[Any, dict[str, Any] | None]]
"""Read one entry's header: (header, its ``"remote"`` object or None)."""


@dataclass(frozen=True)
class _Settings:
    """What every file of one repo audit is audited with."""

    options: Any
    """``gguftpl.audit.AuditOptions``."""
    upstream: bool | str
    endpoint: str | None
    token: str | bool | None
    cache_dir: str | os.PathLike[str] | None
    jobs: int
    progress: Progress | None
    known: Any = None
    """repo id -> ``UpstreamConfig`` already read (``upstream_facts(known=)``)."""


# --------------------------------------------------------------------------------------------- results


@dataclass
class RepoAudit:
    """The result of a repo-level audit: per-file audits plus the findings across files."""

    target: str
    """``hf://ORG/REPO@COMMIT`` or the folder."""
    kind: str
    """``hub`` or ``dir``."""
    run: Any
    """``gguftpl.audit.AuditRun``: every file's audit, then one entry (``target``) for repo-level findings."""
    entries: list[QuantEntry] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    """Findings across files (also inside ``run``)."""
    revision: str | None = None
    requested_revision: str | None = None
    upstream: dict[str, Any] | None = None
    jobs: int = 1
    seconds: float = 0.0

    @property
    def bytes_fetched(self) -> int:
        return sum(int(e.remote.get("bytes_fetched", 0)) for e in self.entries if e.remote)

    @property
    def requests(self) -> int:
        return sum(int(e.remote.get("requests", 0)) for e in self.entries if e.remote)

    def exit_code(self, fail_on: Severity | str = Severity.ERROR) -> int:
        return int(self.run.exit_code(fail_on))

    def repo_dict(self) -> dict[str, Any]:
        """The ``"repo"`` object of the JSON report."""
        groups = Counter(e.group for e in self.entries if e.group)
        return {
            "target": self.target,
            "kind": self.kind,
            "revision": self.revision,
            "requested_revision": self.requested_revision,
            "files": [e.to_dict() for e in self.entries],
            "groups": dict(sorted(groups.items())),
            "upstream": self.upstream,
            "findings": len(self.findings),
            "bytes_fetched": self.bytes_fetched,
            "requests": self.requests,
            "jobs": self.jobs,
            "seconds": round(self.seconds, 6),
        }

    def remote(self) -> dict[str, dict[str, Any]]:
        """File label -> its ``"remote"`` object, for the files read over HTTP."""
        return {e.label: dict(e.remote) for e in self.entries if e.remote}

    def to_dict(self) -> dict[str, Any]:
        """The audit JSON report (``gguftpl.report.json.run_dict``) plus ``"repo"`` and per-file ``"remote"``."""
        from gguftpl.report.json import run_dict

        d = run_dict(self.run, ReportContext(remote=self.remote()))
        d["repo"] = self.repo_dict()
        return d


@dataclass
class TargetsAudit:
    """``gguftpl audit`` over any mix of local paths, remote files (``hf://``, URLs) and repos, as one report."""

    run: Any
    """One ``AuditRun`` for everything (each repo contributes its files and a repo-level entry)."""
    repos: list[RepoAudit] = field(default_factory=list)
    remote: dict[str, dict[str, Any]] = field(default_factory=dict)
    """File label -> its ``"remote"`` object, for every header read over HTTP."""

    def exit_code(self, fail_on: Severity | str = Severity.ERROR) -> int:
        return int(self.run.exit_code(fail_on))

    def context(self) -> ReportContext:
        """What every report format adds to the findings: remote reads and the repos."""
        return ReportContext(remote=dict(self.remote), repos=tuple(r.repo_dict() for r in self.repos))

    def to_dict(self) -> dict[str, Any]:
        from gguftpl.report.json import run_dict

        return run_dict(self.run, self.context())

    def format(self, fmt: str, **options: Any) -> str:
        """The report in ``fmt``, from the report registry (``gguftpl.report.get_formatter``)."""
        from gguftpl.report import get_formatter

        return get_formatter(fmt, **options).format(self.run, self.context())


# --------------------------------------------------------------------------------------------- repos


def audit_hub_repo(
    repo: str | HubRepoRef,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    jobs: int = 4,
    options: Any = None,
    upstream: bool | str = True,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    initial_chunk: int = DEFAULT_INITIAL_CHUNK,
    max_chunk: int = DEFAULT_MAX_CHUNK,
    retries: int = 2,
) -> RepoAudit:
    """Audit every GGUF of a Hub repo from its headers alone, and compare the quants (see module doc).

    ``upstream``: True = the upstream the files name (metadata / catalog), a repo id = that one, False =
    no upstream comparison. A Hub failure (missing repo, gated, offline, dropped connection) raises
    ``HubError``: a repo audit that skipped files must not pass."""
    start = time.perf_counter()
    s = _settings(jobs, options, upstream, endpoint, token, cache_dir, progress)
    listing = list_repo_ggufs(repo, endpoint=endpoint, token=token)
    ref, sha = listing.ref, listing.commit
    commit = sha or ref.revision

    def fetch(e: QuantEntry) -> tuple[Any, dict[str, Any] | None]:
        rr = read_remote_header(
            ref.file(e.name, commit),
            token=token,
            initial_chunk=initial_chunk,
            max_chunk=max_chunk,
            retries=retries,
            follow_shards=False,
        )
        return rr.header, rr.remote_dict()

    entries = plan_entries(listing.files, lambda name: ref.file(name, commit).spec)
    entries, analyses = _audit_entries(entries, fetch, s)
    target = f"hf://{ref.spec.split('@')[0]}@{commit or 'main'}"
    # a name the listing gave that is no safe repo path is never requested: a finding about the repo (GT557)
    entries += [unsafe_entry(target, name, why) for name, why in listing.unsafe]
    result = _finish(target, "hub", entries, replace(s, endpoint=ref.endpoint), start, analyses)
    result.revision = sha
    result.requested_revision = ref.revision or "main"
    return result


def audit_local_dir(
    path: str | os.PathLike[str],
    *,
    jobs: int = 1,
    options: Any = None,
    upstream: bool | str = True,
    endpoint: str | None = None,
    token: str | bool | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    cache: Any = None,
    known_upstreams: Mapping[str, Any] | None = None,
) -> RepoAudit:
    """The same checks on a local folder of GGUFs (a converter's output before upload), recursively.
    ``cache``: an ``AnalysisCache`` to share (a folder patch's, which has just analysed these templates);
    ``known_upstreams``: repo id -> ``UpstreamConfig`` the caller has read already (the folder patch's
    upstream), not read again."""
    from gguftpl.gguf.reader import read_header

    folder = os.fspath(path)
    s = replace(_settings(jobs, options, upstream, endpoint, token, cache_dir, progress), known=known_upstreams)
    if not os.path.isdir(folder):
        raise UsageError(f"not a directory: {folder}")
    start = time.perf_counter()
    names: list[tuple[str, int | None]] = []
    for root, dirs, fnames in os.walk(folder):
        dirs.sort()
        for f in fnames:
            if f.lower().endswith(GGUF_SUFFIX):
                full = os.path.join(root, f)
                names.append((os.path.relpath(full, folder).replace(os.sep, "/"), _size_or_none(full)))
    if not names:  # an empty target must not pass
        raise UsageError(f"no GGUF files (*{GGUF_SUFFIX}) in {folder}")

    def fetch(e: QuantEntry) -> tuple[Any, dict[str, Any] | None]:
        return read_header(e.label), None

    entries = plan_entries(names, lambda name: os.path.join(folder, *name.split("/")))
    entries, analyses = _audit_entries(entries, fetch, s, cache)
    return _finish(folder, "dir", entries, s, start, analyses)


def _settings(
    jobs: int,
    options: Any,
    upstream: bool | str,
    endpoint: str | None,
    token: str | bool | None,
    cache_dir: str | os.PathLike[str] | None,
    progress: Progress | None,
) -> _Settings:
    from gguftpl.audit import AuditOptions

    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    return _Settings(options or AuditOptions(), upstream, endpoint, token, cache_dir, jobs, progress)


def _size_or_none(path: str) -> int | None:
    # a dangling or looping symlink is reported when its header is read (GT001), not a crash of the listing
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _audit_entries(
    entries: list[QuantEntry], fetch: Fetch, s: _Settings, cache: Any = None
) -> tuple[list[QuantEntry], int]:
    """Every entry with its header read and audited (later shards stay as listed); and how many template
    sets were analysed. Audited in listing order while the next headers download."""
    from gguftpl.auditcache import AnalysisCache

    todo = [e for e in entries if e.skipped is None]
    cache = cache if cache is not None else AnalysisCache()
    misses = cache.misses
    memo: dict[str, QuantSummary] = {}
    audited: dict[str, QuantEntry] = {}
    for done, (e, fut) in enumerate(_ahead(fetch, todo, s.jobs), 1):
        try:
            header, remote = fut.result()
        except GGUFFormatError as exc:
            audited[e.name] = _unreadable(e, exc, s.options.keep)
        else:
            try:
                audited[e.name] = _audit_one(replace(e, remote=remote), header, s, cache, memo)
            finally:
                header.close()
        if s.progress is not None:
            s.progress(done, len(todo), e.name)
    return [audited.get(e.name, e) for e in entries], cache.misses - misses


def _ahead(
    fn: Callable[[QuantEntry], Any], items: Sequence[QuantEntry], jobs: int
) -> Iterator[tuple[QuantEntry, Future[Any]]]:
    """``(item, future of fn(item))`` in order, with at most ``2 * jobs`` started and not yet consumed, so
    a slow first file cannot make the others pile up their header buffers (16 MB each for a 262k vocab)."""
    window = 2 * jobs
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="gguftpl-hdr") as pool:
        pending: deque[tuple[QuantEntry, Future[Any]]] = deque()
        it = iter(items)
        try:
            for item in it:
                pending.append((item, pool.submit(fn, item)))
                if len(pending) >= window:
                    break
            while pending:
                yield pending.popleft()
                nxt = next(it, None)
                if nxt is not None:
                    pending.append((nxt, pool.submit(fn, nxt)))
        finally:
            for _, f in pending:  # an error (or a consumer that stopped): start nothing more
                f.cancel()


def _audit_one(entry: QuantEntry, header: Any, s: _Settings, cache: Any, memo: dict[str, QuantSummary]) -> QuantEntry:
    from gguftpl.audit import audit_header

    summary: QuantSummary | None = None
    error: str | None = None
    try:
        summary = summarize(header, memo)
    except Exception as exc:  # noqa: BLE001 - the per-file audit reports it (GT002); the repo check skips it
        error = f"{type(exc).__name__}: {exc}"
    audit = audit_header(header, entry.label, s.options, cache=cache)
    if summary is None:
        return replace(entry, error=error, audit=audit, upstream_repo=audit.upstream_repo)
    return replace(
        entry,
        group=summary.group,
        templates=summary.templates,
        special=summary.special,
        upstream_repo=summary.upstream_repo or audit.upstream_repo,
        audit=audit,
    )


def _unreadable(entry: QuantEntry, exc: GGUFFormatError, keep: Any) -> QuantEntry:
    from gguftpl.audit import FileAudit
    from gguftpl.rules.container import UNREADABLE_GGUF

    f = make_finding(UNREADABLE_GGUF, str(exc), Location(file=entry.label), evidence=str(exc))
    audit = FileAudit(path=entry.label, error=str(exc), findings=[f] if keep(f.code) else [])
    return replace(entry, error=str(exc), audit=audit)


def _finish(target: str, kind: str, entries: list[QuantEntry], s: _Settings, start: float, analyses: int) -> RepoAudit:
    """Read each group's upstream, run the GT55x checks, and file each finding under its quant or the repo."""
    from gguftpl.audit import AuditRun, FileAudit

    groups = RepoFacts(target, tuple(entries)).groups()
    upstream = upstream_facts(
        groups, s.upstream, endpoint=s.endpoint, token=s.token, cache_dir=s.cache_dir, known=s.known
    )
    cross = check_repo(RepoFacts(target, tuple(entries), upstream or {}), s.options.keep)
    per_file: dict[str, list[Finding]] = {}
    for f in cross:
        per_file.setdefault(f.location.file, []).append(f)
    run = AuditRun()
    for e in entries:
        if e.audit is not None:
            extra = sorted(per_file.get(e.label, []), key=_by_template)
            if extra:
                e.audit.findings = list(e.audit.findings) + extra
            run.files.append(e.audit)
    run.files.append(FileAudit(path=target, findings=per_file.get(target, []), repo_level=True))
    run.analyses = analyses
    run.rules = _rules_for(run.findings)
    run.seconds = time.perf_counter() - start
    info = None if upstream is None else {"groups": {g: u.to_dict() for g, u in upstream.items()}}
    return RepoAudit(
        target=target,
        kind=kind,
        run=run,
        entries=entries,
        findings=cross,
        upstream=info,
        jobs=s.jobs,
        seconds=run.seconds,
    )


def _by_template(f: Finding) -> tuple[bool, bool, str]:
    # a quant's findings read template by template, default first, then those about the whole file
    return f.template is None, f.template != "default", f.template or ""


def _rules_for(findings: Iterable[Finding]) -> dict[str, Rule]:
    out: dict[str, Rule] = {}
    for f in findings:
        if f.code not in out:
            try:
                out[f.code] = get_rule(f.code)
            except KeyError:
                continue
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------------------------- single files


def audit_remote_file(
    spec: str | HubFileRef,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    options: Any = None,
    cache: Any = None,
    initial_chunk: int = DEFAULT_INITIAL_CHUNK,
    max_chunk: int = DEFAULT_MAX_CHUNK,
    retries: int = 2,
) -> tuple[Any, RemoteRead | None]:
    """Audit one remote GGUF from its header: (``FileAudit``, the ``RemoteRead`` or None if unreadable).

    A header that is not a GGUF is a GT001 finding; Hub failures raise ``HubError``."""
    from gguftpl.audit import AuditOptions, audit_header

    options = options or AuditOptions()
    label = spec if isinstance(spec, str) else spec.spec
    try:
        rr = read_remote_header(
            spec,
            endpoint=endpoint,
            token=token,
            initial_chunk=initial_chunk,
            max_chunk=max_chunk,
            retries=retries,
        )
    except GGUFFormatError as exc:
        return _unreadable(QuantEntry(label=label, name=label), exc, options.keep).audit, None
    try:
        fa = audit_header(rr.header, rr.label, options, cache=cache)
    finally:
        rr.header.close()
    return fa, rr


def bench_remote_audit(spec: str, **kwargs: Any) -> tuple[int, int]:
    """(bytes fetched, requests made) to audit one remote GGUF; for scripts/bench.py."""
    _, rr = audit_remote_file(spec, **kwargs)
    if rr is None:
        return 0, 0
    return rr.stats.bytes_fetched, rr.stats.requests


def bench_repo_audit(repo: str, *, jobs: int, **kwargs: Any) -> dict[str, Any]:
    """Seconds, bytes and requests of one ``audit_hub_repo`` run; for scripts/bench.py (jobs 1 vs 4)."""
    start = time.perf_counter()
    ra = audit_hub_repo(repo, jobs=jobs, **kwargs)
    return {
        "files": sum(1 for e in ra.entries if e.remote),
        "jobs": jobs,
        "seconds": time.perf_counter() - start,
        "bytes_fetched": ra.bytes_fetched,
        "requests": ra.requests,
        "findings": len(ra.run.findings),
    }


# --------------------------------------------------------------------------------------------- one report


def audit_targets(
    paths: Sequence[str] = (),
    *,
    repos: Sequence[str] = (),
    repo_check: bool = False,
    jobs: int = 4,
    options: Any = None,
    upstream: bool | str = True,
    progress: Progress | None = None,
    endpoint: str | None = None,
    cache: Any = None,
) -> TargetsAudit:
    """Audit local paths, remote GGUFs and Hub repos into one run.

    ``repo_check``: each directory in ``paths`` is treated as one model's set of quants (the converter's
    output folder) and gets the repo-level checks; otherwise directories are audited file by file.
    ``upstream`` (True / repo id / False) only matters for repo-level checks."""
    from gguftpl.audit import AuditOptions, AuditRun, audit_paths
    from gguftpl.auditcache import AnalysisCache

    start = time.perf_counter()
    if not paths and not repos:
        raise UsageError("give a PATH (file, folder, hf://… or URL) or --repo ORG/REPO")
    options = options or AuditOptions()
    result = TargetsAudit(run=AuditRun())
    cache = cache if cache is not None else AnalysisCache()
    for p in paths:  # in the order given, so the report reads like the command line
        if is_remote(p):
            if progress is not None:
                progress(0, 1, p)
            fa, rr = audit_remote_file(p, endpoint=endpoint, options=options, cache=cache)
            result.run.files.append(fa)
            if rr is not None:
                result.remote[fa.path] = rr.remote_dict()
        elif repo_check and os.path.isdir(p):
            ra = audit_local_dir(p, jobs=jobs, options=options, upstream=upstream, endpoint=endpoint, progress=progress)
            _add_repo(result, ra)
        else:
            sub = audit_paths([p], options, cache=cache, progress=progress)
            result.run.files.extend(sub.files)
    for spec in repos:
        ra = audit_hub_repo(spec, endpoint=endpoint, jobs=jobs, options=options, upstream=upstream, progress=progress)
        if not ra.entries:
            raise UsageError(f"no GGUF files in {ra.target}")  # an empty target must not pass
        _add_repo(result, ra)
    result.run.analyses = sum(r.run.analyses for r in result.repos) + cache.misses
    result.run.rules = _rules_for(result.run.findings)
    result.run.seconds = time.perf_counter() - start
    return result


def _add_repo(result: TargetsAudit, ra: RepoAudit) -> None:
    result.repos.append(ra)
    result.run.files.extend(ra.run.files)
    result.remote.update(ra.remote())
