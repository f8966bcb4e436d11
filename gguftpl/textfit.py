"""Text output fitted to a width: every line of a report at most ``width`` terminal columns.

A long line is broken between tokens (runs of non-blanks), never inside one unless the token alone is wider
than the line (a hostile template's 10 kB identifier: it is then cut at the width, the only way to keep the
promise). A continuation keeps its line's place: a hanging indent under prose, the same gutter under a quoted
line (``| text`` continues as ``: text``, ``12 | text`` as ``   : text``), so a wrapped line of evidence or of
a prompt cannot pass for a line of its own. Colour sequences (gguftpl's own SGR) take no width and are closed
at a break and reopened after the continuation's indent.

The text given here is already escaped (:func:`gguftpl.safeio.terminal_text`): every character left is one
a terminal shows. A continuation that would start with ``::`` (a GitHub workflow command once blanks are
dropped) has its first colon escaped, as ``terminal_text`` does for a whole line.
"""

from __future__ import annotations

import os
import re
import shutil
import unicodedata

__all__ = ["DEFAULT_WIDTH", "MIN_WIDTH", "display_width", "fit_line", "fit_text", "terminal_width"]

DEFAULT_WIDTH = 100
"""The width when neither ``COLUMNS`` nor the terminal says (output into a pipe or a file)."""
MIN_WIDTH = 20
"""Narrower than this, a hanging indent leaves no room: the width is raised to it."""

_SGR = re.compile(r"\x1b\[[0-9;]*m")
_SGR_OR_TEXT = re.compile(r"(\x1b\[[0-9;]*m)|((?:(?!\x1b\[[0-9;]*m).)+)", re.S)
_TOKEN = re.compile(r"\S+\s*|\s+")
# `   12 | ` (a numbered gutter: render's prompt) or `   | ` (quoted evidence)
_GUTTER = re.compile(r"^( *)(?:(\d+) )?\| ")
_RESET = "\x1b[0m"


def terminal_width(explicit: int | None = None) -> int:
    """``explicit`` (``--width``), else ``COLUMNS``, else the terminal's size, else :data:`DEFAULT_WIDTH`."""
    if explicit is not None:
        return max(MIN_WIDTH, explicit)
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return max(MIN_WIDTH, int(env))
    return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def _char_width(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes: colour sequences none, East Asian wide characters two."""
    text = _SGR.sub("", text)
    if text.isascii():
        return len(text)
    return sum(_char_width(ch) for ch in text)


def _cut(token: str, room: int) -> tuple[str, str]:
    """The longest head of ``token`` at most ``room`` columns wide (empty when its first character is wider), and the rest."""
    used = 0
    for i, ch in enumerate(token):
        w = _char_width(ch)
        if used + w > room:
            return token[:i], token[i:]
        used += w
    return token, ""


def fit_line(line: str, width: int, *, hang: int | None = None, cont: str = "") -> list[str]:
    """``line`` as lines of at most ``width`` columns. ``hang``: the continuation's indent (default: the
    line's own indent plus four, or its gutter); ``cont``: written at the end of every line but the last
    (`` \\`` for a shell command, so the wrapped command still runs when pasted)."""
    if display_width(line) <= width:
        return [line]
    return _Fitter(width, _continuation(line, hang), cont).run(line)


def _continuation(line: str, hang: int | None) -> str:
    """The prefix of ``line``'s continuation lines."""
    plain = _SGR.sub("", line)
    m = _GUTTER.match(plain)
    if m:
        number = m.group(2) or ""
        return m.group(1) + " " * (len(number) + 1 if number else 0) + ": "
    indent = len(plain) - len(plain.lstrip(" "))
    return " " * (hang if hang is not None else indent + 4)


class _Fitter:
    def __init__(self, width: int, prefix: str, cont: str) -> None:
        self.limit = max(1, width - len(cont))
        if len(prefix) + MIN_WIDTH // 2 > self.limit:  # a deep indent on a narrow line: keep room for text
            prefix = prefix[: max(0, self.limit - MIN_WIDTH // 2)]
        self.prefix, self.cont = prefix, cont
        self.out: list[str] = []
        self.buf, self.width, self.pending = "", 0, ""
        self.active: list[str] = []  # SGR sequences in force since the last reset
        self.content = False  # a visible token is on the current line

    def run(self, line: str) -> list[str]:
        for m in _SGR_OR_TEXT.finditer(line):
            if m.group(1):
                self._sgr(m.group(1))
            else:
                for token in _TOKEN.findall(m.group(2)):
                    self._token(token)
        if self.content or not self.out:
            self.out.append(self.buf + (_RESET if self.active and not self.buf.endswith(_RESET) else ""))
        elif self.out and self.cont:  # nothing followed the last break: it needs no continuation mark
            self.out[-1] = self.out[-1][: -len(self.cont)]
        return self.out

    def _sgr(self, seq: str) -> None:
        if self.pending and self.width + display_width(self.pending) <= self.limit:
            self.buf += self.pending
            self.width += display_width(self.pending)
        self.pending = ""
        self.buf += seq
        self.active = [] if seq == _RESET else [*self.active, seq]

    def _break(self) -> None:
        self.out.append(self.buf + (_RESET if self.active else "") + self.cont)
        self.buf = self.prefix + "".join(self.active)
        self.width, self.pending, self.content = len(self.prefix), "", False

    def _token(self, token: str) -> None:
        body = token.rstrip(" ")
        if not body:  # blanks: kept between two tokens of one line, dropped at a break
            if self.content or not self.out:
                self.pending += token
            return
        tail = token[len(body) :]
        wide = display_width(body)
        # a token wider than a whole line is cut wherever it starts: breaking first would only waste the room
        if self.content and self.width + display_width(self.pending) + wide > self.limit:
            if len(self.prefix) + wide <= self.limit:
                self._break()
        if not self.content and self.out:
            self.pending = ""
            if body.startswith("::"):
                body = "\\x3a" + body[1:]
        lead = self.pending
        while self.width + display_width(lead + body) > self.limit:
            head, body = _cut(body, self.limit - self.width - display_width(lead))
            if not head and not self.content:  # a wide character alone is wider than the line
                head, body = body[0], body[1:]
            if head:
                self.buf += lead + head
                self.width += display_width(lead + head)
            lead, self.content = "", True
            self._break()
            if body.startswith("::"):
                body = "\\x3a" + body[1:]
        self.buf += lead + body
        self.width += display_width(lead + body)
        self.pending, self.content = tail, True


def fit_text(text: str, width: int) -> str:
    """Every line of ``text`` fitted to ``width`` (see :func:`fit_line`); newlines kept."""
    return "\n".join(out for line in text.split("\n") for out in fit_line(line, width))
