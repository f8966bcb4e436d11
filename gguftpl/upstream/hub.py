"""Fetch a repo's chat templates and special tokens from the Hugging Face Hub (or a local stand-in).

Uses huggingface_hub (imported lazily) and its normal cache. The endpoint, token, cache folder and offline
switch come from ``gguftpl.hubenv``, read at call time, so a test or a long-lived process that changes the
environment is honoured. Every failure becomes a one-line ``HubError``.

Requests, cold cache: ``GET /api/models/{repo}/revision/{rev}`` (resolves the commit),
``GET /api/models/{repo}/tree/{sha}?recursive=true``, then HEAD+GET per template/special-token file.
Warm cache with a branch: the revision call only. Pinned commit, warm cache: no request at all.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from gguftpl import hubenv, limits
from gguftpl.errors import HubError, HubUnreachableError
from gguftpl.gguf.httpsource import failed_host
from gguftpl.remotebounds import RemoteLimitError, run_bounded
from gguftpl.safeio import read_bytes_bounded
from gguftpl.upstream.config import (
    SPECIAL_FILES,
    TEMPLATE_FILES,
    TOKENIZER_JSON,
    UpstreamConfig,
    file_bound,
    parse_upstream_files,
)

_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def parse_repo_ref(ref: str) -> tuple[str, str | None]:
    """``org/name`` or ``org/name@revision`` (a Hub address like ``hf.co/org/name`` too) -> (repo_id, revision)."""
    repo, _, rev = ref.partition("@")
    repo = hubenv.strip_hub_url(repo.strip()).strip("/")
    if not _REPO_RE.match(repo):
        raise HubError(f"{ref!r} is not a Hugging Face repo id (expected ORG/NAME[@REVISION])")
    return repo, (rev.strip() or None)


def fetch_upstream(
    repo_id: str,
    revision: str | None = None,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    offline: bool | None = None,
    catalog_fallback: bool = False,
) -> UpstreamConfig:
    """Templates and special tokens of ``repo_id`` at ``revision`` (branch, tag or commit; default main).

    ``offline`` defaults to ``hubenv.offline()``; offline, only the cache is used. With
    ``catalog_fallback``, a Hub that cannot be reached (not a 404) falls back to a bundled catalog entry
    whose revision is known and matches, with a loud warning in ``.warnings``.
    """
    repo_id, rev_in_ref = parse_repo_ref(repo_id)
    revision = revision or rev_in_ref
    offline = hubenv.offline() if offline is None else offline
    url = hubenv.endpoint(endpoint)
    tok = hubenv.token(token)
    try:
        folder = hubenv.cache_dir(cache_dir)
        return run_bounded(
            f"reading {repo_id}@{revision or 'main'}",
            lambda: _fetch(repo_id, revision, url, tok, folder, offline),
            max_bytes=upstream_file_bound,
        )
    except _Unreachable as exc:
        if catalog_fallback:
            from gguftpl.upstream.catalog import fallback_entry

            cfg = fallback_entry(repo_id, revision)
            if cfg is not None:
                cfg.warnings.insert(
                    0,
                    f"WARNING: the Hub could not be reached ({exc}); using the bundled catalog copy of "
                    f"{repo_id} at revision {cfg.commit_sha} instead",
                )
                return cfg
        raise HubUnreachableError(str(exc)) from None


class _Unreachable(Exception):
    """Network down, offline with a cold cache, connection dropped: the catalog may stand in."""


def upstream_file_bound(url: str) -> int:
    """The largest body fetched from ``url`` while reading an upstream: a config file or template, the
    bigger ``tokenizer.json``, an API answer; a download redirected to a CDN (named by its hash) gets the
    largest of them, its size having been checked at the Hub's redirect already."""
    path = urlsplit(url).path
    name = unquote(path.rsplit("/", 1)[-1])
    if "/api/" in path:
        return limits.MAX_HUB_API_BYTES
    if name == TOKENIZER_JSON or "/resolve/" not in path:
        return max(limits.MAX_UPSTREAM_TOKENIZER_BYTES, limits.MAX_UPSTREAM_CONFIG_BYTES)
    return limits.MAX_UPSTREAM_CONFIG_BYTES


def _fetch(
    repo_id: str,
    revision: str | None,
    endpoint: str,
    token: str | bool | None,
    cache_dir: str,
    offline: bool,
) -> UpstreamConfig:
    hf = _import_hub()
    rev = revision or "main"
    where = f"{repo_id}@{rev}"
    silent = _silent_tqdm()
    kwargs: dict[str, Any] = {
        "revision": rev,
        "endpoint": endpoint,
        "token": token,
        "cache_dir": cache_dir,
        "local_files_only": offline,
    }
    try:
        folder = hf.snapshot_download(
            repo_id, allow_patterns=TEMPLATE_FILES + SPECIAL_FILES, tqdm_class=silent, **kwargs
        )
    except Exception as exc:  # noqa: BLE001 - classified below, re-raised as typed errors
        _raise_classified(exc, where, endpoint, offline)
        raise  # pragma: no cover - _raise_classified always raises
    snap = Path(folder)
    sha = snap.name if _COMMIT_RE.match(snap.name) else None
    listing = sorted(p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file())
    warnings: list[str] = []
    if offline:
        warnings.append(f"{hubenv.OFFLINE_NOTE}: read {where} from the local cache, commit {sha}")

    def read(name: str) -> bytes | None:
        p = snap / name
        if p.is_file():  # bounded again: a file cached before the bound, or by another tool
            return read_bytes_bounded(p, what=f"{where} {name}", error=HubError, limit=file_bound(name))
        if name == TOKENIZER_JSON:
            return _download_optional(hf, repo_id, name, {**kwargs, "revision": sha or rev}, silent, warnings)
        return None

    if not any(f in listing for f in ("tokenizer_config.json", "chat_template.jinja", "chat_template.json")):
        raise HubError(
            f"{where}: no tokenizer_config.json, chat_template.jinja or chat_template.json in the repo "
            "(is this the model repo, not a GGUF-only repo?)"
        )
    templates, sources, original, special, more = parse_upstream_files(read, listing)
    warnings.extend(more)
    if not templates:
        warnings.append(
            f"{where} has no chat template (looked in tokenizer_config.json, chat_template.jinja, "
            "additional_chat_templates/, chat_template.json)"
        )
    return UpstreamConfig(
        repo_id=repo_id,
        revision_requested=revision,
        commit_sha=sha,
        templates=templates,
        special=special,
        sources=sources,
        origin="cache" if offline else "hub",
        location=endpoint,
        warnings=warnings,
        files=list(listing),
        original_names=original,
    )


def _download_optional(
    hf: Any, repo_id: str, name: str, kwargs: dict[str, Any], silent: Any, warnings: list[str]
) -> bytes | None:
    """One more file at the same commit. A second snapshot_download (not hf_hub_download) because it
    reuses the cached tree listing: a file the repo does not have costs no request, and a pinned,
    cached commit stays request-free."""
    import logging

    class _NoMatchFilter(logging.Filter):
        # "No files matched" is the expected answer for a repo without the file
        def filter(self, record: logging.LogRecord) -> bool:
            return "No files matched" not in record.getMessage()

    log = logging.getLogger("huggingface_hub._snapshot_download")
    quiet = _NoMatchFilter()
    log.addFilter(quiet)
    try:
        folder = hf.snapshot_download(repo_id, allow_patterns=[name], tqdm_class=silent, **kwargs)
    except RemoteLimitError as exc:
        if exc.deadline:
            raise
        warnings.append(f"could not read {name}: {_short(exc)}")  # too big: an optional file
        return None
    except Exception as exc:  # noqa: BLE001 - optional file: a warning, not an error
        warnings.append(f"could not read {name}: {_short(exc)}")
        return None
    finally:
        log.removeFilter(quiet)
    p = Path(folder) / name
    if not p.is_file():
        return None
    return read_bytes_bounded(p, what=f"{repo_id} {name}", error=HubError, limit=file_bound(name))


def _raise_classified(exc: Exception, where: str, endpoint: str, offline: bool) -> None:
    if isinstance(exc, HubError):  # a remote bound (deadline, size) said it already
        raise exc
    errors = _import_hub().errors
    name = type(exc).__name__
    if isinstance(exc, errors.GatedRepoError):
        raise HubError(
            f"{where}: the repo is gated; accept its licence on the Hub and {hubenv.SET_TOKEN} (or `hf auth login`)"
        ) from None
    if isinstance(exc, errors.RevisionNotFoundError):
        raise HubError(f"{where}: revision not found") from None
    if isinstance(exc, errors.RepositoryNotFoundError):
        raise HubError(f"{where}: repository not found at {endpoint} (or private: {hubenv.SET_TOKEN})") from None
    host = failed_host(exc, endpoint)  # a download redirected elsewhere fails there, not at the Hub
    if isinstance(exc, errors.LocalEntryNotFoundError) or isinstance(exc, errors.OfflineModeIsEnabled):
        if offline:
            raise _Unreachable(f"{where} is not in the local cache and {hubenv.OFFLINE_IS_SET}") from None
        raise _Unreachable(f"{where}: cannot reach {host} and nothing is cached") from None
    if isinstance(exc, errors.EntryNotFoundError) or name == "RemoteEntryNotFoundError":
        raise HubError(f"{where}: file not found: {_short(exc)}") from None
    if isinstance(exc, errors.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            raise HubError(f"{where}: access denied (HTTP {status}); {hubenv.SET_TOKEN}") from None
        raise _Unreachable(f"{where}: {host} answered HTTP {status}") from None
    mod = type(exc).__module__ or ""
    if mod.startswith(("httpx", "httpcore", "h11", "requests", "urllib3")) or isinstance(exc, OSError):
        raise _Unreachable(f"{where}: connection to {host} failed ({name}: {_short(exc)})") from None
    if isinstance(exc, ValueError):  # huggingface_hub validation (bad repo id, bad revision)
        raise HubError(f"{where}: {_short(exc)}") from None
    raise HubError(f"{where}: {name}: {_short(exc)}") from None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _import_hub() -> Any:
    try:
        import huggingface_hub
        import huggingface_hub.errors  # noqa: F401
    except ImportError as exc:  # pragma: no cover - a hard dependency
        raise HubError(f"huggingface_hub is not installed ({exc})") from None
    return huggingface_hub


def _silent_tqdm() -> Any:
    """A progress-bar class that never draws: the CLI's stderr is for errors and warnings."""
    from huggingface_hub.utils import tqdm as hf_tqdm

    class Silent(hf_tqdm):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return Silent


_MAX_UPSTREAM_FILES = 100_000


def load_upstream_dir(path: str | os.PathLike[str]) -> UpstreamConfig:
    """``--upstream DIR_OR_JSON``: a local folder laid out like a Hub repo, or one JSON file.

    A JSON file may be a ``tokenizer_config.json`` (or ``chat_template.json``) itself, or a gguftpl
    bundle ``{"repo_id": ..., "revision": ..., "files": {"tokenizer_config.json": {...}, ...}}``.
    """
    import json

    p = Path(path)
    if p.is_dir():
        from gguftpl.safeio import read_bytes_bounded

        listing: list[str] = []
        for q in p.rglob("*"):
            if len(listing) >= _MAX_UPSTREAM_FILES:  # `--upstream /` would walk the whole disk
                raise HubError(
                    f"--upstream {path}: more than {_MAX_UPSTREAM_FILES:,} files; point it at the model's own folder"
                )
            if q.is_file():
                listing.append(q.relative_to(p).as_posix())
        listing.sort()

        def read(name: str) -> bytes | None:
            q = p / name
            return read_bytes_bounded(q, what="upstream file", error=HubError) if q.is_file() else None

        templates, sources, original, special, warnings = parse_upstream_files(read, listing)
        return UpstreamConfig(
            repo_id=None,
            revision_requested=None,
            commit_sha=None,
            templates=templates,
            special=special,
            sources=sources,
            origin="dir",
            location=str(p),
            warnings=warnings,
            files=listing,
            original_names=original,
        )
    if not p.exists():
        raise HubError(f"--upstream {path}: no such file or folder")
    from gguftpl.safeio import loads_json, read_bytes_bounded

    # read_bytes_bounded names what else it is (a FIFO, a device) and never blocks on it

    raw = read_bytes_bounded(p, what="--upstream file", error=HubError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HubError(f"--upstream {path}: not UTF-8 text (byte {exc.start})") from None
    obj = loads_json(text, what=f"--upstream {path}", error=HubError, invalid="is not valid JSON")
    if not isinstance(obj, dict):
        raise HubError(f"--upstream {path}: expected a JSON object")
    files: dict[str, bytes] = {}
    repo_id = revision = None
    if isinstance(obj.get("files"), dict):
        repo_id, revision = obj.get("repo_id"), obj.get("revision")
        for name, content in obj["files"].items():
            files[name] = (content if isinstance(content, str) else json.dumps(content)).encode("utf-8")
    elif p.name == "chat_template.json":
        files["chat_template.json"] = raw
    else:
        files["tokenizer_config.json"] = raw
    templates, sources, original, special, warnings = parse_upstream_files(files.get, sorted(files))
    return UpstreamConfig(
        repo_id=repo_id if isinstance(repo_id, str) else None,
        revision_requested=revision if isinstance(revision, str) else None,
        commit_sha=revision if isinstance(revision, str) and _COMMIT_RE.match(revision) else None,
        templates=templates,
        special=special,
        sources=sources,
        origin="json",
        location=str(p),
        warnings=warnings,
        files=sorted(files),
        original_names=original,
    )
