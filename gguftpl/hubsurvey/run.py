"""The survey: list the repos, audit each one's files from their headers, one row per repo.

The network work (each repo's file listing, then its header reads) runs in ``jobs`` threads, one repo per
thread at a time; each header read and each listing is one remote operation with its own deadline
(``gguftpl.remotebounds``), and a repo gets the same deadline for all its reads together: a slow repo ends as a
row that says so, and the others go on. The headers are audited here, in the calling thread, as they arrive
(through a queue of ``jobs`` places, so at most ``2 * jobs`` headers are held at once) and each file's record is
written to the state at once (``gguftpl.hubsurvey.state``).

A Ctrl-C stops the threads from starting another read, audits and records the headers already on their way,
and then ends the survey: run again with the same ``--state``, it reads none of them twice. A repo's listing in
progress is not waited for (a stuck one would hold the Ctrl-C for its whole deadline): that repo is listed again
by the next run.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from gguftpl.errors import GGUFFormatError, HubError, UsageError
from gguftpl.findings import Severity
from gguftpl.hubsurvey.listing import ListedRepo, list_gguf_repos, read_repos_file, sample_files

__all__ = ["FileRecord", "FindingCount", "RepoRow", "RuntimeOutcome", "SurveyResult", "survey"]

TOP_FINDINGS = 5
"""Finding codes a repo's row names, most severe and most frequent first."""

Progress = Callable[[int, int, str], None]

_WORST_FIRST = ("dropped", "refused", "fails", "injected", "unknown", "prompt")
"""Runtime outcomes, the one that costs the tools first: a repo's cell for a runtime is its worst file's."""


@dataclass(frozen=True)
class RuntimeOutcome:
    """What one runtime does with a tools request for one file: the fields of ``RuntimeRow.to_dict()`` a
    report's runtime matrix shows (``gguftpl.report.htmlparts.cell`` reads them)."""

    name: str
    outcome: str
    tools_reach_prompt: bool | None
    reason: str = ""
    engine: str = ""
    template: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RuntimeOutcome:
        reach = d.get("tools_reach_prompt")
        return cls(
            str(d["name"]),
            str(d.get("outcome") or "unknown"),
            reach if isinstance(reach, bool) else None,
            str(d.get("reason") or ""),
            str(d.get("engine") or ""),
            str(d.get("template") or ""),
        )


@dataclass(frozen=True)
class FileRecord:
    """What the audit of one file's header found, as the survey keeps it."""

    path: str
    """The path in the repo."""
    label: str
    """``hf://ORG/REPO/PATH@COMMIT``."""
    findings: tuple[tuple[str, str, str], ...] = ()
    """(code, severity, message) of each finding."""
    dropping: tuple[str, ...] = ()
    """Runtimes whose tools request loses the tool schemas (``RuntimeView.dropping``)."""
    fix: str | None = None
    """The file's one repair (``gguftpl.repair``): a command, or the words that say why there is none."""
    error: str | None = None
    """Why the header could not be read as a GGUF (GT001)."""
    runtimes: tuple[RuntimeOutcome, ...] = ()
    """Each runtime's answer for the file, in the runtime table's order (none in a state an older gguftpl wrote)."""
    fixes: tuple[tuple[str, str], ...] = ()
    """(code, how to fix it) of the first finding of each code: its command, else its rule's fix in words."""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FileRecord:
        return cls(
            str(d["path"]),
            str(d["label"]),
            tuple((str(c), str(s), str(m)) for c, s, m in d.get("findings", ())),
            tuple(str(x) for x in d.get("dropping", ())),
            d.get("fix"),
            d.get("error"),
            tuple(RuntimeOutcome.from_dict(r) for r in d.get("runtimes", ())),
            tuple((str(c), str(f)) for c, f in d.get("fixes", ())),
        )


@dataclass(frozen=True)
class FindingCount:
    """One rule's findings in a repo's files read."""

    code: str
    severity: str
    count: int
    message: str
    """The message of its first finding."""
    fix: str = ""
    """How to fix it, as its first finding says (a command, or its rule's fix in words)."""


@dataclass(frozen=True)
class RepoRow:
    """One repo of the survey."""

    repo: str
    sha: str | None
    files_listed: int = 0
    """GGUFs the repo lists (every shard counted)."""
    files: tuple[FileRecord, ...] = ()
    """The files read (one per quant family, or all of them)."""
    error: str | None = None
    """Why the repo could not be audited (gone, gated, its deadline): then ``files`` may be partial."""
    reused: bool = False
    """Taken from the state: the repo's commit is the one audited last time."""

    @property
    def dropping(self) -> tuple[str, ...]:
        """Runtimes that lose the tools in any file read, in the runtime table's order."""
        return tuple(dict.fromkeys(r for f in self.files for r in f.dropping))

    @property
    def top_findings(self) -> tuple[FindingCount, ...]:
        counts: Counter[str] = Counter()
        first: dict[str, tuple[str, str]] = {}
        for f in self.files:
            for code, sev, msg in f.findings:
                counts[code] += 1
                if code not in first or Severity(sev).rank > Severity(first[code][0]).rank:
                    first[code] = (sev, msg)
        order = sorted(counts, key=lambda c: (-Severity(first[c][0]).rank, -counts[c], c))
        fixes: dict[str, str] = {}
        for f in self.files:
            for code, fix in f.fixes:
                fixes.setdefault(code, fix)
        return tuple(
            FindingCount(c, first[c][0], counts[c], first[c][1], fixes.get(c, "")) for c in order[:TOP_FINDINGS]
        )

    def runtime_rows(self) -> list[dict[str, Any]]:
        """One row per runtime (``RuntimeRow.to_dict()``'s fields) for the repo: its worst file's answer, the
        reason saying in how many of the files read when they differ."""
        by: dict[str, list[RuntimeOutcome]] = {}
        for f in self.files:
            for r in f.runtimes:
                by.setdefault(r.name, []).append(r)
        rank = {o: i for i, o in enumerate(_WORST_FIRST)}
        out = []
        for got in by.values():
            worst = min(got, key=lambda r: rank.get(r.outcome, len(rank)))
            row = asdict(worst)
            same = sum(1 for r in got if (r.outcome, r.tools_reach_prompt) == (worst.outcome, worst.tools_reach_prompt))
            if same < len(got):
                row["reason"] = f"in {same} of the {len(got)} files it was asked about: {worst.reason}"
            out.append(row)
        return out

    @property
    def fix(self) -> str | None:
        """The repair of the first file that needs one."""
        return next((f.fix for f in self.files if f.fix), None)

    @property
    def status(self) -> str:
        """``error``, ``findings`` (a warning or an error) or ``clean``."""
        if self.error is not None:
            return "error"
        return "findings" if self.failing(Severity.WARNING) else "clean"

    def failing(self, fail_on: Severity | str = Severity.ERROR) -> bool:
        """Could not be audited, a file is no readable GGUF, or a finding is at or above ``fail_on``."""
        bar = Severity(fail_on).rank
        if self.error is not None or any(f.error is not None for f in self.files):
            return True
        return any(Severity(sev).rank >= bar for f in self.files for _, sev, _ in f.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "sha": self.sha,
            "status": self.status,
            "files_listed": self.files_listed,
            "files_read": len(self.files),
            "runtimes_losing_tools": list(self.dropping),
            "top_findings": [asdict(c) for c in self.top_findings],
            "fix": self.fix,
            "error": self.error,
            "reused": self.reused,
            "files": [asdict(f) for f in self.files],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, reused: bool = False) -> RepoRow:
        return cls(
            str(d["repo"]),
            d.get("sha"),
            int(d.get("files_listed", 0)),
            tuple(FileRecord.from_dict(f) for f in d.get("files", ())),
            d.get("error"),
            reused,
        )


@dataclass
class SurveyResult:
    """Every repo of a survey, in the listing's order."""

    source: str
    """What was surveyed: ``--author ORG``, ``--search TEXT``, ``--repos FILE``."""
    rows: list[RepoRow] = field(default_factory=list)
    header_reads: int = 0
    """Headers read by this run (the files of the state were not read again)."""
    interrupted: bool = False
    seconds: float = 0.0

    @property
    def audited(self) -> int:
        return sum(1 for r in self.rows if not r.reused)

    @property
    def reused(self) -> int:
        return sum(1 for r in self.rows if r.reused)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.rows if r.error is not None)

    def exit_code(self, fail_on: Severity | str = Severity.ERROR, *, exit_zero: bool = False) -> int:
        """1 when a repo has a finding at or above ``fail_on`` or could not be audited (a survey that skipped a
        repo must not pass), else 0."""
        return 0 if exit_zero or not any(r.failing(fail_on) for r in self.rows) else 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "repos": len(self.rows),
            "audited": self.audited,
            "reused": self.reused,
            "failed": self.failed,
            "header_reads": self.header_reads,
            "seconds": round(self.seconds, 3),
            "rows": [r.to_dict() for r in self.rows],
        }


# --------------------------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class _Settings:
    all_files: bool
    jobs: int
    endpoint: str | None
    token: str | bool | None
    options: Any
    cache: Any


def survey(
    *,
    authors: Sequence[str] = (),
    search: str | None = None,
    repos_file: str | os.PathLike[str] | None = None,
    limit: int | None = None,
    all_files: bool = False,
    state: str | os.PathLike[str] | None = None,
    jobs: int = 4,
    options: Any = None,
    cache: Any = None,
    endpoint: str | None = None,
    token: str | bool | None = None,
    progress: Progress | None = None,
) -> SurveyResult:
    """Survey the GGUF repos of ``authors`` (or those matching ``search``, or listed in ``repos_file``): each
    repo's files audited from their headers, one row per repo (see the module doc). ``state``: the SQLite file
    that makes the survey resumable. ``HubError`` when the listing fails; ``UsageError`` when it is empty."""
    from gguftpl.audit import AuditOptions
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.hubsurvey.state import SurveyState

    start = time.perf_counter()
    if sum(bool(x) for x in (authors, search, repos_file)) != 1 and not (authors and search):
        raise UsageError("give --author ORG, --search TEXT or --repos FILE")
    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    source = _source(authors, search, repos_file)
    if repos_file is not None:
        listed = read_repos_file(repos_file)[:limit]
    else:
        listed = list_gguf_repos(authors=authors, search=search, limit=limit, endpoint=endpoint, token=token)
    if not listed:
        raise UsageError(f"no GGUF repos on the Hub for {source}")
    s = _Settings(all_files, jobs, endpoint, token, options or AuditOptions(), cache or AnalysisCache())
    with SurveyState(state) as st:
        result = _Run(s, st, listed, source, progress).run()
    result.seconds = time.perf_counter() - start
    return result


def _source(authors: Sequence[str], search: str | None, repos_file: Any) -> str:
    if repos_file is not None:
        return f"--repos {os.fspath(repos_file)}"
    parts = [f"--author {a}" for a in authors] + ([f"--search {search}"] if search else [])
    return " ".join(parts)


class _Run:
    """One survey run: the threads that read, and this thread that audits and records."""

    def __init__(self, s: _Settings, st: Any, listed: list[ListedRepo], source: str, progress: Progress | None):
        self.s, self.st, self.listed, self.progress = s, st, listed, progress
        self.result = SurveyResult(source)
        self.rows: dict[str, RepoRow] = {}
        self.stop = threading.Event()
        self.inbox: queue.Queue[tuple[Any, ...]] = queue.Queue(maxsize=s.jobs)

    def run(self) -> SurveyResult:
        todo = []
        for r in self.listed:
            prev = self.st.row(r.repo_id)
            if r.sha is not None and prev is not None and prev[1] and prev[0] == r.sha:
                self.rows[r.repo_id] = RepoRow.from_dict(prev[2], reused=True)
            else:
                todo.append(r)
        self._tick("")
        if todo:
            self._audit(todo)
        self.result.rows = [self.rows[r.repo_id] for r in self.listed if r.repo_id in self.rows]
        if self.result.interrupted:
            raise KeyboardInterrupt
        return self.result

    def _tick(self, label: str) -> None:
        if self.progress is not None:
            self.progress(len(self.rows), len(self.listed), label)

    def _audit(self, todo: list[ListedRepo]) -> None:
        pool = ThreadPoolExecutor(max_workers=self.s.jobs, thread_name_prefix="gguftpl-survey")
        futures: list[Any] = []
        ends, item = 0, None
        try:
            for r in todo:
                futures.append(pool.submit(self._read_repo, r))
        except KeyboardInterrupt:
            self._interrupted()
        while ends < len(futures) or not all(f.done() for f in futures) or not self.inbox.empty():
            try:
                if item is None:
                    item = self.inbox.get(timeout=0.2)
                ends += self._handle(item)
                item = None
            except queue.Empty:
                continue
            except KeyboardInterrupt:
                self._interrupted()
        pool.shutdown(wait=True)

    def _interrupted(self) -> None:
        """No new read starts; the headers on their way are audited and recorded, then the run ends."""
        self.result.interrupted = True
        self.stop.set()

    # ---- in the reading threads

    def _post(self, *msg: Any) -> None:
        self.inbox.put(msg)

    def _read_repo(self, r: ListedRepo) -> None:
        try:
            if not self.stop.is_set():
                self._read_files(r)
        except HubError as exc:
            self._post("error", r, None, str(exc))
        except Exception as exc:  # noqa: BLE001 - one repo's failure is its row, not the survey's end
            self._post("error", r, None, f"unexpected {type(exc).__name__}: {exc}")
        finally:
            self._post("end", r)

    def _read_files(self, r: ListedRepo) -> None:
        from gguftpl.gguf.hubref import HubRepoRef
        from gguftpl.gguf.remote import list_repo_ggufs, read_remote_header
        from gguftpl.remotebounds import cancelled_by, deadline_seconds

        deadline = time.monotonic() + deadline_seconds()
        with cancelled_by(self.stop):  # a Ctrl-C need not wait out a stuck listing; a header read is waited for
            listing = list_repo_ggufs(
                HubRepoRef(r.repo_id, r.sha or r.revision), endpoint=self.s.endpoint, token=self.s.token
            )
        sha = listing.commit or r.sha or r.revision or "main"
        prev = self.st.row(r.repo_id)
        if r.sha is None and prev is not None and prev[1] and prev[0] == sha:
            self._post("reuse", r, prev[2])
            return
        chosen, listed = sample_files(listing.files, all_files=self.s.all_files)
        done = self.st.files(r.repo_id, sha)
        for name, why in listing.unsafe:  # never requested, but reported (GT557): a hostile listing hides nothing
            if name not in done:
                self._post("unsafe", r, sha, name, why)
        for name, _ in chosen:
            if name in done:
                continue
            if self.stop.is_set():
                return
            if time.monotonic() > deadline:
                self._post(
                    "error", r, sha, f"{r.repo_id}: gave up after {deadline_seconds():g} s, the deadline of one repo"
                )
                return
            try:
                rr = read_remote_header(listing.ref.file(name, sha), token=self.s.token, follow_shards=False)
            except GGUFFormatError as exc:
                self._post("file", r, sha, name, listing.ref.file(name, sha).spec, None, str(exc))
                continue
            self._post("file", r, sha, name, rr.label, rr, None)
        names = [n for n, _ in chosen] + [n for n, _ in listing.unsafe]
        self._post("done", r, sha, names, listed + len(listing.unsafe))

    # ---- in this thread

    def _handle(self, msg: tuple[Any, ...]) -> int:
        kind, r = msg[0], msg[1]
        if kind == "end":
            return 1
        if kind == "file":
            _, _, sha, name, label, rr, error = msg
            rec = self._record(name, label, rr, error)  # a Ctrl-C in it: handled again, its header still open
            if rr is not None:
                rr.header.close()
            self.st.put_file(r.repo_id, sha, name, asdict(rec))
            self.result.header_reads += rr is not None
        elif kind == "unsafe":
            _, _, sha, name, why = msg
            self.st.put_file(r.repo_id, sha, name, asdict(_unsafe_record(r.repo_id, sha, name, why)))
        elif kind == "done":
            _, _, sha, names, listed = msg
            have = self.st.files(r.repo_id, sha)
            row = RepoRow(r.repo_id, sha, listed, tuple(FileRecord.from_dict(have[n]) for n in names if n in have))
            self._finish(row, ok=True)
        elif kind == "reuse":
            self.rows[r.repo_id] = RepoRow.from_dict(msg[2], reused=True)
            self._tick(r.repo_id)
        elif kind == "error":
            _, _, sha, why = msg
            have = self.st.files(r.repo_id, sha) if sha else {}
            self._finish(
                RepoRow(r.repo_id, sha, 0, tuple(FileRecord.from_dict(v) for v in have.values()), why), ok=False
            )
        return 0

    def _finish(self, row: RepoRow, *, ok: bool) -> None:
        self.st.put_row(row.repo, row.sha, ok, row.to_dict())
        self.rows[row.repo] = row
        self._tick(row.repo)

    def _record(self, name: str, label: str, rr: Any, error: str | None) -> FileRecord:
        from gguftpl.audit import audit_header

        if rr is None:
            return FileRecord(name, label, (("GT001", "error", error or "not a GGUF"),), error=error)
        try:
            fa = audit_header(rr.header, rr.label, self.s.options, cache=self.s.cache)
        except Exception as exc:  # noqa: BLE001 - a bug on one file is that file's row, not the survey's end
            why = f"unexpected {type(exc).__name__}: {exc}"
            return FileRecord(name, label, (("GT002", "error", why),), error=why)
        from gguftpl.findings import fix_text

        rows = fa.runtimes.rows if fa.runtimes is not None else ()
        dropping = tuple(x.name for x in fa.runtimes.dropping()) if fa.runtimes is not None else ()
        fix = fa.repair.text() if fa.repair is not None and fa.repair.needed else None
        findings = tuple((f.code, f.severity.value, f.message) for f in fa.findings)
        fixes: dict[str, str] = {}
        for f in fa.findings:
            fixes.setdefault(f.code, fix_text(f))
        runtimes = tuple(
            RuntimeOutcome(r.name, r.outcome, r.tools_reach_prompt, r.reason, r.engine, r.template) for r in rows
        )
        return FileRecord(name, label, findings, dropping, fix or None, fa.error, runtimes, tuple(fixes.items()))


def _unsafe_record(repo: str, sha: str, name: str, why: str) -> FileRecord:
    """A listed name that is no safe repo path (``gguftpl.gguf.hubref.unsafe_repo_path``): never read, reported
    as the repo audit reports it (GT557), under the repo's own label (the name is never built into a URL)."""
    from gguftpl.rules.repo import REPO_UNSAFE_NAME as rule

    finding = (rule.code, rule.severity.value, f"not read: {why} ({name[:200]!r})")
    return FileRecord(name, f"hf://{repo}@{sha}", (finding,), fixes=((rule.code, rule.fix),))
