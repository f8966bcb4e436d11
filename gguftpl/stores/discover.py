"""Every GGUF in the stores present on this machine (``gguftpl scan``), each named by its reference.

Where each store is comes from its module (:mod:`.ollama`, :mod:`.lmstudio`, :mod:`.hfcache`), so ``HOME``,
``OLLAMA_MODELS`` and the Hub's cache variables move them as they move the runtimes. A cache repo folder
``models--ORG--REPO`` gives ``ORG/REPO`` back as huggingface_hub's ``scan_cache_dir`` does (the type prefix cut, then
``--`` read as ``/``; ``huggingface_hub/utils/_cache_manager.py``, 2.4.0). llama.cpp's cache (``-hf`` downloads) is
``$LLAMA_CACHE``, else ``$XDG_CACHE_HOME/llama.cpp``, else ``$HOME/.cache/llama.cpp`` on Linux (llama.cpp
``common/common.cpp::fs_get_cache_directory`` @17fce9be15411587700cda558a626e9f53e54a0b: ``LLAMA_CACHE`` as it is,
else ``XDG_CACHE_HOME`` or ``HOME/.cache``, then ``llama.cpp``); its GGUFs have no
reference scheme and are named by path. A model the store cannot give safely is
kept as a :class:`Problem` (its reference and the one-line reason), never the end of the scan.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from gguftpl.errors import GGUFTplError
from gguftpl.stores.model import StoreModel

__all__ = ["STORES", "Problem", "discover"]

STORES = ("ollama", "lmstudio", "hf-cache", "llama.cpp", "path")
"""``--store`` names; ``path`` is a folder given with ``--path``."""


def llamacpp_cache() -> str:
    """llama.cpp's cache folder (``fs_get_cache_directory`` on Linux)."""
    own = os.environ.get("LLAMA_CACHE")
    if own:
        return own
    xdg = os.environ.get("XDG_CACHE_HOME")
    return os.path.join(xdg or os.path.join(os.path.expanduser("~"), ".cache"), "llama.cpp")


@dataclass(frozen=True)
class Problem:
    ref: str
    store: str
    error: str


def _models(names: list[str]) -> list[str]:
    from gguftpl.gguf.shards import models_of

    return models_of(names)


def _ollama() -> Iterator[StoreModel | Problem]:
    from gguftpl.stores import ollama

    for root in ollama.models_dirs():
        try:
            os.stat(os.path.join(root, "manifests"))
        except FileNotFoundError:
            continue  # no store there
        except OSError as exc:  # there, but not readable: say so rather than list nothing
            why = f"cannot read the Ollama store {root}: {exc.strerror or exc}"
            yield Problem(f"ollama:// ({root})", "ollama", why)
            continue
        for name in ollama.list_names(root):
            try:
                yield ollama.load(root, name)
            except GGUFTplError as exc:
                yield Problem(f"ollama://{ollama.display(name)}", "ollama", str(exc))


def _lmstudio() -> Iterator[StoreModel | Problem]:
    from gguftpl.stores import lmstudio

    for root in lmstudio.models_dirs():
        for rel in _models([rel for rel, _ in lmstudio.list_files(root)]):
            try:
                yield lmstudio.load(rel, root)
            except GGUFTplError as exc:
                yield Problem(f"lmstudio://{rel}", "lmstudio", str(exc))


def _hf_cache() -> Iterator[StoreModel | Problem]:
    from gguftpl import hubenv
    from gguftpl.stores import hfcache

    root = hubenv.cache_dir()
    for folder in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if not folder.startswith("models--"):
            continue
        repo_id = folder[len("models--") :].replace("--", "/")
        try:  # read as any cache ref is: inside the folder, a small regular file (a FIFO would block a plain open)
            head = hfcache.main_commit(os.path.join(root, folder)) or ""
        except GGUFTplError as exc:
            yield Problem(f"hf-cache://{repo_id}", "hf-cache", str(exc))
            continue
        snapshots = os.path.join(root, folder, "snapshots")
        for commit in sorted(os.listdir(snapshots)) if os.path.isdir(snapshots) else []:
            rev = "" if commit == head else f"@{commit}"
            for rel in _models(hfcache.list_files(os.path.join(snapshots, commit))):
                name = f"{repo_id}{rev or '@' + commit}/{rel}"
                try:
                    model = hfcache.load(name, root)
                except GGUFTplError as exc:
                    yield Problem(f"hf-cache://{repo_id}{rev}/{rel}", "hf-cache", str(exc))
                    continue
                yield model if rev else _named(model, f"hf-cache://{repo_id}/{rel}")


def _named(model: StoreModel, ref: str) -> StoreModel:
    from dataclasses import replace

    return replace(model, ref=ref)


def _llamacpp() -> Iterator[StoreModel | Problem]:
    root = llamacpp_cache()
    if os.path.isdir(root):
        yield from _folder(root, "llama.cpp")


def _folder(path: str, store: str = "path") -> Iterator[StoreModel | Problem]:
    for dirpath, dirs, files in os.walk(path):
        dirs.sort()
        for f in _models(sorted(f for f in files if f.lower().endswith(".gguf"))):
            p = os.path.join(dirpath, f)
            try:
                st = os.stat(p)
            except OSError as exc:
                yield Problem(p, store, f"cannot read {p}: {exc.strerror or exc}")
                continue
            if not stat.S_ISREG(st.st_mode):  # a FIFO or a device named *.gguf: never opened
                yield Problem(p, store, f"{p} is not a regular file: not read")
                continue
            yield StoreModel(p, store, p, st.st_size, path, (st.st_dev, st.st_ino))


def discover(stores: Iterable[str] | None = None, paths: Iterable[str] = ()) -> list[StoreModel | Problem]:
    """Every model of the stores named (None: all of them), then of each folder in ``paths``, in that order."""
    from gguftpl.errors import UsageError

    wanted = list(stores) if stores else ["ollama", "lmstudio", "hf-cache", "llama.cpp"]
    unknown = [s for s in wanted if s not in STORES]
    if unknown:
        raise UsageError(f"unknown store {unknown[0]!r} (choose from {', '.join(STORES)})")
    found: list[StoreModel | Problem] = []
    sources = {"ollama": _ollama, "lmstudio": _lmstudio, "hf-cache": _hf_cache, "llama.cpp": _llamacpp}
    for name in wanted:
        if name in sources:
            found += sources[name]()
    for p in paths:
        if not os.path.isdir(p):
            raise UsageError(f"--path {p}: not a folder")
        found += _folder(p)
    return found
