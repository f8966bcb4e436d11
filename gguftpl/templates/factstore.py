"""Template facts kept on disk between runs, so auditing a template seen before costs a header read.

Every quant of a model, every CI run and every pre-commit hook audits the same few templates again. Their
facts depend only on the template's bytes, the special-token texts, whether llama.cpp was asked, and the code that
gathered them: gguftpl itself, jinja2 (the renderer) and xllamacpp (llama.cpp). The key covers all of
that, so a new version of any of them starts afresh. The folder is ``$XDG_CACHE_HOME/gguftpl/facts``
(``~/.cache/gguftpl/facts``), or ``$GGUFTPL_CACHE_DIR/facts``.

The cache is a convenience: an unreadable, corrupt or unwritable entry is a miss, never an error, and
entries are written atomically (temp file and rename), readable by their owner only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from gguftpl.templates.facts import TemplateFacts

FactsKey = tuple[str, str, str, bool, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]
"""(sha256 of the text, bos, eos, llama.cpp asked, the other special tokens passed to transformers' renderer, the
other engines asked and their versions): what a template's facts depend on besides the code."""


def facts_key(
    sha256: str,
    bos: str,
    eos: str,
    asked: bool,
    specials: Mapping[str, str] | None = None,
    engines: tuple[tuple[str, str], ...] = (),
) -> FactsKey:
    """One gathering: the text, the tokens it was rendered with, llama.cpp asked or not, and the other engines
    asked with their versions (facts without hfjs are stale once hfjs is installed)."""
    return (sha256, bos, eos, asked, tuple(sorted((specials or {}).items())), engines)


MAX_ENTRY_BYTES = 8 << 20
"""An entry larger than this is not read back (facts keep prompts trimmed; real ones are a few KB)."""


def cache_folder() -> Path:
    own = os.environ.get("GGUFTPL_CACHE_DIR")
    if own:
        return Path(own) / "facts"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "gguftpl" / "facts"


def _package_identity(name: str) -> str:
    """``name``'s installed version and its files' size and mtime, found without importing it (an import
    costs what this cache is there to save)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return f"{name}=absent"
    if spec is None or not spec.origin:
        return f"{name}=absent"
    folder = Path(spec.origin).parent
    parts = [name]
    try:
        parts += sorted(p.name for p in folder.parent.glob(f"{name}-*.dist-info"))
        for path in sorted(folder.rglob("*")) if name == "gguftpl" else [Path(spec.origin)]:
            if path.suffix in (".py", ".so", ".json") or path == Path(spec.origin):
                st = path.stat()
                parts.append(f"{path.relative_to(folder.parent)}:{st.st_size}:{st.st_mtime_ns}")
    except OSError:
        return f"{name}=unreadable"
    return "\n".join(parts)


_CODE: str | None = None


def code_identity() -> str:
    """sha256 over gguftpl's own files and the identities of jinja2 and xllamacpp."""
    global _CODE
    if _CODE is None:
        ids = [_package_identity(n) for n in ("gguftpl", "jinja2", "xllamacpp")]
        _CODE = hashlib.sha256("\n\n".join(ids).encode("utf-8", "surrogatepass")).hexdigest()
    return _CODE


def write_entry(path: Path, data: dict[str, Any]) -> bool:
    """Write one cache entry atomically (a temp file renamed over it), private to the user; False when it
    could not be written (a full disk or a read-only home: the audit goes on without the cache)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, separators=(",", ":"))
        os.replace(tmp, path)
        return True
    except (OSError, TypeError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


class FactsStore(MutableMapping[FactsKey, TemplateFacts]):
    """Facts in memory, backed by the folder (``folder=None``: memory only)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self._memory: dict[FactsKey, TemplateFacts] = {}
        self.disk_hits = 0
        self.disk_writes = 0

    def _path(self, key: FactsKey) -> Path:
        assert self.folder is not None
        h = hashlib.sha256(repr((code_identity(), *key)).encode("utf-8", "surrogatepass")).hexdigest()
        return self.folder / h[:2] / f"{h}.json"

    def __getitem__(self, key: FactsKey) -> TemplateFacts:
        found = self._memory.get(key)
        if found is not None:
            return found
        if self.folder is None:
            raise KeyError(key)
        path = self._path(key)
        try:
            if path.stat().st_size > MAX_ENTRY_BYTES:
                raise KeyError(key)
            facts = TemplateFacts.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise KeyError(key) from exc
        self._memory[key] = facts
        self.disk_hits += 1
        return facts

    def __setitem__(self, key: FactsKey, facts: TemplateFacts) -> None:
        self._memory[key] = facts
        if self.folder is not None:
            self._write(self._path(key), facts)

    def _write(self, path: Path, facts: TemplateFacts) -> None:
        if write_entry(path, facts.to_dict()):
            self.disk_writes += 1

    def __delitem__(self, key: FactsKey) -> None:
        self._memory.pop(key, None)

    def __iter__(self) -> Iterator[FactsKey]:
        return iter(self._memory)

    def __len__(self) -> int:
        return len(self._memory)

    def get(self, key: FactsKey, default: TemplateFacts | None = None) -> TemplateFacts | None:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default
