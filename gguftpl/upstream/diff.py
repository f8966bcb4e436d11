"""Compare a GGUF's chat templates and special tokens with its upstream repo.

Three views, each of which can fail independently:

* templates, per name: only in the GGUF, only upstream (a ``tool_use`` lost in conversion is the headline
  case), identical, or changed (with a unified diff and both sha256s);
* special tokens: bos/eos ids and texts, and every upstream added token's id, text and special/CONTROL
  status in the GGUF vocabulary (``upstream.tokendiff``);
* behaviour: the same probe conversations (plain, with tools, a tool round trip) rendered with the
  template a runtime would pick on each side — ``tool_use`` for a request with tools when it exists, as
  llama.cpp does — and whether the prompts are identical, and where they first differ.

Texts are compared exactly as decoded strings (the GGUF stores what ``json.loads`` gave the converter),
so JSON escaping, key order or file layout never show up as differences.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gguftpl.upstream.config import UpstreamConfig
from gguftpl.upstream.tokendiff import TokenDifference, compare_special_tokens

if TYPE_CHECKING:
    from gguftpl.upstream.resolve import UpstreamSource

IDENTICAL, CHANGED, GGUF_ONLY, UPSTREAM_ONLY, NOT_IN_SOURCE = (
    "identical",
    "changed",
    "gguf_only",
    "upstream_only",
    "not_in_source",
)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class TemplateDiff:
    name: str
    status: str
    """identical | changed | gguf_only | upstream_only | not_in_source (partial catalog entry)"""
    gguf_sha256: str | None = None
    upstream_sha256: str | None = None
    gguf_length: int | None = None
    upstream_length: int | None = None
    upstream_source: str | None = None
    whitespace_only: bool = False
    """Changed, but equal once whitespace is normalised."""
    unified_diff: str = ""
    reads_tools: dict[str, bool | None] = field(default_factory=dict)
    """side ("gguf"/"upstream") -> whether the template reads the ``tools`` variable."""

    @property
    def is_difference(self) -> bool:
        return self.status in (CHANGED, GGUF_ONLY, UPSTREAM_ONLY)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "gguf_sha256": self.gguf_sha256,
            "upstream_sha256": self.upstream_sha256,
            "gguf_length": self.gguf_length,
            "upstream_length": self.upstream_length,
            "upstream_source": self.upstream_source,
            "whitespace_only": self.whitespace_only,
            "reads_tools": self.reads_tools,
            "unified_diff": self.unified_diff,
        }


@dataclass
class BehaviourDiff:
    probe: str
    """plain | tools | tool_round_trip"""
    gguf_template: str | None
    upstream_template: str | None
    identical: bool | None
    """None when a side could not be rendered."""
    first_difference: int | None = None
    """Character offset of the first difference."""
    gguf_position: str | None = None
    """line:column of the first difference in the GGUF prompt."""
    upstream_position: str | None = None
    gguf_excerpt: str = ""
    upstream_excerpt: str = ""
    gguf_error: str | None = None
    upstream_error: str | None = None
    gguf_length: int | None = None
    upstream_length: int | None = None
    tools_in_prompt: dict[str, bool] = field(default_factory=dict)
    """side -> whether the canary tool's parameter description reached the prompt (tool probes only)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class DiffOptions:
    ignore_whitespace: bool = False
    """Templates that differ only in whitespace count as equal."""
    behaviour: bool = True
    """Render the probe conversations with both sides' templates and compare the prompts."""
    context: int = 3
    """Lines of context in each template's unified diff."""


@dataclass(frozen=True)
class DiffResult:
    file: str
    upstream: UpstreamConfig
    how_found: str
    templates: list[TemplateDiff]
    tokens: list[TokenDifference]
    tokens_compared: bool
    behaviour: list[BehaviourDiff]
    ignore_whitespace: bool = False
    repair: Any = None
    """The file's one repair of its tool calling (:class:`gguftpl.repair.Repair`), with this upstream as its
    source; None when the file was not audited (:func:`diff_templateset` alone)."""
    runtimes: Any = None
    """The file's runtime view (:mod:`gguftpl.runtimes.view`) the repair was computed from."""
    upstream_own: dict[str, str] = field(default_factory=dict)
    """Which of the file's templates are upstream's own (:func:`gguftpl.repair.upstream_templates`)."""

    @property
    def template_differences(self) -> list[TemplateDiff]:
        out = [t for t in self.templates if t.is_difference]
        if self.ignore_whitespace:
            out = [t for t in out if not t.whitespace_only]
        return out

    @property
    def token_differences(self) -> list[TokenDifference]:
        return [t for t in self.tokens if t.severity == "difference"]

    @property
    def behaviour_differences(self) -> list[BehaviourDiff]:
        return [b for b in self.behaviour if b.identical is False]

    @property
    def identical(self) -> bool:
        return not (self.template_differences or self.token_differences or self.behaviour_differences)

    @property
    def lost_templates(self) -> list[TemplateDiff]:
        return [t for t in self.templates if t.status == UPSTREAM_ONLY]

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "identical": self.identical,
            "upstream": self.upstream.to_dict(),
            "how_found": self.how_found,
            "ignore_whitespace": self.ignore_whitespace,
            "templates": [t.to_dict() for t in self.templates],
            "special_tokens": {
                "compared": self.tokens_compared,
                "differences": [t.to_dict() for t in self.tokens],
            },
            "behaviour": [b.to_dict() for b in self.behaviour],
            "runtimes": self.runtimes.to_list() if self.runtimes is not None else None,
            "repair": self.repair.to_dict() if self.repair is not None else None,
            "summary": {
                "template_differences": len(self.template_differences),
                "token_differences": len(self.token_differences),
                "behaviour_differences": len(self.behaviour_differences),
                "lost_templates": [t.name for t in self.lost_templates],
            },
        }


# ---------------------------------------------------------------------------------------------- templates


def _normalise_ws(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def reads_variable(text: str, variable: str = "tools") -> bool | None:
    """Whether a template reads ``variable``, from its AST: the same fact the audit reports
    (``StaticFacts.reads_tools``). None when it does not parse or is over the size bound.

    Never through ``jinja2.meta``: that compiles the template, and compiling folds constant expressions, so
    ``{{ 'x' * 10**10 }}`` took this process to 15 GB (issue 14). Parsing evaluates nothing."""
    from gguftpl import limits
    from gguftpl.templates.static import parse_template, reads_name

    if len(text.encode("utf-8", "surrogatepass")) > limits.MAX_TEMPLATE_BYTES:
        return None
    try:
        ast = parse_template(text)
    except Exception:  # noqa: BLE001 - any parse failure means "unknown", not a crash
        return None
    return reads_name(ast, variable)


def compare_templates(gguf: dict[str, str], upstream: UpstreamConfig, *, context: int = 3) -> list[TemplateDiff]:
    out: list[TemplateDiff] = []
    names = list(dict.fromkeys(["default", *sorted(gguf), *upstream.templates]))
    for name in names:
        g, u = gguf.get(name), upstream.templates.get(name)
        if g is None and u is None:
            continue
        td = TemplateDiff(name=name, status=IDENTICAL, upstream_source=upstream.sources.get(name))
        if g is not None:
            td.gguf_sha256, td.gguf_length = _sha(g), len(g.encode("utf-8"))
            td.reads_tools["gguf"] = reads_variable(g)
        if u is not None:
            td.upstream_sha256, td.upstream_length = _sha(u), len(u.encode("utf-8"))
            td.reads_tools["upstream"] = reads_variable(u)
        if g is None:
            td.status = UPSTREAM_ONLY
        elif u is None:
            td.status = GGUF_ONLY if upstream.complete else NOT_IN_SOURCE
        elif g != u:
            td.status = CHANGED
            td.whitespace_only = _normalise_ws(g) == _normalise_ws(u)
            td.unified_diff = unified_diff(g, u, name, upstream.label, context=context)
        out.append(td)
    return out


def unified_diff(gguf_text: str, upstream_text: str, name: str, label: str, *, context: int = 3) -> str:
    a = gguf_text.splitlines(keepends=True)
    b = upstream_text.splitlines(keepends=True)
    lines = difflib.unified_diff(a, b, fromfile=f"gguf:{name}", tofile=f"upstream:{label}:{name}", n=context)
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


# ---------------------------------------------------------------------------------------------- behaviour


PROBES = ("plain", "tools", "tool_round_trip")


def _probe_inputs(probe: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    from gguftpl.templates import probes as P

    if probe == "plain":
        return P.plain_conversation(system=True), None
    if probe == "tools":
        return P.tools_conversation(), P.canary_tools()
    return P.tool_round_trip_conversation(), P.canary_tools()


def runtime_choice(templates: dict[str, str], with_tools: bool) -> str | None:
    """The template llama.cpp renders: ``tool_use`` for a request with tools when present, else default."""
    if with_tools and "tool_use" in templates:
        return "tool_use"
    return "default" if "default" in templates else None


def compare_behaviour(
    gguf: dict[str, str], upstream: dict[str, str], *, bos_token: str = "", eos_token: str = ""
) -> list[BehaviourDiff]:
    from gguftpl.engines.transformers import render_hf

    out: list[BehaviourDiff] = []
    # a template that ran out of time, size or memory once does on the next probe too: 5 s each, for nothing
    overrun: dict[str, str] = {}
    for probe in PROBES:
        messages, tools = _probe_inputs(probe)
        gname = runtime_choice(gguf, tools is not None)
        uname = runtime_choice(upstream, tools is not None)
        bd = BehaviourDiff(probe, gname, uname, None)
        prompts: dict[str, str | None] = {}
        for side, name, texts in (("gguf", gname, gguf), ("upstream", uname, upstream)):
            if name is None:
                prompts[side] = None
                setattr(bd, f"{side}_error", "no template")
                continue
            if name == gname and side == "upstream" and texts[name] == gguf.get(gname) and prompts.get("gguf"):
                prompts[side] = prompts["gguf"]  # same text, same inputs: same prompt
                continue
            if texts[name] in overrun:
                prompts[side] = None
                setattr(bd, f"{side}_error", overrun[texts[name]])
                continue
            try:
                prompts[side] = render_hf(texts[name], messages, tools=tools, bos_token=bos_token, eos_token=eos_token)
            except Exception as exc:  # noqa: BLE001 - a template error is a result here
                prompts[side] = None
                setattr(bd, f"{side}_error", " ".join(str(exc).split())[:300])
                if getattr(exc, "overran", False):
                    overrun[texts[name]] = getattr(bd, f"{side}_error")
        g, u = prompts.get("gguf"), prompts.get("upstream")
        if tools is not None:
            from gguftpl.templates.probes import CANARY_PARAM_TOKEN

            bd.tools_in_prompt = {side: CANARY_PARAM_TOKEN in p for side, p in prompts.items() if p is not None}
        if g is not None and u is not None:
            bd.gguf_length, bd.upstream_length = len(g), len(u)
            bd.identical = g == u
            if not bd.identical:
                i = _first_difference(g, u)
                bd.first_difference = i
                bd.gguf_position = _line_col(g, i)
                bd.upstream_position = _line_col(u, i)
                bd.gguf_excerpt = _excerpt(g, i)
                bd.upstream_excerpt = _excerpt(u, i)
        elif bd.gguf_error and bd.upstream_error and bd.gguf_error == bd.upstream_error:
            bd.identical = True  # both fail the same way
        elif (g is None) != (u is None):
            bd.identical = False
        out.append(bd)
    return out


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _line_col(text: str, i: int) -> str:
    line = text.count("\n", 0, i) + 1
    col = i - (text.rfind("\n", 0, i) + 1) + 1
    return f"{line}:{col}"


def _excerpt(text: str, i: int, before: int = 40, after: int = 80) -> str:
    start = max(0, i - before)
    return ("…" if start else "") + text[start : i + after] + ("…" if i + after < len(text) else "")


# ---------------------------------------------------------------------------------------------- together


def diff(
    src: str | os.PathLike[str],
    source: UpstreamSource | None = None,
    options: DiffOptions = DiffOptions(),
    *,
    on_no_upstream: Callable[[Any, Any, dict[str, str]], None] | None = None,
) -> DiffResult:
    """Compare the GGUF ``src`` (a local path, or ``hf://``/``https://`` URL: only its header is read) with
    its upstream: ``source`` names it, or (None) it is discovered from the GGUF's metadata or the catalog.

    When no upstream is named and none can be discovered or reached (the error is raised),
    ``on_no_upstream(view, repair, own)`` is called first with what the file says without it: its runtime view,
    its one repair (as ``audit`` prints it) and which of its templates are upstream's own; so ``diff`` still
    ends with the verdict and the fix."""
    from gguftpl.errors import GGUFTplError, UsageError
    from gguftpl.gguf.open import open_header
    from gguftpl.gguf.templateset import load_templateset
    from gguftpl.upstream.resolve import UpstreamSource, resolve_upstream

    if options.context < 0:
        raise UsageError("--context must be >= 0")
    header, label, _ = open_header(os.fspath(src))
    with header:
        tset = load_templateset(header)
        tset.path = label
        source = source or UpstreamSource()
        try:
            up = resolve_upstream(tset, source)
        except GGUFTplError:
            # only an upstream to discover: a mistyped --catalog ID or --hub REPO is the user's to correct
            if on_no_upstream is not None and not (source.repo or source.folder or source.catalog):
                view, repair, own = _repair(header, label, tset, None, "")
                if view is not None:
                    on_no_upstream(view, repair, own)
            raise
        result = diff_templateset(
            tset,
            up.config,
            how_found=up.how,
            ignore_whitespace=options.ignore_whitespace,
            behaviour=options.behaviour,
            context=options.context,
        )
        view, repair, own = _repair(header, label, tset, up.config, up.how)
        return replace(result, repair=repair, runtimes=view, upstream_own=own)


def _repair(header: Any, label: str, tset: Any, config: Any, how: str) -> tuple[Any, Any, dict[str, str]]:
    """The file's one repair (:mod:`gguftpl.repair`), from its runtime view (its audit, template facts cached on
    disk) with the upstream this diff compared against as the source (``config`` None: the upstream ``audit``
    discovers, from the metadata and the catalog), and which of its templates are upstream's own; (None, None,
    {}) when the file cannot be audited."""
    from gguftpl.audit import AuditOptions, audit_header
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.repair import discover, file_repair, upstream_from_config

    fa = audit_header(header, label, AuditOptions(select=("GT7",)), cache=AnalysisCache.on_disk())
    if fa.runtimes is None:
        return None, None, {}
    repair = file_repair(
        label,
        fa.runtimes,
        upstream_from_config(config, how) if config is not None else discover(tset),
        token_id=tset.token_id if tset.has_vocab else None,
        has_templates=bool(tset.templates),
    )
    return fa.runtimes, repair, dict(fa.upstream_own)


def diff_templateset(
    tset: Any,
    upstream: UpstreamConfig,
    *,
    how_found: str = "",
    ignore_whitespace: bool = False,
    behaviour: bool = True,
    context: int = 3,
) -> DiffResult:
    """Compare an already-read template set with ``upstream``."""
    gguf_texts = {name: t.text for name, t in tset.templates.items()}
    templates = compare_templates(gguf_texts, upstream, context=context)
    compared, tokens = compare_special_tokens(tset, upstream)
    beh: list[BehaviourDiff] = []
    if behaviour and (gguf_texts or upstream.templates):
        bos = tset.special_tokens.get("bos")
        eos = tset.special_tokens.get("eos")
        beh = compare_behaviour(
            gguf_texts,
            upstream.templates,
            bos_token=(bos.text if bos and bos.text else upstream.special.bos) or "",
            eos_token=(eos.text if eos and eos.text else upstream.special.eos) or "",
        )
    return DiffResult(
        file=tset.path,
        upstream=upstream,
        how_found=how_found,
        templates=templates,
        tokens=tokens,
        tokens_compared=compared,
        behaviour=beh,
        ignore_whitespace=ignore_whitespace,
    )


def diff_findings(result: DiffResult, file: str | None = None) -> list[Any]:
    """Findings (GT501-GT503) for a diff, for audit-style reports."""
    from gguftpl.findings import Location, make_finding
    from gguftpl.gguf.templateset import template_key
    from gguftpl.rules.upstream import UPSTREAM_SPECIAL_TOKENS_DIFFER, UPSTREAM_TEMPLATE_CHANGED, UPSTREAM_TEMPLATE_LOST

    where = file or result.file
    up = result.upstream
    from gguftpl.repair import templates_command

    fix = templates_command(where, up.origin, up.repo_id) if up.repo_id else None
    if result.repair is not None and result.repair.needed:
        fix = result.repair.text()  # the file's one repair, what audit and verify print
    out = []
    for t in result.templates:
        loc = Location(where, key=template_key(t.name))
        if t.status == UPSTREAM_ONLY:
            reads = t.reads_tools.get("upstream")
            out.append(
                make_finding(
                    UPSTREAM_TEMPLATE_LOST,
                    f"upstream {up.label} has a `{t.name}` template{' that reads `tools`' if reads else ''}; "
                    "this GGUF does not",
                    loc,
                    template=t.name,
                    evidence=f"upstream sha256 {t.upstream_sha256} ({t.upstream_length} bytes, {t.upstream_source})",
                    fix=fix,
                    severity=None if reads else UPSTREAM_TEMPLATE_CHANGED.severity,
                    upstream_sha256=t.upstream_sha256,
                )
            )
        elif t.status == CHANGED and not (result.ignore_whitespace and t.whitespace_only):
            out.append(
                make_finding(
                    UPSTREAM_TEMPLATE_CHANGED,
                    f"`{t.name}` differs from upstream {up.label}"
                    + (" (whitespace only)" if t.whitespace_only else ""),
                    loc,
                    template=t.name,
                    evidence=t.unified_diff[:2000],
                    fix=fix,
                    gguf_sha256=t.gguf_sha256,
                    upstream_sha256=t.upstream_sha256,
                )
            )
    for d in result.token_differences:
        out.append(
            make_finding(
                UPSTREAM_SPECIAL_TOKENS_DIFFER,
                d.message,
                Location(where, key="tokenizer.ggml.tokens" if d.kind == "added_token" else None),
                evidence=f"{d.path}: gguf {d.gguf!r}, upstream {d.upstream!r}",
            )
        )
    return out
