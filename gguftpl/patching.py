"""Put corrected chat templates into a GGUF: plan, rewrite (tensor bytes identical, atomic), prove.

Templates are written in llama.cpp's layout: ``default`` in ``tokenizer.chat_template``, every other name in
``tokenizer.chat_template.<name>``, and the sorted list of those names in ``tokenizer.chat_templates``.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gguftpl.errors import PatchError, TemplateError
from gguftpl.gguf.reader import ValueType, read_header
from gguftpl.gguf.writer import ProgressFn, RewriteProof, Typed, rewrite
from gguftpl.templates.templateset import LIST_KEY, ChatTemplate, load_templateset, sha256_text, template_key

NAME_RE = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass
class PlanItem:
    name: str
    key: str
    action: str  # "add" | "replace" | "remove" | "unchanged"
    old: ChatTemplate | None
    new_text: str | None

    @property
    def new_sha256(self) -> str | None:
        return sha256_text(self.new_text) if self.new_text is not None else None


@dataclass
class PatchPlan:
    source: str
    items: list[PlanItem]
    set_kv: dict[str, Any]
    remove_keys: list[str]

    @property
    def changes(self) -> list[PlanItem]:
        return [i for i in self.items if i.action != "unchanged"]


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
    header = read_header(src)
    ts = load_templateset(header)
    for name in list(set_templates) + list(remove):
        validate_name(name)
    both = set(set_templates) & set(remove)
    if both:
        raise PatchError(f"cannot both set and remove {sorted(both)}")
    for name, text in set_templates.items():
        if not isinstance(text, str) or not text.strip():
            raise PatchError(f"template {name!r} is empty")
        check_template_syntax(name, text)
    items: list[PlanItem] = []
    set_kv: dict[str, Any] = {}
    remove_keys: list[str] = []
    for name in remove:
        old = ts.templates.get(name)
        if old is None:
            raise PatchError(f"{src} has no template named {name!r} to remove")
        items.append(PlanItem(name, old.key, "remove", old, None))
        remove_keys.append(old.key)
    for name, text in set_templates.items():
        old = ts.templates.get(name)
        action = "add" if old is None else ("unchanged" if old.text == text else "replace")
        items.append(PlanItem(name, template_key(name), action, old, text))
        if action != "unchanged":
            set_kv[template_key(name)] = text
    named_after = sorted(
        {n for n in ts.templates if n != "default" and n not in remove} | {n for n in set_templates if n != "default"}
    )
    if named_after:
        if ts.listed_names != named_after:
            set_kv[LIST_KEY] = Typed(ValueType.ARRAY, named_after, ValueType.STRING)
    elif LIST_KEY in header.kv:
        remove_keys.append(LIST_KEY)
    for k, v in (extra_kv or {}).items():
        set_kv[k] = v
    return PatchPlan(os.fspath(src), items, set_kv, remove_keys)


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
    out_s = resolve_output(src_s, out, in_place=in_place, force=force)
    plan = plan or plan_patch(src_s, set_templates, remove, extra_kv)
    if not plan.set_kv and not plan.remove_keys:
        raise PatchError("nothing to change: the file already has exactly these templates")
    _check_space(src_s, out_s)
    proof = rewrite(
        src_s, out_s, set_kv=plan.set_kv, remove=plan.remove_keys, overwrite=in_place or force, progress=progress
    )
    after = load_templateset(read_header(out_s))
    ok = all(
        (it.action == "remove" and it.name not in after.templates)
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
        out_s = src
    else:
        if out is None:
            raise PatchError("give -o OUT, or --in-place to replace the input")
        out_s = os.fspath(out)
        if _same_file(src, out_s):
            raise PatchError("output is the input file; use --in-place to replace it (still atomic)")
        if os.path.lexists(out_s) and not force:
            raise PatchError(f"{out_s} exists; use --force to overwrite it")
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
