"""Opening user-named input files without hanging or exhausting memory.

A FIFO named as an input blocks ``open()`` until some writer appears, and ``/dev/zero`` or a 10 GB "JSON"
file makes ``read()`` allocate without bound. Every input file gguftpl reads goes through here: it is
opened non-blocking, must be a regular file, and small text inputs (tools, conversations, upstream
configs) are read only up to a bound. (The worker processes that render untrusted templates bound their own
memory: :mod:`gguftpl.worker`.)
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import IO, Any

from gguftpl.errors import GGUFTplError, UsageError

MAX_TEXT_INPUT = 64 * 1024 * 1024
"""Largest tools / conversation / template / config file read (64 MiB: real ones are kilobytes)."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def not_found(name: str, what: str = "GGUF file") -> str:
    """The one wording of a missing input, in every command (``GGUF file not found: x.gguf``)."""
    return f"{what} not found: {name}"


def check_output_folder(path: str | os.PathLike[str], *, error: type[GGUFTplError] = UsageError) -> str:
    """The folder an output file ``path`` goes in (absolute); raise ``error`` (one line) unless it is an existing
    folder. Every writer calls it, and the commands call it before any work, so a typo in ``-o`` is refused at
    once, not after a plan or an audit."""
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(folder):
        kind = kind_of(folder)
        if kind is None and not os.path.lexists(folder):
            raise error(f"output folder does not exist: {folder}")
        raise error(f"output folder {folder} is {kind or 'a file'}, not a folder")
    return folder


def check_regular(path: str | os.PathLike[str], *, what: str = "file", error: type[GGUFTplError] = UsageError) -> None:
    """Raise ``error`` (one line that says what ``path`` is: a FIFO, a character device, a directory) unless
    it is an existing regular file. Opens nothing."""
    name = os.fspath(path)
    try:
        mode = os.stat(name).st_mode
    except FileNotFoundError:
        raise error(not_found(name, what)) from None
    except OSError as exc:
        raise error(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise error(f"{what} {name} is {_kind(mode)}, not a regular file")


def kind_of(path: str | os.PathLike[str]) -> str | None:
    """What an existing path that is not a regular file is ("a FIFO (named pipe)", "a directory", ...); None
    for a regular file or a path that does not exist."""
    try:
        mode = os.stat(os.fspath(path)).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else _kind(mode)


def open_regular(
    path: str | os.PathLike[str], *, what: str = "file", error: type[GGUFTplError] = UsageError
) -> IO[bytes]:
    """Open ``path`` for binary reading; raise ``error`` (one line) unless it is a regular file we can read.

    ``O_NONBLOCK`` makes opening a FIFO return at once instead of waiting for a writer; it does not change
    how a regular file reads."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(not_found(name, what)) from None
    except OSError as exc:
        raise error(f"cannot open {what} {name}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{what} {name} is {_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes_bounded(
    path: str | os.PathLike[str],
    *,
    what: str = "file",
    error: type[GGUFTplError] = UsageError,
    limit: int = MAX_TEXT_INPUT,
) -> bytes:
    """The bytes of a regular file no larger than ``limit``; ``error`` otherwise."""
    name = os.fspath(path)
    with open_regular(name, what=what, error=error) as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise error(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise error(f"{what} {name} is larger than {limit // (1024 * 1024)} MiB; refusing to read it")
    return data


def read_text_bounded(
    path: str | os.PathLike[str],
    *,
    what: str = "file",
    error: type[GGUFTplError] = UsageError,
    limit: int = MAX_TEXT_INPUT,
) -> str:
    """UTF-8 text of a regular file no larger than ``limit``; ``error`` (one line) otherwise."""
    data = read_bytes_bounded(path, what=what, error=error, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {os.fspath(path)} is not UTF-8 text (byte {exc.start})") from None


class _NotJSONConstantError(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NotJSONConstantError(name)


def loads_json(text: str, *, what: str, error: type[GGUFTplError] = UsageError, invalid: str = "is not JSON") -> Any:
    """``json.loads`` whose every failure is ``error`` with one line: syntax, nesting too deep for the
    parser (``RecursionError``), integers past Python's digit limit, and unpaired surrogates (``"\\ud800"``),
    which decode fine but can never be encoded again as UTF-8 for a template renderer or llama.cpp."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except _NotJSONConstantError as exc:  # Python accepts NaN/Infinity; llama.cpp and JSON Schema do not
        raise error(f"{what} holds {exc.args[0]}, which is not JSON") from None
    except json.JSONDecodeError as exc:
        raise error(f"{what} {invalid}: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise error(f"{what} is nested too deeply to parse") from None
    except ValueError as exc:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise error(f"{what} is not usable JSON: {exc}") from None
    check_encodable(value, what=what, error=error)
    return value


def check_encodable(value: Any, *, what: str, error: type[GGUFTplError] = UsageError) -> None:
    """Raise ``error`` if decoded JSON holds a string that is not valid Unicode (a lone surrogate)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end].encode("utf-8", "backslashreplace").decode("ascii")
        raise error(f"{what} holds an unpaired surrogate ({bad}), which is not valid Unicode") from None
    except RecursionError:
        raise error(f"{what} is nested too deeply") from None
    except ValueError as exc:  # circular structures cannot come from JSON; NaN is allowed by dumps
        raise error(f"{what} is not usable JSON: {exc}") from None


def read_json_file(
    path: str | os.PathLike[str],
    *,
    what: str = "file",
    error: type[GGUFTplError] = UsageError,
    limit: int = MAX_TEXT_INPUT,
) -> Any:
    """Decoded JSON of a regular, bounded, UTF-8 file; every failure is ``error`` with one line."""
    text = read_text_bounded(path, what=what, error=error, limit=limit)
    return loads_json(text, what=f"{what} {os.fspath(path)}", error=error)


_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
# letters that render as nothing (Hangul fillers): the invisible-character check flags them in templates too
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _hidden(ch: str) -> bool:
    import unicodedata

    return ch != "\t" and (unicodedata.category(ch) in _INVISIBLE or ch in _BLANK_LETTERS)


def printable(text: str) -> str:
    """``text`` for a terminal line: control, format (bidi overrides, zero-width), surrogate and line-separator
    characters shown as ``\\xNN``/``\\uNNNN`` escapes. A template name or key from a hostile file can hold a
    newline, an ANSI escape or U+202E; printed raw they forge report lines or reorder what the reader sees."""
    if text.isprintable() and not _BLANK_LETTERS.intersection(text):
        return text
    return "".join(_escape(ch) if _hidden(ch) else ch for ch in text)


# the SGR sequences gguftpl's own colours use (click.style: reset, bold, reverse, the foreground colours and
# their resets); anything else, such as conceal (8) or an OSC title, is escaped even in coloured output
_OWN_SGR = re.compile(r"\x1b\[(?:0|1|2|4|7|22|24|27|3[0-7]|39|9[0-7])m")
# GitHub Actions runs a workflow command from any log line that starts with `::` once leading blanks are
# dropped, and the legacy `##[command]` form from anywhere in a line
_COMMAND_START = re.compile(r"^(\s*):(?=:)")
_LEGACY_COMMAND = "##["


def terminal_text(text: str, *, keep_sgr: bool = False, commands: bool = False) -> str:
    """Whole lines of output as a terminal or a CI log may safely show them: each line through
    :func:`printable` (newlines stay), a line that would start with ``::`` gets its first colon escaped
    (``\\x3a:``) and ``##[`` becomes ``#\\x23[``, so text quoted from a model file cannot run a GitHub
    workflow command. Idempotent. ``keep_sgr`` lets gguftpl's own colour sequences through; ``commands``
    leaves line-leading ``::`` alone (the ``github`` report format, whose lines are annotations)."""
    out = []
    for line in text.split("\n"):
        if keep_sgr and "\x1b" in line:
            parts, pos = [], 0
            for m in _OWN_SGR.finditer(line):
                parts.append(printable(line[pos : m.start()]))
                parts.append(m.group(0))
                pos = m.end()
            parts.append(printable(line[pos:]))
            line = "".join(parts)
        else:
            line = printable(line)
        if not commands:
            line = _COMMAND_START.sub(r"\1\\x3a", line, count=1)
        out.append(line.replace(_LEGACY_COMMAND, "#\\x23["))
    return "\n".join(out)


def json_text(text: str) -> str:
    """JSON text with every invisible character written as a ``\\uXXXX`` escape: the same JSON value, but a
    U+202E or a C1 control inside a string no longer reaches the terminal that shows it (``json.dumps``
    with ``ensure_ascii=False`` escapes only U+0000-U+001F). ``##[`` (a legacy workflow command, which can
    only be inside a string) is written ``#\\u0023[``."""
    text = text.replace(_LEGACY_COMMAND, "#\\u0023[")
    if text.isprintable() and not _BLANK_LETTERS.intersection(text):
        return text

    def esc(ch: str) -> str:
        code = ord(ch)
        if code < 0x10000:
            return f"\\u{code:04x}"
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"

    return "".join(esc(ch) if ch not in "\n\t" and _hidden(ch) else ch for ch in text)
