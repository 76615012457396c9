"""Each paper's figures and tables, as entries of ``docs/reproductions.md``.

One package per reproduction config (``workflows/config/<key>.yaml``), ``reports/papers/<paper>/``:
its entries and figures; the generic verdict machinery stays in :mod:`reports.claims`. Each defines ``TITLE``,
``SHORT`` (the paper in a table cell), ``CONFIG``, ``DIFFERENCES`` (what the config changes from
the paper, in one paragraph), ``NOT_ADDRESSED`` (``(item, why)`` for every figure or table the
suite cannot address) and ``entries(tables) -> list[Entry]`` (:mod:`reports.reproductions`),
in the paper's order. Adding a paper is one package and one line below.
"""
from __future__ import annotations

from . import chang2013, daume2007, wang2017, wang2017_text

#: record key (the config's file stem) -> module, in the order of docs/reproductions.md
PAPERS = {"chang2013": chang2013, "daume2007": daume2007, "wang2017": wang2017, "wang2017-text": wang2017_text}
