"""How to repair a file's tool calling: one answer per file, which ``audit``, ``diff``, ``verify``, ``rules`` and the
library all print.

:func:`file_repair` reads the file's runtime view (which runtimes lose the tools) and what is at hand to give them
back: the file's own ``tool_use`` (``--tools-in-default``), the bundled catalog entry of its upstream
(``--from-catalog ID``, offline), a Hub repo its metadata names (``--from-hub REPO``), or nothing. When the upstream
is known and has no template that puts the tool schemas in the prompt, or the markers that template needs are not
tokens of the file's vocabulary, it says so in words instead of naming a command that cannot work.

Every command ends in ``&& gguftpl verify FIXED.gguf``: the repair is proven by llama.cpp itself, and the runtime
rows of that ``verify`` say where the tools reach the prompt afterwards.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gguftpl.runtimes.view import RuntimeView
    from gguftpl.upstream.catalog import CatalogEntry

OUT = "FIXED.gguf"
VERIFY = f"gguftpl verify {OUT}"

NO_TOOL_TEMPLATE = "this model's upstream has no tool-calling template; no template repair gives it tools"
"""The plain fact, when it is one (issue 25 item 2)."""

NO_BASE_REPAIR = "no template repair gives this model tools: a base model without a chat template"
"""The plain fact for a base model (issue 25 item 2), instead of a placeholder for a template file."""


def base_model_advice(why: str) -> str:
    """Why a file without any chat template and no upstream gguftpl can name gets no repair: llama.cpp's
    converter copies upstream's chat template whenever upstream ships one, so none means a base model."""
    return (
        f"{NO_BASE_REPAIR} (none in the file, where llama.cpp's converter copies upstream's whenever upstream ships "
        f"one; gguftpl knows no upstream template for it: {why}); a model of its family trained to chat, converted "
        "with its own template, is the one that calls tools"
    )


RULE_FIX = (
    f"`gguftpl patch FILE --from-catalog ID --tools-in-default -o {OUT} && {VERIFY}` (upstream's templates from "
    "the bundled catalog, and a default that carries the tools for the runtimes that read nothing else); "
    "`--from-hub REPO` when the catalog lacks the upstream; `gguftpl audit FILE` prints the repair for the file, "
    "or says that its upstream has no tool-calling template and no template repair gives it tools."
)
"""The fix of every rule about tools that never reach the prompt, as ``gguftpl rules`` documents it."""

TOOLS_NEVER_REACH = "tools-never-reach-prompt"
"""``Finding.extra["verdict"]`` of every finding saying that the tools never reach the prompt, whatever drops them
(no template and llama.cpp's ChatML fallback, GT101; a template that never reads them, GT201): one verdict, one
severity, and the same finding before and after a patch."""

# -------------------------------------------------------------------------------------------------- upstream


@dataclass(frozen=True)
class Upstream:
    """Where the file came from, as far as the file and the bundled catalog tell (no network)."""

    repo: str | None = None
    how: str = ""
    """How ``repo`` was found, or why not (the discovery's words)."""
    entry: CatalogEntry | None = None
    """The catalog entry of ``repo``: its templates are at hand offline."""
    match: str = "none"
    """``exact`` (the file's own upstream: its template, model name or metadata), ``family`` (an entry of the
    same model family: same tokenizer, or the same template text), ``metadata`` (a repo the metadata names, not in
    the catalog) or ``none``."""
    templates: dict[str, str] | None = None
    """The upstream's templates when they were fetched (a ``diff --hub``): name -> text."""

    def texts(self) -> dict[str, str] | None:
        """The upstream's templates at hand: the catalog entry's, or the fetched ones; None when unknown."""
        if self.templates is not None:
            return self.templates
        if self.entry is not None:
            return {n: self.entry.text(n) for n in self.entry.templates}
        return None


def upstream_from_config(config: Any, how: str) -> Upstream:
    """The :class:`Upstream` of a resolved upstream (``UpstreamConfig``: the Hub, a folder or the catalog)."""
    if config.origin == "catalog":
        found = upstream_of(config.repo_id, how)
        if found.entry is not None:
            return found
        return Upstream(config.repo_id, how, None, "exact", dict(config.templates))
    return Upstream(config.repo_id or None, how, None, "metadata", dict(config.templates))


def upstream_of(repo: str | None, how: str) -> Upstream:
    """The :class:`Upstream` of a discovery answer (``repo``, ``how``): its catalog entry looked up by repo id."""
    if not repo:
        return Upstream(None, how)
    from gguftpl.errors import GGUFTplError
    from gguftpl.upstream.catalog import load_catalog

    try:
        entry = load_catalog().get(repo)
    except GGUFTplError:  # no catalog: the Hub is all there is
        entry = None
    if entry is None:
        return Upstream(repo, how, None, "metadata")
    family = "tokenizer" in how or "family's catalog entry" in how
    return Upstream(repo, how, entry, "family" if family else "exact")


def discover(tset: Any) -> Upstream:
    """The :class:`Upstream` of a template set, discovered from its metadata and the catalog."""
    from gguftpl.upstream.discover import find_upstream_repo

    try:
        repo, how = find_upstream_repo(tset)
    except Exception as exc:  # a hint must never turn a verdict into an error
        return Upstream(None, f"discovery failed: {exc}")
    return upstream_of(repo, how)


@dataclass(frozen=True)
class ToolTemplate:
    """The template of a catalog entry that puts the tool schemas in the prompt, and the markers it writes."""

    name: str | None
    """``default`` when upstream's default renders the tools, else ``tool_use``; None when no template does."""
    markers: tuple[str, ...] = ()
    default_renders: bool = False


@functools.lru_cache(maxsize=64)
def _tool_markers(text: str) -> tuple[str, ...] | None:
    """The control markers a template writes when its AST puts the tool schemas in the prompt, else None: the
    catalog's measured facts for its templates, else parsed (once per text: every file of a folder asks about the
    same upstream)."""
    from gguftpl.errors import GGUFTplError
    from gguftpl.gguf.templateset import sha256_text
    from gguftpl.upstream.catalog import load_catalog, measure_tool_facts

    try:
        known = load_catalog().tool_facts.get(sha256_text(text))
    except GGUFTplError:
        known = None
    try:
        renders, markers = known if known is not None else measure_tool_facts(text)
    except Exception:  # a template that does not parse renders nothing
        return None
    return markers if renders else None


def tool_template(templates: dict[str, str]) -> ToolTemplate:
    """Which of upstream's templates puts the tool schemas in the prompt (read from its AST: parsing runs no
    template code)."""
    renders: dict[str, tuple[str, ...]] = {}
    for name, text in templates.items():
        markers = _tool_markers(text)
        if markers is not None:
            renders[name] = markers
    if "default" in renders:
        return ToolTemplate("default", renders["default"], True)
    for name in ("tool_use", *sorted(renders)):
        if name in renders:
            return ToolTemplate(name, renders[name])
    return ToolTemplate(None)


# ---------------------------------------------------------------------------------------------------- repair


@dataclass(frozen=True)
class Repair:
    """The one repair of a file's tool calling."""

    command: str | None
    """The runnable command (ends with ``&& gguftpl verify FIXED.gguf``); None when there is none to run."""
    advice: str = ""
    """Words instead of (or beside) the command: why no template repair exists, or what is unknown."""
    source: str = "none"
    """``file`` (its own tool_use), ``catalog``, ``hub``, ``none`` (upstream has no tool template), ``unknown``
    (no upstream known) or ``fine`` (every runtime gets the tools: nothing to repair)."""
    dropping: tuple[str, ...] = ()
    """The runtimes that lose the tools now."""
    upstream: str = ""
    """Which upstream the repair takes its templates from, and how it was matched."""
    how: str = ""
    """How that upstream was found (the discovery's words)."""

    @property
    def needed(self) -> bool:
        return self.source != "fine"

    def text(self) -> str:
        """The fix line: the command, else the advice."""
        return self.command or self.advice

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "advice": self.advice or None,
            "source": self.source,
            "runtimes_dropping_tools": list(self.dropping),
            "upstream": self.upstream or None,
        }


NOTHING_TO_REPAIR = Repair(None, "", "fine")


def patch_command(label: str, *flags: str) -> str:
    """``gguftpl patch LABEL FLAGS -o FIXED.gguf && gguftpl verify FIXED.gguf``."""
    q = shlex.quote(label) if label else "FILE"
    return " ".join(["gguftpl patch", q, *flags, "-o", OUT, "&&", VERIFY])


def upstream_command(label: str, repo: str | None, how: str = "") -> str | None:
    """The command that puts upstream's templates back: from the catalog when it holds ``repo`` (offline), else
    from the Hub; None when no repo is known."""
    up = upstream_of(repo, how)
    if up.entry is not None:
        return patch_command(label, "--from-catalog", shlex.quote(up.entry.repo_id))
    if repo:
        return patch_command(label, "--from-hub", shlex.quote(repo))
    return None


def file_repair(
    label: str,
    view: RuntimeView,
    upstream: Upstream,
    *,
    token_id: Callable[[str], int | None] | None = None,
    has_templates: bool = True,
) -> Repair:
    """The repair of the file ``label`` whose runtime view is ``view``: nothing when no runtime loses the tools;
    ``--tools-in-default`` when the file's own tool_use renders them and only runtimes that read the default lose
    them; upstream's templates from the catalog (offline) or the Hub otherwise; and when upstream has no template
    that renders the tools, or the markers it needs are not tokens of the vocabulary (``token_id``), the plain fact
    that no template repair gives the model tools."""
    from gguftpl.runtimes.rows import LLAMACPP

    dropping = tuple(r.name for r in view.dropping())
    if not dropping:
        return NOTHING_TO_REPAIR
    others = [n for n in dropping if n != LLAMACPP]
    if view.tool_use_renders and LLAMACPP not in dropping:
        return Repair(patch_command(label, "--tools-in-default"), source="file", dropping=dropping)
    texts = upstream.texts()
    if texts is not None:
        return _from_upstream(label, texts, upstream, dropping, others, token_id)
    if upstream.repo:
        return Repair(
            patch_command(label, "--from-hub", shlex.quote(upstream.repo), "--tools-in-default"),
            "needs the Hub: the catalog does not hold this upstream",
            "hub",
            dropping,
            f"{upstream.repo} ({upstream.how})",
        )
    why = upstream.how or "no upstream found"
    if not has_templates:
        return Repair(None, base_model_advice(why), "none", dropping)
    q = shlex.quote(label) if label else "FILE"
    advice = (
        f"gguftpl knows no upstream template with tools for this file ({why}), so it names no repair; with a "
        f"tool_use template you trust: gguftpl patch {q} --template tool_use=PATH -o STEP.gguf, then gguftpl "
        f"patch STEP.gguf --tools-in-default -o {OUT} && {VERIFY}"
    )
    return Repair(None, advice, "unknown", dropping)


def _from_upstream(
    label: str,
    texts: dict[str, str],
    upstream: Upstream,
    dropping: tuple[str, ...],
    others: list[str],
    token_id: Callable[[str], int | None] | None,
) -> Repair:
    entry = upstream.entry
    repo = entry.repo_id if entry is not None else upstream.repo or ""
    matched = f"{repo} ({upstream.how})" if upstream.how else repo
    tt = tool_template(texts)
    if tt.name is None:
        names = ", ".join(sorted(texts)) or "none"
        complete = "" if entry is None or entry.complete else " (the entry may not list every template the repo ships)"
        return Repair(
            None,
            f"{NO_TOOL_TEMPLATE} (upstream {matched}: its templates ({names}) put no tool schema in the prompt"
            f"{complete})",
            "none",
            dropping,
            matched,
        )
    missing = [m for m in tt.markers if token_id is not None and token_id(m) is None]
    if missing:
        shown = ", ".join(repr(m) for m in missing[:4])
        return Repair(
            None,
            f"no template repair gives this model tools: upstream's {tt.name} template ({repo}) writes {shown}, "
            f"which {'is' if len(missing) == 1 else 'are'} not a token of this file's vocabulary",
            "none",
            dropping,
            matched,
        )
    flags = ["--from-catalog", shlex.quote(repo)] if entry is not None else ["--from-hub", shlex.quote(repo)]
    if not tt.default_renders and others:
        flags.append("--tools-in-default")
    advice = "" if entry is not None else "needs the Hub: the catalog does not hold this upstream"
    source = "catalog" if entry is not None else "hub"
    return Repair(patch_command(label, *flags), advice, source, dropping, matched, upstream.how)


# --------------------------------------------------------------------------------------------------- verdict


def in_prompt(row: Any) -> bool:
    """The template's own prompt carries the tool schemas (not a tool prompt the runtime writes instead)."""
    from gguftpl.runtimes.rows import INJECTED, PROMPT

    return bool(row.outcome == PROMPT or (row.tools_reach_prompt is True and row.outcome != INJECTED))


def verdict_line(view: RuntimeView, upstream_own: Mapping[str, str] | None = None) -> str:
    """One line for every runtime: where the tool schemas reach the prompt, and what the others do instead
    (``tools reach the prompt in 2 of 9 runtimes (llama.cpp, Dynamo); dropped: vLLM, …; refused: Ollama``); an
    engine that raises on a template that is upstream's own (``upstream_own``: name -> whose) is said to."""
    from gguftpl.runtimes.rows import DROPPED, FAILS, INJECTED, REFUSED

    groups: dict[str, list[str]] = {}
    for r in view.rows:
        if in_prompt(r):
            key = "yes"
        elif r.outcome == FAILS and upstream_own and r.template in upstream_own:
            key = "fails-upstream"
        elif r.outcome in (INJECTED, REFUSED, FAILS):
            key = r.outcome
        elif r.tools_reach_prompt is False:
            key = DROPPED
        else:
            key = "unknown"
        groups.setdefault(key, []).append(r.name)
    yes = groups.get("yes", [])
    head = f"tools reach the prompt in {len(yes)} of {len(view.rows)} runtimes"
    head += f" ({', '.join(yes)})" if yes else ""
    words = {
        DROPPED: "dropped",
        REFUSED: "refused",
        INJECTED: "replaced by the runtime's own tool prompt",
        FAILS: "its engine raises",
        "fails-upstream": "its engine raises on upstream's own template",
        "unknown": "unknown",
    }
    rest = [f"{words[k]}: {', '.join(groups[k])}" for k in words if groups.get(k)]
    return head + ("; " + "; ".join(rest) if rest else "")


def verdict_fix_lines(
    view: RuntimeView, repair: Repair | None, upstream_own: Mapping[str, str] | None = None
) -> list[str]:
    """A file's last lines in a plain report (``diff``): ``verdict: …`` for every runtime, then ``fix: …``, the
    one repair, when a runtime loses the tools; what the audit's text report ends each file with."""
    lines = [f"verdict: {verdict_line(view, upstream_own)}"]
    if repair is not None and repair.needed:
        lines.append(f"fix: {repair.text()}")
    return lines


def templates_command(label: str, origin: str, repo: str) -> str:
    """The command that writes upstream's templates (``repo``, from the catalog or the Hub by ``origin``) into
    the file, for a template that differs or was lost whatever the tools do."""
    return patch_command(label, "--from-catalog" if origin == "catalog" else "--from-hub", shlex.quote(repo))


# ------------------------------------------------------------------------------------- upstream's own templates

_UPSTREAM_ORIGINS = ("hub", "cache", "catalog", "dir", "json")
"""``gguftpl.patch.source`` values of a patch that copied upstream's templates (``patchplan``)."""


def upstream_templates(tset: Any) -> dict[str, str]:
    """Which of the file's templates are upstream's own, name -> whose (``NousResearch/…:tool_use``): byte-equal to a
    bundled catalog template, or written by a patch from upstream and unchanged since (its provenance), or a
    ``--tools-in-default`` default built from two such templates. Findings in them come with upstream's template:
    expected, and not the repair's doing."""
    from gguftpl.errors import GGUFTplError
    from gguftpl.gguf.templateset import sha256_text

    prov = {k: v for k, v in (getattr(tset, "provenance", {}) or {}).items() if k.startswith("gguftpl.patch.")}
    p = "gguftpl.patch."
    repo = prov.get(p + "source_repo") or "upstream"
    copied = prov.get(p + "source") in _UPSTREAM_ORIGINS or bool(prov.get(p + "source_repo"))
    try:
        from gguftpl.upstream.catalog import load_catalog

        catalog: Any = load_catalog()
    except GGUFTplError:
        catalog = None

    def whose(sha: Any) -> str | None:
        if not isinstance(sha, str):
            return None
        found = catalog.by_sha256(sha) if catalog is not None else []
        if found:
            return f"{found[0][0].repo_id}:{found[0][1]}"
        for name in getattr(tset, "templates", {}):
            source = prov.get(f"{p}template.{name}.source")
            if copied and prov.get(f"{p}template.{name}.sha256") == sha and source != "tools-in-default":
                return f"{repo}:{name}"
        return None

    out: dict[str, str] = {}
    for name, t in getattr(tset, "templates", {}).items():
        sha = getattr(t, "sha256", None) or sha256_text(t.text)
        own = whose(sha)
        if own is None and name == "default" and prov.get(p + "template.default.sha256") == sha:
            parts = [
                whose(prov.get(p + "tools_in_default.tool_use_sha256")),
                whose(prov.get(p + "tools_in_default.default_sha256")),
            ]
            if all(parts):
                own = f"built by --tools-in-default from {' and '.join(str(x) for x in parts)}"
        if own is not None:
            out[name] = own
    return out
