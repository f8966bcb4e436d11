"""``gguftpl diff FILE``: parse -> ``upstream.diff.diff`` (pick the upstream: --hub / --upstream / --catalog /
discovered, then compare) -> report -> exit code 0 identical, 1 differences, 2 error."""

from __future__ import annotations

from typing import Any

import click

from gguftpl.cli.modelarg import MODEL
from gguftpl.cli.output import colour_fixes, echo, echo_json, width_option


@click.command("diff")
@click.argument("file", type=MODEL, metavar="FILE_OR_URL")
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
@width_option
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
    from gguftpl.upstream.diff import DiffOptions, diff
    from gguftpl.upstream.difftext import diff_data, diff_text
    from gguftpl.upstream.resolve import UpstreamSource

    source = UpstreamSource(repo=hub, revision=revision, folder=upstream, catalog=catalog, fallback=not no_fallback)
    options = DiffOptions(ignore_whitespace=ignore_whitespace, behaviour=not no_behaviour, context=context)

    def no_upstream(view: Any, repair: Any, own: dict[str, str]) -> None:
        # what the file says without its upstream, before the error line: the verdict and the one repair
        from gguftpl.repair import verdict_fix_lines
        from gguftpl.safeio import terminal_text

        echo(colour_fixes(terminal_text(f"{file}\n" + "\n".join(verdict_fix_lines(view, repair, own)))), color=None)

    result = diff(file, source, options, on_no_upstream=no_upstream if fmt == "text" else None)
    for w in result.upstream.warnings:
        echo(f"gguftpl: {w}", err=True)
    if fmt == "json":
        echo_json(diff_data(result))
    else:
        from gguftpl.safeio import terminal_text

        # the file's text escaped first, then gguftpl's own colour for the fix (on a terminal only)
        echo(colour_fixes(terminal_text(diff_text(result))), nl=False, color=None)
    raise SystemExit(0 if result.identical else 1)
