"""A diff against upstream as text (the report ``gguftpl diff`` prints) or as JSON-ready data with its
GT5xx findings. Plain strings and dicts; the CLI prints them."""

from __future__ import annotations

from typing import Any

from gguftpl.findings import fix_text
from gguftpl.upstream.diff import DiffResult, diff_findings

_STATUS = {
    "identical": "identical",
    "changed": "changed",
    "gguf_only": "only in the GGUF",
    "upstream_only": "only upstream",
    "not_in_source": "not in the catalog entry (partial)",
}

_ORIGIN = {
    "hub": "Hub",
    "cache": "local cache (offline)",
    "dir": "folder",
    "json": "JSON",
    "catalog": "bundled catalog",
}


def diff_data(result: DiffResult) -> dict[str, Any]:
    """``result.to_dict()`` with the findings an audit would report for it."""
    data = result.to_dict()
    data["findings"] = [{**f.to_dict(), "fix": fix_text(f) or None} for f in diff_findings(result)]
    return data


def diff_text(result: DiffResult) -> str:
    up = result.upstream
    origin = _ORIGIN.get(up.origin, up.origin)
    how = result.how_found
    if how.startswith(origin):  # "bundled catalog (matched)" under the origin "bundled catalog": say it once
        how = how[len(origin) :].strip(" ()")
    how = f"; {how}" if how else ""
    lines = [f"{result.file}", f"  upstream: {up.label} ({origin}{how})"]
    if up.commit_sha:
        lines.append(f"  commit:   {up.commit_sha}")
    lines += ["", "Templates", *_template_lines(result), "", "Special tokens", *_token_lines(result)]
    if result.behaviour:
        lines += ["", "Behaviour (the same probe conversations rendered with each side's runtime template)"]
        lines += _behaviour_lines(result)
    lines.append("")
    n_t, n_k, n_b = len(result.template_differences), len(result.token_differences), len(result.behaviour_differences)
    if result.identical:
        lines.append("identical to upstream")
    else:
        lines.append(
            f"differences: {n_t} template{'s' if n_t != 1 else ''}, {n_k} special token{'s' if n_k != 1 else ''}, "
            f"{n_b} probe{'s' if n_b != 1 else ''}"
        )
    # the report ends as each file of an audit does: the verdict per runtime, and the file's one repair
    from gguftpl.repair import templates_command, verdict_fix_lines

    repair = result.repair
    if result.runtimes is not None:
        lines += verdict_fix_lines(result.runtimes, repair, result.upstream_own)
    if (repair is None or not repair.needed) and result.lost_templates and up.repo_id:
        lines.append(f"fix: {templates_command(result.file, up.origin, up.repo_id)}")
    return "\n".join(lines) + "\n"


def _template_lines(result: DiffResult) -> list[str]:
    lines = []
    width = max([len(t.name) for t in result.templates] + [8])
    for t in result.templates:
        status = _STATUS.get(t.status, t.status)
        if t.status == "changed" and t.whitespace_only:
            status += " (whitespace only)"
        g = f"gguf {t.gguf_sha256[:12]} ({t.gguf_length} B)" if t.gguf_sha256 else "gguf -"
        u = f"upstream {t.upstream_sha256[:12]} ({t.upstream_length} B)" if t.upstream_sha256 else "upstream -"
        lines.append(f"  {t.name:<{width}}  {status:<16} {g}  {u}")
        if t.name in result.upstream.statuses:
            from gguftpl.upstream.catalog import proven

            lines.append(f"  {'':<{width}}  catalog text {proven(result.upstream.statuses[t.name])}")
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
    return lines


def _token_lines(result: DiffResult) -> list[str]:
    if not result.tokens_compared:
        return ["  not compared (the upstream source has no token data)"]
    lines = [] if result.tokens else ["  identical (bos/eos ids and texts, added tokens, special/CONTROL status)"]
    for d in result.tokens:
        mark = "-" if d.severity == "difference" else "note:"
        lines.append(f"  {mark} {d.message}")
    return lines


def _behaviour_lines(result: DiffResult) -> list[str]:
    lines = []
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
    return lines
