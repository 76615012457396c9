"""The report's first screen: per data set, which method did best at the equal budget, which
methods converged, and what the run can and cannot tell (:func:`first_screen`).

Both the HTML report (:mod:`reports.report`) and ``docs/results.md``
(:mod:`reports.results_doc`) open with it; this module holds its data and its paragraph as
plain values, and each of them writes its own markup.

**The equal budget** of a data set is the stop rule most of its runs share: the pair (time
budget per chain in seconds, iteration cap) of its runs' metadata, counted over the runs with
a fixed concentration (a run that learns alpha scores its log joint at its own alpha, another
quantity). A method is *at the equal budget* when every run of it on the data set has that
budget; the others (variants with their own budget, such as a claim's fixed iteration count,
and runs that learn alpha) are named and left to the data set's own section.

Per data set and method, every number is a row of :func:`reports.chains.chain_statistics`
(medians and 5-95 % intervals over chains, R-hat, ESS) and every verdict comes from
:func:`reports.chains.convergence_verdict`: nothing is recomputed here.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import chains

#: (chain-statistics column, what it is) of the two qualities a method can be best at
QUALITIES = (("final_log_joint", "log joint"), ("heldout_lpd", "held-out log predictive"))


@dataclass(frozen=True)
class Budget:
    """The stop rule of a run: seconds of sampler time per chain and an iteration cap (None
    where the run had none, or its metadata does not say)."""

    seconds: float | None
    iterations: int | None

    def describe(self) -> str:
        """The budget in words.

        Examples
        --------
        >>> from dpmmbench.reports.answer import Budget
        >>> Budget(5.0, 50).describe()
        '5 s or 50 iterations'
        >>> Budget(None, 200).describe()
        '200 iterations'
        >>> Budget(None, None).describe()
        'not recorded'
        """
        said = ([f"{self.seconds:g} s"] if self.seconds is not None else []) + (
            [f"{self.iterations:,} iterations"] if self.iterations is not None else [])
        return " or ".join(said) or "not recorded"


@dataclass(frozen=True)
class Status:
    """Whether a method converged on a data set, and why not (a short reason: ``R̂ 1.62``,
    ``stuck``, ``n/a optimiser``, ...)."""

    label: str
    converged: bool
    reason: str
    rhat: float
    ess: float


@dataclass(frozen=True)
class Best:
    """The method with the highest median (over its chains) of a quality, at the equal budget.

    ``margin`` is its median minus the runner-up's (NaN without a runner-up); ``apart`` says
    whether their 5-95 % intervals over chains are disjoint (None without a runner-up): a
    margin inside the spread over chains does not separate the two methods.
    """

    quality: str
    label: str
    value: float
    runner_up: str | None
    margin: float
    apart: bool | None
    status: Status


@dataclass(frozen=True)
class DatasetAnswer:
    """The first screen's row of one data set (see :func:`first_screen`)."""

    dataset: str
    points: int | None
    dims: int | None
    budget: Budget | None
    chains: tuple[int, int]
    best: dict
    converged: tuple
    not_converged: tuple
    left_out: tuple
    stats: pd.DataFrame

    @property
    def rows(self) -> int:
        """Methods at the equal budget."""
        return len(self.converged) + len(self.not_converged)


@dataclass(frozen=True)
class FirstScreen:
    """The data sets' answers and the paragraph "What this run can and cannot tell you"."""

    datasets: tuple
    paragraph: str


def run_budget(meta: dict) -> Budget:
    """The budget a run's metadata records (``time_budget``, ``iterations_requested``).

    Examples
    --------
    >>> from dpmmbench.reports.answer import run_budget
    >>> run_budget({"time_budget": 5, "iterations_requested": 50})
    Budget(seconds=5.0, iterations=50)
    >>> run_budget({})
    Budget(seconds=None, iterations=None)
    """
    seconds, iterations = meta.get("time_budget"), meta.get("iterations_requested")
    return Budget(None if seconds is None else float(seconds), None if iterations is None else int(iterations))


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
        Data set -> its equal :class:`Budget`: the most common budget among its runs with a
        fixed alpha (ties go to the one met first); None when every run learns alpha.
    """
    budget = runs["meta"].map(lambda m: run_budget(m if isinstance(m, dict) else {}))
    learned = runs["learned_alpha"].astype(bool)
    budgets = {}
    for name, group in budget[~learned].groupby(runs.loc[~learned, "dataset"], sort=False):
        budgets[name] = Counter(group).most_common(1)[0][0]
    fits = pd.Series([not learned.loc[i] and budget.loc[i] == budgets.get(runs.at[i, "dataset"])
                      for i in runs.index], index=runs.index, dtype=bool)
    at = fits.groupby([runs["dataset"], runs["label"]], sort=False).transform("all")
    return at.astype(bool), budgets


def convergence_status(row) -> Status:
    """What a row of :func:`reports.chains.chain_statistics` says of convergence, in a word.

    Converged: the row's ``converged`` (R-hat of the log joint and of the number of clusters
    at most :data:`reports.chains.RHAT_THRESHOLD`, not stuck) and an ESS of the log joint
    reported. Otherwise the reason: ``n/a optimiser`` or ``n/a variational`` for a method
    that is no sampler, ``stuck``, ``R̂ x`` (the log joint's) or ``R̂ clusters x`` above the
    threshold, ``one chain``, ``too few draws``, ``no ESS``, ``every run failed``.

    Parameters
    ----------
    row : mapping
        A row of :func:`reports.chains.chain_statistics` (with ``label``).
    """
    rhat, ess = float(row["rhat_log_joint"]), float(row["ess_bulk_log_joint"])
    verdict, bad = chains.convergence_verdict(row)
    kinds = {note: kind for kind, note in chains.NOT_A_SAMPLER.items()}
    if verdict in kinds:
        return Status(row["label"], False, f"n/a {kinds[verdict]}", math.nan, math.nan)
    if row["chains"] == 0:
        reason = "every run failed"
    elif verdict == chains.STUCK:
        reason = "stuck"
    elif verdict == chains.STILL:
        reason = "did not move (kind unknown)"
    elif chains.not_converged(rhat):
        reason = f"R̂ {_rhat(rhat)}"
    elif bad:
        reason = f"R̂ clusters {_rhat(float(row['rhat_n_clusters']))}"
    elif not pd.isna(row["converged"]) and bool(row["converged"]):
        if math.isfinite(ess):
            return Status(row["label"], True, "", rhat, ess)
        reason = "no ESS"
    elif row["chains"] < 2:
        reason = "one chain"
    elif row["draws"] < chains.MIN_DRAWS:
        reason = "too few draws"
    else:
        reason = "R̂ unknown"
    return Status(row["label"], False, reason, rhat, ess)


def _rhat(x: float) -> str:
    return "∞" if x == math.inf else f"{x:.4g}"


def best(stats: pd.DataFrame, column: str, statuses: dict) -> Best | None:
    """The method with the highest median ``column`` over its chains, and its margin.

    Parameters
    ----------
    stats : pandas.DataFrame
        Chain statistics of one data set's methods at the equal budget, in display order
        (ties go to the first).
    column : str
        A quality of :data:`QUALITIES`.
    statuses : dict
        label -> :class:`Status`.

    Returns
    -------
    Best or None
        None when no method measured ``column``.
    """
    known = stats[np.isfinite(stats[column].to_numpy(float))]
    if known.empty:
        return None
    ranked = known.iloc[np.argsort(-known[column].to_numpy(float), kind="stable")]
    top = ranked.iloc[0]
    runner = ranked.iloc[1] if len(ranked) > 1 else None
    margin = math.nan if runner is None else float(top[column] - runner[column])
    apart = None if runner is None else bool(top[f"{column}_lo"] > runner[f"{column}_hi"])
    return Best(dict(QUALITIES)[column], str(top["label"]), float(top[column]),
                None if runner is None else str(runner["label"]), margin, apart, statuses[top["label"]])


def first_screen(runs: pd.DataFrame, stats: pd.DataFrame, order=None) -> FirstScreen:
    """The first screen of a run: per data set its answer, and the paragraph.

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
        the fewest and most chains of a method, the best method per quality of
        :data:`QUALITIES` (absent when none measured it), the methods that converged and
        those that did not (with the reason, :func:`convergence_status`), the labels left out
        with why, and the statistics rows of the methods at the equal budget; and the
        paragraph of :func:`limits`.
    """
    at, budgets = equal_budget(runs)
    position = {label: i for i, label in enumerate(order if order is not None else dict.fromkeys(stats["label"]))}
    found = []
    for name in dict.fromkeys(runs["dataset"]):
        mine = runs[runs["dataset"] == name]
        labels = set(mine.loc[at[mine.index], "label"])
        here = stats[(stats["dataset"] == name) & stats["label"].isin(labels)]
        here = here.iloc[np.argsort([position.get(label, len(position)) for label in here["label"]], kind="stable")]
        statuses = {row["label"]: convergence_status(row) for _, row in here.iterrows()}
        bests = {column: best(here, column, statuses) for column, _ in QUALITIES}
        left = []
        for label, group in mine[~at[mine.index]].groupby("label", sort=False):
            if group["learned_alpha"].astype(bool).any():
                left.append((label, "learns α"))
            else:
                own = dict.fromkeys(run_budget(m).describe() for m in group["meta"])
                left.append((label, "; ".join(own)))
        counts = here["chains"].astype(int)
        found.append(DatasetAnswer(
            dataset=str(name), points=_size(mine, "n"), dims=_size(mine, "dim"), budget=budgets.get(name),
            chains=(int(counts.min()), int(counts.max())) if len(counts) else (0, 0),
            best={column: found_best for column, found_best in bests.items() if found_best is not None},
            converged=tuple(s for s in statuses.values() if s.converged),
            not_converged=tuple(s for s in statuses.values() if not s.converged),
            left_out=tuple(left), stats=here.reset_index(drop=True)))
    return FirstScreen(tuple(found), limits(found, runs))


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


def limits(found, runs: pd.DataFrame) -> str:
    """The paragraph "What this run can and cannot tell you", from the answers.

    It states the budget and the chains per method, how many method x data set rows at the
    equal budget converged and which did not and why, what was left out of the screen, that
    the papers' claims are decided in their own section, that peers ran with their own
    defaults, and what is measured and what is modelled.

    Parameters
    ----------
    found : sequence of DatasetAnswer
    runs : pandas.DataFrame
        The run table (peers, failed runs, cores).
    """
    said = []
    budgets = {a.dataset: a.budget for a in found if a.budget is not None}
    if len(set(budgets.values())) == 1:
        shared = next(iter(budgets.values()))
        said.append(f"The equal budget, the stop rule most runs of a data set share, is {shared.describe()} per "
                    f"chain{'' if len(budgets) == 1 else ' on every data set'} (sampler time; whichever comes "
                    f"first).")
    elif budgets:
        said.append("The equal budget, the stop rule most runs of a data set share, differs between data sets "
                    "(sampler time per chain or iterations, whichever comes first): "
                    + "; ".join(f"{name}: {b.describe()}" for name, b in budgets.items()) + ".")
    lows, highs = [a.chains[0] for a in found if a.rows], [a.chains[1] for a in found if a.rows]
    if lows:
        lo, hi = min(lows), max(highs)
        said.append(f"Each method ran {lo if lo == hi else f'{lo} to {hi}'} chain{'s' if hi > 1 else ''} "
                    f"(seeds) per data set at that budget.")
    failed = int(runs["status"].eq("failed").sum()) if "status" in runs else 0
    if failed:
        said.append(f"{failed} run{'' if failed == 1 else 's'} failed and {'is' if failed == 1 else 'are'} left out.")

    rows = sum(a.rows for a in found)
    ok = sum(len(a.converged) for a in found)
    if rows:
        said.append(f"{ok} of {rows} method × data set rows converged (R̂ of the log joint and of the number of "
                    f"clusters at most {chains.RHAT_THRESHOLD:g} over the chains' second halves, with an ESS).")
    kinds = {f"n/a {kind}" for kind in chains.NOT_A_SAMPLER}
    unshown, other = {}, {}  # why -> method -> data sets; kind -> methods
    for a in found:
        for s in a.not_converged:
            if s.reason in kinds:
                other.setdefault(s.reason.removeprefix("n/a "), {})[s.label] = None
            else:
                unshown.setdefault(_category(s.reason), {}).setdefault(s.label, []).append(a.dataset)
    if unshown:
        count = sum(len(where) for who in unshown.values() for where in who.values())
        said.append(f"Not shown to converge: {count} of {rows} rows (the table gives each one's R̂).")
        every = [a.dataset for a in found if a.rows]
        for why, who in unshown.items():
            # methods that fail on the same data sets are named together: the paragraph stays short
            places = {}
            for label, where in who.items():
                places.setdefault(tuple(where), []).append(label)
            said.append(f"{why[0].upper()}{why[1:]}: " + "; ".join(
                f"{', '.join(labels)} (on {_places(where, every)})" for where, labels in places.items()) + ".")
    if other:
        said.append("Not samplers, so R̂ and ESS do not apply (they climb to an optimum or a fixed point): "
                    + "; ".join(f"{kind}: {', '.join(who)}" for kind, who in other.items()) + ".")
    learned = sorted({label for a in found for label, why in a.left_out if why == "learns α"})
    own = [f"{label} ({why}, {a.dataset})" for a in found for label, why in a.left_out if why != "learns α"]
    if learned or own:
        parts = [f"runs that learn α, whose log joint is at their own α ({', '.join(learned)})"] if learned else []
        parts += [f"variants with their own budget: {'; '.join(own)}"] if own else []
        said.append("Left out of this screen, and shown in each data set's own section: " + " and ".join(parts) + ".")
    said.append("A best method's margin is the difference of medians over chains; where the two methods' 5-95 % "
                "intervals over chains overlap, the margin does not separate them.")
    said.append("Whether each paper's claim held is decided in its own section, within the claim's declared scope "
                "and on every draw of its data that ran, not from this table.")
    peers = list(dict.fromkeys(runs.loc[runs["external"].astype(bool), "label"])) if "external" in runs else []
    if peers:
        said.append(f"Peers ({', '.join(peers)}) ran with their own defaults (their settings are listed with the "
                    f"peers), not tuned for this grid.")
    said.append("Measured here, on this machine: sampler time per chain (start-up and scoring excluded), log joint, "
                "held-out log predictive, R̂ and ESS; modelled, not measured: the scaling to more workers than ran.")
    return " ".join(said)


def _places(where, every) -> str:
    """The data sets a group of methods did not converge on, in words."""
    return "every data set" if list(where) == every and len(every) > 1 else ", ".join(where)


def _category(reason: str) -> str:
    """The group a reason is listed under in the paragraph (an R-hat's value stays with its
    method)."""
    if reason.startswith("R̂ clusters"):
        return f"R̂ of the number of clusters above {chains.RHAT_THRESHOLD:g}"
    if reason.startswith("R̂ ") and reason != "R̂ unknown":
        return f"R̂ above {chains.RHAT_THRESHOLD:g}"
    return {"one chain": "one chain (no R̂)", "too few draws": "too few draws for R̂"}.get(reason, reason)
