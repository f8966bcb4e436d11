"""``gguftpl inspect FILE…``: parse -> ``inspect.inspect_file`` for each -> text or JSON (or one template's
exact bytes with --raw)."""

from __future__ import annotations

import sys

import click

from gguftpl.cli.modelarg import MODEL, store_model
from gguftpl.cli.output import echo, echo_json, use_color, width_option
from gguftpl.errors import UsageError


@click.command("inspect")
@click.argument("files", nargs=-1, required=False, type=MODEL)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--template", "template_name", metavar="NAME", help="Only this template (default, tool_use, …).")
@click.option("--raw", is_flag=True, help="With --template: print the exact template bytes, nothing else.")
@click.option(
    "--repo",
    "repos",
    multiple=True,
    metavar="ORG/REPO[@REV]",
    help="Inspect every GGUF of a Hub repo (headers only, by HTTP Range; a split GGUF through its first shard).",
)
@width_option
def command(
    files: tuple[str, ...], fmt: str, template_name: str | None, raw: bool, repos: tuple[str, ...] = ()
) -> None:
    """Show what a GGUF says about chat: templates, special tokens, provenance (header only).

    FILE may be local, hf://ORG/REPO/FILE.gguf[@REV] or an https://…/resolve/… URL (header fetched with
    HTTP Range requests; JSON then carries a "remote" object with the bytes and requests it cost), or a model
    reference: ollama://NAME[:TAG], lmstudio://PUBLISHER/REPO[/FILE], hf-cache://ORG/REPO[@REV][/FILE] (JSON then
    carries a "store" object: the blob, the Ollama layers).
    """
    from gguftpl.inspect import SCHEMA_VERSION, inspect_file, inspect_text

    if repos:
        from gguftpl.gguf.remote import repo_file_specs

        unsafe: list[tuple[str, str]] = []
        files = tuple(files) + tuple(spec for r in repos for spec in repo_file_specs(r, unsafe=unsafe))
        for name, why in unsafe:  # never requested: a name like ../../x.gguf reaches outside the repo
            echo(f"gguftpl: warning: not reading {name!r} from the repo listing: {why}", err=True)
        if not files:
            raise UsageError("no GGUF files in " + ", ".join(repos))
    if not files:
        raise click.UsageError("Missing argument 'FILES...' (or --repo ORG/REPO).")
    if raw and not template_name:
        raise UsageError("--raw needs --template NAME")
    if raw and len(files) != 1:
        raise UsageError("--raw takes exactly one file")
    reports = [inspect_file(f, template_name) for f in files]
    for f, (info, _) in zip(files, reports, strict=True):
        model = store_model(f)
        if model is not None:  # the reference the user gave, not the blob's hash
            info["path"], info["store"] = model.ref, model.to_dict()
    if raw and template_name:
        sys.stdout.buffer.write(reports[0][1].templates[template_name].text.encode("utf-8"))
        return
    if fmt == "json":
        payload = {"schema_version": SCHEMA_VERSION, "files": [info for info, _ in reports]}
        echo_json(payload)
        return
    color = use_color()
    for info, ts in reports:
        if color:
            echo(inspect_text(info, ts, template_name, style=click.style), color=None)
        else:
            echo(inspect_text(info, ts, template_name))
