"""Text output fitted to a width: every line of a report at most ``width`` terminal columns.

A long line is broken between tokens (runs of non-blanks), never inside one unless the token alone is wider
than a whole line (a hostile template's 10 kB identifier, a 40-hex revision after a repo id). Such a token is
cut, preferably after a ``/``, ``@``, ``:`` or ``,`` inside it, and the cut line ends with :data:`CUT_MARK`,
so a reader sees that the next line goes on with the same token, with no blank between. That is the one
general rule that keeps the promise for any input.

A continuation keeps its line's place: a hanging indent under prose; the same gutter under a quoted line
(``| text`` continues as ``: text``, ``12 | text`` as ``   : text``) and under a unified diff line (``+text``,
``-text``, `` text`` continue as ``: text``), so a wrapped line of evidence, of a prompt or of a diff cannot
pass for a line of its own. Colour sequences (gguftpl's own SGR) take no width and are closed at a break and
reopened after the continuation's indent. Widths are measured by ``wcwidth`` (East Asian wide characters
and emoji take two columns, combining marks none); a tab is expanded to its tab stop first.

The text given here is already escaped (:func:`gguftpl.safeio.terminal_text`): every character left is one
a terminal shows. A continuation that would start with ``::`` (a GitHub workflow command once blanks are
dropped) has its first colon escaped, as ``terminal_text`` does for a whole line.
"""

from __future__ import annotations

import os
import re
import shutil

__all__ = [
    "CUT_MARK",
    "DEFAULT_WIDTH",
    "MIN_WIDTH",
    "command_hang",
    "display_width",
    "fit_line",
    "fit_text",
    "terminal_width",
]

DEFAULT_WIDTH = 100
"""The width when neither ``COLUMNS`` nor the terminal says (output into a pipe or a file)."""
MIN_WIDTH = 20
"""Narrower than this, a hanging indent leaves no room: the width is raised to it."""
CUT_MARK = "↩"
"""Ends a line cut inside a token: the next line goes on with the same token."""

_SGR = re.compile(r"\x1b\[[0-9;]*m")
_SGR_OR_TEXT = re.compile(r"(\x1b\[[0-9;]*m)|((?:(?!\x1b\[[0-9;]*m).)+)", re.S)
_TOKEN = re.compile(r"\S+\s*|\s+")
# `   12 | ` (a numbered gutter: render's prompt) or `   | ` (quoted evidence)
_GUTTER = re.compile(r"^( *)(?:(\d+) )?\| ")
# a unified diff's line at column 0: `+added`, `-removed`, ` context` (one blank, then text), `@@ hunk`
_DIFF_LINE = re.compile(r"^(?:[+-]|@@| (?! ))")
_SOFT = frozenset("/@:,;&=?")
"""Characters after which a token too wide for a line is preferably cut."""
_RESET = "\x1b[0m"


def terminal_width(explicit: int | None = None) -> int:
    """``explicit`` (``--width``), else ``COLUMNS``, else the terminal's size, else :data:`DEFAULT_WIDTH`."""
    if explicit is not None:
        return max(MIN_WIDTH, explicit)
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return max(MIN_WIDTH, int(env))
    return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes (one line): colour sequences none, wide characters two."""
    if text.isascii() and "\x1b" not in text and "\t" not in text:
        return len(text)
    import wcwidth

    return int(wcwidth.width(text))


def _graphemes(text: str) -> list[str]:
    if text.isascii():
        return list(text)
    import wcwidth

    return list(wcwidth.iter_graphemes(text))


def _expand_tabs(line: str) -> str:
    """``line`` with each tab replaced by the blanks up to the next stop (every 8 columns), as a terminal shows it."""
    out, col = [], 0
    for m in _SGR_OR_TEXT.finditer(line):
        if m.group(1):
            out.append(m.group(1))
            continue
        for piece in re.split(r"(\t)", m.group(2)):
            if piece == "\t":
                out.append(" " * (8 - col % 8))
                col += 8 - col % 8
            elif piece:
                out.append(piece)
                col += display_width(piece)
    return "".join(out)


def _cut(token: str, room: int) -> tuple[str, str]:
    """A head of ``token`` at most ``room`` columns wide (empty when its first character is wider), and the
    rest. The head ends at its last soft break (after ``/``, ``@``, …, before a backslash) when that keeps at
    least half of it. A cluster shown as one (an emoji with its modifier, a letter with its accent) is never
    split."""
    used, heads = 0, []
    for g in _graphemes(token):
        w = display_width(g)
        if used + w > room:
            break
        used += w
        heads.append(g)
    n = len(heads)
    # after a soft break character, or before a backslash (an escape such as `\n` stays whole)
    soft = max((i + (g in _SOFT) for i, g in enumerate(heads) if g in _SOFT or g == "\\"), default=0)
    if n < len(token) and token[len("".join(heads))] == "\\":
        soft = n
    if 2 * soft >= n and soft < n:
        n = soft
    head = "".join(heads[:n])
    return head, token[len(head) :]


def fit_line(line: str, width: int, *, hang: int | None = None, cont: str = "") -> list[str]:
    """``line`` as lines of at most ``width`` columns. ``hang``: the continuation's indent (default: the
    line's own indent plus four, or its gutter); ``cont``: written at the end of every line broken between
    tokens (`` \\`` for a shell command, so the wrapped command still runs when pasted)."""
    if "\t" in line:
        line = _expand_tabs(line)
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
    if hang is None and _DIFF_LINE.match(plain):
        return ": "
    indent = len(plain) - len(plain.lstrip(" "))
    return " " * (hang if hang is not None else indent + 4)


class _Fitter:
    def __init__(self, width: int, prefix: str, cont: str) -> None:
        # room for either mark at the end of a broken line
        self.limit = max(1, width - max(display_width(cont), display_width(CUT_MARK)))
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
        elif self.out and self.cont and self.out[-1].endswith(self.cont):
            self.out[-1] = self.out[-1][: -len(self.cont)]  # nothing followed the last break: no mark needed
        return self.out

    def _sgr(self, seq: str) -> None:
        if self.pending and self.width + display_width(self.pending) <= self.limit:
            self.buf += self.pending
            self.width += display_width(self.pending)
        self.pending = ""
        self.buf += seq
        self.active = [] if seq == _RESET else [*self.active, seq]

    def _break(self, mark: str) -> None:
        self.out.append(self.buf + (_RESET if self.active else "") + mark)
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
                self._break(self.cont)
        if not self.content and self.out:
            self.pending = ""
            body = _defused(body)
        lead = self.pending
        while self.width + display_width(lead + body) > self.limit:
            head, body = _cut(body, self.limit - self.width - display_width(lead))
            if not head and not self.content and self.width <= len(self.prefix):
                head, body = body[0], body[1:]  # cannot happen with MIN_WIDTH; never loop forever
            if head:
                self.buf += lead + head
                self.width += display_width(lead + head)
                lead, self.content = "", True
                self._break(CUT_MARK)
            else:  # not even its first character fits after what is on the line: a plain break
                lead = ""
                self._break(self.cont)
            body = _defused(body)
        self.buf += lead + body
        self.width += display_width(lead + body)
        self.pending, self.content = tail, True


def _defused(piece: str) -> str:
    """A continuation's first token: one that starts with ``::`` would be a workflow command in a CI log."""
    return "\\x3a" + piece[1:] if piece.startswith("::") else piece


# `fix: ` / `  repair: ` / `then run: `: a short label before what may be a command line
_LABEL = re.compile(r"( *)((?:[A-Za-z][\w.-]*)(?: [A-Za-z][\w.-]*){0,3}: )?")


def command_hang(line: str) -> int | None:
    """The column a wrapped command goes on at when ``line`` is a command line to run (``gguftpl patch … &&
    gguftpl verify FIXED.gguf``), alone or after a label (``  fix: ``), read as the shell reads it; None for any
    other line. Its continuations hang under the command and each broken piece ends with `` \\``."""
    plain = _SGR.sub("", line)
    m = _LABEL.match(plain)
    start = m.end() if m else 0
    if not plain.startswith("gguftpl ", start):
        return None
    from gguftpl.commandline import is_command

    return start if is_command(plain[start:]) else None


def fit_text(text: str, width: int) -> str:
    """Every line of ``text`` fitted to ``width`` (see :func:`fit_line`); newlines kept. A command line (see
    :func:`command_hang`) wraps as a command: `` \\`` at each break, continued under the command."""
    out: list[str] = []
    for line in text.split("\n"):
        hang = command_hang(line) if display_width(line) > width else None
        out += fit_line(line, width) if hang is None else fit_line(line, width, hang=hang, cont=" \\")
    return "\n".join(out)
