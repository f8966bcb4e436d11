"""The Hugging Face cache, as huggingface_hub lays it out (huggingface_hub 2.4.0, ``file_download.py``,
``constants.py``; the same since 0.14):

- The folder is :func:`gguftpl.hubenv.cache_dir`, the one home of the Hub's environment (huggingface_hub's
  cache variables, else ``~/.cache/huggingface/hub``).
- A model repo ``ORG/REPO`` lives in ``models--ORG--REPO`` (``repo_folder_name``: ``"--".join(["models", *repo_id
  .split("/")])``, ``constants.REPO_ID_SEPARATOR``).
- ``refs/<branch or tag>`` holds the 40-hex commit a revision resolved to; a revision that is already 40 hex is
  the commit (``REGEX_COMMIT_HASH``).
- ``snapshots/<commit>/<file>`` is a symlink to ``blobs/<etag>`` (``_get_pointer_path``, ``blob_path``); a file
  stored with Git LFS, as every GGUF is, has its sha256 as etag (``REGEX_SHA256``): that is checked like an Ollama
  blob. On a file system without symlinks the snapshot holds the file itself.

``hf-cache://ORG/REPO[@REV][/FILE]``: REV defaults to ``main``; FILE may be left out when the snapshot holds one
model GGUF (``mmproj-*`` projectors aside). The snapshot file must resolve inside the repo's folder. The folder
name gives the upstream repo for free: a GGUF repo's ``ORG/NAME-GGUF`` is reported as the file's source.
"""

from __future__ import annotations

import os
import re

from gguftpl import hubenv
from gguftpl.errors import StoreError
from gguftpl.safeio import printable
from gguftpl.stores.model import StoreModel
from gguftpl.stores.safety import check_blob, inside, read_small

__all__ = ["list_files", "load", "main_commit", "parse", "repo_folder"]

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PART = re.compile(r"^[A-Za-z0-9][\w.\-]*$")


def repo_folder(repo_id: str) -> str:
    """``models--ORG--REPO`` (huggingface_hub's ``repo_folder_name`` for a model repo)."""
    from huggingface_hub.file_download import repo_folder_name

    return str(repo_folder_name(repo_id=repo_id, repo_type="model"))


def parse(name: str) -> tuple[str, str, str | None]:
    """(repo_id, revision, file or None) of ``ORG/REPO[@REV][/FILE]``."""
    parts = name.split("/")
    if len(parts) < 2:
        raise StoreError(f"hf-cache://{printable(name)}: a cache reference is ORG/REPO[@REV][/FILE]")
    repo, _, rev = parts[1].partition("@")
    if not (_PART.match(parts[0]) and _PART.match(repo)) or (rev and not _PART.match(rev)):
        raise StoreError(f"hf-cache://{printable(name)}: not a Hub repo name")
    return f"{parts[0]}/{repo}", rev or "main", "/".join(parts[2:]) or None


def _commit(folder: str, revision: str) -> str:
    if _COMMIT.match(revision):
        return revision
    refs = os.path.join(folder, "refs")
    ref = os.path.join(refs, revision)
    if not os.path.lexists(ref):  # anything else there (a FIFO, a folder) is read_small's one-line refusal
        raise StoreError(
            f"revision {printable(revision)} is not in the cache ({printable(folder)} has no refs/{revision})"
        )
    commit = read_small(ref, refs, "cache ref", 4096).decode("ascii", "replace").strip()
    if not _COMMIT.match(commit):
        raise StoreError(f"cache ref {printable(ref)} does not hold a commit")
    return commit


def main_commit(folder: str) -> str | None:
    """The commit ``refs/main`` of a cached repo folder holds, None when the cache has no ``main`` (only
    revisions fetched by commit); :class:`StoreError` for a ref that is not a small regular file holding one."""
    if not os.path.lexists(os.path.join(folder, "refs", "main")):
        return None
    return _commit(folder, "main")


def _is_model(name: str) -> bool:
    base = name.rsplit("/", 1)[-1].lower()
    return base.endswith(".gguf") and not base.startswith("mmproj")


def list_files(snapshot: str) -> list[str]:
    """The model GGUFs of a snapshot folder (relative, ``/``-separated), sorted."""
    out = []
    for dirpath, dirs, files in os.walk(snapshot):
        dirs.sort()
        out += [os.path.relpath(os.path.join(dirpath, f), snapshot).replace(os.sep, "/") for f in files if _is_model(f)]
    return sorted(out)


def load(name: str, cache: str | None = None) -> StoreModel:
    repo_id, revision, filename = parse(name)
    root = cache or hubenv.cache_dir()
    folder = os.path.join(root, repo_folder(repo_id))
    if not os.path.isdir(folder):
        raise StoreError(f"hf-cache://{printable(name)}: {repo_id} is not in the Hugging Face cache {printable(root)}")
    commit = _commit(folder, revision)
    snapshot = os.path.join(folder, "snapshots", commit)
    if filename is None:
        from gguftpl.gguf.shards import models_of

        files = models_of(list_files(snapshot)) if os.path.isdir(snapshot) else []  # a split GGUF: its shard 1
        if len(files) != 1:
            raise StoreError(
                f"hf-cache://{printable(name)}: name the file, the snapshot holds {len(files)} model GGUFs "
                f"({', '.join(files) or 'none'})"
            )
        filename = files[0]
    path = os.path.join(snapshot, *filename.split("/"))
    if not os.path.lexists(path):
        raise StoreError(
            f"hf-cache://{printable(name)}: {printable(filename)} is not in the cached snapshot {commit[:12]}"
        )
    real = inside(path, folder, "cached file")
    etag = os.path.basename(real)
    if _SHA256.match(etag) and os.path.dirname(real) == os.path.realpath(os.path.join(folder, "blobs")):
        real, st = check_blob(path, folder, etag, None, "cached blob")
    else:
        st = os.stat(real)
    ref = f"hf-cache://{repo_id}" + (f"@{revision}" if revision != "main" else "") + f"/{filename}"
    return StoreModel(
        ref, "hf-cache", real, st.st_size, root, (st.st_dev, st.st_ino), upstream_repo=repo_id, revision=commit
    )
