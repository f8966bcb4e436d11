"""What an MCP server sends, bounded before the SDK reads it: the size of one message, and the tool lists.

The SDK reads a stdio server's messages line by line with no bound (a 2 GB line is gathered whole, copied
once per chunk) and validates a tools/list answer into one pydantic model per tool: 50,000 tools or a
20 MB description took the 30 s of the call and 430 MB, and ended as "no answer". Here:

- a stdio server's output is decoded by a codec that stops a line at ``limits.MAX_MCP_MESSAGE_BYTES``: the
  rest of the line is dropped as it arrives (nothing gathers it) and the connection is told, which ends the
  call in progress with what was too big. (The codec is the SDK's one public hook on what it reads:
  ``StdioServerParameters.encoding``.)
- a streamable HTTP server's JSON answers are cut at the same bound (SSE events by the SDK's own bound);
- every answer carrying a tool list is screened before the SDK validates it: more than ``limits.MAX_TOOLS``
  tools, or a description over ``limits.MAX_TOOL_DESCRIPTION_CHARS``, becomes a JSON-RPC error that says so.
"""

from __future__ import annotations

import codecs
import itertools
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from gguftpl import limits

__all__ = ["bounded_encoding", "http_client", "release_encoding", "screened", "tool_list_problem"]

_PREFIX = "gguftpl_mcp_lines_"
_lock = threading.Lock()
_ids = itertools.count(1)
_overflow: dict[int, tuple[int, Callable[[], None]]] = {}
"""codec id -> (line bound in bytes, what to call when a line passes it)."""
_registered = False


def bounded_encoding(on_overflow: Callable[[], None]) -> str:
    """The name of a UTF-8 codec whose decoder drops every line longer than ``limits.MAX_MCP_MESSAGE_BYTES``
    and calls ``on_overflow`` (from the thread that decodes); ``release_encoding`` forgets it."""
    global _registered
    with _lock:
        if not _registered:
            codecs.register(_search)  # once per process
            _registered = True
        key = next(_ids)
        _overflow[key] = (int(limits.MAX_MCP_MESSAGE_BYTES), on_overflow)
    return f"{_PREFIX}{key}"


def release_encoding(name: str) -> None:
    with _lock:
        _overflow.pop(int(name.removeprefix(_PREFIX)), None)


def _search(name: str) -> codecs.CodecInfo | None:
    if not name.startswith(_PREFIX):
        return None
    try:
        limit, on_overflow = _overflow[int(name.removeprefix(_PREFIX))]
    except (KeyError, ValueError):
        return None
    utf8 = codecs.lookup("utf-8")

    class LineBoundDecoder(codecs.IncrementalDecoder):
        def __init__(self, errors: str = "strict") -> None:
            super().__init__(errors)
            self._utf8 = utf8.incrementaldecoder(errors)
            self._line = 0  # bytes of the current line so far
            self._dropping = False

        def decode(self, data: bytes, final: bool = False) -> str:  # type: ignore[override]
            out: list[str] = []
            pos = 0
            while pos < len(data):
                nl = data.find(b"\n", pos)
                end = len(data) if nl < 0 else nl + 1
                seg = data[pos:end]
                if not self._dropping and self._line + len(seg) - (nl >= 0) > limit:
                    self._dropping = True
                    on_overflow()
                if self._dropping:
                    if nl >= 0:  # the line ends: what the SDK gathered of it fails to parse, and is dropped
                        self._dropping, self._line = False, 0
                        self._utf8.reset()
                        out.append("\n")
                else:
                    out.append(self._utf8.decode(seg, final and nl < 0))
                    self._line = 0 if nl >= 0 else self._line + len(seg)
                pos = end
            return "".join(out)

        def reset(self) -> None:
            self._utf8.reset()
            self._line, self._dropping = 0, False

    return codecs.CodecInfo(
        utf8.encode,
        utf8.decode,
        incrementalencoder=utf8.incrementalencoder,
        incrementaldecoder=LineBoundDecoder,
        name=name,
    )


def tool_list_problem(result: Any) -> str | None:
    """What is too big about an answer's tool list (``{"tools": [...]}``), or None."""
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        return None
    if len(tools) > limits.MAX_TOOLS:
        return (
            f"tools/list answered {len(tools):,} tools in one page, more than the {limits.MAX_TOOLS:,} one source "
            "may offer (hosts cap a request far lower: OpenAI at 128)"
        )
    for t in tools:
        desc = t.get("description") if isinstance(t, dict) else None
        if isinstance(desc, str) and len(desc) > limits.MAX_TOOL_DESCRIPTION_CHARS:
            name = t.get("name")
            return (
                f"tool {name if isinstance(name, str) else '?'!r} has a description of {len(desc):,} characters, "
                f"more than {limits.MAX_TOOL_DESCRIPTION_CHARS:,}"
            )
    return None


@asynccontextmanager
async def screened(transport: Any) -> AsyncIterator[tuple[Any, Any]]:
    """``transport``'s streams, with every answer that carries a tool list screened before the SDK sees it:
    one that is too big is replaced by a JSON-RPC error saying what was too big."""
    import anyio
    from mcp import types
    from mcp.shared.message import SessionMessage

    def screen(item: Any) -> Any:
        msg = getattr(item, "message", None)
        if isinstance(msg, types.JSONRPCResponse):
            problem = tool_list_problem(msg.result)
            if problem is not None:
                error = types.ErrorData(code=types.INVALID_REQUEST, message=problem)
                return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=msg.id, error=error))
        return item

    async with transport as streams:
        read, write = streams[0], streams[1]
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def pump() -> None:
            async with send:
                async for item in read:
                    await send.send(screen(item))

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                yield receive, write
            finally:
                tg.cancel_scope.cancel()


def http_client() -> Any:
    """An HTTP client for streamable HTTP whose JSON answers stop at ``limits.MAX_MCP_MESSAGE_BYTES`` (the SDK
    reads them whole), with the SDK's own timeouts (30 s, 300 s to read a stream)."""
    import httpx2  # the SDK's HTTP client library

    limit = int(limits.MAX_MCP_MESSAGE_BYTES)

    class TooLarge(httpx2.StreamError):
        pass

    class Bounded(httpx2.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self._inner:
                seen += len(chunk)
                if seen > limit:
                    raise TooLarge(f"an answer larger than {limit:,} bytes, the bound on one MCP message")
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class Transport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            response = await self._inner.handle_async_request(request)
            if not response.headers.get("content-type", "").lower().startswith("text/event-stream"):
                response.stream = Bounded(response.stream)  # SSE: the SDK bounds each event itself
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    return httpx2.AsyncClient(transport=Transport(), timeout=httpx2.Timeout(30.0, read=300.0))
