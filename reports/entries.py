"""The vocabulary of a paper's reproduction (:mod:`reports.reproductions`): an
:class:`Entry` per figure or table of a paper, its verdict, and the :class:`Tables` the
paper modules (:mod:`reports.papers`) read.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable here"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE)


@dataclass(frozen=True)
class Entry:
    """One figure or table of a paper, set beside what this suite measured.

    Attributes
    ----------
    item : str
        The paper's figure or table, as the paper names it (with the page where it helps).
    paper : str
        What the paper reports: its numbers quoted exactly, or the figure's stated finding.
    measured : str
        What this suite measured, with numbers, under the differences the record states.
    verdict : str
        :data:`REPRODUCED`, :data:`NOT_REPRODUCED` or :data:`NOT_COMPARABLE`.
    reason : str
        Why, in one sentence.
    table : pandas.DataFrame, optional
        The numbers behind ``measured``, shown under the entry.
    figure : bytes, optional
        PNG of this suite's result in the paper's axes.
    caption : str
        What the figure shows.
    """

    item: str
    paper: str
    measured: str
    verdict: str
    reason: str
    table: pd.DataFrame | None = None
    figure: bytes | None = None
    caption: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")


@dataclass
class Tables:
    """A reproduction's small tables (see the module docstring), as DataFrames."""

    summary: pd.DataFrame
    runs: pd.DataFrame
    curves: pd.DataFrame
    communication: pd.DataFrame
    scaling: pd.DataFrame
    claims: list
    record: dict
    extra: dict = field(default_factory=dict)  #: file stem -> DataFrame (extra CSV tables)
