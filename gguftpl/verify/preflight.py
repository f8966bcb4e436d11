"""What is checked before a file's templates may reach llama.cpp inside this process.

llama.cpp renders templates with no time, size, memory or recursion limits, in the caller's process: a
template that loops, prints gigabytes or overflows the C stack would hang it, eat the machine's memory or kill
it. ``verify`` and ``render --engine llamacpp`` therefore first render the templates with transformers' bounded
renderer and load the templates llama.cpp will load in the parse-check child; a template that had to be
stopped in either is a *render bomb* and never reaches llama.cpp here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gguftpl.engines.llamacpp_choice import LOADED
from gguftpl.errors import GGUFTplError

LOAD_CHECK_TIMEOUT = 20.0
"""Seconds verify and render wait for a template to load in the parse-check child before calling it a hang
(a plain load takes 0.1-0.7 s)."""


def check_regular(path: str) -> None:
    """A missing file, a directory, a FIFO (llama.cpp would block opening it) or a device: one line."""
    from gguftpl.safeio import open_regular

    open_regular(path, what="GGUF file").close()


def incomplete(path: str) -> str | None:
    """Why llama.cpp cannot load ``path`` whatever its templates, or None: tensor data past the end of the
    file (a download cut short, GT004). The stand-in model never reads the file's tensors, so without this
    check verify passed a file ``--load-weights`` (and llama-server) refuses. The verdict is the GT004
    check's own."""
    from gguftpl.gguf.reader import read_header
    from gguftpl.rules.container import truncated_tensor_data
    from gguftpl.rules.context import FileContext

    try:
        with read_header(path) as header:
            found = list(truncated_tensor_data(FileContext(file=path, header=header)))
    except GGUFTplError:
        return None  # an unreadable file: the session reports it in its own words
    return f"{found[0].message} ({found[0].code} {found[0].name})" if found else None


def not_chat(path: str) -> Any:
    """The file's :class:`gguftpl.gguf.modelkind.ModelKind` when its model answers no chat request (an
    embedding model, a reranker), else None: the five stages ask chat questions it has no answer to."""
    from gguftpl.gguf.reader import read_header
    from gguftpl.gguf.templateset import load_templateset

    try:
        with read_header(path) as header:
            kind = load_templateset(header).kind
    except GGUFTplError:
        return None  # an unreadable file: the session reports it in its own words
    return None if kind.generates else kind


def render_bombs(
    path: str,
    messages: list[dict[str, Any]] | None = None,
    tools: list[dict[str, Any]] | None = None,
    also_load: Sequence[str] = (),
) -> list[str]:
    """Templates of ``path`` that transformers' bounded renderer had to stop (time, output size, memory,
    recursion) on ``messages``/``tools`` (default: the probe conversation), rendered with llama.cpp's
    leniencies so a template that only llama.cpp accepts still gets as far as it would there; then the
    templates llama.cpp will load (default, tool_use and ``also_load``), loaded in the parse-check child: one
    that hangs or crashes it there is a bomb too. Each entry is ``NAME: why``."""
    from gguftpl.gguf.reader import read_header
    from gguftpl.gguf.templateset import load_templateset, special_token_text
    from gguftpl.templates import probes

    try:
        header = read_header(path)
    except GGUFTplError:
        return []  # the session reports an unreadable file in its own words
    tset = load_templateset(header)
    # llama.cpp passes the file's own bos/eos texts: `bos_token * 10**7` is empty without them, 120 MB with
    bos, eos = special_token_text(tset, "bos"), special_token_text(tset, "eos")
    msgs = messages if messages is not None else probes.tools_conversation()
    tl = tools if tools is not None else probes.canary_tools()
    texts = {name: tpl.text for name, tpl in tset.templates.items()}
    return _bounded_render_bombs(texts, msgs, tl, bos, eos) or _load_bombs(texts, also_load)


def _bounded_render_bombs(
    texts: dict[str, str], msgs: list[dict[str, Any]], tools: list[dict[str, Any]], bos: str, eos: str
) -> list[str]:
    from gguftpl.engines.transformers import TemplateRenderError, render_hf

    bombs: list[str] = []
    verdicts: dict[str, str | None] = {}  # by text: a file whose default is its tool_use waited twice
    for name, text in texts.items():
        if text not in verdicts:
            verdicts[text] = None
            try:
                render_hf(text, msgs, tools or None, True, bos, eos, lenient=True)
            except TemplateRenderError as exc:
                # RecursionError: one that recursed without end, or nests too deeply for jinja2 to compile
                if exc.overran or exc.exc_type == "RecursionError":
                    verdicts[text] = f"transformers' bounded renderer had to stop: {exc}"
        if verdicts[text] is not None:
            bombs.append(f"{name}: {verdicts[text]}")
    return bombs


def _load_bombs(texts: dict[str, str], also_load: Sequence[str]) -> list[str]:
    # Loading renders the template too, on llama.cpp's own probe inputs (two tools, parallel calls, …) that no
    # conversation of ours reproduces: a template that loops only on those hung this process for good. So the
    # templates llama.cpp will load are first loaded in the parse-check child, bounded in time and memory.
    from gguftpl.engines.llamacpp import crashed_or_hung, parse_check
    from gguftpl.gguf.templateset import sha256_text

    loaded = {name: text for name, text in texts.items() if name in (*LOADED, *also_load)}
    verdicts = parse_check(list(loaded.values()), timeout=LOAD_CHECK_TIMEOUT) if loaded else {}
    bombs: list[str] = []
    for name, text in loaded.items():
        error = verdicts.get(sha256_text(text))
        if error and crashed_or_hung(error):
            bombs.append(f"{name}: {error}")
    return bombs
