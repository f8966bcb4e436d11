"""``gguftpl render FILE``: print the exact prompt an engine renders, marking where the tool schemas landed."""

from __future__ import annotations

import sys
from typing import Any

import click

from gguftpl.cli.modelarg import LOCAL_MODEL
from gguftpl.cli.output import echo, use_color, width_option
from gguftpl.cli.tool_options import open_from_options, pop_tool_source_options, tool_source_options


@click.command("render")
@click.argument("file", type=LOCAL_MODEL)
@click.option(
    "--template",
    "template",
    metavar="NAME",
    default=None,
    help="Template to render (default: the one "
    "llama.cpp would pick: tool_use when there are tools and the file has one, else default).",
)
@click.option(
    "--messages",
    "messages_file",
    type=click.Path(dir_okay=False),
    default=None,
    help='Conversation JSON: a list of messages or {"messages": [...]} (default: samples/conversation.json).',
)
@click.option("--no-tools", is_flag=True, help="Render without tools (default tools: samples/tools.json).")
@click.option(
    "--engine",
    type=click.Choice(
        [
            "hf",
            "transformers",
            "llamacpp",
            "hfjs",
            "minijinja",
            "minijinja/tgi",
            "minijinja/mistralrs",
            "minijinja/dynamo",
            "ollama",
        ]
    ),
    default="hf",
    show_default=True,
    help="hf (= transformers): transformers' jinja2, as vLLM and SGLang render; llamacpp: llama.cpp's own engine "
    "(needs xllamacpp); hfjs: @huggingface/jinja, LM Studio's engine; minijinja/tgi|mistralrs|dynamo: minijinja "
    "as that runtime configures it (minijinja = minijinja/tgi); ollama: Go text/template on the curated template "
    "Ollama puts in place of the default. `gguftpl engines` lists what is installed.",
)
@click.option("--load-weights", is_flag=True, help="llamacpp engine: load the real file instead of a stand-in.")
@click.option(
    "--raw",
    is_flag=True,
    help="Print only the prompt, byte for byte, with no line numbers, marks or notes (control characters "
    "included: otherwise they are shown as escapes).",
)
@click.option("--color/--no-color", default=None, help="Highlight the tool schemas (default: only on a terminal).")
@tool_source_options
@width_option
def command(
    file: str,
    template: str | None,
    messages_file: str | None,
    no_tools: bool,
    engine: str,
    load_weights: bool,
    raw: bool,
    color: bool | None,
    **kwargs: Any,
) -> None:
    """Print the prompt ENGINE renders for a conversation with tools, and where each tool's name,
    description and parameters landed (line numbers; highlighted on a terminal). A tool missing from the
    prompt is named: the model would never see it."""
    from gguftpl.verify.render import load_messages_file, render_prompt
    from gguftpl.verify.tools import openai_tools

    source_opts = pop_tool_source_options(kwargs)
    messages = load_messages_file(messages_file) if messages_file else None
    sources = open_from_options(source_opts)
    try:
        tools = openai_tools(sources.tools) if sources is not None else None
    finally:
        if sources is not None:
            sources.close()
    if no_tools:
        tools = []
    from gguftpl.cli.modelarg import store_model

    result = render_prompt(
        file,
        engine=engine,
        template=template,
        messages=messages,
        tools=tools,
        load_weights=load_weights,
        store=store_model(file),
    )
    if raw:
        sys.stdout.write(result.prompt)
        sys.stdout.flush()
        return
    use = use_color(color)
    echo(quoted_prompt(result.prompt, result.spans if use else []), color=use)
    echo(f"--- engine: {result.engine}; template: {result.template}")
    for note in result.notes:
        echo(f"--- note: {note}")
    if result.tools:
        echo(_tool_note(result.spans))


def quoted_prompt(prompt: str, spans: list[Any]) -> str:
    """The prompt behind a line-number gutter, control and invisible characters shown as escapes, the tool
    pieces in ``spans`` highlighted: a prompt line can never pass for one of gguftpl's own lines, start a
    GitHub workflow command or drive the terminal (``--raw`` gives the exact bytes)."""
    from gguftpl.safeio import printable

    pieces: list[tuple[str, bool]] = []
    pos = 0
    for start, end in sorted({(s.start, s.start + len(s.text)) for s in spans if s.found}):
        if start < pos:
            continue
        pieces += [(prompt[pos:start], False), (prompt[start:end], True)]
        pos = end
    pieces.append((prompt[pos:], False))
    lines: list[list[str]] = [[]]
    for text, marked in pieces:
        for i, part in enumerate(text.split("\n")):
            if i:
                lines.append([])
            if part:  # styled line by line, so the gutter never takes the highlight
                shown = printable(part)
                lines[-1].append(click.style(shown, reverse=True, bold=True) if marked else shown)
    if len(lines) > 1 and not lines[-1]:
        lines.pop()  # the prompt's final newline ends the last line; it opens no new one
    width = len(str(len(lines)))
    return "\n".join(f"{n:>{width}} | {''.join(parts)}" for n, parts in enumerate(lines, 1))


def _tool_note(spans: list[Any]) -> str:
    by_tool: dict[str, list[Any]] = {}
    for s in spans:
        by_tool.setdefault(s.tool, []).append(s)
    lines = []
    for tool, items in by_tool.items():
        found = [s for s in items if s.found]
        missing = [s for s in items if not s.found]
        if not found:
            lines.append(f"--- tool {tool}: NOT in the prompt (the model never sees it)")
            continue
        where = ", ".join(f"{s.kind} {s.text[:24]!r} line {s.line}" for s in found)
        lines.append(f"--- tool {tool}: {where}")
        if missing:
            lines.append(f"--- tool {tool}: missing: {', '.join(f'{s.kind} {s.text[:24]!r}' for s in missing)}")
    return "\n".join(lines)
