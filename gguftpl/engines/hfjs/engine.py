"""``hfjs``: what LM Studio's template engine does with a template — ``@huggingface/jinja`` under Node.js.

LM Studio's template errors are byte-identical to ``@huggingface/jinja``'s ("Parser Error: Expected closing statement
token. OpenSquareBracket !== CloseStatement." is ``parser.ts:52``, "Unknown test: …" ``runtime.ts:1298``,
"Unexpected character: ~" ``lexer.ts:322``; huggingface.js @fe42e680, ``packages/jinja/src``; see
``../shared/RUNTIMES.md`` §2). So this adapter runs that library, at the version pinned in ``package-lock.json``,
the way transformers.js calls it (``PreTrainedTokenizer.apply_chat_template`` in ``src/tokenizers.js``:
``new Template(chat_template)``, then ``render({messages, add_generation_prompt, tools, documents,
...special_tokens_map, ...kwargs})``). ``Template``'s own constructor sets ``trim_blocks`` and ``lstrip_blocks``
(``src/index.ts``) and ``setupGlobals`` (``src/runtime.ts:762``) provides ``raise_exception``, ``range``,
``strftime_now``, ``namespace`` and the constants: a request that passes one of them again gets the engine's own
"Variable already declared", as a caller of transformers.js would. The library's errors carry no position (the
lexer and parser throw bare messages), so ``EngineError.line`` is always None here: the message is verbatim.

The engine runs in one persistent Node.js worker (``worker.mjs`` beside this module, :mod:`gguftpl.worker`'s frames):
renders in a ``worker_threads`` thread with its own heap limit, the process under RLIMIT_DATA, each conversation
under the adapter's time limit. A render that loops, recurses without end or eats memory is an ``overrun``; a
Node.js that dies is ``crashed``; the next render gets a fresh worker.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from gguftpl import worker
from gguftpl.engines.base import (
    UNAVAILABLE,
    Availability,
    EngineError,
    Rendered,
    RenderRequest,
    unavailable,
)
from gguftpl.engines.childanswers import ChildEngine
from gguftpl.engines.hfjs.node import Node, find_node
from gguftpl.engines.hfjs.package import NAME, PACKAGE, WORKER_SCRIPT, missing_reason, pinned
from gguftpl.engines.home import engine_dir
from gguftpl.worker import Op, Worker, WorkerSpec

INSTALL_HINT = "gguftpl engines install hfjs"
CHILD = ChildEngine(PACKAGE, "Node.js", NAME)
DEFAULT_TIMEOUT = 5.0
"""Seconds one conversation may take to render (real templates: about a millisecond)."""
STARTUP_TIMEOUT = 60.0
"""Seconds Node.js may take to start and import the library (a fraction of a second when warm)."""
MAX_OUTPUT = 1 << 20
"""Characters (UTF-16 code units) one prompt may have; real prompts with tools are tens of kilobytes."""
RENDER_HEAP_MB = 1024
"""The render thread's V8 old-generation limit (``resourceLimits.maxOldGenerationSizeMb``)."""
MAIN_HEAP_MB = 64
"""The main thread's V8 heap (``--max-old-space-size``): it only moves frames."""
DATA_LIMIT = 2 << 30
"""Bytes of writable private memory (RLIMIT_DATA) the whole Node.js process may hold: the render heap, the main
thread's and Node's own (about 100 MB at rest), so a leak past V8's limits is a crash, not the machine's memory."""
_OPS = ("load", "render", "version")


class HfJinjaEngine:
    """``@huggingface/jinja`` as LM Studio (and transformers.js) render chat templates with it."""

    name = NAME

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_output: int = MAX_OUTPUT,
        heap_mb: int = RENDER_HEAP_MB,
        data_limit: int = DATA_LIMIT,
    ) -> None:
        self.timeout = timeout
        self.max_output = max_output
        self.heap_mb = heap_mb
        self.data_limit = data_limit

    def availability(self) -> Availability:
        """Installed only when a Node.js 18+ runs here and the pinned package is in ``engine_dir("hfjs")``."""
        return self._found()[0]

    def load(self, template: str) -> EngineError | None:
        """None when ``@huggingface/jinja`` parses ``template``; else its error (``syntax``: the lexer's or
        parser's own message), or why it could not say."""
        found, node = self._found()
        if node is None:
            return EngineError(UNAVAILABLE, found.unknown_reason())
        return CHILD.load(self._worker(node), template, self.timeout)

    def render(self, template: str, requests: Sequence[RenderRequest]) -> list[Rendered]:
        """One :class:`Rendered` per request, in order. Each conversation is its own item under the time limit;
        after one overruns, the rest of this template's are not tried (``overrun``, saying so)."""
        requests = list(requests)
        if not requests:
            return []
        found, node = self._found()
        if node is None:
            return unavailable(found, len(requests))
        items = [{"template": template, "requests": [r.to_dict()]} for r in requests]
        return CHILD.render(self._worker(node), items, self.timeout)

    def version(self) -> dict[str, Any] | None:
        """What the running worker says it is (``{"library", "version", "node"}``), or None when not installed
        or it would not answer."""
        _, node = self._found()
        if node is None:
            return None
        outcome = self._worker(node).ask("version", None, STARTUP_TIMEOUT)
        return dict(outcome.value) if outcome.ok and isinstance(outcome.value, Mapping) else None

    def prestart(self) -> None:
        """Start the worker now without waiting, so Node.js starts while the caller does other work."""
        _, node = self._found()
        if node is not None:
            self._worker(node).prestart()

    def worker(self) -> Worker | None:
        """The shared worker this engine renders in (None when not installed)."""
        _, node = self._found()
        return self._worker(node) if node is not None else None

    # ---------------------------------------------------------------------------------------------- inside

    def _found(self) -> tuple[Availability, Node | None]:
        want, _ = pinned()
        node = find_node()
        if isinstance(node, str):
            return Availability(NAME, False, install_hint=INSTALL_HINT, detail=node), None
        reason = missing_reason(engine_dir(NAME))
        if reason is not None:
            return Availability(NAME, False, install_hint=INSTALL_HINT, detail=reason), None
        version = f"{PACKAGE} {want} on Node {node.version}"
        return Availability(NAME, True, version=version, install_hint=INSTALL_HINT), node

    def _worker(self, node: Node) -> Worker:
        spec = _spec(node.path, str(engine_dir(NAME)), self.max_output, self.heap_mb, self.data_limit)
        return worker.shared(spec)


@functools.lru_cache(maxsize=8)
def _spec(node: str, directory: str, max_output: int, heap_mb: int, data_limit: int) -> WorkerSpec:
    """One worker per Node, install folder and bounds (:func:`gguftpl.worker.shared` keeps one per name)."""
    return WorkerSpec(
        f"hfjs worker ({node}, {directory}, {heap_mb} MiB, {max_output} chars)",
        ops={op: Op(f"worker.mjs:{op}") for op in _OPS},
        command=(
            node,
            f"--max-old-space-size={MAIN_HEAP_MB}",
            str(WORKER_SCRIPT),
            directory,
            str(max_output),
            str(heap_mb),
        ),
        data_limit=data_limit,
        startup_timeout=STARTUP_TIMEOUT,
        env={"NODE_OPTIONS": "", "NODE_NO_WARNINGS": "1"},
    )


ENGINE = HfJinjaEngine()
"""The engine with its default bounds."""
