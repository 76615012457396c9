"""The report's first screen: per data set, which settled method did best at the equal budget,
which methods settled, whether the leaders' chains agree or sit in different modes, and what
the run can and cannot tell (:func:`first_screen`).

Both the HTML report (:mod:`reports.report`) and ``docs/results.md``
(:mod:`reports.results_doc`) open with it; this module holds its data and its paragraph as
plain values, and each of them writes its own markup.

**The equal budget** of a data set is the stop rule most of its runs share: the pair (time
budget per chain in seconds, iteration cap) read back from its runs' metadata as a
:class:`~dpmmbench.algorithms.runner.StopRule`, counted over the runs with
a fixed concentration (a run that learns alpha scores its log joint at its own alpha, another
quantity). A method is *at the equal budget* when every run of it on the data set has that
budget; the others (variants with their own budget, such as a claim's fixed iteration count,
and runs that learn alpha) are named and left to the data set's own section.

Per data set and method, every number is a row of :func:`reports.chains.chain_statistics`
(medians and 5-95 % intervals over chains) and every verdict its chain diagnosis
(:mod:`reports.diagnosis`: chains agree, settled in different modes, still climbing, stuck,
too slow at this budget, n/a): nothing is recomputed here. Only settled methods are ranked: a
chain still climbing has a final log joint that says when it stopped, not where it goes.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpmmbench.algorithms.runner import StopRule

from . import chains

#: settled methods a first-screen cell names before "+ N more"
SETTLED_SHOWN = 6
#: (chain-statistics column, what it is) of the two qualities a method can be best at
QUALITIES = (("final_log_joint", "log joint"), ("heldout_lpd", "held-out log predictive"))


@dataclass(frozen=True)
class Method:
    """A method's diagnosis on a data set at the equal budget (a row of
    :func:`reports.chains.chain_statistics`): ``outcome`` (a key of
    :data:`reports.diagnosis.OUTCOMES`), ``text`` (it in words, with its numbers) and
    ``settled`` (whether it is ranked)."""

    label: str
    outcome: str
    text: str
    settled: bool


@dataclass(frozen=True)
class Best:
    """The settled method with the highest median (over its chains) of a quality.

    ``margin`` is its median minus the runner-up's (the next settled method; NaN without
    one); ``overlap`` says whether their 5-95 % intervals over chains overlap (None without a
    runner-up): a margin inside the spread over chains does not separate the two methods.
    ``outcome`` and ``runner_outcome`` are their diagnoses (agree, modes, ...).
    """

    quality: str
    label: str
    value: float
    runner_up: str | None
    margin: float
    overlap: bool | None
    outcome: Method
    runner_outcome: Method | None


@dataclass(frozen=True)
class DatasetAnswer:
    """The first screen's row of one data set (see :func:`first_screen`)."""

    dataset: str
    points: int | None
    dims: int | None
    budget: StopRule | None
    chains: tuple[int, int]
    best: dict
    methods: tuple
    left_out: tuple
    stats: pd.DataFrame

    @property
    def rows(self) -> int:
        """Methods at the equal budget."""
        return len(self.methods)

    @property
    def settled(self) -> tuple:
        """The labels of the settled methods, best median final log joint first."""
        ranked = self.stats[self.stats["label"].isin([m.label for m in self.methods if m.settled])]
        ranked = ranked.iloc[np.argsort(-ranked["final_log_joint"].to_numpy(float), kind="stable")]
        return tuple(ranked["label"])

    def counts(self) -> Counter:
        """How many methods ended in each outcome (:data:`reports.diagnosis.OUTCOMES`)."""
        return Counter(m.outcome for m in self.methods)


@dataclass(frozen=True)
class FirstScreen:
    """The data sets' answers, the paragraph "What this run can and cannot tell you", and the
    data sets left off the screen (only variants ran there: the claims' further draws)."""

    datasets: tuple
    paragraph: str
    elsewhere: tuple = ()

def equal_budget(runs: pd.DataFrame) -> tuple[pd.Series, dict]:
    """Which runs are at their data set's equal budget.

    Parameters
    ----------
    runs : pandas.DataFrame
        The run table (:func:`reports.runs.read_runs`): ``dataset``, ``label``,
        ``learned_alpha``, ``meta``.

    Returns
    -------
    at : pandas.Series of bool
        Per run (aligned with ``runs``): its label has, on its data set, only runs with a
        fixed alpha and the data set's equal budget.
    budgets : dict
        Data set -> its equal stop rule (:class:`algorithms.runner.StopRule`, read back from
        the runs' metadata): the most common budget among its runs with a
        fixed alpha (ties go to the one met first); None when every run learns alpha.
    """
    budget = runs["meta"].map(lambda m: StopRule.from_meta(m if isinstance(m, dict) else {}))
    learned = runs["learned_alpha"].astype(bool)
    budgets = {}
    for name, group in budget[~learned].groupby(runs.loc[~learned, "dataset"], sort=False):
        budgets[name] = Counter(group).most_common(1)[0][0]
    fits = pd.Series([not learned.loc[i] and budget.loc[i] == budgets.get(runs.at[i, "dataset"])
                      for i in runs.index], index=runs.index, dtype=bool)
    at = fits.groupby([runs["dataset"], runs["label"]], sort=False).transform("all")
    return at.astype(bool), budgets


def method(row) -> Method:
    """A row of :func:`reports.chains.chain_statistics` as a :class:`Method` (a group whose
    every run failed is ``failed``: nothing can be said of it, and it is not ranked)."""
    from .diagnosis import SETTLED

    if int(row["chains"]) == 0:
        return Method(str(row["label"]), "failed", "every run failed", False)
    outcome = str(row["outcome"])
    return Method(str(row["label"]), outcome, str(row["diagnosis"]), outcome in SETTLED)


def best(stats: pd.DataFrame, column: str, methods: dict) -> Best | None:
    """The settled method with the highest median ``column`` over its chains, and its margin
    over the next settled one.

    Parameters
    ----------
    stats : pandas.DataFrame
        Chain statistics of one data set's methods at the equal budget, in display order
        (ties go to the first).
    column : str
        A quality of :data:`QUALITIES`.
    methods : dict
        label -> :class:`Method`; only settled ones are ranked.

    Returns
    -------
    Best or None
        None when no settled method measured ``column``.
    """
    known = stats[np.isfinite(stats[column].to_numpy(float)) & stats["label"].map(lambda x: methods[x].settled)]
    if known.empty:
        return None
    ranked = known.iloc[np.argsort(-known[column].to_numpy(float), kind="stable")]
    top = ranked.iloc[0]
    runner = ranked.iloc[1] if len(ranked) > 1 else None
    margin = math.nan if runner is None else float(top[column] - runner[column])
    overlap = None if runner is None else not bool(top[f"{column}_lo"] > runner[f"{column}_hi"])
    return Best(dict(QUALITIES)[column], str(top["label"]), float(top[column]),
                None if runner is None else str(runner["label"]), margin, overlap, methods[top["label"]],
                None if runner is None else methods[runner["label"]])


def first_screen(runs: pd.DataFrame, stats: pd.DataFrame, order=None) -> FirstScreen:
    """The first screen of a run: per data set its answer, and the paragraph.

    The data sets on the screen are those of the comparison: where at least one run is a
    registered algorithm under its own name (its ``name`` is its ``algorithm``: no variant of a
    config, no changed option); data sets where only variants ran
    (a claim's further draws, decided in the claims' section) are named in ``elsewhere``. A
    run of variants only puts every data set on the screen.

    Parameters
    ----------
    runs : pandas.DataFrame
        The run table (:func:`reports.runs.read_runs`).
    stats : pandas.DataFrame
        :func:`reports.chains.chain_statistics` of ``runs`` by ``["dataset", "label"]``.
    order : sequence of str, optional
        The labels in display order (:func:`reports.runs.label_order`); default: as
        ``stats`` has them.

    Returns
    -------
    FirstScreen
        Per data set (in the order of ``runs``) a :class:`DatasetAnswer`: its size (from the
        data set's metadata, else the run's training and held-out points), its equal budget,
        the fewest and most chains of a method, the best settled method per quality of
        :data:`QUALITIES` (absent when none settled), every method's diagnosis
        (:class:`Method`), the labels left out with why, and the statistics rows of the
        methods at the equal budget; the paragraph of :func:`limits`; the data sets left off.
    """
    at, budgets = equal_budget(runs)
    position = {label: i for i, label in enumerate(order if order is not None else dict.fromkeys(stats["label"]))}
    plain = runs["name"].eq(runs["algorithm"]) if {"name", "algorithm"} <= set(runs) else None
    datasets = list(dict.fromkeys(runs["dataset"]))
    shown = [d for d in datasets if plain is None or plain[runs["dataset"] == d].any()] or datasets
    found = []
    for dataset in shown:
        mine = runs[runs["dataset"] == dataset]
        labels = set(mine.loc[at[mine.index], "label"])
        here = stats[(stats["dataset"] == dataset) & stats["label"].isin(labels)]
        here = here.iloc[np.argsort([position.get(label, len(position)) for label in here["label"]], kind="stable")]
        methods = {row["label"]: method(row) for _, row in here.iterrows()}
        bests = {column: best(here, column, methods) for column, _ in QUALITIES}
        left = []
        for label, group in mine[~at[mine.index]].groupby("label", sort=False):
            if group["learned_alpha"].astype(bool).any():
                left.append((label, "learns α"))
            else:
                own = dict.fromkeys(StopRule.from_meta(m).describe() for m in group["meta"])
                left.append((label, "; ".join(own)))
        counts = here["chains"].astype(int)
        found.append(DatasetAnswer(
            dataset=str(dataset), points=_size(mine, "n"), dims=_size(mine, "dim"), budget=budgets.get(dataset),
            chains=(int(counts.min()), int(counts.max())) if len(counts) else (0, 0),
            best={column: found_best for column, found_best in bests.items() if found_best is not None},
            methods=tuple(methods.values()), left_out=tuple(left), stats=here.reset_index(drop=True)))
    elsewhere = tuple(str(d) for d in datasets if d not in shown)
    return FirstScreen(tuple(found), limits(found, runs, elsewhere), elsewhere)


def _size(runs: pd.DataFrame, key: str) -> int | None:
    """The data set's number of points (``n``) or dimensions (``dim``) from its metadata; the
    points also from a run's split (training plus held-out points)."""
    for meta in runs["meta"]:
        meta = meta if isinstance(meta, dict) else {}
        value = (meta.get("dataset_meta") or {}).get(key)
        if value is None and key == "n" and meta.get("n_points"):
            value = int(meta["n_points"]) + int(meta.get("heldout_points") or 0)
        if value is not None:
            return int(value)
    return None


def leaders(a: DatasetAnswer) -> str:
    """Whether the leaders (the best settled method by log joint and its runner-up) have chains
    that agree or sit in different modes, in a few words.

    Examples
    --------
    >>> from dpmmbench.reports.answer import Best, DatasetAnswer, Method, leaders
    >>> top = Method("subc", "modes", "settled in different modes (...)", True)
    >>> two = Method("gibbs", "modes", "settled in different modes (...)", True)
    >>> b = Best("log joint", "subc", -10.0, "gibbs", 2.0, True, top, two)
    >>> leaders(DatasetAnswer("d", None, None, None, (4, 4), {"final_log_joint": b}, (top, two), (), None))
    'both in different modes'
    """
    found = a.best.get("final_log_joint")
    if found is None:
        return "no method settled"
    words = {"agree": "chains agree", "modes": "in different modes", "settled": "one chain"}
    if found.runner_outcome is None:
        return f"{found.label}: {words[found.outcome.outcome]}"
    if found.outcome.outcome == found.runner_outcome.outcome:
        return f"both {words[found.outcome.outcome]}".replace("both chains agree", "both: chains agree")
    return (f"{found.label}: {words[found.outcome.outcome]}; "
            f"{found.runner_up}: {words[found.runner_outcome.outcome]}")


#: the outcomes the paragraph counts, in its order, with the words it uses
COUNTED = (("agree", "with chains that agree"), ("modes", "settled in different modes"),
           ("climbing", "still climbing"), ("stuck", "stuck"), ("too slow", "too slow"),
           ("n/a", "n/a (optimiser or variational)"))


def limits(found, runs: pd.DataFrame, elsewhere=()) -> str:
    """The paragraph "What this run can and cannot tell you" (at most about 150 words), from
    the answers: what the outcomes mean, how many methods ended in each, what was left out and
    where the detail is.

    Parameters
    ----------
    found : sequence of DatasetAnswer
    runs : pandas.DataFrame
        The run table (peers, failed runs).
    elsewhere : sequence of str
        Data sets left off the screen (only variants ran there).
    """
    from .diagnosis import MIN_ITERATIONS

    total = Counter()
    for a in found:
        total.update(a.counts())
    rows = sum(a.rows for a in found)
    said = []
    if rows:
        counted = ", ".join(f"{total[key]} {words}" for key, words in COUNTED if total[key])
        said.append(f"Of {rows} method × data set pairs at the equal budget: {counted}.")
    said.append("Settled: a chain's log joint no longer climbs over its last half. Settled in different modes: "
                f"the settled chains sit on plateaus that R̂ across chains (above {chains.RHAT_THRESHOLD:g}) tells "
                "apart; a best method there found better modes, it did not sample the posterior better.")
    said.append(f"Only settled methods are ranked; a method with fewer than {MIN_ITERATIONS} iterations is too "
                "slow at its budget. ≈ marks a margin inside the 5-95 % spread over chains.")
    failed = int(runs["status"].eq("failed").sum()) if "status" in runs else 0
    if failed:
        said.append(f"{failed} run{'' if failed == 1 else 's'} failed and {'is' if failed == 1 else 'are'} left out.")
    peers = list(dict.fromkeys(runs.loc[runs["external"].astype(bool), "label"])) if "external" in runs else []
    if peers:
        said.append(f"Peers ({', '.join(peers)}) ran with their own defaults.")
    said.append("Each data set's section lists every method's diagnosis, variants with their own budget and runs "
                "that learn α" + (f"; the claims' further draws ({len(elsewhere)} data sets) are decided with the "
                                  f"claims" if elsewhere else "") + ".")
    return " ".join(said)
