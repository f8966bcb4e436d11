"""A small synchronous client for MCP servers, over the official ``mcp`` SDK (v2, imported lazily).

gguftpl starts the server (stdio) or connects to it (streamable HTTP), lists its tools and, for the round
trip in ``verify``, calls one — all inside one session, as a host does::

    with McpConnection(McpServerSpec.stdio("python server.py"), timeout=20) as conn:
        tools = conn.list_tools()            # wire-shape dicts: name, description, inputSchema
        result = conn.call_tool("lookup", {"q": "x"})

The SDK is async and built on anyio task groups, which must be entered and left in the same task; so
each connection owns one thread running one event loop, and the caller's operations are handed to it.
Every failure (server will not start, does not answer in time, dies mid-call, answers with a JSON-RPC
error) becomes a one-line :class:`ToolSourceError`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import shlex
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse

from gguftpl import limits
from gguftpl.errors import ToolSourceError
from gguftpl.verify import mcpwire
from gguftpl.verify.tools import ToolSpec, mcp_tool_to_spec, merge_tool_lists, resolve_prefix

DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class McpServerSpec:
    """How to reach one MCP server."""

    transport: str
    """``stdio`` or ``http`` (streamable HTTP)."""
    command: tuple[str, ...] = ()
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment for a stdio server (merged over the SDK's safe default environment)."""
    cwd: str | None = None

    @classmethod
    def stdio(
        cls, command: str | list[str], env: dict[str, str] | None = None, cwd: str | None = None
    ) -> McpServerSpec:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise ToolSourceError("--mcp needs a command to start the server")
        return cls("stdio", command=tuple(argv), env=dict(env or {}), cwd=cwd)

    @classmethod
    def http(cls, url: str) -> McpServerSpec:
        try:
            u = urlparse(url)
        except ValueError:  # "Invalid IPv6 URL"
            raise ToolSourceError(f"--mcp-url needs an http(s) URL, got {url!r}") from None
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ToolSourceError(f"--mcp-url needs an http(s) URL, got {url!r}")
        return cls("http", url=url)

    @property
    def label(self) -> str:
        """How errors name the server before it has told us its name."""
        text = shlex.join(self.command) if self.transport == "stdio" else str(self.url)
        return text if len(text) <= 100 else text[:97] + "..."

    @property
    def fallback_name(self) -> str:
        if self.transport == "stdio":
            return Path(self.command[-1] if len(self.command) > 1 else self.command[0]).stem or "server"
        return urlparse(str(self.url)).hostname or "server"


@dataclass(frozen=True)
class CallResult:
    """What ``tools/call`` returned."""

    text: str
    """The text content blocks joined by newlines, as hosts put them into the ``tool`` message."""
    is_error: bool
    raw: dict[str, Any]
    """The result as JSON (``content``, ``structuredContent``, ``isError``)."""


class _LogTap(logging.Handler):
    """Keeps the SDK's own log lines (a server's broken stdout, a failed teardown) for our error messages.

    Having a handler on the ``mcp`` logger also keeps Python's last-resort handler from printing SDK
    tracebacks on the user's terminal; records still propagate to whatever the application configured.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class McpConnection:
    """One live MCP session, used synchronously. A context manager; not reusable after exit."""

    def __init__(self, spec: McpServerSpec, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.spec = spec
        self.timeout = timeout
        self.server_name: str = spec.fallback_name
        self.server_version: str = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Any] | None = None
        self._thread: threading.Thread | None = None
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._errlog: IO[str] | None = None
        self._tap = _LogTap()
        self._closed = False
        self._task: asyncio.Task[Any] | None = None
        self._busy = False
        self._encoding: str | None = None
        """The line-bounded codec of a stdio server's output (``mcpwire.bounded_encoding``)."""
        self._op_scope: Any = None
        """The cancel scope of the operation in progress; a message over the bound cancels it."""
        self.too_large: str | None = None
        """Set when the server sent a message over ``limits.MAX_MCP_MESSAGE_BYTES`` (it was dropped)."""

    # -- lifecycle ------------------------------------------------------------------------------------

    def __enter__(self) -> McpConnection:
        try:
            import mcp  # noqa: F401
        except ImportError:
            raise ToolSourceError("MCP support needs the 'mcp' package: pip install 'gguftpl[mcp]'") from None
        if self.spec.transport == "stdio":
            exe = self.spec.command[0]
            if shutil.which(exe, path=_search_path(self.spec)) is None and not os.path.isfile(exe):
                raise ToolSourceError(f"MCP server {self.spec.label!r}: command not found: {exe}")
            # the server's stderr goes to a file we read back for error messages, not the user's terminal
            self._errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            self._encoding = mcpwire.bounded_encoding(self._overflowed)
        logging.getLogger("mcp").addHandler(self._tap)
        self._thread = threading.Thread(target=self._thread_main, name="gguftpl-mcp", daemon=True)
        self._thread.start()
        try:
            self._ready.result(timeout=self.timeout + 5)
        except concurrent.futures.TimeoutError:
            self._shutdown()
            raise ToolSourceError(
                f"MCP server {self.spec.label!r} did not answer initialize within {self.timeout:g} s"
            ) from None
        except (KeyboardInterrupt, SystemExit):
            self._shutdown()
            raise
        except BaseException as exc:
            why = self._describe(exc)  # before shutdown closes the server's stderr log
            self._shutdown()
            raise ToolSourceError(f"MCP server {self.spec.label!r} failed to start: {why}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        self._shutdown()

    def _shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._loop is not None and self._queue is not None and self._thread and self._thread.is_alive():
            try:
                self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
                if self._busy and self._task is not None:
                    # a call in flight (a Ctrl-C while a tool never answers) would hold the loop until its
                    # timeout, past the join below: cancel it so the SDK's teardown starts now
                    self._loop.call_soon_threadsafe(self._task.cancel)
            except RuntimeError:  # loop already closed
                pass
        if self._thread is not None:
            # the SDK bounds its own teardown (close stdin, SIGTERM, SIGKILL: ~6 s worst case)
            self._thread.join(timeout=15)
        logging.getLogger("mcp").removeHandler(self._tap)
        if self._errlog is not None:
            self._errlog.close()
        if self._encoding is not None:
            mcpwire.release_encoding(self._encoding)

    def _overflowed(self) -> None:
        """A message passed the bound (called on the event loop's thread, as the SDK reads): it is dropped,
        and the operation waiting for it ends now with what was too big."""
        self.too_large = (
            f"an answer larger than {limits.MAX_MCP_MESSAGE_BYTES:,} bytes, the bound on one MCP message "
            "(a real one is kilobytes); not read"
        )
        if self._op_scope is not None:
            self._op_scope.cancel()

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through the futures
            if not self._ready.done():
                self._ready.set_exception(exc)

    async def _serve(self) -> None:
        import anyio
        from mcp import ClientSession

        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        self._task = asyncio.current_task()
        pending: list[concurrent.futures.Future[Any]] = []
        try:
            async with mcpwire.screened(self._transport()) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write, read_timeout_seconds=self.timeout) as session:
                    with anyio.fail_after(self.timeout), anyio.CancelScope() as self._op_scope:
                        init = await session.initialize()
                    self._op_scope = None
                    if self.too_large:
                        raise ToolSourceError(f"initialize: {self.too_large}")
                    info = getattr(init, "server_info", None)
                    if info is not None and getattr(info, "name", None):
                        self.server_name = info.name
                        self.server_version = getattr(info, "version", "") or ""
                    self._ready.set_result(None)
                    while True:
                        item = await self._queue.get()
                        if item is None:
                            break
                        op, fut = item
                        pending.append(fut)
                        self._busy = True
                        try:
                            with anyio.fail_after(self.timeout), anyio.CancelScope() as self._op_scope:
                                fut.set_result(await op(session))
                            if self.too_large and not fut.done():  # cancelled by _overflowed
                                fut.set_exception(ToolSourceError(self.too_large))
                        except BaseException as exc:  # noqa: BLE001 - reported by the caller's thread
                            fut.set_exception(exc)
                            if not isinstance(exc, Exception):
                                raise
                        finally:
                            self._busy = False
                            self._op_scope = None
        finally:
            for fut in pending:
                if not fut.done():
                    fut.set_exception(ToolSourceError("the MCP connection closed"))

    def _transport(self) -> Any:
        if self.spec.transport == "stdio":
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(
                command=self.spec.command[0],
                args=list(self.spec.command[1:]),
                env=dict(self.spec.env) or None,
                cwd=self.spec.cwd,
                encoding=self._encoding or "utf-8",
            )
            return stdio_client(params, errlog=self._errlog)  # type: ignore[arg-type]
        return _http_transport(str(self.spec.url))

    # -- operations -------------------------------------------------------------------------------------

    def _run(self, what: str, op: Callable[[Any], Awaitable[Any]]) -> Any:
        if self._closed or self._loop is None or self._queue is None:
            raise ToolSourceError(f"MCP server {self.server_name!r}: not connected")
        if self._thread is None or not self._thread.is_alive():
            raise ToolSourceError(f"MCP server {self.server_name!r}: the connection is gone ({what})")
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (op, fut))
        except RuntimeError:  # the loop closed between the check above and now
            raise ToolSourceError(f"MCP server {self.server_name!r}: the connection is gone ({what})") from None
        try:
            return fut.result(timeout=self.timeout + 5)
        except concurrent.futures.TimeoutError:
            raise ToolSourceError(
                f"MCP server {self.server_name!r}: no answer to {what} within {self.timeout:g} s"
            ) from None
        except ToolSourceError as exc:
            if self.too_large and str(exc) == self.too_large:
                raise ToolSourceError(f"MCP server {self.server_name!r}: {what}: {exc}") from None
            raise
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            raise ToolSourceError(f"MCP server {self.server_name!r}: {what} failed: {self._describe(exc)}") from None

    def list_tools(self) -> list[dict[str, Any]]:
        """All tools the server offers (following pagination), in wire shape (``inputSchema``)."""

        async def op(session: Any) -> tuple[list[dict[str, Any]], bool]:
            from mcp import types

            out: list[dict[str, Any]] = []
            cursor: str | None = None
            for _ in range(limits.MAX_MCP_PAGES):  # a server whose cursor never ends must not hang us
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                res = await session.list_tools(params=params)
                out.extend(t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in res.tools)
                cursor = res.next_cursor
                if not cursor or len(out) > limits.MAX_TOOLS:  # past the bound: refused by the count below
                    return out, True
            return out, False

        tools, ended = self._run("tools/list", op)
        if not ended:
            # a list cut short would be checked as if it were the server's: say so instead
            raise ToolSourceError(
                f"MCP server {self.server_name!r}: tools/list still had a next page after "
                f"{limits.MAX_MCP_PAGES:,} pages"
            )
        if len(tools) > limits.MAX_TOOLS:
            raise ToolSourceError(
                f"MCP server {self.server_name!r}: {len(tools):,} tools, more than the {limits.MAX_TOOLS:,} one "
                "source may offer (hosts cap a request far lower: OpenAI at 128)"
            )
        return list(tools)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """``tools/call``; a result with ``isError`` is returned (the host shows it to the model), not raised."""

        async def op(session: Any) -> CallResult:
            res = await session.call_tool(name, arguments)
            raw = res.model_dump(mode="json", by_alias=True, exclude_none=True)
            texts = [b.get("text", "") for b in raw.get("content", []) if b.get("type") == "text"]
            if not texts and raw.get("structuredContent") is not None:
                import json

                texts = [json.dumps(raw["structuredContent"], ensure_ascii=False)]
            return CallResult(text="\n".join(texts), is_error=bool(raw.get("isError")), raw=raw)

        result: CallResult = self._run(f"tools/call {name}", op)
        return result

    # -- errors -----------------------------------------------------------------------------------------

    def _describe(self, exc: BaseException) -> str:
        leaf = _leaf_exception(exc)
        msg = " ".join(str(leaf).split()) or type(leaf).__name__
        if type(leaf).__name__ in ("TimeoutError", "CancelledError") and not str(leaf):
            msg = f"no answer within {self.timeout:g} s"
        if type(leaf).__name__ == "ConnectError":
            msg = f"cannot connect ({msg})"
        if msg == "Connection closed":
            msg = "the server closed the connection" + (
                " (its process ended)" if self.spec.transport == "stdio" else ""
            )
        tail = self._stderr_tail()
        if tail:
            msg += f" (server stderr: {tail})"
        elif self._tap.lines:
            msg += f" ({' '.join(self._tap.lines[-1].split())[:200]})"
        return msg

    def _stderr_tail(self) -> str:
        if self._errlog is None or self._errlog.closed:
            return ""
        try:
            self._errlog.flush()
            self._errlog.seek(0)
            lines = [ln.strip() for ln in self._errlog.read()[-4000:].splitlines() if ln.strip()]
        except (OSError, ValueError):
            return ""
        return lines[-1][:200] if lines else ""


@asynccontextmanager
async def _http_transport(url: str) -> AsyncIterator[Any]:
    """Streamable HTTP whose answers are bounded (``mcpwire.http_client``); the client is ours to close."""
    from mcp.client.streamable_http import streamable_http_client

    async with mcpwire.http_client() as client:
        async with streamable_http_client(
            url, http_client=client, max_sse_event_size=limits.MAX_MCP_MESSAGE_BYTES
        ) as streams:
            yield streams


def _leaf_exception(exc: BaseException) -> BaseException:
    """The first real error inside anyio's exception groups."""
    # duck-typed: BaseExceptionGroup is a builtin only from Python 3.11
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


def _search_path(spec: McpServerSpec) -> str | None:
    return spec.env.get("PATH") or os.environ.get("PATH")


# ------------------------------------------------------------------------------------- many servers at once


@dataclass
class McpToolSource:
    """Several live connections and the merged, namespaced tool list, as a host builds it."""

    connections: list[McpConnection]
    tools: list[ToolSpec]

    def connection_for(self, tool: ToolSpec) -> McpConnection | None:
        for c in self.connections:
            if tool.server is not None and c.server_name == tool.server:
                return c
        return None

    def dispatch(self, tool: ToolSpec, arguments: dict[str, Any]) -> CallResult:
        """Send a parsed call to the server that owns ``tool``, under the tool's own (un-prefixed) name."""
        conn = self.connection_for(tool)
        if conn is None:
            raise ToolSourceError(f"tool {tool.name!r} does not belong to a connected MCP server")
        return conn.call_tool(tool.remote_name or tool.name, arguments)

    def close(self) -> None:
        for c in self.connections:
            c.__exit__(None, None, None)

    def __enter__(self) -> McpToolSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_mcp_tools(
    specs: list[McpServerSpec], prefix: str | None = None, timeout: float = DEFAULT_TIMEOUT
) -> McpToolSource:
    """Connect to every server, list and convert their tools. Close the result (it is a context manager).

    ``prefix``: ``None``/``"auto"`` → none for one server, ``{server}__`` for several; otherwise a string
    that may use ``{server}``.
    """
    conns: list[McpConnection] = []
    try:
        for spec in specs:
            conns.append(McpConnection(spec, timeout=timeout).__enter__())
        _dedupe_server_names(conns)
        pfx = resolve_prefix(prefix, len(conns))
        lists = [[mcp_tool_to_spec(t, c.server_name, pfx) for t in c.list_tools()] for c in conns]
        for c, lst in zip(conns, lists, strict=True):
            if not lst:
                raise ToolSourceError(f"MCP server {c.server_name!r} offers no tools")
        return McpToolSource(conns, merge_tool_lists(lists))
    except BaseException:
        for c in conns:
            c.__exit__(None, None, None)
        raise


def _dedupe_server_names(conns: list[McpConnection]) -> None:
    # two servers that call themselves the same need distinct prefixes, or dispatch would be ambiguous
    seen: dict[str, int] = {}
    for c in conns:
        n = seen.get(c.server_name, 0)
        seen[c.server_name] = n + 1
        if n:
            c.server_name = f"{c.server_name}_{n + 1}"
