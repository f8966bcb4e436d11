"""``gguftpl scan``: the models a user already has, each audited once, in one table.

:func:`gguftpl.stores.discover.discover` lists every GGUF of the stores present (Ollama, LM Studio, the Hugging
Face cache, folders given); names that are one file with the same store metadata (two Ollama tags of one blob and
one manifest content, a cache revision shared by ``main``) become one entry with several names, and every entry is
audited through :func:`gguftpl.audit.audit_file` with one facts cache, so a blob several names share is analysed
once and a warm run renders nothing. An entry *drops tools* when a runtime loses the schemas that the GGUF's own
template (or its Ollama TEMPLATE) can render.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gguftpl.audit import AuditOptions, FileAudit
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.stores.discover import Problem
    from gguftpl.stores.model import StoreModel

__all__ = ["ScanEntry", "ScanResult", "scan"]


@dataclass
class ScanEntry:
    models: list[StoreModel]
    """The names of one file (the first is the one audited and shown)."""
    audit: FileAudit

    @property
    def model(self) -> StoreModel:
        return self.models[0]

    @property
    def capable(self) -> bool:
        """The file's own templates (or its Ollama TEMPLATE) can put the tool schemas in the prompt."""
        from gguftpl.runtimes.rows import PROMPT
        from gguftpl.runtimes.view import reaches

        view = self.audit.runtimes
        if view is None:
            return False
        default = next((t for t in self.audit.templates if t.name == "default"), None)
        return bool(view.tool_use_renders or reaches(default) or any(r.outcome == PROMPT for r in view.rows))

    @property
    def dropping(self) -> list[str]:
        """The runtimes that lose tools this model can render (refused or dropped)."""
        view = self.audit.runtimes
        return [r.name for r in view.dropping()] if view is not None and self.capable else []

    def fix(self) -> str | None:
        """The command that repairs it: the Modelfile for Ollama when Ollama is the one losing them, else the file's
        repair."""
        if not self.dropping:
            return None
        if self.model.store == "ollama" and "Ollama" in self.dropping:
            return f"gguftpl patch {self.model.ref} --ollama-modelfile DIR"
        return self.audit.repair.text() if self.audit.repair is not None else None

    def to_dict(self) -> dict[str, Any]:
        view = self.audit.runtimes
        return {
            "ref": self.model.ref,
            "also": [m.ref for m in self.models[1:]],
            "store": self.model.store,
            "size": self.model.size,
            "upstream_repo": self.model.upstream_repo,
            "error": self.audit.error,
            "runtimes": {r.id: r.outcome for r in view.rows} if view else {},
            "tools_reach_prompt": {r.id: r.tools_reach_prompt for r in view.rows} if view else {},
            "drops_tools": self.dropping,
            # an Ollama model: do Ollama's template and the GGUF's own Jinja agree about tools (None: unknown)
            "jinja_agrees_on_tools": view.ollama.jinja_agrees if view is not None and view.ollama.manifest else None,
            "fix": self.fix(),
        }


@dataclass
class ScanResult:
    entries: list[ScanEntry] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    seconds: float = 0.0
    analysed: int = 0
    """Templates analysed (rendered) afresh (0 on a warm run)."""
    go_rendered: int = 0
    """Ollama TEMPLATEs rendered afresh by the Go engine (0 on a warm run)."""
    bytes_hashed: int = 0
    """Blob bytes hashed to check their digests (0 once they are verified)."""

    def exit_code(self) -> int:
        """2 when a model could not be read safely, 1 when one drops tools, else 0."""
        if self.problems:
            return 2
        return 1 if any(e.dropping for e in self.entries) else 0

    def to_json(self) -> str:
        return json.dumps(
            {
                "models": [e.to_dict() for e in self.entries],
                "problems": [{"ref": p.ref, "store": p.store, "error": p.error} for p in self.problems],
                "seconds": round(self.seconds, 3),
                "analysed": self.analysed,
                "go_rendered": self.go_rendered,
                "bytes_hashed": self.bytes_hashed,
            },
            indent=2,
            ensure_ascii=False,
        )


def _same(a: StoreModel, b: StoreModel) -> bool:
    la, lb = a.ollama, b.ollama
    same_layers = (la is None and lb is None) or (
        la is not None and lb is not None and (la.template, la.params, la.config) == (lb.template, lb.params, lb.config)
    )
    return a.identity == b.identity and a.store == b.store and same_layers


def scan(
    stores: Iterable[str] | None = None,
    paths: Iterable[str] = (),
    options: AuditOptions | None = None,
    cache: AnalysisCache | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> ScanResult:
    """Find, de-duplicate and audit every model of ``stores`` (None: all) and of the folders in ``paths``;
    ``progress(done, total, ref)`` as each model is audited."""
    from gguftpl.audit import AuditOptions, audit_file
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.stores import safety
    from gguftpl.stores.discover import Problem, discover
    from gguftpl.templates import enginefacts

    start = time.perf_counter()
    hashed, rendered = safety.HASHED[0], enginefacts.GO_RENDERS[0]
    options = options or AuditOptions()
    cache = cache if cache is not None else AnalysisCache.on_disk()
    gathered = cache.gathered
    result = ScanResult()
    groups: list[list[StoreModel]] = []
    for found in discover(stores, paths):
        if isinstance(found, Problem):
            result.problems.append(found)
            continue
        group = next((g for g in groups if _same(g[0], found)), None)
        if group is None:
            groups.append([found])
        else:
            group.append(found)
    for i, group in enumerate(groups):
        m = group[0]
        if progress is not None:
            progress(i, len(groups), m.ref)
        fa = audit_file(m.path, options, label=m.ref, cache=cache, store=m)
        result.entries.append(ScanEntry(group, fa))
    if progress is not None and groups:
        progress(len(groups), len(groups), groups[-1][0].ref)
    result.analysed = cache.gathered - gathered
    result.go_rendered = enginefacts.GO_RENDERS[0] - rendered
    result.bytes_hashed = safety.HASHED[0] - hashed
    result.seconds = time.perf_counter() - start
    return result
