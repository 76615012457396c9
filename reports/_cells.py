"""The vocabulary of the report's template (``templates/report.html.j2``): tables of
formatted cells and figures as data URIs.

A cell that needs more than text (a grey range, a warning, a link) is a tuple of text and
:class:`Span` parts; the template writes the markup and escapes every text.
"""
from __future__ import annotations

import base64
import re
from dataclasses import dataclass

import pandas as pd

from . import _format as fmt

#: a table cell that reads as a number (right-aligned)
_NUMERIC = re.compile(r"^[-+\u2212\u2013]?[\d.,]")


@dataclass(frozen=True)
class Span:
    """A part of a table cell with a class of its own (``range``, ``bad``, ``total``) or,
    with ``href``, a link."""

    text: str
    cls: str = ""
    href: str = ""


@dataclass(frozen=True)
class Cell:
    """One table cell: text and :class:`Span` parts, right-aligned when ``numeric``, with an
    optional tooltip (``title``); ``code``: its one part is an identifier (a column name)."""

    parts: tuple
    numeric: bool = False
    title: str = ""
    code: bool = False


@dataclass(frozen=True)
class Table:
    """A table of :class:`Cell`; ``cls`` names its layout in the style sheet."""

    header: tuple
    rows: tuple
    caption: str = ""
    cls: str = ""


@dataclass(frozen=True)
class Figure:
    """A PNG figure as a data URI, its alternative text and its caption."""

    src: str
    alt: str
    caption: str


def figure(png: bytes, alt: str, caption: str) -> Figure:
    """A :class:`Figure` of the PNG bytes ``png`` (embedded: the page opens offline)."""
    return Figure("data:image/png;base64," + base64.b64encode(png).decode("ascii"), alt, caption)


def cell(value, align: bool = True) -> Cell:
    """``value`` (text, a tuple of text and :class:`Span` parts, or a :class:`Cell`) as a
    :class:`Cell`, right-aligned when ``align`` and it starts with a number."""
    if isinstance(value, Cell):
        return value
    parts = tuple(p if isinstance(p, Span) else str(p) for p in (value if isinstance(value, tuple) else (value,)))
    numeric = align and bool(parts) and isinstance(parts[0], str) and _NUMERIC.match(parts[0]) is not None
    return Cell(parts, numeric)


def table(header, rows, caption: str = "", align_numbers: bool = True, cls: str = "") -> Table:
    """A :class:`Table`; each header or row entry is text, a tuple of text and :class:`Span`
    parts, or a :class:`Cell`. Cells that start with a number are right-aligned unless
    ``align_numbers`` is False."""
    return Table(tuple(cell(h, False) for h in header),
                 tuple(tuple(cell(v, align_numbers) for v in row) for row in rows), caption, cls)


def frame_table(df: pd.DataFrame) -> Table:
    """A data frame as a table, its values formatted by :func:`reports._format.cell`."""
    return table(list(df.columns), [[fmt.cell(v) for v in row] for row in df.itertuples(index=False)])
