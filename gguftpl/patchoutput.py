"""Where a patch writes: the output path after refusing every unsafe combination (before any work is done), and
the permissions the output gets."""

from __future__ import annotations

import os

from gguftpl.errors import PatchError
from gguftpl.gguf.writer import Permissions

__all__ = ["output_permissions", "resolve_output"]


def resolve_output(src: str, out: str | os.PathLike[str] | None, *, in_place: bool = False, force: bool = False) -> str:
    """The output path, after refusing every unsafe combination (checked before any work is done)."""
    from gguftpl.safeio import check_output_folder, check_regular, kind_of

    check_regular(src, what="GGUF file", error=PatchError)  # a FIFO or /dev/zero is named as what it is
    if in_place:
        if out is not None and not _same_file(src, os.fspath(out)):
            raise PatchError("--in-place writes over the input; do not also give -o")
        # through a symlink (a Hugging Face cache snapshot -> blob) the model is the file it points at
        out_s = os.path.realpath(src)
    else:
        if out is None:
            raise PatchError("give -o OUT, or --in-place to replace the input")
        out_s = os.fspath(out)
        if not out_s:
            raise PatchError("-o: the output path is empty")
        if _same_file(src, out_s):
            raise PatchError("output is the input file; use --in-place to replace it (still atomic)")
        if os.path.lexists(out_s):
            if not force:
                raise PatchError(f"{out_s} exists; use --force to overwrite it")
            out_s = os.path.realpath(out_s)
    check_output_folder(out_s, error=PatchError)  # a typo in -o is refused before the plan, not after it
    kind = kind_of(out_s)
    if kind is not None:
        # renaming over a device node, FIFO or folder would destroy it, not write into it
        raise PatchError(f"{out_s} exists and is {kind}, not a regular file; refusing to replace it")
    return out_s


def output_permissions(src: str, *, in_place: bool) -> Permissions:
    """The output's permissions: ``--in-place`` keeps the input's mode, owner and group (the file is the same
    model, replaced); a new output (``-o``, with ``--force`` too) gets the input's read/write/execute bits less
    the umask, so a private model never becomes readable by more people than it was."""
    st = os.stat(src)
    return Permissions.kept(st) if in_place else Permissions.like(st)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)
