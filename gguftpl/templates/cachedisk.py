"""The cache folder on disk: an optimisation, never an authority.

Whoever can write into the folder must not be able to change a verdict (a shared CI runner, a world-writable
``GGUFTPL_CACHE_DIR``, a planted FIFO). So the folder and each entry must belong to the user and be writable by
nobody else (as ssh and git check), else the cache is ignored with one warning; every entry carries an HMAC-SHA256
tag made with a per-user secret kept in the folder (mode 0600), and names the key it answers, which is checked
against the key asked for (the file name is that key's hash). An entry is opened with ``O_NOFOLLOW|O_NONBLOCK``
(a symlink or a FIFO never blocks or redirects the read), must be a regular file under a size cap, and its tag is
checked before its JSON is parsed, with a depth limit. A bad entry is a miss and is removed.

The folder is kept under ``GGUFTPL_CACHE_MAX`` bytes (default 256M) by removing the least recently used entries
(a hit refreshes an entry's mtime).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguftpl.errors import UsageError

ENTRY_MAX = 4 << 20
"""An entry larger than this is not read (facts keep prompts trimmed; real ones are a few KB)."""
DEPTH_MAX = 64
"""JSON nesting an entry may have (facts nest about 5 deep): deeper is a damaged entry, never a RecursionError."""
DEFAULT_MAX = 256 << 20
"""The folder's size cap when ``GGUFTPL_CACHE_MAX`` is not set."""
SECRET = "secret"
MAGIC = b"gguftpl-cache-1 "
_TAG_HEX = 64
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def size_cap(raw: str | None = None) -> int:
    """``GGUFTPL_CACHE_MAX`` in bytes (``500M``, ``2G``, ``1048576``; ``0`` keeps nothing on disk)."""
    raw = os.environ.get("GGUFTPL_CACHE_MAX") if raw is None else raw
    if raw is None or not raw.strip():
        return DEFAULT_MAX
    m = re.fullmatch(r"\s*(\d{1,15})\s*([kmgt]?)i?b?\s*", raw, re.IGNORECASE)
    if m is None:
        raise UsageError(f"GGUFTPL_CACHE_MAX={raw!r} is not a size (bytes, or a number with K, M or G)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def untrusted(st: os.stat_result, what: str) -> str | None:
    """Why a folder or file with this status may not be trusted (None when it may)."""
    if st.st_uid != os.geteuid():
        return f"{what} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"{what} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _depth_ok(text: str, limit: int = DEPTH_MAX) -> bool:
    depth = 0
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', "", text):
        if ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


@dataclass(frozen=True)
class CacheInfo:
    """What ``gguftpl cache info`` shows."""

    folder: str
    entries: int
    size: int
    cap: int
    trusted: str
    """``yes``, or why the cache is ignored."""


class CacheFolder:
    """One user's cache folder, checked once when opened; ``warning`` says why it is not used (then every read
    is a miss and nothing is written)."""

    def __init__(self, root: Path, *, cap: int | None = None, create: bool = True) -> None:
        self.root = root
        self.cap = size_cap() if cap is None else cap
        self.warning: str | None = None
        self._secret = b""
        self._total: int | None = None
        self._create = create
        if not create and not os.path.lexists(root):  # `gguftpl cache info` on a fresh machine makes nothing
            return
        try:
            self._open()
        except OSError as exc:
            self.warning = f"cache folder {root} is not usable ({exc.strerror or exc}); not using it"

    @property
    def usable(self) -> bool:
        """Trusted and holding its secret (one opened with ``create=False`` before any audit has none)."""
        return self.warning is None and len(self._secret) == 32

    def _open(self) -> None:
        if self._create:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = os.lstat(self.root)
        why = None if stat.S_ISDIR(st.st_mode) else f"cache folder {self.root} is a symlink"
        why = why or untrusted(st, f"cache folder {self.root}")
        # the folder holding it too: whoever can write there can swap the whole folder for theirs
        why = why or untrusted(os.stat(self.root.parent), f"cache folder {self.root.parent}")
        if why is None:
            self._secret, why = self._load_secret()
        if why is not None:
            self.warning = f"{why}; not using it (gguftpl cache clear, or set GGUFTPL_CACHE_DIR to a private folder)"

    def _load_secret(self) -> tuple[bytes, str | None]:
        path = self.root / SECRET
        if not os.path.lexists(path) and not self._create:
            return b"", None
        if not os.path.lexists(path):  # written whole, then linked: a concurrent audit never reads half of it
            tmp = self.root / f".{SECRET}.{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(os.urandom(32))
                with contextlib.suppress(FileExistsError):
                    os.link(tmp, path)
            finally:
                self._remove(tmp)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            return b"", f"cache secret {path} cannot be read ({exc.strerror})"
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            why = untrusted(st, f"cache secret {path}")
            if why is None and (not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or st.st_size != 32):
                why = f"cache secret {path} is not a private 32-byte file"
            return (fh.read(33), None) if why is None else (b"", why)

    # -------------------------------------------------------------------------------------------- entries

    def path(self, kind: str, key: str) -> Path:
        h = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        return self.root / kind / h[:2] / f"{h}.json"

    def _tag(self, name: str, body: bytes) -> bytes:
        return hmac.new(self._secret, name.encode() + b"\0" + body, hashlib.sha256).hexdigest().encode()

    def seal(self, name: str, body: bytes) -> bytes:
        """The first line of the entry file ``name`` holding ``body``: the format and the body's tag."""
        return MAGIC + self._tag(name, body)

    def remove(self, kind: str, key: str) -> None:
        """Remove the entry for ``key`` (one that read back as something else than what it claims)."""
        self._remove(self.path(kind, key))

    def read(self, kind: str, key: str) -> Any:
        """The data stored under ``key``, or None (a miss: absent, not ours, not a regular file, too large, its
        tag or key wrong, too deeply nested). A bad entry is removed."""
        if not self.usable:
            return None
        path = self.path(kind, key)
        try:
            raw = self._read_raw(path)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            self._remove(path)
            return None
        data = self._verify(path.name, key, raw)
        if data is None:
            self._remove(path)
        return data

    def _read_raw(self, path: Path) -> bytes:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or untrusted(st, "entry") or st.st_size > ENTRY_MAX:
                raise ValueError("not a private regular file under the cap")
            chunks, left = [], ENTRY_MAX + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            if left <= 0:
                raise ValueError("grew past the cap")
            with contextlib.suppress(OSError):
                os.utime(fd)  # least recently used is what the size cap removes first
            return b"".join(chunks)
        finally:
            os.close(fd)

    def _verify(self, name: str, key: str, raw: bytes) -> Any:
        head, sep, body = raw.partition(b"\n")
        if not sep or len(head) != len(MAGIC) + _TAG_HEX or not head.startswith(MAGIC):
            return None
        if not hmac.compare_digest(head[len(MAGIC) :], self._tag(name, body)):
            return None
        try:
            text = body.decode("utf-8")
            if not _depth_ok(text):
                return None
            doc = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if not isinstance(doc, dict) or doc.get("key") != key or "data" not in doc:
            return None
        return doc["data"]

    def write(self, kind: str, key: str, data: Any) -> bool:
        """Store ``data`` under ``key`` atomically (temp file, rename), private to the user; False when it could
        not be written (a full disk, a read-only folder: the audit goes on without the cache)."""
        if not self.usable or self.cap <= 0:
            return False
        path = self.path(kind, key)
        try:
            body = json.dumps({"key": key, "data": data}, ensure_ascii=False, separators=(",", ":")).encode()
        except (TypeError, ValueError):
            return False
        blob = self.seal(path.name, body) + b"\n" + body
        if len(blob) > ENTRY_MAX:
            return False
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
            os.replace(tmp, path)
        except OSError:
            self._remove(tmp)
            return False
        self._grew(len(blob))
        return True

    def _remove(self, path: Path) -> None:
        """Unlink ``path`` if it is a regular file of ours (another user's file, a FIFO, a symlink stay: they
        are never read, and a write renames over them)."""
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                os.unlink(path)

    # ------------------------------------------------------------------------------------ size and listing

    def entries(self) -> list[tuple[float, int, Path]]:
        """(mtime, size, path) of every entry (a listing error skips that part)."""
        out = []
        for kind in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.is_symlink()):
            for sub in sorted(p for p in kind.iterdir() if p.is_dir() and not p.is_symlink()):
                with contextlib.suppress(OSError):
                    for entry in os.scandir(sub):
                        if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
                            st = entry.stat(follow_symlinks=False)
                            out.append((st.st_mtime, st.st_size, Path(entry.path)))
        return out

    def _grew(self, n: int) -> None:
        if self._total is None:
            try:
                self._total = sum(size for _, size, _ in self.entries())
            except OSError:
                self._total = n
                return
        else:
            self._total += n
        if self._total > self.cap:
            self.evict(self.cap * 8 // 10)

    def evict(self, target: int) -> int:
        """Remove the least recently used entries until the folder holds at most ``target`` bytes."""
        found = sorted(self.entries())
        total = sum(size for _, size, _ in found)
        removed = 0
        for _, size, path in found:
            if total <= target:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)
                total -= size
                removed += 1
        self._total = total
        return removed

    def info(self) -> CacheInfo:
        found = self.entries() if self.root.is_dir() and not self.root.is_symlink() else []
        return CacheInfo(str(self.root), len(found), sum(s for _, s, _ in found), self.cap, self.warning or "yes")

    def clear(self) -> int:
        """Remove every entry of ours and the secret (the next audit makes a new one, so whatever was tagged
        with the old one is void); the number of entries removed. The walk holds each folder open and never
        follows a symlink, so a folder swapped for a link by someone else while it runs removes nothing outside
        the cache."""
        try:
            top = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return 0
        try:
            removed = _clear_under(top, depth=2)
            _unlink_ours(SECRET, top)
        finally:
            os.close(top)
        self._total = 0
        return removed


def _unlink_ours(name: str, folder: int) -> bool:
    """Unlink ``name`` in the open folder ``folder`` when it is a regular file of ours (a FIFO, a link or another
    user's file is left: it is never read)."""
    try:
        st = os.lstat(name, dir_fd=folder)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return False
        os.unlink(name, dir_fd=folder)
    except FileNotFoundError:
        return False
    return True


def _clear_under(folder: int, depth: int) -> int:
    """Remove the entries (``*.json`` and leftover ``.*.tmp``) under the open folder, ``depth`` levels down
    (``kind/xx/``), then the folders left empty."""
    removed = 0
    for name in os.listdir(folder):
        if depth == 0:
            if name.endswith((".json", ".tmp")) and _unlink_ours(name, folder) and name.endswith(".json"):
                removed += 1
            continue
        try:
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        except OSError as exc:  # a file (the secret), a symlink, gone: not a folder of entries
            if exc.errno in (errno.ENOTDIR, errno.ELOOP, errno.ENOENT):
                continue
            raise
        try:
            removed += _clear_under(sub, depth - 1)
        finally:
            os.close(sub)
        with contextlib.suppress(OSError):
            os.rmdir(name, dir_fd=folder)
    return removed
