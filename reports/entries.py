"""The vocabulary of a paper's reproduction (:mod:`reports.reproductions`): an
:class:`Entry` per figure or table of a paper, its verdict, and the :class:`Tables` the
paper modules (:mod:`reports.papers`) read.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from .summary import current_names

REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable here"
#: the comparison rests on a chain that had not completed one sweep where it was read: its state
#: is the starting one, so neither outcome says anything about the sampler
INCONCLUSIVE = "inconclusive"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE, INCONCLUSIVE)


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
        :data:`REPRODUCED`, :data:`NOT_REPRODUCED`, :data:`NOT_COMPARABLE` or :data:`INCONCLUSIVE`.
    reason : str
        Why, in one sentence.
    table : pandas.DataFrame, optional
        The numbers behind ``measured``, shown under the entry.
    figure : bytes, optional
        PNG of this suite's result in the paper's axes.
    caption : str
        What the figure shows.
    criterion : reports.claims.Criterion, optional
        The criterion as a function of its thresholds: its margin and whether the verdict
        flips when a threshold is halved or doubled are computed from it
        (:func:`reports.claims.sensitivity`). A reproduced or not reproduced entry with a
        criterion must agree with it at its thresholds.
    regime : str
        Where the verdict was decided against the paper's regime (a budget far below it is
        said so), empty when it is the paper's.
    rerun : str
        The command that reruns this entry with its measured time, seeds, commit and machine,
        when it is not the paper's config (a small measurement of its own, ``checks.json``);
        empty: the config's record.
    """

    item: str
    paper: str
    measured: str
    verdict: str
    reason: str
    table: pd.DataFrame | None = None
    figure: bytes | None = None
    caption: str = ""
    criterion: object | None = None
    regime: str = ""
    rerun: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")
        if self.criterion is not None and self.verdict in (REPRODUCED, NOT_REPRODUCED):
            # the generic verdict code decides: an entry cannot say otherwise than its criterion
            held = bool(self.criterion.holds(dict(self.criterion.thresholds)))
            if held != (self.verdict == REPRODUCED):
                raise ValueError(f"{self.item}: verdict {self.verdict!r} disagrees with its criterion")


@dataclass
class Tables:
    """A reproduction's small tables (see the module docstring), as DataFrames.

    ``summary``, ``runs``, ``curves`` and ``scaling`` are in today's names (``name`` the run's
    name, ``algorithm`` its registry name): the tables of an older record are renamed when
    they are given (:func:`reports.summary.current_names`).
    """

    summary: pd.DataFrame
    runs: pd.DataFrame
    curves: pd.DataFrame
    communication: pd.DataFrame
    scaling: pd.DataFrame
    claims: list
    record: dict
    extra: dict = field(default_factory=dict)  #: file stem -> DataFrame (extra CSV tables)
    #: the suite's many-core scaling records (``docs/scaling/*.json``, as
    #: :func:`reports.scaling_doc.load_records` reads them): the measured rows a speed-up
    #: verdict past two workers rests on
    scaling_records: list = field(default_factory=list)
    #: the paper's own small measurements (``checks.json``: each with its commit and machine)
    checks: dict = field(default_factory=dict)

    def __post_init__(self):
        for key in ("summary", "runs", "curves", "scaling"):
            setattr(self, key, current_names(getattr(self, key)))


def rerun_text(command: str, check: dict) -> str:
    """The rerun line of an entry from a small measurement of its own (a ``checks.json``
    record): the command, its measured time, seeds, commit and machine.

    Parameters
    ----------
    command : str
        The command that reruns it.
    check : dict
        The record: ``cpu_s``, ``wall_s``, ``git_commit``, ``git_dirty``, ``cores``,
        ``cpu_model``, ``finished_utc`` and ``result`` (whose ``seeds`` or ``seed`` are named).

    Examples
    --------
    >>> from dpmmbench.reports.entries import rerun_text
    >>> rerun_text("python -m x", {"cpu_s": 12.3, "wall_s": 12.5, "git_commit": "abcdef0123",
    ...            "git_dirty": False, "cores": 2, "cpu_model": "AMD EPYC", "finished_utc": "2026-11-27T15:00",
    ...            "result": {"seed": 0}})
    '`python -m x` (12.5 s measured, 12.3 s CPU; seed 0; commit abcdef0 on 2 cores, AMD EPYC, 2026-11-27).'
    """
    result = check.get("result", {})
    seeds = (f"seeds {', '.join(map(str, result['seeds']))}" if "seeds" in result
             else f"seed {result['seed']}" if "seed" in result else "no seed")
    commit = str(check.get("git_commit") or "unknown")[:7] + (" with uncommitted changes" if check.get("git_dirty")
                                                              else "")
    return (f"`{command}` ({check['wall_s']:.3g} s measured, {check['cpu_s']:.3g} s CPU; {seeds}; commit {commit} on "
            f"{check.get('cores', '?')} cores, {check.get('cpu_model', 'unknown CPU')}, "
            f"{str(check.get('finished_utc', ''))[:10]}).")


def not_measured(item: str, paper: str, name: str, command: str) -> Entry:
    """The entry of a paper's own measurement that has no record yet (``checks.json`` lacks
    ``name``): not comparable, naming the command that measures it."""
    return Entry(item, paper, f"Not measured: no {name} record (`{command}`).", NOT_COMPARABLE,
                 "The measurement has no record yet.")
