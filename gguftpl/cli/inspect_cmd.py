from __future__ import annotations

import json
import sys

import click

from gguftpl.errors import UsageError


@click.command("inspect")
@click.argument("files", nargs=-1, required=False)
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
def command(
    files: tuple[str, ...], fmt: str, template_name: str | None, raw: bool, repos: tuple[str, ...] = ()
) -> None:
    """Show what a GGUF says about chat: templates, special tokens, provenance (header only).

    FILE may be local, hf://ORG/REPO/FILE.gguf[@REV] or an https://…/resolve/… URL (header fetched with
    HTTP Range requests; JSON then carries a "remote" object with the bytes and requests it cost).
    """
    from gguftpl.gguf.hubref import is_remote
    from gguftpl.gguf.open import open_header
    from gguftpl.inspect import SCHEMA_VERSION, inspect_header
    from gguftpl.templates.templateset import load_templateset

    if repos:
        from gguftpl.gguf.remote import repo_file_specs

        files = tuple(files) + tuple(spec for r in repos for spec in repo_file_specs(r))
        if not files:
            raise UsageError("no GGUF files in " + ", ".join(repos))
    if not files:
        raise click.UsageError("Missing argument 'FILES...' (or --repo ORG/REPO).")
    if raw and not template_name:
        raise UsageError("--raw needs --template NAME")
    if raw and len(files) != 1:
        raise UsageError("--raw takes exactly one file")
    reports = []
    for f in files:
        header, label, extra = open_header(f)
        ts = load_templateset(header)
        if template_name:
            tpl = ts.templates.get(template_name)
            if tpl is None:
                have = ", ".join(ts.templates) or "none"
                raise UsageError(f"{label} has no template named {template_name!r} (has: {have})")
            if raw:
                sys.stdout.buffer.write(tpl.text.encode("utf-8"))
                return
        info = inspect_header(header, label, ts)
        if extra:
            # remote reads report what they cost; a local split GGUF says which shard was read
            info["remote" if is_remote(f) else "split"] = extra
        if template_name:
            info["templates"] = [t for t in info["templates"] if t["name"] == template_name]
        reports.append((info, ts))
    if fmt == "json":
        payload = {"schema_version": SCHEMA_VERSION, "files": [r for r, _ in reports]}
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False, default=str))
        return
    for info, ts in reports:
        click.echo(_text(info, ts, template_name))


def _text(info: dict, ts, only: str | None) -> str:  # type: ignore[no-untyped-def]
    from gguftpl.safeio import printable

    lines = [click.style(printable(info["path"]), bold=True)]
    lines.append(
        f"  GGUF v{info['gguf_version']} ({info['byteorder']} endian), arch {info['architecture'] or '?'}, "
        f"{info['file_type'] or 'file type ?'}, {info['tensor_count']} tensors, data at byte {info['data_offset']} "
        f"(alignment {info['alignment']})"
    )
    tok = info["tokenizer"]
    lines.append(
        f"  tokenizer: {tok['model'] or '?'}, {tok['vocab_size'] or 0} tokens, context {info['context_length']}"
    )
    if not info["templates"]:
        lines.append(click.style("  no chat template", fg="yellow"))
    for t in info["templates"]:
        lines.append(
            f"  template {printable(t['name'])} ({printable(t['key'])}): {t['length']} bytes, {t['lines']} lines, "
            f"sha256 {t['sha256']}"
        )
        text = ts.templates[t["name"]].text
        head = text.splitlines()[:3] if only is None else text.splitlines()
        for ln in head:
            lines.append("    | " + printable(ln if len(ln) <= 110 else ln[:107] + "..."))
        if only is None and text.count("\n") >= 3:
            lines.append("    | …")
    tl = info["template_list"]
    if tl["names"] is not None and not tl["agrees"]:
        lines.append(
            click.style(
                f"  tokenizer.chat_templates disagrees with the keys: unlisted {tl['unlisted']}, "
                f"listed without a key {tl['listed_without_key']}",
                fg="yellow",
            )
        )
    if info["special_tokens"]:
        parts = [f"{r}={v['id']} {v['text']!r} {v['type'] or ''}".rstrip() for r, v in info["special_tokens"].items()]
        lines.append("  special tokens: " + ", ".join(parts))
    lines.append(f"  add_bos={info['add_bos']} add_eos={info['add_eos']}")
    for k, v in info["provenance"].items():
        lines.append(f"  {printable(k)} = {printable(str(v))}")
    for note in (info.get("remote") or info.get("split") or {}).get("notes", []):
        lines.append(click.style(f"  note: {note}", fg="yellow"))
    return "\n".join(lines)
