"""The ``ollama`` engine's Go program: finding Go, building it, and knowing whether the built one is current.

The source is ``ollama_go/`` beside this module (``go.mod`` at ``go 1.19``, standard library only). :func:`install`
builds it with the Go toolchain found here (``go`` on PATH, else ``$GOROOT/bin/go``), offline
(``GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local``, its build cache inside the engine's folder), into
``engine_dir("ollama")/gguftpl-ollama``, and writes a stamp beside it with the sha256 of the source it was built
from. The engine is installed only while that stamp matches the shipped source, so an upgraded gguftpl never runs
an older program.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gguftpl.engines.home import engine_dir, install_lock
from gguftpl.errors import EngineInstallError

NAME = "ollama"
SOURCE_DIR = Path(__file__).resolve().parent / "ollama_go"
SOURCES = ("go.mod", "main.go", "template.go", "api.go")
BINARY = "gguftpl-ollama"
STAMP = "gguftpl-ollama.stamp.json"
OLLAMA_COMMIT = "fb30760996871fa9460115c753afd2c60d4ab0f7"
"""The ollama/ollama commit the Go program reproduces (``OllamaCommit`` in ``main.go``)."""
BUILD_TIMEOUT = 600.0
_MAX_STAMP = 1 << 16


@dataclass(frozen=True)
class Built:
    """The program that is installed and current."""

    binary: Path
    go_version: str
    """``go1.19.8``: the toolchain that built it (its text/template is the engine)."""


def find_go() -> str | None:
    """``go`` on PATH, else ``$GOROOT/bin/go``; None when neither is there."""
    found = shutil.which("go")
    if found:
        return found
    goroot = os.environ.get("GOROOT")
    if goroot:
        candidate = Path(goroot) / "bin" / "go"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """sha256 over the shipped Go source files, each name and content in order."""
    h = hashlib.sha256()
    for name in SOURCES:
        h.update(name.encode() + b"\0")
        h.update((SOURCE_DIR / name).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def built(directory: Path | None = None) -> Built | str:
    """The current program in ``directory`` (default ``engine_dir("ollama")``), or why there is none."""
    directory = directory or engine_dir(NAME)
    binary = directory / BINARY
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        if find_go() is None:
            return "no Go toolchain to build it: neither go on PATH nor $GOROOT/bin/go"
        return f"not built: no {BINARY} in {directory}"
    try:
        with open(directory / STAMP, "rb") as fh:
            stamp = json.loads(fh.read(_MAX_STAMP).decode("utf-8"))
    except (OSError, ValueError):
        return f"{binary} has no readable build stamp: rebuild it"
    if not isinstance(stamp, dict) or stamp.get("source_sha256") != source_hash():
        return f"{binary} was built from other source than this gguftpl's: rebuild it"
    return Built(binary, str(stamp.get("go_version") or "go?"))


def install(*, timeout: float = BUILD_TIMEOUT) -> str:
    """Build the Go program into ``engine_dir("ollama")`` (a no-op when the current one is there). Returns a
    one-line summary; raises :class:`~gguftpl.errors.EngineInstallError` when Go is missing or the build fails."""
    final = engine_dir(NAME)
    have = built(final)
    if isinstance(have, Built):
        return f"the ollama engine ({have.go_version}) is already built in {final}"
    go = find_go()
    if go is None:
        raise EngineInstallError("cannot build the ollama engine: no go on PATH nor $GOROOT/bin/go (install Go 1.19+)")
    try:
        final.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EngineInstallError(f"cannot create {final}: {exc.strerror or exc}") from None
    with install_lock(final / ".build.lock"):
        have = built(final)
        if isinstance(have, Built):
            return f"the ollama engine ({have.go_version}) is already built in {final}"
        version = _go_version(go, final, timeout)
        seconds = _build(go, final, timeout)
        _write_stamp(final, version)
    return f"built the ollama engine with {version} in {seconds:.1f} s into {final / BINARY}"


def _env(final: Path) -> dict[str, str]:
    return {
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",
        "GOTOOLCHAIN": "local",
        "GOCACHE": str(final / "gocache"),
        "GOPATH": str(final / "gopath"),
        "CGO_ENABLED": "0",
        "GOWORK": "off",
    }


def _go_version(go: str, final: Path, timeout: float) -> str:
    from gguftpl import worker

    ran = worker.run([go, "env", "GOVERSION"], timeout=min(timeout, 120.0), env=_env(final))
    out = ran.output.strip().splitlines()
    if not ran.ok or not out or not out[-1].startswith("go"):
        raise EngineInstallError(f"{go} does not run: {' '.join(out)[-400:] or ran.returncode}")
    return out[-1]


def _build(go: str, final: Path, timeout: float) -> float:
    import time

    from gguftpl import worker

    staging = Path(tempfile.mkdtemp(prefix=f".{BINARY}-", dir=final))
    tmp = str(staging / BINARY)
    started = time.monotonic()
    try:
        ran = worker.run(
            [go, "build", "-trimpath", "-o", tmp, "."], timeout=timeout, cwd=str(SOURCE_DIR), env=_env(final)
        )
        if not ran.ok:
            how = f"stopped after {timeout:g} s" if ran.returncode is None else f"exit status {ran.returncode}"
            tail = " ".join(ran.output.strip().splitlines()[-8:])[-800:]
            raise EngineInstallError(f"go build of the ollama engine failed ({how}): {tail}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, final / BINARY)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return time.monotonic() - started


def _write_stamp(final: Path, version: str) -> None:
    data = {"source_sha256": source_hash(), "go_version": version, "ollama_commit": OLLAMA_COMMIT}
    fd, tmp = tempfile.mkstemp(prefix=".stamp-", dir=final)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, final / STAMP)
