"""Template facts kept on disk between runs, so auditing a template seen before costs a header read.

Every quant of a model, every CI run and every pre-commit hook audits the same few templates again. Their
facts depend only on the template's bytes, the special-token texts, whether llama.cpp was asked, and the code that
gathered them: gguftpl itself, jinja2 (the renderer) and xllamacpp (llama.cpp). The key covers all of
that, so a new version of any of them starts afresh. The folder is ``$XDG_CACHE_HOME/gguftpl/facts``
(``~/.cache/gguftpl/facts``), or ``$GGUFTPL_CACHE_DIR/facts``.

The cache is an optimisation, never an authority (issue 27): the folder is checked and every entry verified
on read (``templates.cachedisk``: owner, mode, special files, size, an HMAC tag, nesting depth), then decoded
strictly and checked against the key it was looked up for. An unreadable, forged, corrupt or unwritable entry
is a miss, never an error and never another verdict. Without a home directory (no ``HOME``, a uid without a
passwd entry) and without ``GGUFTPL_CACHE_DIR`` the cache is off for the run, with one notice.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from contextvars import ContextVar
from pathlib import Path

from gguftpl.errors import UsageError
from gguftpl.templates.cachedisk import CacheFolder, CacheInfo
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


NO_HOME = (
    "no home directory (HOME is not set and uid {uid} has no passwd entry): the facts cache is off for this run "
    "(set GGUFTPL_CACHE_DIR to a private folder to keep it)"
)


def cache_folder() -> Path | None:
    """The facts folder; None when there is no home to put it in (and no ``GGUFTPL_CACHE_DIR``)."""
    own = os.environ.get("GGUFTPL_CACHE_DIR")
    if own:
        if not os.path.isabs(own):
            # relative to where? a hook run from another folder would use another cache, and a cache inside a
            # cloned repository comes with its author's secret and entries: refused, as XDG refuses relative paths
            raise UsageError(f'GGUFTPL_CACHE_DIR={own!r} is a relative path; set an absolute one (e.g. "$PWD/{own}")')
        return Path(own) / "facts"
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "gguftpl" / "facts"
    try:
        return Path.home() / ".cache" / "gguftpl" / "facts"
    except (RuntimeError, KeyError):
        return None


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """One line on stderr per message and process (a folder audit, a patch's three audits: one warning)."""
    if message not in _WARNED:
        from gguftpl.safeio import printable

        _WARNED.add(message)
        # the folder's name is shown: a newline or an escape in it must not forge lines or drive the terminal
        print(f"gguftpl: warning: {printable(message)}", file=sys.stderr, flush=True)


SOURCE_SUFFIXES = (".py", ".json", ".gotmpl", ".go", ".mod", ".mjs", ".js", ".jinja")
"""The files of gguftpl that make its behaviour (compiled caches, installed engines and the like excluded)."""


def source_digest(root: Path, suffixes: tuple[str, ...] | None = SOURCE_SUFFIXES) -> str:
    """sha256 over the relative name and content of every source file under ``root`` (every file with
    ``suffixes=None``): the same sources give
    the same digest after a rebuilt venv, a fresh checkout or a ``touch`` (no mtimes)."""
    h = hashlib.sha256()
    stack = [root]
    found: list[tuple[str, str]] = []
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in ("__pycache__", "node_modules") and not entry.name.startswith("."):
                        stack.append(Path(entry.path))
                elif (suffixes is None or entry.name.endswith(suffixes)) and entry.is_file():
                    found.append((os.path.relpath(entry.path, root), entry.path))
    for rel, path in sorted(found):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # os-level reads: a third of open()'s cost per file
        try:
            data = os.read(fd, os.fstat(fd).st_size + 1)
        finally:
            os.close(fd)
        h.update(f"{rel}\0{len(data)}\0".encode("utf-8", "surrogateescape"))
        h.update(data)
    return h.hexdigest()


def _package_identity(name: str) -> str:
    """``name``'s installed version and a digest of its content, found without importing it (an import costs
    what this cache is there to save). gguftpl: its version and the digest of its sources. A dependency: the
    version and the ``RECORD`` of its dist-info (the sha256 of every installed file, written by the installer),
    else the digest of its package folder's sources."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return f"{name}=absent"
    if spec is None or not spec.origin:
        return f"{name}=absent"
    folder = Path(spec.origin).parent
    try:
        if name == "gguftpl":  # the digest covers __init__.py, where the version is written (no upward import)
            return f"gguftpl=src:{source_digest(folder)}"
        infos = sorted(folder.parent.glob(f"{name}-*.dist-info"))
        record = infos[-1] / "RECORD" if infos else None
        if record is not None and record.is_file():
            digest = hashlib.sha256(record.read_bytes()).hexdigest()
            return f"{name}={infos[-1].name}:{digest}"
        return f"{name}=unpackaged:{source_digest(folder, ('.py', '.so', '.pyd'))}"
    except OSError:
        return f"{name}=unreadable"


_CODE: str | None = None


def code_identity() -> str:
    """sha256 over gguftpl's own sources and version, and the identities of jinja2 and xllamacpp: content, never
    mtimes, so a CI job that rebuilds its venv and keeps its cache still hits."""
    global _CODE
    if _CODE is None:
        ids = [_package_identity(n) for n in ("gguftpl", "jinja2", "xllamacpp")]
        _CODE = hashlib.sha256("\n\n".join(ids).encode("utf-8", "surrogatepass")).hexdigest()
    return _CODE


FILE_FIELDS = ("repo", "how", "invalid_utf8")


class FactsStore(MutableMapping[FactsKey, TemplateFacts]):
    """Facts in memory, backed by the folder (``folder=None``: memory only). ``read_disk=False`` writes what it
    learns but never reads an entry back: for decisions that must not come from the cache (the patch gate)."""

    def __init__(self, folder: Path | None = None, *, read_disk: bool = True, warning: str | None = None) -> None:
        self.folder = folder
        self.read_disk = read_disk
        self._memory: dict[FactsKey, TemplateFacts] = {}
        self._disk: CacheFolder | None = None
        self._warning = warning
        self.disk_hits = 0
        self.disk_writes = 0
        self.gathered = 0
        """Template facts gathered (rendered) by this process, not read back."""

    @property
    def disk(self) -> CacheFolder | None:
        """The folder, opened and checked on first use; None when memory only or the folder is not trusted."""
        if self.folder is None:
            return None
        if self._disk is None:
            self._disk = CacheFolder(self.folder)
        return self._disk if self._disk.usable else None

    @property
    def disk_use(self) -> str:
        """What :data:`DISK_USE` is for an audit with this store: ``off`` (memory only), ``write`` or ``on``."""
        return "off" if self.folder is None else "on" if self.read_disk else "write"

    @property
    def warning(self) -> str | None:
        """Why the folder is not used (not ours, writable by others, no home), or None."""
        if self._warning is None and self.folder is not None and self.disk is None:
            return self._disk.warning if self._disk is not None else None
        return self._warning

    @staticmethod
    def _name(key: FactsKey) -> str:
        return repr((code_identity(), *key))

    def path_of(self, key: FactsKey) -> Path | None:
        disk = self.disk
        return disk.path("templates", self._name(key)) if disk is not None else None

    def __getitem__(self, key: FactsKey) -> TemplateFacts:
        found = self._memory.get(key)
        if found is not None:
            return found
        facts = self._read(key)
        if facts is None:
            raise KeyError(key)
        self._memory[key] = facts
        self.disk_hits += 1
        return facts

    def _read(self, key: FactsKey) -> TemplateFacts | None:
        """The entry for ``key`` decoded strictly, and only when it describes the template it is looked up for."""
        disk = self.disk
        if disk is None or not self.read_disk:
            return None
        data = disk.read("templates", self._name(key))
        if data is None:
            return None
        try:
            facts = TemplateFacts.from_dict(data)
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError):
            facts = None
        if facts is None or facts.sha256 != key[0]:
            disk.remove("templates", self._name(key))
            return None
        return facts

    def __setitem__(self, key: FactsKey, facts: TemplateFacts) -> None:
        self._memory[key] = facts
        self.gathered += 1
        disk = self.disk
        if disk is not None and disk.write("templates", self._name(key), facts.to_dict()):
            self.disk_writes += 1

    def read_file_facts(self, key: str) -> tuple[str | None, str, int | None] | None:
        """A file's upstream repo, how it was found and its first invalid UTF-8 byte, kept under ``key``."""
        disk = self.disk
        if disk is None or not self.read_disk:
            return None
        found = disk.read("files", key)
        if isinstance(found, dict) and set(found) == set(FILE_FIELDS):
            repo, how, invalid = (found[f] for f in FILE_FIELDS)
            if (repo is None or isinstance(repo, str)) and isinstance(how, str):
                if invalid is None or (isinstance(invalid, int) and not isinstance(invalid, bool) and invalid >= 0):
                    return repo, how, invalid
        if found is not None:
            disk.remove("files", key)
        return None

    def remove_file_facts(self, key: str) -> None:
        """Remove the file entry under ``key`` (one whose facts cannot be right for the file it is read for)."""
        disk = self.disk
        if disk is not None:
            disk.remove("files", key)

    def write_file_facts(self, key: str, facts: tuple[str | None, str, int | None]) -> None:
        disk = self.disk
        if disk is not None:
            disk.write("files", key, dict(zip(FILE_FIELDS, facts, strict=True)))

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


DISK_USE: ContextVar[str] = ContextVar("gguftpl_disk_use", default="on")
"""How facts kept outside a :class:`FactsStore` (Ollama's Go facts) may use the folder here: ``on`` (read and
write), ``write`` (never read back: ``--no-cache`` would still read them, and a patch's proof must be its own),
``off``. Set by the audit from its store (:func:`disk_use`)."""


@contextlib.contextmanager
def disk_use(mode: str) -> Iterator[None]:
    """:data:`DISK_USE` set to ``mode`` for the code run inside (a folder audit's files, a patch's proof)."""
    token = DISK_USE.set(mode)
    try:
        yield
    finally:
        DISK_USE.reset(token)


def open_store(*, read_disk: bool = True) -> FactsStore:
    """The user's facts store, as the CLI uses it; its warning (a folder not trusted, no home) is shown once."""
    folder = cache_folder()
    if folder is None:
        store = FactsStore(None, warning=NO_HOME.format(uid=os.geteuid()))
    else:
        store = FactsStore(folder, read_disk=read_disk)
    if store.warning:
        warn_once(store.warning)
    return store


def cache_info() -> CacheInfo | None:
    """What ``gguftpl cache info`` shows: the facts folder, its entries, their size, the cap and whether the
    folder is trusted; None without a home (and without ``GGUFTPL_CACHE_DIR``). Creates nothing."""
    folder = cache_folder()
    return None if folder is None else CacheFolder(folder, create=False).info()


def cache_clear() -> tuple[str, int] | None:
    """Empty the facts folder (``gguftpl cache clear``): (the folder, the entries removed), None without a home."""
    folder = cache_folder()
    if folder is None:
        return None
    return str(folder), CacheFolder(folder, create=False).clear()
