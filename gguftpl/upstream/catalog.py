"""The bundled catalog of known-good upstream chat templates.

Where it lives: the top-level ``upstream_templates/`` folder of the source tree is the copy people
review and edit (index.json + ``<org>/<repo>/<name>.jinja``, provenance per template). The package ships
an identical copy in ``gguftpl/data/upstream_templates/`` so an installed gguftpl finds it without the
source tree; ``python -m gguftpl.upstream.catalog --sync`` refreshes it and a test fails when the two
differ. At run time the package copy is used (``GGUFTPL_CATALOG`` overrides, for tests and experiments).

Every template is checked against the sha256 in index.json when it is read, so a damaged catalog is an
error, never a silently different template.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gguftpl.errors import HubError

STATUSES = ("EXACT", "CORROBORATED", "PROXY")


def package_catalog_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "upstream_templates"


def source_catalog_dir() -> Path:
    """The top-level folder of a source checkout (may not exist in an installed package)."""
    return Path(__file__).resolve().parent.parent.parent / "upstream_templates"


def catalog_dir() -> Path:
    env = os.environ.get("GGUFTPL_CATALOG")
    if env:
        return Path(env)
    pkg = package_catalog_dir()
    if (pkg / "index.json").is_file():
        return pkg
    src = source_catalog_dir()
    if (src / "index.json").is_file():
        return src
    raise HubError(f"the bundled template catalog is missing (looked in {pkg} and {src})")


@dataclass(frozen=True)
class CatalogTemplate:
    name: str
    file: str
    sha256: str
    length: int
    status: str
    source: str
    note: str = ""
    git_blob_sha1: str = ""
    """``git hash-object`` of the file: finds it in llama.cpp's (or any) git history."""


@dataclass
class CatalogEntry:
    repo_id: str
    revision: str | None
    """HF commit the templates were taken from, when known."""
    revision_note: str
    complete: bool
    """True when the entry lists every template the repo ships."""
    status: str
    """Weakest status of its templates."""
    model_license: str
    templates: dict[str, CatalogTemplate]
    notes: str = ""
    root: Path = field(default_factory=Path, repr=False)

    def text(self, name: str) -> str:
        t = self.templates[name]
        path = self.root / t.file
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise HubError(f"catalog file {t.file} cannot be read: {exc.strerror or exc}") from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != t.sha256:
            raise HubError(f"catalog file {t.file} is damaged: sha256 {digest[:12]}… != index {t.sha256[:12]}…")
        return data.decode("utf-8")

    def to_upstream(self) -> Any:
        from gguftpl.upstream.config import UpstreamConfig, UpstreamSpecial

        order = sorted(self.templates, key=lambda n: (n != "default", n))
        warnings = []
        for n in order:
            t = self.templates[n]
            if t.status == "PROXY":
                warnings.append(
                    f"catalog template {self.repo_id}:{n} is a PROXY: stand-in text, not byte-verified against "
                    "the repo (see the note in upstream_templates/index.json)"
                )
            elif t.status != "EXACT":
                warnings.append(f"catalog template {self.repo_id}:{n} is {t.status}, not a byte copy of the HF file")
        return UpstreamConfig(
            repo_id=self.repo_id,
            revision_requested=self.revision,
            commit_sha=self.revision,
            templates={n: self.text(n) for n in order},
            special=UpstreamSpecial(),
            sources={n: f"catalog:{self.templates[n].file}" for n in order},
            origin="catalog",
            location=str(self.root),
            warnings=warnings,
            files=[self.templates[n].file for n in order],
            complete=self.complete,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "revision": self.revision,
            "revision_note": self.revision_note,
            "complete": self.complete,
            "status": self.status,
            "model_license": self.model_license,
            "templates": {
                n: {"sha256": t.sha256, "length": t.length, "status": t.status, "source": t.source, "note": t.note}
                for n, t in self.templates.items()
            },
            "notes": self.notes,
        }


@dataclass
class Catalog:
    root: Path
    entries: list[CatalogEntry]

    def get(self, repo_id: str) -> CatalogEntry | None:
        low = repo_id.lower()
        for e in self.entries:
            if e.repo_id.lower() == low:
                return e
        return None

    def by_sha256(self, sha256: str) -> list[tuple[CatalogEntry, str]]:
        return [(e, n) for e in self.entries for n, t in e.templates.items() if t.sha256 == sha256]

    def by_name(self, name: str) -> list[CatalogEntry]:
        """Entries whose repo name matches a model name (case and punctuation ignored)."""
        key = _norm(name)
        if not key:
            return []
        return [e for e in self.entries if _norm(e.repo_id.split("/", 1)[1]) == key]


def _norm(s: str) -> str:
    return "".join(c for c in s.lower() if c.isalnum())


_CACHE: dict[Path, Catalog] = {}


def load_catalog(path: str | os.PathLike[str] | None = None) -> Catalog:
    root = Path(path) if path is not None else catalog_dir()
    root = root.resolve()
    if root in _CACHE:
        return _CACHE[root]
    try:
        index = json.loads((root / "index.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HubError(f"catalog index {root / 'index.json'} cannot be read: {exc}") from None
    entries: list[CatalogEntry] = []
    try:
        for e in index["entries"]:
            templates = {
                n: CatalogTemplate(
                    name=n,
                    file=t["file"],
                    sha256=t["sha256"],
                    length=int(t["length"]),
                    status=t["status"],
                    source=t.get("source", ""),
                    note=t.get("note", "") or "",
                    git_blob_sha1=t.get("git_blob_sha1", "") or "",
                )
                for n, t in e["templates"].items()
            }
            entries.append(
                CatalogEntry(
                    repo_id=e["repo_id"],
                    revision=e.get("revision"),
                    revision_note=e.get("revision_note") or "",
                    complete=bool(e.get("complete", True)),
                    status=e["status"],
                    model_license=e.get("model_license", ""),
                    templates=templates,
                    notes=e.get("notes", "") or "",
                    root=root,
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise HubError(f"catalog index {root / 'index.json'} is malformed: {exc!r}") from None
    cat = Catalog(root, entries)
    _CACHE[root] = cat
    return cat


def catalog_upstream(repo_id: str | None = None, *, tset: Any = None) -> Any:
    """``--from-catalog [ID]``: the catalog entry as an UpstreamConfig; without ID, discover it."""
    cat = load_catalog()
    if repo_id is None:
        if tset is None:
            raise HubError("--from-catalog needs a repo id when the GGUF cannot be matched")
        from gguftpl.upstream.discover import match_catalog

        entry, how = match_catalog(tset, cat)
        if entry is None:
            raise HubError(f"no catalog entry matches this GGUF ({how}); name one: --from-catalog ORG/NAME")
        cfg = entry.to_upstream()
        cfg.warnings.insert(0, f"catalog entry {entry.repo_id} chosen by {how}")
        return cfg
    entry = cat.get(repo_id)
    if entry is None:
        known = ", ".join(e.repo_id for e in cat.entries)
        raise HubError(f"{repo_id} is not in the bundled catalog (known: {known})")
    return entry.to_upstream()


def fallback_entry(repo_id: str, revision: str | None) -> Any:
    """A catalog stand-in for an unreachable Hub: only when the entry's revision is known and matches."""
    entry = load_catalog().get(repo_id)
    if entry is None or not entry.revision:
        return None
    if revision not in (None, "main") and revision != entry.revision:
        return None
    return entry.to_upstream()


def sync(src: Path | None = None, dst: Path | None = None) -> Path:
    """Copy the top-level catalog into the package data folder (maintainers; run after editing)."""
    src = src or source_catalog_dir()
    dst = dst or package_catalog_dir()
    if not (src / "index.json").is_file():
        raise HubError(f"no catalog at {src}")
    tmp = dst.with_name(dst.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(src, tmp)
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(tmp, dst)
    return dst


def tree_digest(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file below ``root`` (to check the two copies agree)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


if __name__ == "__main__":  # pragma: no cover - maintainer entry point
    if sys.argv[1:] == ["--sync"]:
        print(f"synced to {sync()}")
    else:
        print("usage: python -m gguftpl.upstream.catalog --sync", file=sys.stderr)
        sys.exit(2)
