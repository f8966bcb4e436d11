"""Check every quant of a model at once: a Hub repo (headers read remotely) or a local output folder.

Converters publish ten or twenty quants of one model; users pick one. Each file is audited on its own
(``gguftpl.audit.audit_header``), and then the files are compared with each other: a quant missing a
template the others carry (GT550), the same template differing between quants (GT551), special tokens
that differ (GT552), all quants drifting from the upstream model (GT553, when it is known and reachable;
GT554 notes when it was not checked), and split GGUFs missing shards (GT555).

"Quants of the same model" is decided from the headers, never from file names: files are grouped by
architecture, tokenizer model and vocabulary size (a projector or a draft model lands in its own group,
GT556). Split GGUFs are read through their first shard only; the file names of the split set are
gguf-split's documented naming, used to check the set is complete.

Remote headers are read concurrently (``jobs`` threads, default 4): the work is waiting on the network.
"""

from __future__ import annotations

import difflib
import os
import shlex
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from gguftpl.errors import GGUFFormatError, HubError, UsageError
from gguftpl.findings import Finding, Location, Rule, Severity, get_rule, make_finding
from gguftpl.gguf.remote import (
    DEFAULT_INITIAL_CHUNK,
    DEFAULT_MAX_CHUNK,
    HubFileRef,
    HubRepoRef,
    RemoteRead,
    ShardInfo,
    hub_endpoint,
    parse_repo_spec,
    read_remote_header,
    shard_info,
)

__all__ = [
    "QuantEntry",
    "RepoAudit",
    "TargetsAudit",
    "TerminalProgress",
    "audit_hub_repo",
    "audit_local_dir",
    "audit_remote_file",
    "audit_targets",
    "bench_remote_audit",
    "bench_repo_audit",
    "check_consistency",
    "list_repo_ggufs",
    "repo_file_specs",
]

GGUF_SUFFIX = ".gguf"
Progress = Callable[[int, int, str], None]
"""``progress(done, total, label)`` after each file."""


# --------------------------------------------------------------------------------------------- data


@dataclass
class QuantEntry:
    """One GGUF of the repo or folder, as far as the repo-level checks need it."""

    label: str
    """How reports name the file: a path, or ``hf://ORG/REPO/FILE@COMMIT``."""
    name: str
    """Path inside the repo or folder (``Q4_K_M/model-00001-of-00002.gguf``)."""
    size: int | None = None
    shard: ShardInfo | None = None
    skipped: str | None = None
    """Why the header was not read (a later shard of a split GGUF)."""
    error: str | None = None
    group: str | None = None
    """Model group (architecture / tokenizer / vocabulary size); None when the header was not read."""
    templates: dict[str, str] = field(default_factory=dict)
    """Template name -> text."""
    special: dict[str, Any] = field(default_factory=dict)
    """Role -> [id, text] (and ``add_bos``/``add_eos`` -> bool)."""
    upstream_repo: str | None = None
    remote: dict[str, Any] | None = None
    """The ``"remote"`` object of a Hub read (url, bytes_fetched, requests, revision …)."""
    audit: Any = None
    """``gguftpl.audit.FileAudit`` of this file."""

    def to_dict(self) -> dict[str, Any]:
        import hashlib

        return {
            "label": self.label,
            "name": self.name,
            "size": self.size,
            "shard": None
            if self.shard is None
            else {"number": self.shard.number, "count": self.shard.count, "first": self.shard.first},
            "skipped": self.skipped,
            "error": self.error,
            "group": self.group,
            "templates": {n: hashlib.sha256(t.encode("utf-8")).hexdigest() for n, t in sorted(self.templates.items())},
            "special": self.special,
            "upstream_repo": self.upstream_repo,
            "remote": self.remote,
        }


@dataclass
class RepoAudit:
    """The result of a repo-level audit: per-file audits plus the findings across files."""

    target: str
    """``ORG/REPO@COMMIT`` or the folder."""
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

    def to_dict(self) -> dict[str, Any]:
        """The audit JSON report (``gguftpl.report.json.run_dict``) plus ``"repo"`` and per-file ``"remote"``."""
        from gguftpl.report.json import run_dict

        d = run_dict(self.run)
        remote_by_label = {e.label: e.remote for e in self.entries if e.remote}
        for fd in d.get("files", []):
            if fd.get("path") in remote_by_label:
                fd["remote"] = remote_by_label[fd["path"]]
        d["repo"] = self.repo_dict()
        return d


# --------------------------------------------------------------------------------------------- summaries


# Metadata that differs between quants of one model and that the summary never reads.
_PER_QUANT_KEYS = ("general.file_type", "general.quantization_version")
_PER_QUANT_PREFIXES = ("quantize.", "split.")


def _raw_key(header: Any) -> str | None:
    """sha256 of the raw metadata pairs except the per-quant ones: equal for quants of one conversion, so
    the second quant of a model skips decoding its vocabulary. None when the bytes cannot be re-read."""
    import hashlib

    start, end = header.kv_start, header.kv_end
    try:
        src = getattr(header, "_source", None)
        if src is not None:  # remote headers: the bytes are still in the buffer
            raw = src.read_range(start, end)
        elif os.path.isfile(header.path):
            with open(header.path, "rb") as fh:
                fh.seek(start)
                raw = fh.read(end - start)
        else:
            return None
    except (OSError, GGUFFormatError, HubError):
        return None
    if len(raw) != end - start:
        return None
    h = hashlib.sha256(header.byteorder.encode())
    for kv in header.kv.values():
        if kv.key in _PER_QUANT_KEYS or kv.key.startswith(_PER_QUANT_PREFIXES):
            continue
        h.update(raw[kv.offset - start : kv.end - start])
    return h.hexdigest()


_Summary = tuple[dict[str, str], dict[str, Any], str, "str | None"]


def _summarize(entry: QuantEntry, header: Any, memo: dict[str, _Summary] | None = None) -> None:
    key = _raw_key(header) if memo is not None else None
    if memo is not None and key is not None and key in memo:
        templates, special, group, upstream = memo[key]
        entry.templates, entry.special, entry.group = dict(templates), dict(special), group
        entry.upstream_repo = upstream
        return
    _summarize_fresh(entry, header)
    if memo is not None and key is not None and entry.group is not None:
        memo[key] = (dict(entry.templates), dict(entry.special), entry.group, entry.upstream_repo)


def _summarize_fresh(entry: QuantEntry, header: Any) -> None:
    from gguftpl.templates.templateset import load_templateset

    ts = load_templateset(header)
    entry.templates = {name: t.text for name, t in ts.templates.items()}
    entry.special = {role: [tok.id, tok.text] for role, tok in sorted(ts.special_tokens.items())}
    if ts.add_bos is not None:
        entry.special["add_bos"] = ts.add_bos
    if ts.add_eos is not None:
        entry.special["add_eos"] = ts.add_eos
    entry.group = f"{ts.architecture or '?'} / {ts.tokenizer_model or 'no tokenizer'} / {ts.vocab_size or 0} tokens"
    try:  # what the file says it came from (metadata, bundled catalog); no network
        from gguftpl.upstream.discover import find_upstream_repo

        entry.upstream_repo = find_upstream_repo(ts)[0]
    except Exception:  # noqa: BLE001 - discovery is optional; the audit reports its own problems
        entry.upstream_repo = None


# --------------------------------------------------------------------------------------------- checks


def _majority(values: Sequence[tuple[str, Any]], prefer: Any = None) -> Any:
    """Most common value among (label, value); ties go to ``prefer`` if tied, else the first seen."""
    counts = Counter(_freeze(v) for _, v in values)
    best = max(counts.values())
    tied = [v for _, v in values if counts[_freeze(v)] == best]
    if prefer is not None and any(_freeze(v) == _freeze(prefer) for v in tied):
        return prefer
    return tied[0]


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


def _diff_excerpt(a: str, b: str, a_name: str, b_name: str, limit: int = 24) -> str:
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), fromfile=a_name, tofile=b_name, lineterm="", n=1))
    if len(lines) > limit:
        lines = lines[:limit] + [f"… ({len(lines) - limit} more diff lines)"]
    return "\n".join(lines)


def _template_key(name: str) -> str:
    return "tokenizer.chat_template" if name == "default" else f"tokenizer.chat_template.{name}"


def _same_text(a: str, b: str) -> bool:
    # jinja2 drops one trailing newline of a template source (keep_trailing_newline=False, the setting
    # transformers renders with), so `chat_template.jinja`'s final newline does not make another template
    return a == b or _drop_final_newline(a) == _drop_final_newline(b)


def _drop_final_newline(s: str) -> str:
    if s.endswith("\r\n"):
        return s[:-2]
    return s[:-1] if s.endswith("\n") else s


def check_consistency(
    entries: Sequence[QuantEntry],
    *,
    target: str,
    upstream_templates: dict[str, dict[str, str]] | None = None,
) -> list[Finding]:
    """Findings across the quants (pure: no I/O). ``upstream_templates`` maps a group to upstream's
    name -> text, used to break ties in favour of upstream's version."""
    from gguftpl.rules import (
        REPO_MODELS_GROUPED,
        REPO_SPECIAL_TOKENS_DIFFER,
        REPO_SPLIT_INCOMPLETE,
        REPO_TEMPLATE_DIFFERS,
        REPO_TEMPLATE_MISSING,
    )

    findings: list[Finding] = []
    findings += _check_splits(entries, target, REPO_SPLIT_INCOMPLETE)
    read = [e for e in entries if e.group is not None]
    groups: dict[str, list[QuantEntry]] = {}
    for e in read:
        assert e.group is not None
        groups.setdefault(e.group, []).append(e)
    if len(groups) > 1:
        desc = "; ".join(f"{g}: {len(v)} file(s)" for g, v in sorted(groups.items()))
        findings.append(
            make_finding(
                REPO_MODELS_GROUPED,
                f"{len(groups)} models by architecture and vocabulary; quants compared within each ({desc})",
                Location(file=target),
                groups={g: [e.name for e in v] for g, v in sorted(groups.items())},
            )
        )
    for gname, members in sorted(groups.items()):
        if len(members) < 2:
            continue
        ups = (upstream_templates or {}).get(gname, {})
        names = sorted({n for e in members for n in e.templates}, key=lambda n: (n != "default", n))
        for tname in names:
            having = [(e.name, e.templates[tname]) for e in members if tname in e.templates]
            majority = _majority(having, prefer=ups.get(tname))
            majority_files = [n for n, t in having if _same_text(t, majority)]
            for e in members:
                key = _template_key(tname)
                if tname not in e.templates:
                    findings.append(
                        make_finding(
                            REPO_TEMPLATE_MISSING,
                            f"{e.name} has no `{tname}` chat template ({key}); {len(having)} of "
                            f"{len(members)} quants of this model carry it (e.g. {having[0][0]})",
                            Location(file=e.label, key=key),
                            template=tname,
                            evidence=f"carried by: {', '.join(n for n, _ in having)}",
                            fix=_copy_fix(majority_files[0], e.name, tname),
                            carried_by=[n for n, _ in having],
                        )
                    )
                elif not _same_text(e.templates[tname], majority):
                    findings.append(
                        make_finding(
                            REPO_TEMPLATE_DIFFERS,
                            f"{e.name}: the `{tname}` template differs from the one in {len(majority_files)} of "
                            f"{len(having)} quants carrying it (e.g. {majority_files[0]})",
                            Location(file=e.label, key=key),
                            template=tname,
                            evidence=_diff_excerpt(majority, e.templates[tname], majority_files[0], e.name),
                            fix=_copy_fix(majority_files[0], e.name, tname),
                            majority_files=majority_files,
                        )
                    )
        roles = sorted({r for e in members for r in e.special})
        majority_special: dict[str, Any] = {}
        for role in roles:
            vals = [(e.name, e.special.get(role)) for e in members]
            majority_special[role] = _majority(vals)
        for e in members:
            diffs = [
                f"{role}: {_fmt_tok(e.special.get(role))} (others: {_fmt_tok(majority_special[role])})"
                for role in roles
                if _freeze(e.special.get(role)) != _freeze(majority_special[role])
            ]
            if diffs:
                findings.append(
                    make_finding(
                        REPO_SPECIAL_TOKENS_DIFFER,
                        f"{e.name}: special tokens differ from the other quants: " + "; ".join(diffs),
                        Location(file=e.label),
                        evidence="\n".join(diffs),
                        fix=f"re-convert {e.name}, or set the token ids to match the other quants",
                    )
                )
    return findings


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


def _check_splits(entries: Sequence[QuantEntry], target: str, rule: Rule) -> list[Finding]:
    sets: dict[tuple[str, int], set[int]] = {}
    for e in entries:
        if e.shard is not None:
            sets.setdefault((e.shard.first, e.shard.count), set()).add(e.shard.number)
    out: list[Finding] = []
    for (first, count), have in sorted(sets.items()):
        missing = sorted(set(range(1, count + 1)) - have)
        if missing:
            what = "its first shard (which holds the metadata)" if 1 in missing else "shards"
            out.append(
                make_finding(
                    rule,
                    f"split GGUF {first} ({count} shards) is missing {what}: " + ", ".join(f"{n:05d}" for n in missing),
                    Location(file=target),
                    evidence=f"present: {', '.join(f'{n:05d}' for n in sorted(have))}",
                    missing=missing,
                )
            )
    return out


def _plan(names: Iterable[tuple[str, int | None]], label_of: Callable[[str], str]) -> list[QuantEntry]:
    """One entry per GGUF; later shards of a split set are listed but not read."""
    out: list[QuantEntry] = []
    for name, size in sorted(names):
        shard = shard_info(name)
        e = QuantEntry(label=label_of(name), name=name, size=size, shard=shard)
        if shard is not None and not shard.is_first:
            e.skipped = f"shard {shard.number} of {shard.count}: the metadata is in {shard.first}"
        out.append(e)
    return out


# --------------------------------------------------------------------------------------------- upstream


def _upstream_check(
    entries: Sequence[QuantEntry],
    target: str,
    upstream: bool | str,
    endpoint: str | None,
    token: str | bool | None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[list[Finding], dict[str, Any] | None, dict[str, dict[str, str]]]:
    """Compare each group's majority templates with upstream's, when upstream is known and reachable."""
    from gguftpl.rules import REPO_UPSTREAM_DRIFT, REPO_UPSTREAM_UNKNOWN

    read = [e for e in entries if e.group is not None]
    if upstream is False or not read:
        return [], None, {}
    groups: dict[str, list[QuantEntry]] = {}
    for e in read:
        assert e.group is not None
        groups.setdefault(e.group, []).append(e)
    findings: list[Finding] = []
    info: dict[str, Any] = {"groups": {}}
    by_group: dict[str, dict[str, str]] = {}
    for gname, members in sorted(groups.items()):
        if not any(m.templates for m in members) and not isinstance(upstream, str):
            continue  # no chat model (a projector, an embedding model): nothing to compare
        repo: str | None
        if isinstance(upstream, str):
            repo, how = upstream, "given with --upstream"
        else:
            candidates = [(m.name, m.upstream_repo) for m in members if m.upstream_repo]
            repo = _majority(candidates) if candidates else None
            how = "from the files' metadata or the bundled catalog"
        ginfo: dict[str, Any] = {"repo": repo, "how": how}
        info["groups"][gname] = ginfo
        if repo is None:
            ginfo["status"] = "unknown"
            findings.append(
                make_finding(
                    REPO_UPSTREAM_UNKNOWN,
                    f"no upstream model known for {gname}: the quants were compared only with each other",
                    Location(file=target),
                )
            )
            continue
        from gguftpl.upstream.hub import fetch_upstream

        try:
            tok = token if isinstance(token, str) else None
            cfg = fetch_upstream(
                repo, endpoint=hub_endpoint(endpoint), token=tok, cache_dir=cache_dir, catalog_fallback=True
            )
        except HubError as exc:
            ginfo["status"] = "unreachable"
            ginfo["error"] = str(exc)
            findings.append(
                make_finding(
                    REPO_UPSTREAM_UNKNOWN,
                    f"upstream {repo} could not be read ({exc}); the quants were compared only with each other",
                    Location(file=target),
                )
            )
            continue
        ginfo.update(status="checked", revision=cfg.commit_sha, origin=cfg.origin, warnings=list(cfg.warnings))
        ups = dict(cfg.templates)
        by_group[gname] = ups
        if not ups:
            continue
        names = sorted({n for m in members for n in m.templates} | set(ups), key=lambda n: (n != "default", n))
        missing: list[str] = []
        differing: list[str] = []
        evidence: list[str] = []
        for n in names:
            having = [(m.name, m.templates[n]) for m in members if n in m.templates]
            if n in ups and not having:
                if cfg.complete:
                    missing.append(n)
                continue
            if n not in ups or not having:
                continue
            majority = _majority(having, prefer=ups[n])
            if not _same_text(majority, ups[n]):
                differing.append(n)
                evidence.append(_diff_excerpt(ups[n], majority, f"{repo}:{n}", f"quants:{n}", limit=12))
        if missing or differing:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(f"`{n}`" for n in missing))
            if differing:
                parts.append("different " + ", ".join(f"`{n}`" for n in differing))
            findings.append(
                make_finding(
                    REPO_UPSTREAM_DRIFT,
                    f"{gname}: the quants' templates drift from upstream {cfg.label}: " + "; ".join(parts),
                    Location(file=target),
                    template=(missing + differing)[0],
                    # a template upstream ships and no quant carries is the silent tool-calling failure
                    severity=Severity.ERROR if missing else None,
                    evidence="\n".join(evidence) or f"upstream templates: {', '.join(sorted(ups))}",
                    fix=f"gguftpl patch QUANT.gguf --from-hub {shlex.quote(repo)} -o FIXED.gguf (for each quant)",
                    upstream=repo,
                    upstream_revision=cfg.commit_sha,
                    missing=missing,
                    differing=differing,
                )
            )
    return findings, info, by_group


# --------------------------------------------------------------------------------------------- runs


def _finish(
    target: str,
    kind: str,
    entries: list[QuantEntry],
    *,
    keep: Any,
    upstream: bool | str,
    endpoint: str | None,
    token: str | bool | None,
    start: float,
    analyses: int,
    cache_dir: str | os.PathLike[str] | None = None,
) -> RepoAudit:
    from gguftpl.audit import AuditRun, FileAudit

    up_findings, up_info, by_group = _upstream_check(entries, target, upstream, endpoint, token, cache_dir)
    cross = check_consistency(entries, target=target, upstream_templates=by_group) + up_findings
    cross = [f for f in cross if keep(f.code)]
    run = AuditRun()
    per_file: dict[str, list[Finding]] = {}
    repo_level: list[Finding] = []
    for f in cross:
        if f.location.file == target:
            repo_level.append(f)
        else:
            per_file.setdefault(f.location.file, []).append(f)
    for e in entries:
        if e.audit is None:
            continue
        fa = e.audit
        extra = per_file.get(e.label, [])
        if extra:
            fa.findings = list(fa.findings) + extra
        run.files.append(fa)
    repo_fa = FileAudit(path=target, findings=repo_level)
    run.files.append(repo_fa)
    run.analyses = analyses
    run.rules = _rules_for(run.findings)
    run.seconds = time.perf_counter() - start
    return RepoAudit(
        target=target, kind=kind, run=run, entries=entries, findings=cross, upstream=up_info, seconds=run.seconds
    )


def _rules_for(findings: Iterable[Finding]) -> dict[str, Rule]:
    out: dict[str, Rule] = {}
    for f in findings:
        if f.code not in out:
            try:
                out[f.code] = get_rule(f.code)
            except KeyError:
                continue
    return dict(sorted(out.items()))


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


def _audit_one(
    entry: QuantEntry,
    header: Any,
    *,
    keep: Any,
    cache: Any,
    engine: str,
    strict: bool,
    memo: dict[str, _Summary] | None = None,
) -> None:
    from gguftpl.audit import audit_header

    try:
        _summarize(entry, header, memo)
    except Exception as exc:  # noqa: BLE001 - the per-file audit reports it (GT002); the repo check skips it
        entry.error = f"{type(exc).__name__}: {exc}"
    entry.audit = audit_header(header, entry.label, engine=engine, cache=cache, rule_filter=keep, strict=strict)
    entry.upstream_repo = entry.upstream_repo or entry.audit.upstream_repo


def _unreadable(entry: QuantEntry, exc: GGUFFormatError, keep: Any) -> None:
    from gguftpl.audit import FileAudit
    from gguftpl.rules import UNREADABLE_GGUF

    entry.error = str(exc)
    f = make_finding(UNREADABLE_GGUF, str(exc), Location(file=entry.label), evidence=str(exc))
    entry.audit = FileAudit(path=entry.label, error=str(exc), findings=[f] if keep(f.code) else [])


def list_repo_ggufs(
    repo: str | HubRepoRef, *, endpoint: str | None = None, token: str | bool | None = None
) -> tuple[HubRepoRef, str | None, list[tuple[str, int | None]]]:
    """(repo ref, commit sha, [(path, size)]) of every ``*.gguf`` in the repo at its revision.

    Two requests: the revision (to pin the commit, so every header comes from the same snapshot) and the
    recursive tree."""
    from gguftpl.gguf.remote import _offline

    ref = parse_repo_spec(repo) if isinstance(repo, str) else repo
    if _offline():
        raise HubError(f"HF_HUB_OFFLINE is set: cannot list {ref.spec} on the Hub")
    from huggingface_hub import HfApi

    ep = hub_endpoint(endpoint or ref.endpoint)
    tok: str | bool | None = token if token is not None else (os.environ.get("HF_TOKEN") or None)
    api = HfApi(endpoint=ep, token=tok, library_name="gguftpl")
    rev = ref.revision or "main"
    try:
        info = api.repo_info(ref.repo_id, revision=rev, repo_type=ref.repo_type)
        sha: str | None = getattr(info, "sha", None)
        items = api.list_repo_tree(ref.repo_id, recursive=True, revision=sha or rev, repo_type=ref.repo_type)
        files = [
            (str(it.path), getattr(it, "size", None))
            for it in items
            if str(getattr(it, "path", "")).lower().endswith(GGUF_SUFFIX) and hasattr(it, "blob_id")
        ]
    except HubError:
        raise
    except Exception as exc:  # noqa: BLE001 - huggingface_hub's typed errors, mapped to one line
        raise _listing_error(ref, rev, exc) from None
    return HubRepoRef(ref.repo_id, ref.revision, ref.repo_type, ep), sha, files


def repo_file_specs(
    repo: str | HubRepoRef, *, endpoint: str | None = None, token: str | bool | None = None
) -> list[str]:
    """``hf://ORG/REPO/FILE@COMMIT`` for every GGUF of the repo whose header holds metadata (later shards
    of a split GGUF are left out: their first shard speaks for them). For ``inspect --repo``."""
    ref, sha, files = list_repo_ggufs(repo, endpoint=endpoint, token=token)
    out = []
    for name, _ in sorted(files):
        shard = shard_info(name)
        if shard is None or shard.is_first:
            spec = ref.file(name, sha or ref.revision)
            out.append(spec.url() if ref.endpoint and ref.endpoint != hub_endpoint() else spec.spec)
    return out


def _listing_error(ref: HubRepoRef, rev: str, exc: BaseException) -> HubError:
    from huggingface_hub.errors import (
        GatedRepoError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, OfflineModeIsEnabled):
        return HubError(f"HF_HUB_OFFLINE is set: cannot list {ref.spec} on the Hub")
    if isinstance(exc, GatedRepoError):
        return HubError(f"{ref.repo_id} is a gated repo: accept its conditions on the Hub and set HF_TOKEN")
    if isinstance(exc, RevisionNotFoundError):
        return HubError(f"revision {rev!r} not found in {ref.repo_id}")
    if isinstance(exc, RepositoryNotFoundError):
        return HubError(f"repository {ref.repo_id} not found (or private: set HF_TOKEN)")
    status = getattr(getattr(exc, "response", None), "status_code", None)
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if status is not None:
        return HubError(f"HTTP {status} while listing {ref.spec}: {detail.splitlines()[0][:200]}")
    return HubError(f"cannot list {ref.spec}: {detail[:200]}")


def audit_hub_repo(
    repo: str | HubRepoRef,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    jobs: int = 4,
    select: Iterable[str] | str | None = None,
    ignore: Iterable[str] | str | None = None,
    upstream: bool | str = True,
    cache_dir: str | os.PathLike[str] | None = None,
    engine: str = "hf",
    strict: bool = False,
    progress: Progress | None = None,
    initial_chunk: int = DEFAULT_INITIAL_CHUNK,
    max_chunk: int = DEFAULT_MAX_CHUNK,
    retries: int = 2,
) -> RepoAudit:
    """Audit every GGUF of a Hub repo from its headers alone, and compare the quants (see module doc).

    ``upstream``: True = the upstream the files name (metadata / catalog), a repo id = that one, False =
    no upstream comparison. A Hub failure (missing repo, gated, offline, dropped connection) raises
    ``HubError``: a repo audit that skipped files must not pass."""
    from gguftpl.audit import AnalysisCache, RuleFilter

    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    start = time.perf_counter()
    keep = RuleFilter(select, ignore)
    ref, sha, files = list_repo_ggufs(repo, endpoint=endpoint, token=token)
    commit = sha or ref.revision
    target = f"hf://{ref.spec.split('@')[0]}@{commit or 'main'}"

    def label_of(name: str) -> str:
        return ref.file(name, commit).spec

    entries = _plan(files, label_of)
    todo = [e for e in entries if e.skipped is None]
    cache = AnalysisCache()
    misses = cache.misses
    total = len(todo)
    memo: dict[str, _Summary] = {}

    def fetch(e: QuantEntry) -> RemoteRead:
        return read_remote_header(
            ref.file(e.name, commit),
            token=token,
            initial_chunk=initial_chunk,
            max_chunk=max_chunk,
            retries=retries,
            follow_shards=False,
        )

    done = 0
    # audit in listing order while the next headers download: the network overlaps the (CPU) analysis
    for e, fut in _ahead(fetch, todo, jobs):
        try:
            rr = fut.result()
        except GGUFFormatError as exc:
            _unreadable(e, exc, keep)
        else:
            e.remote = rr.remote_dict()
            try:
                _audit_one(e, rr.header, keep=keep, cache=cache, engine=engine, strict=strict, memo=memo)
            finally:
                rr.header.close()
        done += 1
        if progress is not None:
            progress(done, total, e.name)
    result = _finish(
        target,
        "hub",
        entries,
        keep=keep,
        upstream=upstream,
        endpoint=ref.endpoint,
        token=token,
        start=start,
        analyses=cache.misses - misses,
        cache_dir=cache_dir,
    )
    result.revision = sha
    result.requested_revision = ref.revision or "main"
    result.jobs = jobs
    return result


def _size_or_none(path: str) -> int | None:
    # a dangling or looping symlink is reported when its header is read (GT001), not a crash of the listing
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def audit_local_dir(
    path: str | os.PathLike[str],
    *,
    jobs: int = 1,
    select: Iterable[str] | str | None = None,
    ignore: Iterable[str] | str | None = None,
    upstream: bool | str = True,
    endpoint: str | None = None,
    token: str | bool | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    engine: str = "hf",
    strict: bool = False,
    progress: Progress | None = None,
) -> RepoAudit:
    """The same checks on a local folder of GGUFs (a converter's output before upload), recursively."""
    from gguftpl.audit import AnalysisCache, RuleFilter
    from gguftpl.gguf.reader import read_header

    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    folder = os.fspath(path)
    if not os.path.isdir(folder):
        raise UsageError(f"not a directory: {folder}")
    start = time.perf_counter()
    keep = RuleFilter(select, ignore)
    names: list[tuple[str, int | None]] = []
    for root, dirs, fnames in os.walk(folder):
        dirs.sort()
        for f in fnames:
            if f.lower().endswith(GGUF_SUFFIX):
                full = os.path.join(root, f)
                names.append((os.path.relpath(full, folder).replace(os.sep, "/"), _size_or_none(full)))

    def label_of(name: str) -> str:
        return os.path.join(folder, *name.split("/"))

    entries = _plan(names, label_of)
    todo = [e for e in entries if e.skipped is None]
    cache = AnalysisCache()
    misses = cache.misses
    memo: dict[str, _Summary] = {}

    def fetch(e: QuantEntry) -> Any:
        return read_header(e.label)

    done = 0
    for e, fut in _ahead(fetch, todo, jobs):
        try:
            header = fut.result()
        except GGUFFormatError as exc:
            _unreadable(e, exc, keep)
        else:
            try:
                _audit_one(e, header, keep=keep, cache=cache, engine=engine, strict=strict, memo=memo)
            finally:
                header.close()
        done += 1
        if progress is not None:
            progress(done, len(todo), e.name)
    result = _finish(
        folder,
        "dir",
        entries,
        keep=keep,
        upstream=upstream,
        endpoint=endpoint,
        token=token,
        start=start,
        analyses=cache.misses - misses,
        cache_dir=cache_dir,
    )
    result.jobs = jobs
    return result


# --------------------------------------------------------------------------------------------- single files


def audit_remote_file(
    spec: str | HubFileRef,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    select: Iterable[str] | str | None = None,
    ignore: Iterable[str] | str | None = None,
    engine: str = "hf",
    cache: Any = None,
    strict: bool = False,
    initial_chunk: int = DEFAULT_INITIAL_CHUNK,
    max_chunk: int = DEFAULT_MAX_CHUNK,
    retries: int = 2,
) -> tuple[Any, RemoteRead | None]:
    """Audit one remote GGUF from its header: (``FileAudit``, the ``RemoteRead`` or None if unreadable).

    A header that is not a GGUF is a GT001 finding; Hub failures raise ``HubError``."""
    from gguftpl.audit import RuleFilter, audit_header

    keep = RuleFilter(select, ignore)
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
        e = QuantEntry(label=label, name=label)
        _unreadable(e, exc, keep)
        return e.audit, None
    try:
        fa = audit_header(rr.header, rr.label, engine=engine, cache=cache, rule_filter=keep, strict=strict)
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


# --------------------------------------------------------------------------------------------- CLI entry


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

    def to_dict(self) -> dict[str, Any]:
        from gguftpl.report.json import run_dict

        d = run_dict(self.run)
        for fd in d.get("files", []):
            if fd.get("path") in self.remote:
                fd["remote"] = self.remote[fd["path"]]
        if self.repos:
            d["repos"] = [r.repo_dict() for r in self.repos]
        if self.remote:
            d["remote"] = {
                "files": len(self.remote),
                "bytes_fetched": sum(int(r.get("bytes_fetched", 0)) for r in self.remote.values()),
                "requests": sum(int(r.get("requests", 0)) for r in self.remote.values()),
            }
        return d

    def format(self, fmt: str, **options: Any) -> str:
        """The report in ``fmt``: JSON gains ``"remote"``/``"repos"``; text gains a one-line footer."""
        import json

        from gguftpl.report import get_formatter

        if fmt == "json":
            return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"
        out = get_formatter(fmt, **options).format(self.run)
        if fmt == "text" and self.remote:
            nbytes = sum(int(r.get("bytes_fetched", 0)) for r in self.remote.values())
            nreq = sum(int(r.get("requests", 0)) for r in self.remote.values())
            out += f"remote: {len(self.remote)} header(s) read over HTTP, {nbytes:,} bytes in {nreq} request(s)\n"
            for label, info in self.remote.items():
                for note in info.get("notes", []):  # e.g. "… is shard 2 of 3 …, reading …-00001-of-00003.gguf"
                    out += f"note: {label}: {note}\n"
        return out


class TerminalProgress:
    """``[ 3/20] name`` on one stderr line, only on a terminal; ``done()`` clears it."""

    def __init__(self, stream: Any = None) -> None:
        import sys

        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self._width = 0

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.enabled:
            return
        n = len(str(total))
        bar_w = 20
        filled = bar_w * done // max(total, 1)
        line = f"[{'#' * filled}{'.' * (bar_w - filled)}] {done:>{n}}/{total} {label}"[:100]
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)

    def done(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def audit_targets(
    paths: Sequence[str] = (),
    *,
    repos: Sequence[str] = (),
    repo_check: bool = False,
    jobs: int = 4,
    select: Iterable[str] | str | None = None,
    ignore: Iterable[str] | str | None = None,
    upstream: bool | str = True,
    engine: str = "hf",
    strict: bool = False,
    progress: Progress | None = None,
    endpoint: str | None = None,
) -> TargetsAudit:
    """Audit local paths, remote GGUFs and Hub repos into one run.

    ``repo_check``: each directory in ``paths`` is treated as one model's set of quants (the converter's
    output folder) and gets the repo-level checks; otherwise directories are audited file by file.
    ``upstream`` (True / repo id / False) only matters for repo-level checks."""
    from gguftpl.audit import AnalysisCache, AuditRun, audit_paths
    from gguftpl.gguf.remote import is_remote

    start = time.perf_counter()
    if not paths and not repos:
        raise UsageError("give a PATH (file, folder, hf://… or URL) or --repo ORG/REPO")
    run = AuditRun()
    result = TargetsAudit(run=run)
    cache = AnalysisCache()
    analyses = 0
    for p in paths:  # in the order given, so the report reads like the command line
        if is_remote(p):
            fa, rr = audit_remote_file(
                p, endpoint=endpoint, select=select, ignore=ignore, engine=engine, cache=cache, strict=strict
            )
            run.files.append(fa)
            if rr is not None:
                result.remote[fa.path] = rr.remote_dict()
        elif repo_check and os.path.isdir(p):
            ra = audit_local_dir(
                p,
                jobs=jobs,
                select=select,
                ignore=ignore,
                upstream=upstream,
                endpoint=endpoint,
                engine=engine,
                strict=strict,
                progress=progress,
            )
            result.repos.append(ra)
            run.files.extend(ra.run.files)
            analyses += ra.run.analyses
        else:
            sub = audit_paths([p], select=select, ignore=ignore, engine=engine, cache=cache, strict=strict)
            run.files.extend(sub.files)
    for spec in repos:
        ra = audit_hub_repo(
            spec,
            endpoint=endpoint,
            jobs=jobs,
            select=select,
            ignore=ignore,
            upstream=upstream,
            engine=engine,
            strict=strict,
            progress=progress,
        )
        result.repos.append(ra)
        run.files.extend(ra.run.files)
        analyses += ra.run.analyses
        for e in ra.entries:
            if e.remote:
                result.remote[e.label] = e.remote
    run.analyses = analyses + cache.misses
    run.rules = _rules_for(run.findings)
    run.seconds = time.perf_counter() - start
    return result
