"""What a patch will write: one plan type for every source of templates, and the provenance it leaves.

Templates are written in llama.cpp's layout: ``default`` in ``tokenizer.chat_template``, every other name in
``tokenizer.chat_template.<name>``, and the sorted list of those names in ``tokenizer.chat_templates``.

``plan_patch`` plans templates given as text; ``plan_from_files`` (``patch --template``) and
``plan_from_upstream`` (``patch --from-hub/--from-catalog``) build on it and add the provenance keys below;
``gguftpl.patching.run_patch`` carries any plan out the same way.

Provenance keys (all strings; written unless ``provenance=False`` / ``--no-provenance``):

``gguftpl.patch.tool_version``                  gguftpl version that wrote the file
``gguftpl.patch.source``                        file | text | hub | cache | catalog | dir | json
``gguftpl.patch.source_repo``                   upstream repo id (when known)
``gguftpl.patch.revision``                      commit sha the templates were read at (or the revision asked for)
``gguftpl.patch.source_path``                   upstream folder or JSON (``dir`` / ``json`` without a revision)
``gguftpl.patch.templates``                     comma-separated names written by this patch
``gguftpl.patch.template.<name>.sha256``        sha256 of the template text written
``gguftpl.patch.template.<name>.replaced_sha256`` sha256 of the text it replaced (absent when added)
``gguftpl.patch.template.<name>.source``        file it came from (the ``--template`` path, or the upstream
                                                file: tokenizer_config.json, …)
``gguftpl.patch.template.<name>.status``        catalog status EXACT | CORROBORATED | PROXY (catalog only)
``gguftpl.patch.removed``                       comma-separated names removed (when any)

Keys from an earlier gguftpl patch that a new one does not restate are removed by it, so the file never
claims a provenance it no longer has.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gguftpl.errors import PatchError, TemplateError, UsageError
from gguftpl.gguf.inplace import FileIdentity, file_identity
from gguftpl.gguf.reader import ValueType, read_header
from gguftpl.gguf.templateset import (
    LIST_KEY,
    NAME_RE,
    ChatTemplate,
    TemplateSet,
    load_templateset,
    sha256_text,
    template_key,
)
from gguftpl.gguf.writer import Typed

if TYPE_CHECKING:
    from gguftpl.upstream.config import UpstreamConfig

ADD, REPLACE, KEEP, REMOVE = "add", "replace", "keep", "remove"

PROVENANCE_PREFIX = "gguftpl.patch."
"""The keys a patch records about itself (listed above)."""


@dataclass(frozen=True)
class PlanItem:
    name: str
    key: str
    action: str
    """add | replace | keep (the file has this text already) | remove"""
    old: ChatTemplate | None
    new_text: str | None

    @property
    def old_sha256(self) -> str | None:
        return self.old.sha256 if self.old is not None else None

    @property
    def new_sha256(self) -> str | None:
        return sha256_text(self.new_text) if self.new_text is not None else None


@dataclass(frozen=True)
class PatchPlan:
    """What a patch writes: the template items, and every key set or removed (templates, the name list,
    ``extra_kv``)."""

    path: str
    """The GGUF being patched."""
    items: list[PlanItem]
    set_kv: dict[str, Any]
    remove_keys: list[str]
    extra_kv: dict[str, Any] = field(default_factory=dict)
    """The keys besides templates and their list (provenance, and any the caller adds); also in ``set_kv``."""
    upstream: UpstreamConfig | None = None
    """Where the new templates came from (``patch --from-hub/--from-catalog``); None when given directly."""
    how_found: str = ""
    """How ``upstream`` was chosen (``--hub``, ``bundled catalog (matched)``)."""
    template_files: dict[str, str] | None = None
    """name -> file each new template was read from (``patch --template NAME=PATH``); None for text given
    directly or copied from upstream."""
    previous_provenance: dict[str, Any] = field(default_factory=dict)
    """The ``gguftpl.patch.*`` keys the file has from an earlier patch."""
    planned_from: FileIdentity | None = None
    kept_working: tuple[str, ...] = ()
    """Templates of the file ``--from-catalog`` left as they are although upstream's text differs: they already put
    the tool schemas in the prompt (``keepworking.keep_working``)."""
    """The file as it was when planned (``gguf.inplace.file_identity``): ``--in-place`` writes nothing if the path
    names another file by then (another patch renamed its output over it)."""

    @property
    def changes(self) -> list[PlanItem]:
        return [i for i in self.items if i.action != KEEP]

    @property
    def agrees(self) -> bool:
        """Upstream's templates are the file's already: the patch writes nothing (a key such as the name list that
        differs is left as it is), and says so up front. The one place that decides it (``run_patch``, the
        plan's text and the CLI read it)."""
        return self.upstream is not None and not self.changes

    @property
    def writes_nothing(self) -> bool:
        """Nothing to write: upstream agrees (:attr:`agrees`), or the plan sets and removes no key at all."""
        return self.agrees or not (self.set_kv or self.remove_keys)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the user should hear about the source (a Hub fallback, a catalog entry matched by name)."""
        return tuple(self.upstream.warnings) if self.upstream is not None else ()


def validate_name(name: str) -> str:
    if name != "default" and not NAME_RE.match(name):
        raise PatchError(f"template name {name!r} must be 'default' or letters, digits and underscores")
    return name


_PARSED: dict[str, None] = {}
"""sha256 of the texts that parsed (a folder's plans check the same few texts for every quant)."""


def check_template_syntax(name: str, text: str) -> None:
    """Refuse to write a template that jinja2 cannot even parse (line number in the message). Parsed with the
    analysis's own parser, which runs no template code and says so when the nesting is too deep to parse."""
    from jinja2 import TemplateSyntaxError

    from gguftpl.templates.static import parse_template

    digest = sha256_text(text)
    if digest in _PARSED:
        return
    try:
        parse_template(text)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"template {name!r} does not parse: {exc.message} (line {exc.lineno})") from None
    if len(_PARSED) < 256:
        _PARSED[digest] = None


def plan_patch(
    src: str | os.PathLike[str],
    set_templates: Mapping[str, str],
    remove: Sequence[str] = (),
    extra_kv: Mapping[str, Any] | None = None,
) -> PatchPlan:
    """Set ``set_templates`` (name -> text) and remove the ``remove`` names; a name set to the text the
    file already has is a ``keep`` item. ``extra_kv`` (key -> value or ``Typed``) is written too."""
    try:
        planned_from: FileIdentity | None = file_identity(src)  # before reading: a change while it is read shows
    except OSError:
        planned_from = None  # read_header says what is wrong with the path
    with read_header(src) as header:
        ts = load_templateset(header)
        has_list_key = LIST_KEY in header.kv
    remove = list(dict.fromkeys(remove))
    for name in list(set_templates) + remove:
        validate_name(name)
    both = [n for n in set_templates if n in remove]
    if both:
        raise PatchError(f"cannot both set and remove {', '.join(both)}")
    items: list[PlanItem] = []
    set_kv: dict[str, Any] = {}
    remove_keys: list[str] = []
    for name, text in set_templates.items():
        if not isinstance(text, str) or not text.strip():
            raise PatchError(f"template {name!r} is empty")
        old = ts.templates.get(name)
        action = ADD if old is None else (KEEP if old.text == text else REPLACE)
        items.append(PlanItem(name, template_key(name), action, old, text))
        if action != KEEP:
            check_template_syntax(name, text)
            set_kv[template_key(name)] = text
    for name in remove:
        old = ts.templates.get(name)
        if old is None:
            raise PatchError(f"{src} has no template named {name!r} to remove")
        items.append(PlanItem(name, old.key, REMOVE, old, None))
        remove_keys.append(old.key)
    named_after = sorted(
        {n for n in ts.templates if n != "default" and n not in remove} | {n for n in set_templates if n != "default"}
    )
    if named_after:
        if ts.listed_names != named_after:
            set_kv[LIST_KEY] = Typed(ValueType.ARRAY, named_after, ValueType.STRING)
    elif has_list_key:
        remove_keys.append(LIST_KEY)
    extra = dict(extra_kv or {})
    set_kv.update(extra)
    previous = {k: v for k, v in ts.provenance.items() if k.startswith(PROVENANCE_PREFIX)}
    return PatchPlan(
        os.fspath(src), items, set_kv, remove_keys, extra, previous_provenance=previous, planned_from=planned_from
    )


def plan_from_files(
    src: str | os.PathLike[str],
    set_templates: Mapping[str, str],
    remove: Sequence[str] = (),
    *,
    template_files: Mapping[str, str] | None = None,
    provenance: bool = True,
    extra_kv: Mapping[str, Any] | None = None,
) -> PatchPlan:
    """``patch --template NAME=PATH / --remove NAME``: ``set_templates`` (name -> text) read from
    ``template_files`` (name -> path, recorded in the provenance; None when the texts were given directly).
    ``extra_kv`` is written too."""
    plan = plan_patch(src, set_templates, remove, extra_kv)
    plan = replace(plan, template_files=dict(template_files) if template_files is not None else None)
    return add_provenance(plan) if provenance else plan


def plan_from_upstream(
    tset: TemplateSet,
    upstream: UpstreamConfig,
    *,
    only: Sequence[str] | None = None,
    remove: Sequence[str] = (),
    provenance: bool = True,
    how_found: str = "",
) -> PatchPlan:
    """What ``patch --from-hub`` would do to the GGUF of ``tset``: every upstream template (or the ``only``
    ones) is written; templates upstream does not have are kept unless named in ``remove``."""
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
    plan = plan_patch(tset.path, {n: upstream.templates[n] for n in names}, remove)
    plan = replace(plan, upstream=upstream, how_found=how_found)
    return add_provenance(plan) if provenance else plan


# ---------------------------------------------------------------------------------------------- provenance


def add_provenance(plan: PatchPlan) -> PatchPlan:
    """``plan`` with its ``gguftpl.patch.*`` keys; a plan that changes no template records nothing."""
    if not plan.changes:
        return plan
    kv = provenance_kv(plan)
    # keys of an earlier patch that this one does not restate would claim a provenance the file lost
    stale = [k for k in plan.previous_provenance if k not in kv and k not in plan.extra_kv]
    return replace(
        plan, extra_kv={**plan.extra_kv, **kv}, set_kv={**plan.set_kv, **kv}, remove_keys=[*plan.remove_keys, *stale]
    )


def provenance_kv(plan: PatchPlan) -> dict[str, Any]:
    """The ``gguftpl.patch.*`` keys recording where ``plan``'s templates came from."""
    up = plan.upstream
    kv: dict[str, Any] = {
        PROVENANCE_PREFIX + "tool_version": _tool_version(),
        PROVENANCE_PREFIX + "source": up.origin if up else ("file" if plan.template_files is not None else "text"),
    }
    if up is not None:
        if up.repo_id:
            kv[PROVENANCE_PREFIX + "source_repo"] = up.repo_id
        rev = up.commit_sha or up.revision_requested
        if rev:
            kv[PROVENANCE_PREFIX + "revision"] = rev
        elif up.origin in ("dir", "json"):
            kv[PROVENANCE_PREFIX + "source_path"] = up.location
    sources = up.sources if up is not None else (plan.template_files or {})
    written = [i for i in plan.items if i.action in (ADD, REPLACE)]
    kv[PROVENANCE_PREFIX + "templates"] = ",".join(i.name for i in written)
    statuses = _catalog_statuses(up) if up is not None else {}
    for i in written:
        base = f"{PROVENANCE_PREFIX}template.{i.name}."
        kv[base + "sha256"] = i.new_sha256
        if i.action == REPLACE and i.old_sha256:
            kv[base + "replaced_sha256"] = i.old_sha256
        if sources.get(i.name):
            kv[base + "source"] = sources[i.name]
        if i.name in statuses:
            kv[base + "status"] = statuses[i.name]
    removed = [i.name for i in plan.items if i.action == REMOVE]
    if removed:
        kv[PROVENANCE_PREFIX + "removed"] = ",".join(removed)
    return kv


def _tool_version() -> str:
    from gguftpl import __version__

    return __version__


def _catalog_statuses(up: UpstreamConfig) -> dict[str, str]:
    if up.origin != "catalog" or not up.repo_id:
        return {}
    from gguftpl.upstream.catalog import load_catalog

    entry = load_catalog().get(up.repo_id)
    return {n: t.status for n, t in entry.templates.items()} if entry else {}


def read_provenance(tset_or_kv: TemplateSet | Mapping[str, Any]) -> dict[str, Any]:
    """The ``gguftpl.patch.*`` keys of a file (TemplateSet or a plain dict of keys)."""
    kv = tset_or_kv.provenance if isinstance(tset_or_kv, TemplateSet) else tset_or_kv
    return {k: v for k, v in (kv or {}).items() if k.startswith(PROVENANCE_PREFIX)}
