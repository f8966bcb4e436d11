"""``bench.py bombs``: a cold ``audit`` and ``verify`` of GGUFs whose default template is a render bomb.

Each shape explodes another way: output (string multiplication in a loop; the same inside a macro, whose output
jinja2 buffers), work without output (nested loops; quadratic string concatenation), unbounded recursion (a
macro calling itself). Every run gets a fresh facts cache, so each audit is cold. Peak RSS is wait4's: the
largest of gguftpl's process and the workers it ended (the render children).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

PY = sys.executable

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
BOMBS = {
    "output": "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",
    "macro output": "{% macro f() %}{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}{% endmacro %}"
    "{{ f() }}" + CHATML,
    "recursion": "{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}",
    "nested loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}" + CHATML,
    "concatenation": "{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ ('x' * 100000) %}"
    "{% endfor %}{{ ns.s }}" + CHATML,
}
"""Shape -> template. ``output`` is issue 26's: 35-52 s and ~814 MB in the render child before the fix."""

Runner = Callable[[list[str], "dict[str, str] | None"], "tuple[float, int, str]"]


def bomb_gguf(path: Path, template: str) -> Path:
    """A small llama.cpp-loadable GGUF (byte-level vocabulary, one-block model) whose default is ``template``."""
    from gguftpl.gguf.tinymodel import byte_level_vocab, tiny_llama_kv, tiny_llama_tensors, tokenizer_kv
    from gguftpl.gguf.writer import write_gguf

    toks, types, merges = byte_level_vocab(("<|im_start|>", "<|im_end|>"))
    kv = {**tiny_llama_kv(), "general.name": path.stem, "tokenizer.chat_template": template}
    kv.update(tokenizer_kv(toks, types, merges, bos="<|im_start|>", eos="<|im_end|>", add_bos=False))
    write_gguf(path, kv, tiny_llama_tensors(len(toks), seed=1))
    return path


def bombs_table(work: Path, runs: int, run: Runner, table: Callable[[list[list[str]]], str]) -> str:
    rows = [["bomb", "command", "median s", "max s", "peak RSS MiB"]]
    for shape, text in BOMBS.items():
        path = bomb_gguf(work / f"bomb-{shape.replace(' ', '-')}.gguf", text)
        for command in ("audit", "verify"):
            times, peaks = [], []
            for _ in range(runs):
                with tempfile.TemporaryDirectory(prefix="gguftpl-bench-cache-") as cache:
                    env = {**os.environ, "GGUFTPL_CACHE_DIR": cache}
                    dt, peak, _out = run([PY, "-m", "gguftpl", command, "--format", "json", str(path)], env)
                times.append(dt)
                peaks.append(peak)
            rows.append([shape, command, f"{statistics.median(times):.1f}", f"{max(times):.1f}", str(max(peaks))])
    return "render bombs, cold (target: the output bomb detected in about a second)\n" + table(rows)
