"""Put corrected chat templates into a GGUF: plan, rewrite (tensor bytes identical, atomic), prove.

Templates are written in llama.cpp's layout: ``default`` in ``tokenizer.chat_template``, every other name in
``tokenizer.chat_template.<name>``, and the sorted list of those names in ``tokenizer.chat_templates``.

``PatchPlan`` is the one plan behind every ``patch``: templates given directly (``plan_patch``) or copied
from upstream (``gguftpl.upstream.patchplan.plan_from_upstream``, which builds on ``plan_patch``).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gguftpl.errors import PatchError, TemplateError
from gguftpl.gguf.reader import ValueType, read_header
from gguftpl.gguf.writer import ProgressFn, RewriteProof, Typed, rewrite
from gguftpl.templates.templateset import LIST_KEY, ChatTemplate, load_templateset, sha256_text, template_key

if TYPE_CHECKING:
    from gguftpl.upstream.config import UpstreamConfig

NAME_RE = re.compile(r"^[A-Za-z0-9_]+$")

ADD, REPLACE, KEEP, REMOVE = "add", "replace", "keep", "remove"


@dataclass
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


@dataclass
class PatchPlan:
    """What a patch writes: the template items, and every key set or removed (templates, the name list,
    ``extra_kv``)."""

    source: str
    items: list[PlanItem]
    set_kv: dict[str, Any]
    remove_keys: list[str]
    extra_kv: dict[str, Any] = field(default_factory=dict)
    """The keys besides templates and their list (provenance); also in ``set_kv``."""
    upstream: UpstreamConfig | None = None
    """Where the new templates came from (``patch --from-hub/--from-catalog``); None when given directly."""

    @property
    def changes(self) -> list[PlanItem]:
        return [i for i in self.items if i.action != KEEP]


@dataclass
class PatchResult:
    plan: PatchPlan
    output: str
    proof: RewriteProof
    readback_ok: bool
    """Every template read back from the output equals what was asked, and removed ones are gone."""
    readback: dict[str, str] = field(default_factory=dict)
    """name -> sha256 of the templates in the output."""


def validate_name(name: str) -> str:
    if name != "default" and not NAME_RE.match(name):
        raise PatchError(f"template name {name!r} must be 'default' or letters, digits and underscores")
    return name


def check_template_syntax(name: str, text: str) -> None:
    """Refuse to write a template that jinja2 cannot even parse (line number in the message)."""
    import jinja2
    from jinja2.ext import Extension, loopcontrols

    class _Generation(Extension):
        # transformers' {% generation %} block tag: parse it, render its body
        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body, lineno=lineno)

    env = jinja2.Environment(extensions=[loopcontrols, _Generation])
    try:
        env.parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template {name!r} does not parse: {exc.message} (line {exc.lineno})") from None


def plan_patch(
    src: str | os.PathLike[str],
    set_templates: Mapping[str, str],
    remove: Sequence[str] = (),
    extra_kv: Mapping[str, Any] | None = None,
) -> PatchPlan:
    """Set ``set_templates`` (name -> text) and remove the ``remove`` names; a name set to the text the
    file already has is a ``keep`` item. ``extra_kv`` is written too."""
    header = read_header(src)
    ts = load_templateset(header)
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
    elif LIST_KEY in header.kv:
        remove_keys.append(LIST_KEY)
    extra = dict(extra_kv or {})
    set_kv.update(extra)
    return PatchPlan(os.fspath(src), items, set_kv, remove_keys, extra)


def patch_templates(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str] | None,
    set_templates: Mapping[str, str],
    remove: Sequence[str] = (),
    *,
    in_place: bool = False,
    force: bool = False,
    extra_kv: Mapping[str, Any] | None = None,
    progress: ProgressFn | None = None,
    plan: PatchPlan | None = None,
) -> PatchResult:
    """Write ``src`` with templates set/removed to ``out`` (or over ``src`` with ``in_place``)."""
    src_s = os.fspath(src)
    resolve_output(src_s, out, in_place=in_place, force=force)  # refuse unsafe outputs before any work
    plan = plan or plan_patch(src_s, set_templates, remove, extra_kv)
    return apply_plan(plan, out, in_place=in_place, force=force, progress=progress)


def apply_plan(
    plan: PatchPlan,
    out: str | os.PathLike[str] | None,
    *,
    in_place: bool = False,
    force: bool = False,
    progress: ProgressFn | None = None,
) -> PatchResult:
    """Write ``plan.source`` with the plan applied to ``out`` (or over the source with ``in_place``), then
    read the output back and check every template item."""
    src_s = plan.source
    out_s = resolve_output(src_s, out, in_place=in_place, force=force)
    if not plan.set_kv and not plan.remove_keys:
        raise PatchError("nothing to change: the file already has exactly these templates")
    _check_space(src_s, out_s)
    proof = rewrite(
        src_s, out_s, set_kv=plan.set_kv, remove=plan.remove_keys, overwrite=in_place or force, progress=progress
    )
    after = load_templateset(read_header(out_s))
    ok = all(
        (it.action == REMOVE and it.name not in after.templates)
        or (it.new_text is not None and it.name in after.templates and after.templates[it.name].text == it.new_text)
        for it in plan.items
    )
    if not ok:
        raise PatchError(f"read-back of {out_s} does not match the templates written")
    return PatchResult(plan, out_s, proof, ok, {n: t.sha256 for n, t in after.templates.items()})


def resolve_output(src: str, out: str | os.PathLike[str] | None, *, in_place: bool = False, force: bool = False) -> str:
    """The output path, after refusing every unsafe combination (checked before any work is done)."""
    if not os.path.isfile(src):
        raise PatchError(f"no such file: {src}")
    if in_place:
        if out is not None and not _same_file(src, os.fspath(out)):
            raise PatchError("--in-place writes over the input; do not also give -o")
        # through a symlink (a Hugging Face cache snapshot -> blob) the model is the file it points at
        out_s = os.path.realpath(src)
    else:
        if out is None:
            raise PatchError("give -o OUT, or --in-place to replace the input")
        out_s = os.fspath(out)
        if not out_s:
            raise PatchError("-o: the output path is empty")
        if _same_file(src, out_s):
            raise PatchError("output is the input file; use --in-place to replace it (still atomic)")
        if os.path.lexists(out_s):
            if not force:
                raise PatchError(f"{out_s} exists; use --force to overwrite it")
            out_s = os.path.realpath(out_s)
    if os.path.exists(out_s) and not os.path.isfile(out_s):
        # renaming over a device node, FIFO or folder would destroy it, not write into it
        raise PatchError(f"{out_s} exists and is not a regular file; refusing to replace it")
    return out_s


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _check_space(src: str, out: str) -> None:
    need = os.path.getsize(src) + (1 << 20)
    folder = os.path.dirname(os.path.abspath(out))
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < need:
        raise PatchError(f"not enough space in {folder}: need {need} bytes, {free} free")
