"""Each paper's figures and tables, as entries of ``docs/reproductions.md``.

One package per reproduction config (``workflows/config/<key>.yaml``), ``reports/papers/<paper>/``:
its entries and figures; the generic verdict machinery stays in :mod:`reports.claims`. Each defines ``TITLE``,
``SHORT`` (the paper in a table cell), ``CONFIG``, ``DIFFERENCES`` (what the config changes from
the paper, in one paragraph), ``NOT_ADDRESSED`` (``(item, why)`` for every figure or table the
suite cannot address) and ``entries(tables) -> list[Entry]`` (:mod:`reports.reproductions`),
in the paper's order. Adding a paper is one package and one line below. A paper with a headline
claim that a grid's runs can check has it in ``claim.py`` (``check``), run by :func:`check_claims`.
"""
from __future__ import annotations

import pandas as pd

from . import chang2013, daume2007, wang2017, wang2017_text
from .chang2013.claim import check as check_chang2013
from .daume2007.claim import check as check_daume2007
from .wang2017.claim import check as check_wang2017

#: record key (the config's file stem) -> module, in the order of docs/reproductions.md
PAPERS = {"chang2013": chang2013, "daume2007": daume2007, "wang2017": wang2017, "wang2017-text": wang2017_text}


def check_claims(frame: pd.DataFrame, runs: pd.DataFrame) -> list:
    """Check the three papers' headline claims.

    Parameters
    ----------
    frame, runs : pandas.DataFrame
        From :func:`reports.runs.read_runs`.

    Returns
    -------
    list of reports.claims.Claim
        Chang & Fisher 2013, Daumé 2007, Wang & Lin 2017, from the runs at a fixed alpha
        (the papers' setting; a learned alpha's log joint is at another alpha), the one most
        runs share (log joints at two alphas are not comparable: a grid that also varies
        alpha, as Chang & Fisher's Figure 4 does, decides the claims at its main one).
        Chang & Fisher's claim is about chains started from one cluster: it reads only those.
    """
    if "learned_alpha" in runs:
        runs = runs[~runs["learned_alpha"]]
    if len(runs) and "alpha" in runs:
        runs = runs[runs["alpha"] == runs["alpha"].mode().iloc[0]]
    frame = frame[frame["run"].isin(runs["run"])]
    one = (runs["meta"].map(lambda m: (m or {}).get("init_clusters", 1) == 1) if "meta" in runs
           else pd.Series(True, index=runs.index))
    return [check_chang2013(runs[one]), check_daume2007(frame, runs), check_wang2017(runs)]
