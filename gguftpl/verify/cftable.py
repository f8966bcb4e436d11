"""The counterfactual's table as text: stage | before | after, every line at most ``width`` columns.

Each cell is broken into lines of its column's width by :func:`gguftpl.textfit.fit_line` (between tokens,
inside one only when it is wider than the column), and padded by display width, so wide characters keep the
columns straight. Too narrow for three columns, each stage is shown as a block: its name, then before and after.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import zip_longest

from gguftpl.textfit import display_width, fit_line
from gguftpl.verify.counterfactual import Cell, Row

MARKS = {"pass": "+", "fail": "x", "skip": "-", "warn": "!"}
LEGEND = "+ passes, x fails, - not reached"
MIN_COLUMN = 18
"""Narrower side columns than this and the table is stacked."""


def _cell_lines(cell: Cell, width: int) -> list[str]:
    text = f"{MARKS.get(cell.status, '?')} {cell.text}"
    return fit_line(text, max(1, width), hang=2)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - display_width(text))


def table_text(rows: Sequence[Row], width: int, labels: tuple[str, str] = ("before", "after")) -> str:
    """The rows as a table fitted to ``width`` columns (a stacked list when too narrow)."""
    first = max([len(r.stage) for r in rows] + [5])
    side = (width - first - 6) // 2
    if side < MIN_COLUMN:
        return _stacked(rows, width, labels)
    out = [f"{_pad('stage', first)} | {_pad(labels[0], side)} | {labels[1]}".rstrip()]
    out.append(f"{'-' * first}-+-{'-' * side}-+-{'-' * side}")
    for r in rows:
        left, right = _cell_lines(r.before, side), _cell_lines(r.after, side)
        for i, (a, b) in enumerate(zip_longest(left, right, fillvalue="")):
            name = r.stage if i == 0 else ""
            out.append(f"{_pad(name, first)} | {_pad(a, side)} | {b}".rstrip())
    out.append(LEGEND)
    return "\n".join(out)


def _stacked(rows: Sequence[Row], width: int, labels: tuple[str, str]) -> str:
    out = []
    for r in rows:
        out.append(r.stage)
        for label, cell in zip(labels, (r.before, r.after), strict=True):
            out += fit_line(f"  {label}: {MARKS.get(cell.status, '?')} {cell.text}", width, hang=4)
    out.append(LEGEND)
    return "\n".join(out)
