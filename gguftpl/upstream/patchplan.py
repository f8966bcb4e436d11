"""Plan a template patch from an upstream source (Hub, catalog, folder), and the provenance it leaves.

The plan is ``patching.PatchPlan`` (the same plan as ``patch --template``), with ``upstream`` set and the
``gguftpl.patch.*`` keys below in its ``extra_kv``. ``gguftpl.cli.patch_cmd.plan_text`` prints it.

Provenance keys (all strings; written unless ``--no-provenance``):

``gguftpl.patch.tool_version``                  gguftpl version that wrote the file
``gguftpl.patch.source``                        hub | cache | catalog | dir | json
``gguftpl.patch.source_repo``                   upstream repo id (when known)
``gguftpl.patch.revision``                      commit sha the templates were read at (or the revision asked for)
``gguftpl.patch.templates``                     comma-separated names written by this patch
``gguftpl.patch.template.<name>.sha256``        sha256 of the template text written
``gguftpl.patch.template.<name>.replaced_sha256`` sha256 of the text it replaced (absent when added)
``gguftpl.patch.template.<name>.source``        upstream file it came from (tokenizer_config.json, …)
``gguftpl.patch.template.<name>.status``        catalog status EXACT | CORROBORATED | PROXY (catalog only)
``gguftpl.patch.removed``                       comma-separated names removed (when any)

Keys from an earlier gguftpl patch that a new one does not restate are removed by it, so the file never
claims a provenance it no longer has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gguftpl.errors import UsageError
from gguftpl.upstream.config import UpstreamConfig

if TYPE_CHECKING:
    from gguftpl.patching import PatchPlan

PROVENANCE_PREFIX = "gguftpl.patch."


def plan_from_upstream(
    tset: Any,
    upstream: UpstreamConfig,
    *,
    only: list[str] | None = None,
    remove: list[str] | None = None,
    provenance: bool = True,
) -> PatchPlan:
    """What ``patch --from-hub`` would do to the GGUF of ``tset`` (a TemplateSet): every upstream template
    (or the ``only`` ones) is written; templates upstream does not have are kept unless named in ``remove``.
    The plan is ``patching.plan_patch``'s, with ``upstream`` recorded and the provenance keys added."""
    from gguftpl.patching import plan_patch

    if not upstream.templates:
        raise UsageError(f"{upstream.label} has no chat template to copy")
    names = list(upstream.templates)
    if only:
        missing = [n for n in only if n not in upstream.templates]
        if missing:
            raise UsageError(
                f"--only {', '.join(missing)}: not among {upstream.label}'s templates ({', '.join(names)})"
            )
        names = [n for n in names if n in only]
    plan = plan_patch(tset.path, {n: upstream.templates[n] for n in names}, remove or ())
    plan.upstream = upstream
    if provenance and plan.changes:
        plan.extra_kv = provenance_kv(plan, upstream)
        plan.set_kv.update(plan.extra_kv)
        # keys of an earlier patch that this one does not restate would claim a provenance the file lost
        plan.remove_keys.extend(k for k in read_provenance(tset) if k not in plan.extra_kv)
    return plan


def provenance_kv(plan: PatchPlan, up: UpstreamConfig) -> dict[str, Any]:
    """The ``gguftpl.patch.*`` keys recording that ``plan`` copied its templates from ``up``."""
    from importlib.metadata import PackageNotFoundError, version

    from gguftpl.patching import ADD, REMOVE, REPLACE

    try:
        tool_version = version("gguftpl")
    except PackageNotFoundError:  # pragma: no cover - running from an unpacked tree
        tool_version = "unknown"
    kv: dict[str, Any] = {
        PROVENANCE_PREFIX + "tool_version": tool_version,
        PROVENANCE_PREFIX + "source": up.origin,
    }
    if up.repo_id:
        kv[PROVENANCE_PREFIX + "source_repo"] = up.repo_id
    rev = up.commit_sha or up.revision_requested
    if rev:
        kv[PROVENANCE_PREFIX + "revision"] = rev
    elif up.origin in ("dir", "json"):
        kv[PROVENANCE_PREFIX + "source_path"] = up.location
    written = [i for i in plan.items if i.action in (ADD, REPLACE)]
    kv[PROVENANCE_PREFIX + "templates"] = ",".join(i.name for i in written)
    statuses = _catalog_statuses(up)
    for i in written:
        base = f"{PROVENANCE_PREFIX}template.{i.name}."
        kv[base + "sha256"] = i.new_sha256
        if i.action == REPLACE and i.old_sha256:
            kv[base + "replaced_sha256"] = i.old_sha256
        src = up.sources.get(i.name)
        if src:
            kv[base + "source"] = src
        if i.name in statuses:
            kv[base + "status"] = statuses[i.name]
    removed = [i.name for i in plan.items if i.action == REMOVE]
    if removed:
        kv[PROVENANCE_PREFIX + "removed"] = ",".join(removed)
    return kv


def _catalog_statuses(up: UpstreamConfig) -> dict[str, str]:
    if up.origin != "catalog" or not up.repo_id:
        return {}
    from gguftpl.upstream.catalog import load_catalog

    entry = load_catalog().get(up.repo_id)
    return {n: t.status for n, t in entry.templates.items()} if entry else {}


def read_provenance(tset_or_kv: Any) -> dict[str, Any]:
    """The ``gguftpl.patch.*`` keys of a file (TemplateSet or a plain dict of keys)."""
    kv = getattr(tset_or_kv, "provenance", tset_or_kv) or {}
    return {k: v for k, v in kv.items() if k.startswith(PROVENANCE_PREFIX)}
