"""``gguftpl catalog [ID]``: the bundled catalog's entries (the ids ``--catalog``/``--from-catalog`` take), with
their status, templates, tools and provenance; or one entry in full."""

from __future__ import annotations

from typing import Any

import click

from gguftpl.cli.output import echo, echo_json, output_width, width_option


@click.command("catalog")
@click.argument("entry_id", required=False, metavar="[ID]")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Output format."
)
@width_option
def command(entry_id: str | None, fmt: str) -> None:
    """List the bundled catalog of upstream chat templates: each entry's id (what `diff --catalog ID` and
    `patch --from-catalog ID` take), its status (EXACT: a byte copy of the upstream file; CORROBORATED: several
    independent copies agree; PROXY: stand-in text), its templates (default, tool_use, …) and which of them put
    the tool schemas in the prompt, and its revision. With ID: that entry's provenance in full (each template's
    status, source, sha256 and git blob)."""
    from gguftpl.upstream.catalog import entry_summary, find_entry, load_catalog

    cat = load_catalog()
    entries = [find_entry(entry_id, cat)] if entry_id is not None else cat.entries
    summaries = [entry_summary(e, cat) for e in entries]
    if fmt == "json":
        echo_json(summaries[0] if entry_id is not None else summaries)
    elif entry_id is not None:
        echo(_entry_text(summaries[0]))
    else:
        echo(_list_text(summaries, output_width()))


def _templates(s: dict[str, Any]) -> str:
    return ", ".join(f"{name} {t['status']}" for name, t in s["templates"].items())


def _tools(s: dict[str, Any]) -> str:
    return f"yes ({', '.join(s['tools'])})" if s["tools"] else "no"


def _list_text(summaries: list[dict[str, Any]], width: int) -> str:
    """A table, one entry a line; when it is wider than ``width``, each entry on two lines (its id and status,
    then its templates, tools and revision), rather than a table whose rows all wrap."""
    rows = [
        (s["id"], s["status"], _templates(s), _tools(s), f"rev {s['revision'][:12]}" if s["revision"] else "rev -")
        for s in summaries
    ]
    head = ("id", "status", "templates", "tools", "provenance")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4] for r in [head, *rows]]
    if max(len(line) for line in lines) > width:
        lines = [f"{r[0]}  {r[1]}  {r[4]}\n    templates {r[2]}; tools {r[3]}" for r in rows]
    lines.append(f"{len(rows)} entries; `gguftpl catalog ID` shows one entry's provenance in full")
    return "\n".join(lines)


def _entry_text(s: dict[str, Any]) -> str:
    lines = [
        f"{s['id']}: {s['status']}" + (f" (the {s['family']} family)" if s["family"] else ""),
        f"  revision: {s['revision'] or 'not recorded'}" + (f" ({s['revision_note']})" if s["revision_note"] else ""),
        f"  licence: {s['model_license'] or 'not recorded'}; "
        + ("every template of the repo" if s["complete"] else "not every template of the repo"),
        f"  tools in the prompt: {_tools(s)}",
    ]
    for name, t in s["templates"].items():
        lines.append(f"  template {name}: {t['status']} ({t['proven']})")
        lines.append(
            f"    sha256 {t['sha256']}, {t['length']} bytes"
            + (f", git blob {t['git_blob_sha1']}" if t["git_blob_sha1"] else "")
        )
        lines.append(f"    source: {t['source']}")
        if t["note"]:
            lines.append(f"    note: {t['note']}")
    if s["notes"]:
        lines.append(f"  notes: {s['notes']}")
    return "\n".join(lines)
