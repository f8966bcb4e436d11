"""LM Studio's models folder: ``<home>/models/<publisher>/<repo>/<file>.gguf``.

- LM Studio's home (``lmstudio-ai/lmstudio-js`` @6ec11db19bf43ea8dab9e4c2014f46f054822b1f,
  ``packages/lms-common-server/src/findLMStudioHome.ts``): the path written in ``$HOME/.lmstudio-home-pointer``
  (trimmed), else ``$HOME/.cache/lm-studio`` when it exists (the older location), else ``$HOME/.lmstudio``.
- Its models are ``models/<publisher>/<model>/<file>.gguf`` below it (``lmstudio-ai/docs`` @c6854fba,
  ``0_app/5_advanced/import-model.md``: "LM Studio's expected models directory structure").

A scan looks at every one of those homes that exists (a machine upgraded from the older location may have both).
A model file or folder may be a symlink (a user's own models kept elsewhere, linked in): it is followed, a loop is
an error; the reference itself can name nothing outside the folder (no ``..``). ``mmproj-*.gguf`` files are vision
projectors, not models, and are left out.
"""

from __future__ import annotations

import os

from gguftpl.errors import StoreError
from gguftpl.safeio import open_regular, printable
from gguftpl.stores.model import StoreModel
from gguftpl.stores.safety import follow

__all__ = ["homes", "list_files", "load", "models_dirs"]

_POINTER = ".lmstudio-home-pointer"


def homes() -> list[str]:
    """LM Studio homes, the one ``findLMStudioHome`` picks first, then the others that exist."""
    user = os.path.expanduser("~")
    out: list[str] = []
    pointer = os.path.join(user, _POINTER)
    try:  # never a plain open: a FIFO there would block the scan for good
        with open_regular(pointer, what="LM Studio home pointer", error=StoreError) as fh:
            pointed = fh.read(4096).decode("utf-8").strip()
        if pointed:
            out.append(pointed)
    except (StoreError, OSError, UnicodeDecodeError):
        pass  # no pointer, or one LM Studio could not read either: its default homes
    for candidate in (os.path.join(user, ".cache", "lm-studio"), os.path.join(user, ".lmstudio")):
        if candidate not in out:
            out.append(candidate)
    return out


def models_dirs() -> list[str]:
    """``<home>/models`` of every LM Studio home that has one."""
    return [d for d in (os.path.join(h, "models") for h in homes()) if os.path.isdir(d)]


def _is_model(name: str) -> bool:
    low = name.lower()
    return low.endswith(".gguf") and not low.startswith("mmproj")


def list_files(root: str) -> list[tuple[str, str]]:
    """(``publisher/repo/file``, path) for every model GGUF of one models folder, sorted."""
    out = []
    for publisher in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        pdir = os.path.join(root, publisher)
        if not os.path.isdir(pdir):
            continue
        for repo in sorted(os.listdir(pdir)):
            rdir = os.path.join(pdir, repo)
            if not os.path.isdir(rdir):
                continue
            for dirpath, dirs, files in os.walk(rdir):
                dirs.sort()
                for f in sorted(files):
                    if _is_model(f):
                        path = os.path.join(dirpath, f)
                        out.append((os.path.relpath(path, root).replace(os.sep, "/"), path))
    return out


def load(name: str, root: str | None = None) -> StoreModel:
    """``lmstudio://PUBLISHER/REPO[/FILE]``: FILE may be left out when the repo folder holds one model GGUF."""
    parts = name.split("/")
    if len(parts) < 2:
        raise StoreError(f"lmstudio://{printable(name)}: an LM Studio reference is PUBLISHER/REPO[/FILE]")
    roots = [root] if root else models_dirs()
    if not roots:
        raise StoreError(f"lmstudio://{printable(name)}: no LM Studio models folder ({', '.join(homes())})")
    for top in roots:
        rdir = os.path.join(top, parts[0], parts[1])
        if not os.path.isdir(rdir):
            continue
        if len(parts) > 2:
            path = os.path.join(rdir, *parts[2:])
        else:
            from gguftpl.gguf.shards import models_of

            # a split GGUF is one model: its first shard
            files = models_of([p for rel, p in list_files(top) if rel.startswith(f"{parts[0]}/{parts[1]}/")])
            if len(files) != 1:
                listed = ", ".join(os.path.relpath(f, rdir) for f in files) or "none"
                raise StoreError(
                    f"lmstudio://{printable(name)}: name the file, the folder holds {len(files)} model GGUFs ({listed})"
                )
            path = files[0]
        if not os.path.lexists(path):
            raise StoreError(f"lmstudio://{printable(name)}: no such file in {printable(rdir)}")
        real = follow(path, "LM Studio model file")
        if not os.path.isfile(real):
            raise StoreError(f"lmstudio://{printable(name)}: {printable(path)} is not a file")
        st = os.stat(real)
        ref = "lmstudio://" + os.path.relpath(path, top).replace(os.sep, "/")
        return StoreModel(ref, "lmstudio", real, st.st_size, top, (st.st_dev, st.st_ino))
    raise StoreError(f"lmstudio://{printable(name)}: no such model in {', '.join(printable(r) for r in roots)}")
