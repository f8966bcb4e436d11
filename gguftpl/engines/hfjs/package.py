"""The pinned ``@huggingface/jinja`` package: which version, whether it is installed, and installing it.

The pin is the ``package-lock.json`` shipped beside this module (version, registry tarball and its sha512
``integrity``); the library's code is never in this repository. :func:`install` copies ``package.json`` and the lock
into :func:`gguftpl.engines.home.engine_dir` ``("hfjs")`` and runs ``npm ci`` there, which fetches exactly the locked
tarball from the npm registry and refuses one whose hash differs. It builds in a staging folder beside the final
one and swaps it in whole, under a lock, so a reader never sees a half-installed engine.
"""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
from pathlib import Path

from gguftpl.engines.home import engine_dir, install_lock
from gguftpl.errors import EngineInstallError

PACKAGE = "@huggingface/jinja"
NAME = "hfjs"
HERE = Path(__file__).resolve().parent
MANIFESTS = ("package.json", "package-lock.json")
WORKER_SCRIPT = HERE / "worker.mjs"
INSTALL_TIMEOUT = 300.0
_MAX_PACKAGE_JSON = 1 << 20
"""Bytes of an installed package.json read to learn its version (the real one is 1.3 KB)."""


@functools.lru_cache(maxsize=1)
def pinned() -> tuple[str, str]:
    """(version, integrity) of ``@huggingface/jinja`` in the shipped lock: ``("0.5.11", "sha512-…")``."""
    lock = json.loads((HERE / "package-lock.json").read_text(encoding="utf-8"))
    entry = lock["packages"][f"node_modules/{PACKAGE}"]
    return str(entry["version"]), str(entry["integrity"])


def installed_version(directory: Path) -> str | None:
    """The version of ``@huggingface/jinja`` in ``directory/node_modules``, or None when it is not there."""
    manifest = directory / "node_modules" / PACKAGE / "package.json"
    try:
        with open(manifest, "rb") as fh:
            data = json.loads(fh.read(_MAX_PACKAGE_JSON).decode("utf-8"))
    except (OSError, ValueError):
        return None
    version = data.get("version") if isinstance(data, dict) else None
    return version if isinstance(version, str) else None


def missing_reason(directory: Path) -> str | None:
    """None when the pinned version is installed in ``directory``; else what is there instead."""
    want, _ = pinned()
    have = installed_version(directory)
    if have == want:
        return None
    if have is None:
        return f"{PACKAGE} {want} is not installed in {directory}"
    return f"{PACKAGE} {have} is installed in {directory}, not the pinned {want}"


def install(*, timeout: float = INSTALL_TIMEOUT) -> str:
    """Install the pinned ``@huggingface/jinja`` into ``engine_dir("hfjs")`` with ``npm ci`` (run through
    :func:`gguftpl.worker.run`); a no-op when it is there already. Returns a one-line summary; raises
    :class:`~gguftpl.errors.EngineInstallError` when Node.js or npm is missing or npm fails."""
    from gguftpl.engines.hfjs.node import find_node

    want, integrity = pinned()
    final = engine_dir(NAME)
    if missing_reason(final) is None:
        return f"{PACKAGE} {want} is already installed in {final}"
    node = find_node()
    if isinstance(node, str):
        raise EngineInstallError(f"cannot install {PACKAGE}: {node}")
    npm = node.npm()
    if npm is None:
        raise EngineInstallError(f"cannot install {PACKAGE}: no npm beside Node.js {node.version} ({node.path})")
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EngineInstallError(f"cannot create {final.parent}: {exc.strerror or exc}") from None
    with install_lock(final.parent / f".{NAME}.lock"):
        if missing_reason(final) is None:  # another process installed it while this one waited
            return f"{PACKAGE} {want} is already installed in {final}"
        staging = Path(tempfile.mkdtemp(prefix=f".{NAME}-new-", dir=final.parent))
        try:
            staging.chmod(0o755)  # mkdtemp makes it private; the engine is read by whoever runs this environment
            _npm_ci(npm, staging, timeout)
            _swap_in(staging, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return f"installed {PACKAGE} {want} ({integrity[:19]}…) in {final} with npm ci on Node {node.version}"


def _npm_ci(npm: list[str], staging: Path, timeout: float) -> None:
    from gguftpl import worker

    for name in MANIFESTS:
        shutil.copyfile(HERE / name, staging / name)
    ran = worker.run(
        [*npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--no-update-notifier"],
        timeout=timeout,
        cwd=str(staging),
        env={"NODE_OPTIONS": "", "npm_config_update_notifier": "false"},
    )
    if not ran.ok:
        how = f"stopped after {timeout:g} s" if ran.returncode is None else f"exit status {ran.returncode}"
        tail = " ".join(ran.output.strip().splitlines()[-6:])[-800:]
        raise EngineInstallError(f"npm ci of {PACKAGE} failed ({how}): {tail}")
    reason = missing_reason(staging)
    if reason is not None:
        raise EngineInstallError(f"npm ci finished but {reason}")


def _swap_in(staging: Path, final: Path) -> None:
    """Replace ``final`` by ``staging`` (two renames in one folder); the old copy is removed after."""
    old: Path | None = None
    if final.exists() or final.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{NAME}-old-", dir=final.parent)) / NAME
        final.rename(old)
    try:
        staging.rename(final)
    except OSError as exc:
        if old is not None:
            old.rename(final)
        raise EngineInstallError(f"cannot move the new install into {final}: {exc.strerror or exc}") from None
    if old is not None:
        shutil.rmtree(old.parent, ignore_errors=True)
