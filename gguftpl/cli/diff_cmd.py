"""``gguftpl diff FILE``: compare a GGUF's chat templates and special tokens with its upstream repo.

parse -> read header -> pick the upstream (--hub / --upstream / --catalog / discovered) -> diff -> report.
Exit codes: 0 identical, 1 differences, 2 error.
"""

from __future__ import annotations

import json
from typing import Any

import click


def resolve_upstream(
    tset: Any,
    *,
    hub: str | None,
    revision: str | None,
    upstream: str | None,
    catalog: str | None,
    catalog_fallback: bool = True,
) -> tuple[Any, str]:
    """(UpstreamConfig, how it was chosen) from the CLI options; shared by diff and patch."""
    from gguftpl.errors import UsageError

    given = [o for o, v in (("--hub", hub), ("--upstream", upstream), ("--catalog", catalog)) if v]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)} cannot be used together")
    if upstream:
        from gguftpl.upstream.hub import load_upstream_dir

        return load_upstream_dir(upstream), f"--upstream {upstream}"
    if catalog:
        from gguftpl.upstream.catalog import catalog_upstream

        if catalog == "auto":
            return catalog_upstream(None, tset=tset), "bundled catalog (matched)"
        return catalog_upstream(catalog), "bundled catalog"
    from gguftpl.upstream.hub import fetch_upstream, parse_repo_ref

    if hub:
        repo, rev = parse_repo_ref(hub)
        how = "--hub"
    else:
        from gguftpl.upstream.discover import find_upstream_repo

        found, how = find_upstream_repo(tset)
        if found is None:
            raise UsageError(f"cannot tell which repo this GGUF came from ({how}); pass --hub ORG/NAME")
        repo, rev = found, None
        how = f"discovered {how}"
    return fetch_upstream(repo, revision or rev, catalog_fallback=catalog_fallback), how


@click.command("diff")
@click.argument("file", metavar="FILE_OR_URL")
@click.option("--hub", "hub", metavar="REPO[@REV]", help="Compare with this Hugging Face repo (at a revision).")
@click.option("--revision", metavar="REV", help="Branch, tag or commit of --hub (default main).")
@click.option(
    "--upstream",
    metavar="DIR_OR_JSON",
    help="Compare with a local folder laid out like a repo, or a tokenizer_config.json / bundle JSON.",
)
@click.option(
    "--catalog",
    metavar="ID",
    help="Compare with the bundled catalog entry ORG/NAME ('auto' to match on name and template hash).",
)
@click.option("--ignore-whitespace", is_flag=True, help="Treat templates that differ only in whitespace as equal.")
@click.option("--no-behaviour", "no_behaviour", is_flag=True, help="Skip rendering the probe conversations.")
@click.option("--no-fallback", is_flag=True, help="Never fall back to the bundled catalog when the Hub is unreachable.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-U", "--context", "context", type=int, default=3, show_default=True, help="Lines of diff context.")
def command(
    file: str,
    hub: str | None,
    revision: str | None,
    upstream: str | None,
    catalog: str | None,
    ignore_whitespace: bool,
    no_behaviour: bool,
    no_fallback: bool,
    fmt: str,
    context: int,
) -> None:
    """Compare FILE's chat templates and special tokens with its upstream repo.

    FILE may be a local GGUF or a Hub URL (hf://ORG/REPO/FILE.gguf, https://…/resolve/…): only the header
    is read, with HTTP Range requests.

    Without --hub/--upstream/--catalog the repo is discovered from the GGUF's metadata
    (general.base_model.N.repo_url, general.source.*) or the bundled catalog, and the report says how.
    Exit 0 when identical, 1 when something differs, 2 on error.
    """
    from gguftpl.errors import UsageError
    from gguftpl.gguf.open import open_header
    from gguftpl.templates.templateset import load_templateset
    from gguftpl.upstream.diff import diff_templateset

    if context < 0:
        raise UsageError("--context must be >= 0")
    header, label, _ = open_header(file)  # a local path, or hf:// / https:// (header bytes only, HTTP Range)
    with header:
        tset = load_templateset(header)
        tset.path = label
        up, how = resolve_upstream(
            tset, hub=hub, revision=revision, upstream=upstream, catalog=catalog, catalog_fallback=not no_fallback
        )
        for w in up.warnings:
            click.echo(f"gguftpl: {w}", err=True)
        result = diff_templateset(
            tset, up, how_found=how, ignore_whitespace=ignore_whitespace, behaviour=not no_behaviour
        )
        if context != 3:
            from gguftpl.upstream.diff import unified_diff

            for td in result.templates:
                if td.unified_diff:
                    td.unified_diff = unified_diff(
                        tset.templates[td.name].text, up.templates[td.name], td.name, up.label, context=context
                    )
    if fmt == "json":
        from gguftpl.upstream.diff import diff_findings

        data = result.to_dict()
        data["findings"] = [f.to_dict() for f in diff_findings(result)]
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        click.echo(format_text(result), nl=False)
    raise SystemExit(0 if result.identical else 1)


_STATUS = {
    "identical": "identical",
    "changed": "changed",
    "gguf_only": "only in the GGUF",
    "upstream_only": "only upstream",
    "not_in_source": "not in the catalog entry (partial)",
}


def format_text(result: Any) -> str:
    up = result.upstream
    lines: list[str] = []
    origin = {
        "hub": "Hub",
        "cache": "local cache (offline)",
        "dir": "folder",
        "json": "JSON",
        "catalog": "bundled catalog",
    }
    lines.append(f"{result.file}")
    lines.append(f"  upstream: {up.label} ({origin.get(up.origin, up.origin)}; {result.how_found})")
    if up.commit_sha:
        lines.append(f"  commit:   {up.commit_sha}")
    lines.append("")
    lines.append("Templates")
    width = max([len(t.name) for t in result.templates] + [8])
    for t in result.templates:
        status = _STATUS.get(t.status, t.status)
        if t.status == "changed" and t.whitespace_only:
            status += " (whitespace only)"
        g = f"gguf {t.gguf_sha256[:12]} ({t.gguf_length} B)" if t.gguf_sha256 else "gguf -"
        u = f"upstream {t.upstream_sha256[:12]} ({t.upstream_length} B)" if t.upstream_sha256 else "upstream -"
        lines.append(f"  {t.name:<{width}}  {status:<16} {g}  {u}")
        if t.status == "upstream_only":
            tools = " It reads `tools`;" if t.reads_tools.get("upstream") else ""
            lines.append(
                f"  {'':<{width}}  !{tools} lost in conversion: the GGUF has no tokenizer.chat_template"
                f"{'' if t.name == 'default' else '.' + t.name}"
            )
    for t in result.templates:
        if t.unified_diff and not (result.ignore_whitespace and t.whitespace_only):
            lines.append("")
            lines.extend(t.unified_diff.rstrip("\n").split("\n"))
    lines.append("")
    lines.append("Special tokens")
    if not result.tokens_compared:
        lines.append("  not compared (the upstream source has no token data)")
    elif not result.tokens:
        lines.append("  identical (bos/eos ids and texts, added tokens, special/CONTROL status)")
    for d in result.tokens:
        mark = "-" if d.severity == "difference" else "note:"
        lines.append(f"  {mark} {d.message}")
    if result.behaviour:
        lines.append("")
        lines.append("Behaviour (the same probe conversations rendered with each side's runtime template)")
        for b in result.behaviour:
            pair = f"{b.gguf_template or '-'} vs {b.upstream_template or '-'}"
            if b.identical:
                verdict = "identical prompts"
            elif b.identical is None:
                verdict = "not comparable"
            elif b.first_difference is not None:
                verdict = f"prompts differ at gguf {b.gguf_position} / upstream {b.upstream_position}"
            else:
                verdict = "differ (one side fails to render)"
            lines.append(f"  {b.probe:<16} {pair:<22} {verdict}")
            if b.tools_in_prompt:
                seen = ", ".join(f"{s} {'yes' if v else 'NO'}" for s, v in b.tools_in_prompt.items())
                lines.append(f"    tool schema reaches the prompt: {seen}")
            if b.identical is False and b.first_difference is not None:
                lines.append(f"    gguf:     {b.gguf_excerpt!r}")
                lines.append(f"    upstream: {b.upstream_excerpt!r}")
            for side in ("gguf", "upstream"):
                err = getattr(b, f"{side}_error")
                if err:
                    lines.append(f"    {side} error: {err}")
    lines.append("")
    if result.lost_templates and up.repo_id:
        lines.append("")
        src = "--from-catalog" if up.origin == "catalog" else "--from-hub"
        lines.append(f"fix: gguftpl patch {result.file} {src} {up.repo_id} -o PATCHED.gguf")
    n_t, n_k, n_b = len(result.template_differences), len(result.token_differences), len(result.behaviour_differences)
    if result.identical:
        lines.append("identical to upstream")
    else:
        lines.append(
            f"differences: {n_t} template{'s' if n_t != 1 else ''}, {n_k} special token{'s' if n_k != 1 else ''}, "
            f"{n_b} probe{'s' if n_b != 1 else ''}"
        )
    return "\n".join(lines) + "\n"
