"""``gguftpl verify FILE``: does tool calling survive llama.cpp itself? A trace of stages, each PASS, FAIL
or SKIP with its evidence, from llama.cpp's own engine and parser (xllamacpp, in-process, 127.0.0.1).

Exit codes: 0 every stage passed; 1 a stage failed; 2 usage error, unreadable file, or llama.cpp missing.
"""

from __future__ import annotations

from typing import Any

import click

from gguftpl.cli.output import echo, echo_json
from gguftpl.cli.tool_options import (
    open_from_options,
    pop_tool_check_options,
    pop_tool_source_options,
    tool_check_options,
    tool_source_options,
    wants_tools,
)

_MARK = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP", "warn": "WARN"}
_COLOR = {"pass": "green", "fail": "red", "skip": "yellow", "warn": "yellow"}


@click.command("verify")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Output format."
)
@click.option(
    "--load-weights",
    is_flag=True,
    help="Load the real file into llama.cpp instead of a stand-in (the file's tokenizer on a zero-weight body).",
)
@tool_source_options
@tool_check_options
@click.option(
    "--with-data",
    is_flag=True,
    help="JSON: add each stage's data (per-tool token costs, missing schema items, prompts, parsed calls).",
)
def command(file: str, fmt: str, load_weights: bool, with_data: bool = False, **kwargs: Any) -> None:
    """Verify tool calling through llama.cpp itself: which template it picks, whether a canary tool's schema
    reaches the prompt, whether a call written in the template's own dialect is parsed back, whether the tool
    result renders in the next turn, and whether llama.cpp and transformers render the same prompt.

    With --tools/--mcp/--mcp-url, the tools you really run are checked too (schema reach, context budget,
    one round trip). Needs xllamacpp: pip install 'gguftpl[llamacpp]'.

    Exit status: 0 all stages passed, 1 a stage failed, 2 error.
    """
    from gguftpl.errors import UsageError
    from gguftpl.verify.session import require_xllamacpp
    from gguftpl.verify.stages import verify_file
    from gguftpl.verify.tools import parse_arguments_json

    source_opts = pop_tool_source_options(kwargs)
    check_opts = pop_tool_check_options(kwargs)
    if not wants_tools(source_opts) and (check_opts.get("call") or check_opts.get("call_args")):
        # without tools of the user's own, the canary tool is called: --call/--args would be ignored silently
        raise UsageError("--call and --args choose one of your tools: give them with --tools, --mcp or --mcp-url")
    require_xllamacpp()
    args = parse_arguments_json(check_opts["call_args"]) if check_opts.get("call_args") else None
    if args is not None and not isinstance(args, dict):
        raise UsageError("--args must be a JSON object")
    sources = open_from_options(source_opts)
    try:
        tools = sources.tools if sources is not None else None
        dispatch = None
        if sources is not None and tools:
            from gguftpl.verify.roundtrip import pick_tool

            dispatch = sources.dispatcher_for(pick_tool(tools, check_opts.get("call")))
        result = verify_file(
            file,
            load_weights=load_weights,
            tools=tools,
            dispatch=dispatch,
            call=check_opts.get("call"),
            arguments=args,
            max_tool_share=check_opts.get("max_tool_share"),
        )
    finally:
        if sources is not None:
            sources.close()
    if fmt == "json":
        echo_json(result.to_dict(with_data=with_data))
    else:
        echo(_text(result), color=None)
    raise SystemExit(0 if result.ok else 1)


def _text(result: Any) -> str:
    from gguftpl.safeio import printable
    from gguftpl.verify.result import CORE_STAGES

    if result.load_weights:
        how = "real weights"
    elif result.standin is not None:
        how = f"stand-in: the file's tokenizer ({result.standin['vocab']}, {result.standin['n_vocab']} tokens)"
    else:
        how = "stand-in"
    t = result.timings.get("total_s")
    if t is not None:
        how += f", {t:.1f} s"
    lines = [f"{printable(result.path)}: llama.cpp (xllamacpp, {how})"]
    for i, st in enumerate(result.stages, 1):
        mark = click.style(_MARK.get(st.status, st.status.upper()), fg=_COLOR.get(st.status), bold=True)
        num = f"{i}." if st.name in CORE_STAGES else "  "
        lines.append(f"  {mark} {num} {st.name}")
        for ev_line in st.evidence.splitlines() or [""]:
            lines.append(f"          {printable(ev_line)}")
    failed = [s.name for s in result.stages if not s.ok]
    lines.append("ok: every stage passed" if not failed else f"failed: {', '.join(failed)}")
    if failed:
        lines.append(_repair_hint(result.path))
    return "\n".join(lines)


def _repair_hint(path: str) -> str:
    """Point at the repair: the upstream repo when the file's metadata or the catalog names it (no network)."""
    import shlex

    repo = None
    try:
        from gguftpl.gguf.reader import read_header
        from gguftpl.templates.templateset import load_templateset
        from gguftpl.upstream.discover import find_upstream_repo

        repo, _ = find_upstream_repo(load_templateset(read_header(path)))
    except Exception:  # a hint must never turn a verdict into an error
        repo = None
    q = shlex.quote(path)
    if repo:
        return f"repair: gguftpl patch {q} --from-hub {repo} -o FIXED.gguf && gguftpl verify FIXED.gguf"
    return (
        f"repair: gguftpl diff {q} --hub ORG/REPO shows what upstream has; "
        f"gguftpl patch {q} --from-hub ORG/REPO -o FIXED.gguf"
    )
