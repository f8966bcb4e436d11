"""Every bound gguftpl puts on untrusted input, in one place.

Templates, GGUF headers, Hub answers and MCP servers come from strangers; each bound here keeps one of
them from costing unbounded time or memory. Real inputs stay far below every one (the docstrings say by
how much). Code reads them as ``limits.NAME`` at call time, so a test can lower one with monkeypatch.
"""

from __future__ import annotations

# --- chat templates

MAX_TEMPLATE_BYTES = 4 * 1024 * 1024
"""A template over this many UTF-8 bytes is reported (GT404) and neither parsed nor rendered: a 50 MB
"template" cost 20 s and 400 MB; real ones are under 100 KB."""

MAX_FOLDED_INT_BITS = 256
"""Bits of an integer the static analysis computes from a template's constant expression (a ``range()``
bound): past it the value is only known to be huge. Real bounds are a few digits; ``2**(2**40)`` computed in
full would take this process's memory and time."""

MAX_ANALYSED_TEXTS = 64
"""Distinct template texts one file's analysis renders; real files carry one to four. A file with 10,000
named templates took minutes."""


# --- the process

INTERRUPT_GRACE = 10.0
"""Seconds a SIGINT or SIGTERM gives the command to clean up and exit (worker processes stopped, a stand-in
model removed: under a second) before the process ends without it: a main thread stuck in C code cannot run
Python's handler (``gguftpl.interrupts``)."""
# --- remote operations (a Hub, a mirror, any URL): gguftpl.remotebounds applies them

REMOTE_DEADLINE = 300.0
"""Seconds one remote operation (reading a header, listing a repo, fetching an upstream's files) may take
in all, however slowly the bytes arrive (``GGUFTPL_REMOTE_TIMEOUT`` overrides it). A server answering a Range
request one byte per second kept ``inspect hf://…`` alive for hours; a real header read takes seconds."""

MAX_UPSTREAM_CONFIG_BYTES = 16 * 1024 * 1024
"""Largest upstream ``tokenizer_config.json``, chat template or other small config file downloaded and
parsed, checked before downloading (the listing's size, HEAD). A 500 MB one was downloaded whole and parsed
at 2.6 GB; real ones are kilobytes, the largest known about 1 MB (thousands of added tokens)."""

MAX_UPSTREAM_TOKENIZER_BYTES = 64 * 1024 * 1024
"""Largest upstream ``tokenizer.json`` (read only for its added tokens, when tokenizer_config.json has none);
real ones are up to about 35 MB (262k-token vocabularies with their merges)."""

MAX_HUB_API_BYTES = 64 * 1024 * 1024
"""Largest answer of the Hub's API (repo info, a file listing); a repo of 10,000 files lists in about 2 MB."""

MAX_REPO_FILE_NAME = 1024
"""Longest file name taken from a repo listing; the Hub itself refuses paths past a few hundred bytes."""

# --- tools and MCP servers

MAX_TOOLS = 1_000
"""Tools one file or server may offer: each schema is checked at about a millisecond and a half (100,000 tools
ran for minutes), and every tool costs prompt context."""

MAX_SCHEMA_NODES = 5_000
"""Objects and arrays one parameter schema may hold. jsonschema checks a schema against its metaschema at about
a millisecond per subschema (100,000 `$defs` ran for minutes); real tool schemas hold tens to hundreds."""

MAX_SCHEMA_DEPTH = 64
"""Nesting one parameter schema may reach: deeper, jsonschema (and any host) overflows its recursion."""

MAX_TOOL_DESCRIPTION_CHARS = 256 * 1024
"""Longest tool description taken from a tools file or an MCP server; real ones are under a few KB, and every
character of it goes into each prompt. A 20 MB one was read, validated and rendered."""

MAX_MCP_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest message read from an MCP server (one line over stdio, one JSON answer over HTTP, one SSE event).
The SDK gathers a line whole and parses it into Python objects at about 30 times its size (8 MB of tools:
240 MB, 1.5 s): 50,000 tools or a 20 MB description cost 430 MB and the whole call's 30 s. Real tools/list
answers are tens to hundreds of KB; a thousand tools with their schemas about 2 MB."""

MAX_MCP_PAGES = 1000
"""tools/list pages followed before a server's pagination counts as endless."""

# --- GGUF headers

MAX_HEADER_BYTES = 512 * 1024 * 1024
"""Largest GGUF header (metadata and tensor infos) read, local or remote: it is read into memory (a local file
is not memory-mapped: truncated underneath, a mapping kills the process with SIGBUS). No real header comes
close (262k vocabulary + merges ~ 16 MB); a hostile length must not turn a header read into reading the file."""

MAX_SURVEY_REPOS = 100_000
"""Repos one survey lists and audits: the largest GGUF publishers have a few thousand; a listing whose pages
never stop ends here (or at its deadline)."""
