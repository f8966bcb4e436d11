"""Names of GGUFs and repos on the Hugging Face Hub: ``hf://`` specs, Hub URLs and ``ORG/REPO[@REV]``.

Parsing only; no request is made here. Which Hub a reference points at is decided when its URL is built:
the endpoint a full URL named, else ``gguftpl.hubenv.endpoint()``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from gguftpl import hubenv, limits
from gguftpl.errors import HubError
from gguftpl.safeio import printable

__all__ = ["HubFileRef", "HubRepoRef", "is_remote", "parse_remote", "parse_repo_spec", "unsafe_repo_path"]

_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
_REPO_TYPE_PREFIX = {"datasets": "dataset", "spaces": "space"}


@dataclass(frozen=True)
class HubFileRef:
    """One file in a Hub repo, at a revision (None = the default branch)."""

    repo_id: str
    filename: str
    revision: str | None = None
    repo_type: str = "model"
    endpoint: str | None = None
    """Set when the reference came from a full URL; otherwise ``hubenv.endpoint()`` decides."""

    def url(self, revision: str | None = None) -> str:
        from huggingface_hub import hf_hub_url

        url: str = hf_hub_url(
            self.repo_id,
            self.filename,
            repo_type=None if self.repo_type == "model" else self.repo_type,
            revision=revision or self.revision or "main",
            endpoint=hubenv.endpoint(self.endpoint),
        )
        return url

    @property
    def spec(self) -> str:
        prefix = "" if self.repo_type == "model" else f"{self.repo_type}s/"
        rev = f"@{self.revision}" if self.revision else ""
        return f"hf://{prefix}{self.repo_id}/{self.filename}{rev}"

    def with_filename(self, filename: str) -> HubFileRef:
        return HubFileRef(self.repo_id, filename, self.revision, self.repo_type, self.endpoint)


@dataclass(frozen=True)
class HubRepoRef:
    """A Hub repo at a revision, as given to ``--repo``."""

    repo_id: str
    revision: str | None = None
    repo_type: str = "model"
    endpoint: str | None = None

    @property
    def spec(self) -> str:
        prefix = "" if self.repo_type == "model" else f"{self.repo_type}s/"
        return f"{prefix}{self.repo_id}" + (f"@{self.revision}" if self.revision else "")

    def file(self, filename: str, revision: str | None = None) -> HubFileRef:
        return HubFileRef(self.repo_id, filename, revision or self.revision, self.repo_type, self.endpoint)


def is_remote(spec: str | os.PathLike[str]) -> bool:
    """True for ``hf://…`` and ``http(s)://…`` specs (local paths are never remote)."""
    if not isinstance(spec, str):
        return False
    low = spec.lower()
    return low.startswith(("hf://", "http://", "https://"))


def _split_repo_type(parts: list[str]) -> tuple[str, list[str]]:
    if parts and parts[0] in _REPO_TYPE_PREFIX:
        return _REPO_TYPE_PREFIX[parts[0]], parts[1:]
    return "model", parts


def _check_repo_id(repo_id: str, spec: str) -> None:
    if not _REPO_ID_RE.match(repo_id) or ".." in repo_id:
        raise HubError(f"not a Hub repo id: {repo_id!r} (in {spec!r}; expected ORG/REPO)")


def parse_remote(spec: str) -> HubFileRef | str:
    """Parse a remote GGUF spec.

    Accepted: ``hf://ORG/REPO/path/FILE.gguf[@REV]``, ``hf://ORG/REPO@REV/path/FILE.gguf`` (HfFileSystem
    style), ``hf://datasets/…``, and Hub URLs ``https://HOST/ORG/REPO/(resolve|blob)/REV/path``. Any other
    http(s) URL is returned unchanged, to be read as a plain file (no token is sent to it).
    """
    if spec.lower().startswith("hf://"):
        return _parse_hf_spec(spec)
    try:
        parts_url = urlsplit(spec)
    except ValueError as exc:  # "Invalid IPv6 URL" and the like
        raise HubError(f"not a valid URL: {spec!r} ({exc})") from None
    if parts_url.scheme not in ("http", "https") or not parts_url.netloc:
        raise HubError(f"not a remote GGUF spec: {spec!r} (use hf://ORG/REPO/FILE.gguf or an https URL)")
    segs = [unquote(s) for s in parts_url.path.strip("/").split("/")]
    repo_type, segs = _split_repo_type(segs)
    for i, kind in enumerate(segs):
        if kind in ("resolve", "blob") and i == 2 and len(segs) >= 5:
            repo_id = f"{segs[0]}/{segs[1]}"
            _check_repo_id(repo_id, spec)
            endpoint = f"{parts_url.scheme}://{parts_url.netloc}"
            return HubFileRef(repo_id, "/".join(segs[4:]), segs[3], repo_type, endpoint)
    return spec


def _parse_hf_spec(spec: str) -> HubFileRef:
    body = spec[5:].strip("/")
    rev: str | None = None
    m = re.match(r"^(?P<path>.*?\.gguf)@(?P<rev>[^@]+)$", body, re.IGNORECASE)
    if m:
        body, rev = m.group("path"), m.group("rev")
    repo_type, parts = _split_repo_type(body.split("/"))
    if len(parts) < 3:
        raise HubError(f"{spec!r} names no file: expected hf://ORG/REPO/FILE.gguf[@REVISION]")
    org, name, rest = parts[0], parts[1], parts[2:]
    if "@" in name:  # hf://ORG/REPO@REV/FILE
        if rev is not None:
            raise HubError(f"{spec!r} gives the revision twice")
        name, rev = name.split("@", 1)
        rev = unquote(rev)
    repo_id = f"{org}/{name}"
    _check_repo_id(repo_id, spec)
    filename = "/".join(rest)
    if not filename or ".." in rest:
        raise HubError(f"{spec!r} names no file: expected hf://ORG/REPO/FILE.gguf[@REVISION]")
    return HubFileRef(repo_id, filename, rev or None, repo_type)


def parse_repo_spec(spec: str) -> HubRepoRef:
    """``ORG/REPO[@REV]``, ``hf://ORG/REPO[@REV]`` or ``https://HOST/ORG/REPO[/tree/REV]``."""
    s = spec.strip()
    endpoint: str | None = None
    rev: str | None = None
    if s.lower().startswith(("http://", "https://")):
        try:
            u = urlsplit(s)
        except ValueError as exc:  # "Invalid IPv6 URL"
            raise HubError(f"not a valid URL: {spec!r} ({exc})") from None
        endpoint = f"{u.scheme}://{u.netloc}"
        segs = [unquote(x) for x in u.path.strip("/").split("/")]
        repo_type, segs = _split_repo_type(segs)
        if len(segs) < 2:
            raise HubError(f"not a Hub repo URL: {spec!r}")
        if len(segs) >= 4 and segs[2] == "tree":
            rev = "/".join(segs[3:])
        s = "/".join(segs[:2])
    else:
        if s.lower().startswith("hf://"):
            s = s[5:]
        s = s.strip("/")
        if "@" in s:
            s, rev = s.split("@", 1)
        repo_type, segs = _split_repo_type(s.split("/"))
        s = "/".join(segs)
    _check_repo_id(s, spec)
    return HubRepoRef(s, rev or None, repo_type, endpoint)


def unsafe_repo_path(path: str) -> str | None:
    """Why a file path from a repo listing must never be requested, or None when it is an ordinary path.

    A listing comes from the server: ``../../x.gguf`` in it would be resolved against the URL and fetch a
    file outside the repo (with the user's token); an absolute path, a backslash, an empty or ``.``
    segment, a control character or a name longer than any the Hub allows are no repo file either."""
    if not path:
        return "an empty name"
    if len(path) > limits.MAX_REPO_FILE_NAME:
        return f"a name of {len(path):,} characters (more than {limits.MAX_REPO_FILE_NAME:,})"
    if path.startswith("/"):
        return "an absolute path"
    if "\\" in path:
        return "a backslash in the name"
    if any(seg in ("", ".", "..") for seg in path.split("/")):
        return "a '..', '.' or empty path segment (outside the repo)"
    if printable(path) != path:
        return "control or invisible characters in the name"
    return None
