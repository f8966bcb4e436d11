"""Read a GGUF header from the Hugging Face Hub (or any HTTP server), and list a Hub repo's GGUFs.

The bytes come from ``gguftpl.gguf.httpsource.RemoteSource`` (Range requests sized to what the parser
asks); this module decides what to read: a Hub file at a revision pinned to the commit the first answer
names, the first shard of a split GGUF (``NAME-00002-of-00005.gguf`` keeps its metadata in shard 1), or a
plain URL, which gets no token. The Hub's endpoint, token and offline switch come from
``gguftpl.hubenv``, read at call time. Hub failures become one-line ``HubError``s naming the repo, file and
revision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from gguftpl import hubenv, limits
from gguftpl.errors import HubError
from gguftpl.gguf.httpsource import DEFAULT_INITIAL_CHUNK, DEFAULT_MAX_CHUNK, Describe, RemoteSource, RemoteStats
from gguftpl.gguf.hubref import HubFileRef, HubRepoRef, parse_remote, parse_repo_spec, unsafe_repo_path
from gguftpl.gguf.reader import GGUFHeader, read_header
from gguftpl.gguf.shards import ShardInfo, shard_info
from gguftpl.remotebounds import run_bounded

__all__ = [
    "GGUF_SUFFIX",
    "RemoteRead",
    "RepoListing",
    "list_repo_ggufs",
    "open_remote",
    "open_remote_header",
    "read_remote_header",
    "remote_header_cost",
    "repo_file_specs",
]

GGUF_SUFFIX = ".gguf"


# --------------------------------------------------------------------------------------------- Hub errors


def _repo_error(exc: BaseException, repo_id: str, rev: str, status: int | None = None) -> HubError | None:
    """huggingface_hub's typed answers about a repo as a whole (gated, no such revision or repo)."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    if isinstance(exc, GatedRepoError):
        http = f" (HTTP {status})" if status is not None else ""
        return HubError(f"{repo_id} is a gated repo: accept its conditions on the Hub and {hubenv.SET_TOKEN}{http}")
    if isinstance(exc, RevisionNotFoundError):
        return HubError(f"revision {rev!r} not found in {repo_id}")
    if isinstance(exc, RepositoryNotFoundError):
        return HubError(f"repository {repo_id} not found (or private: {hubenv.SET_TOKEN})")
    return None


def _hub_describer(ref: HubFileRef, asked: str | None = None) -> Describe:
    """Map huggingface_hub's typed errors to one line naming the repo, file and revision."""

    def describe(exc: BaseException, status: int | None) -> HubError | None:
        from huggingface_hub.errors import OfflineModeIsEnabled, RemoteEntryNotFoundError

        rev = ref.revision or "main"
        if isinstance(exc, OfflineModeIsEnabled):
            return HubError(f"{hubenv.OFFLINE_IS_SET}: cannot read {ref.spec} from the Hub")
        if isinstance(exc, RemoteEntryNotFoundError):
            why = ""
            if asked and asked != ref.filename:
                why = f" (asked for {asked}; a split GGUF keeps its metadata in the first shard)"
            return HubError(f"{ref.filename} not found in {ref.repo_id}@{rev}{why}")
        return _repo_error(exc, ref.repo_id, rev, status)

    return describe


# --------------------------------------------------------------------------------------------- read a header


@dataclass
class RemoteRead:
    """A header read over HTTP, with what it cost and where it came from."""

    header: GGUFHeader
    stats: RemoteStats
    label: str
    """What to show as the file: the hf:// spec (with the resolved revision) or the URL."""
    ref: HubFileRef | None = None
    shard: ShardInfo | None = None
    notes: list[str] = field(default_factory=list)

    def remote_dict(self) -> dict[str, Any]:
        """The ``"remote"`` object for JSON output."""
        d = self.stats.to_dict()
        if self.ref is not None:
            d["repo_id"] = self.ref.repo_id
            d["filename"] = self.ref.filename
            d["requested_revision"] = self.ref.revision or "main"
        if self.shard is not None:
            d["shard"] = self.shard.to_dict()
        if self.notes:
            d["notes"] = list(self.notes)
        return d


def _same_origin(a: str, b: str) -> bool:
    ua, ub = urlsplit(a), urlsplit(b)
    return (ua.scheme, ua.netloc.lower()) == (ub.scheme, ub.netloc.lower())


def _follow_hub_shard(ref: HubFileRef, notes: list[str]) -> tuple[HubFileRef, ShardInfo | None]:
    shard = shard_info(ref.filename)
    if shard is not None:
        if not shard.is_first:
            notes.append(
                f"{ref.filename} is shard {shard.number} of {shard.count}; a split GGUF keeps its metadata "
                f"in the first shard, reading {shard.first}"
            )
            ref = ref.with_filename(shard.first)
        else:
            notes.append(f"split GGUF ({shard.count} shards): metadata read from the first shard")
    return ref, shard


def _follow_url_shard(url: str, notes: list[str]) -> tuple[str, ShardInfo | None]:
    shard = shard_info(unquote(urlsplit(url).path))
    if shard is not None and not shard.is_first:
        first_name = shard.first.rsplit("/", 1)[-1]
        base = url.split("?", 1)[0]
        url = base.rsplit("/", 1)[0] + "/" + quote(first_name)
        notes.append(
            f"shard {shard.number} of {shard.count}; a split GGUF keeps its metadata in the first shard, "
            f"reading {first_name}"
        )
    return url, shard


def open_remote(
    spec: str | HubFileRef,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    initial_chunk: int = DEFAULT_INITIAL_CHUNK,
    max_chunk: int = DEFAULT_MAX_CHUNK,
    retries: int = 2,
    follow_shards: bool = True,
) -> tuple[RemoteSource, HubFileRef | None, ShardInfo | None, list[str]]:
    """A ``RemoteSource`` for a spec (not yet read), plus the Hub reference and shard notes."""
    ref = parse_remote(spec) if isinstance(spec, str) else spec
    if hubenv.offline():  # before building headers: huggingface_hub may fetch its agent registry then
        label = ref.spec if isinstance(ref, HubFileRef) else ref
        raise HubError(f"{hubenv.OFFLINE_IS_SET}: cannot read {label} from the Hub")
    notes: list[str] = []
    if isinstance(ref, HubFileRef):
        if endpoint and ref.endpoint is None:
            ref = HubFileRef(ref.repo_id, ref.filename, ref.revision, ref.repo_type, endpoint)
        asked = ref.filename
        shard = None
        if follow_shards:
            ref, shard = _follow_hub_shard(ref, notes)
        else:
            shard = shard_info(ref.filename)
        final_ref = ref

        def pin(commit: str) -> str:
            return final_ref.url(revision=commit)

        src = RemoteSource(
            ref.url(),
            name=ref.spec,
            headers=hubenv.headers(token),
            pin_url=pin,
            describe=_hub_describer(ref, asked),
            initial_chunk=initial_chunk,
            max_chunk=max_chunk,
            retries=retries,
        )
        return src, ref, shard, notes
    url = ref
    # credentials go only to the Hub endpoint itself, never to an arbitrary host
    send_token = token if _same_origin(url, hubenv.endpoint(endpoint)) else False
    if follow_shards:
        url, shard = _follow_url_shard(url, notes)
    else:
        shard = shard_info(unquote(urlsplit(url).path))
    src = RemoteSource(
        url,
        name=url,
        headers=hubenv.headers(send_token),
        initial_chunk=initial_chunk,
        max_chunk=max_chunk,
        retries=retries,
    )
    return src, None, shard, notes


def read_remote_header(
    spec: str | HubFileRef,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    initial_chunk: int = DEFAULT_INITIAL_CHUNK,
    max_chunk: int = DEFAULT_MAX_CHUNK,
    retries: int = 2,
    follow_shards: bool = True,
) -> RemoteRead:
    """Read the header of a remote GGUF with Range requests (``GGUFFormatError`` / ``HubError`` on failure).

    Only the header is fetched (plus at most one read-ahead chunk); lazy arrays decode from the buffered
    bytes, so nothing more is fetched after this returns. The whole read has one deadline
    (``gguftpl.remotebounds``), however slowly the server answers.
    """
    label = spec.spec if isinstance(spec, HubFileRef) else spec
    return run_bounded(
        f"reading {label}",
        lambda: _read_remote_header(
            spec,
            endpoint=endpoint,
            token=token,
            initial_chunk=initial_chunk,
            max_chunk=max_chunk,
            retries=retries,
            follow_shards=follow_shards,
        ),
    )


def _read_remote_header(spec: str | HubFileRef, *, follow_shards: bool, **kwargs: Any) -> RemoteRead:
    src, ref, shard, notes = open_remote(spec, follow_shards=follow_shards, **kwargs)
    try:
        # keep_open: header._source stays set, so the raw metadata bytes remain readable from the buffer
        # (RemoteSource.read_range serves them after close()); a cut-short stream is closed right here
        header = read_header(src, keep_open=True)
    except BaseException:
        src.close()  # a HubError mid-read: do not leave a streamed body open
        raise
    src.close()
    label = src.name
    if ref is not None:
        label = HubFileRef(ref.repo_id, ref.filename, src.stats.revision or ref.revision, ref.repo_type).spec
        header.path = label
    split_no = header.get("split.no")
    split_count = header.get("split.count")
    if isinstance(split_no, int) and isinstance(split_count, int) and split_count > 1:
        if shard is None:
            shard = ShardInfo(split_no + 1, split_count, label)
        if split_no != 0:
            notes.append(f"split.no is {split_no}: this is not the first shard, its metadata may be incomplete")
        elif not notes:
            notes.append(f"split GGUF ({split_count} shards): metadata read from the first shard")
    return RemoteRead(header=header, stats=src.stats, label=label, ref=ref, shard=shard, notes=notes)


def open_remote_header(spec: str, **kwargs: Any) -> tuple[GGUFHeader, str, dict[str, Any]]:
    """(header, label, ``"remote"`` dict) for ``gguftpl.gguf.open.open_header`` (inspect, diff, …)."""
    rr = read_remote_header(spec, **kwargs)
    return rr.header, rr.label, rr.remote_dict()


def remote_header_cost(spec: str, **kwargs: Any) -> tuple[int, int]:
    """(bytes fetched, requests made) to read one remote header; for scripts/bench.py."""
    rr = read_remote_header(spec, **kwargs)
    return rr.stats.bytes_fetched, rr.stats.requests


# --------------------------------------------------------------------------------------------- list a repo


def _listing_error(ref: HubRepoRef, rev: str, exc: BaseException) -> HubError:
    from huggingface_hub.errors import OfflineModeIsEnabled

    if isinstance(exc, OfflineModeIsEnabled):
        return HubError(f"{hubenv.OFFLINE_IS_SET}: cannot list {ref.spec} on the Hub")
    known = _repo_error(exc, ref.repo_id, rev)
    if known is not None:
        return known
    status = getattr(getattr(exc, "response", None), "status_code", None)
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if status is not None:
        return HubError(f"HTTP {status} while listing {ref.spec}: {detail.splitlines()[0][:200]}")
    return HubError(f"cannot list {ref.spec}: {detail[:200]}")


@dataclass(frozen=True)
class RepoListing:
    """The GGUFs of a Hub repo at one commit."""

    ref: HubRepoRef
    commit: str | None
    files: list[tuple[str, int | None]]
    """(path in the repo, size) of every ``*.gguf`` whose path is safe to request."""
    unsafe: list[tuple[str, str]] = field(default_factory=list)
    """(path, why) of the listed ``*.gguf`` paths that are never requested (``hubref.unsafe_repo_path``)."""


def list_repo_ggufs(
    repo: str | HubRepoRef, *, endpoint: str | None = None, token: str | bool | None = None
) -> RepoListing:
    """Every ``*.gguf`` of the repo at its revision; a path that is no safe repo path (``../../x.gguf``) is
    set apart, never requested.

    Two requests: the revision (to pin the commit, so every header comes from the same snapshot) and the
    recursive tree."""
    ref = parse_repo_spec(repo) if isinstance(repo, str) else repo
    if hubenv.offline():
        raise HubError(f"{hubenv.OFFLINE_IS_SET}: cannot list {ref.spec} on the Hub")
    from huggingface_hub import HfApi

    ep = hubenv.endpoint(endpoint or ref.endpoint)
    api = HfApi(endpoint=ep, token=hubenv.token(token), library_name="gguftpl")
    rev = ref.revision or "main"

    def listing() -> tuple[str | None, list[tuple[str, int | None]]]:
        info = api.repo_info(ref.repo_id, revision=rev, repo_type=ref.repo_type)
        sha: str | None = getattr(info, "sha", None)
        items = api.list_repo_tree(ref.repo_id, recursive=True, revision=sha or rev, repo_type=ref.repo_type)
        return sha, [
            (str(it.path), getattr(it, "size", None))
            for it in items
            if str(getattr(it, "path", "")).lower().endswith(GGUF_SUFFIX) and hasattr(it, "blob_id")
        ]

    try:
        sha, files = run_bounded(f"listing {ref.spec}", listing, max_bytes=lambda url: limits.MAX_HUB_API_BYTES)
    except HubError:
        raise
    except Exception as exc:  # noqa: BLE001 - huggingface_hub's typed errors, mapped to one line
        raise _listing_error(ref, rev, exc) from None
    safe: list[tuple[str, int | None]] = []
    unsafe: list[tuple[str, str]] = []
    for name, size in files:
        why = unsafe_repo_path(name)
        if why is None:
            safe.append((name, size))
        else:
            unsafe.append((name, why))
    return RepoListing(HubRepoRef(ref.repo_id, ref.revision, ref.repo_type, ep), sha, safe, unsafe)


def repo_file_specs(
    repo: str | HubRepoRef,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    unsafe: list[tuple[str, str]] | None = None,
) -> list[str]:
    """``hf://ORG/REPO/FILE@COMMIT`` for every GGUF of the repo whose header holds metadata (later shards
    of a split GGUF are left out: their first shard speaks for them). For ``inspect --repo``. Listed paths
    that are not safe to request are added to ``unsafe`` as (path, why)."""
    listing = list_repo_ggufs(repo, endpoint=endpoint, token=token)
    ref, sha = listing.ref, listing.commit
    if unsafe is not None:
        unsafe.extend(listing.unsafe)
    out = []
    for name, _ in sorted(listing.files):
        shard = shard_info(name)
        if shard is None or shard.is_first:
            spec = ref.file(name, sha or ref.revision)
            out.append(spec.url() if ref.endpoint and ref.endpoint != hubenv.endpoint() else spec.spec)
    return out
