"""Statistics over repeated chains: do the chains agree, how much do they deliver per second,
how soon do they get there, and how far apart do they end.

Every (algorithm, dataset) runs several chains (seeds). For each group of chains this module
computes, from the traces (docs/design.md "Summary columns"):

- **intervals over chains**: the median and the 5-95 % interval (:data:`INTERVAL`) of each
  chain's final log joint, VI, NMI, number of clusters, held-out log predictive and sampler
  time;
- **convergence**: rank-normalised split R-hat and bulk and tail effective sample sizes of
  the log joint, the number of clusters and (when it is learned) alpha, computed by
  arviz-stats on a (chain, draw) array. Only quantities that do not change when clusters are
  relabelled are diagnosed: a cluster's parameters have no identity across chains;
- **efficiency**: bulk ESS of the log joint per second of sampler time, and the time each
  chain needs to come within a relative tolerance of the best log joint any method reached on
  the dataset (:func:`time_to_target`).

Draws (what R-hat and ESS see): the steps of each chain (iteration 0, the initial state, is no
draw), all chains of a group cut to the shortest one (time-budgeted chains stop at different
iterations), of which the second half is kept as draws, at least the last :data:`MIN_DRAWS`
steps when the chain has them (see :func:`draws`). One chain has no between-chain variance:
its R-hat is NaN. A quantity that does not move within any chain (a deterministic search, a
variational peer at its fixed point, alpha when it is fixed) has no ESS: NaN, never the number
of draws arviz-stats reports for a constant.

R-hat and ESS are statistics of samplers. A method that is none (an optimiser such as
``search``, variational inference such as the peers ``sklearn-bgm`` and ``bnpy-memovb``:
:attr:`algorithms.base.Sampler.kind`) gets no R-hat and no ESS but the reason, in
``rhat_note`` (:data:`NOT_A_SAMPLER`): its chains stop moving at an optimum, and the few
digits of noise left there would make R-hat any number at all, e.g. 10^15 for chains flat at
different optima. It is neither converged nor unconverged in R-hat's sense. A sampler whose
chains all stand still over their draws is stuck, and says so (:data:`STUCK`): whatever
R-hat says, it has not shown that it mixes (``converged`` is False).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from .diagnosis import NOT_SAMPLERS, RHAT_THRESHOLD, diagnose

#: quantiles of the interval over chains (the ``_lo`` and ``_hi`` columns)
INTERVAL = (0.05, 0.95)
#: default relative tolerance of the time to target: 0.1 % of the best log joint
TARGET_TOLERANCE = 1e-3
# RHAT_THRESHOLD (a method whose R-hat exceeds it is not converged) lives with the chain
# diagnosis, which this module's statistics call: one place, no import cycle
#: fewest draws per chain arviz-stats computes R-hat and ESS from
MIN_DRAWS = 4
#: quantile probabilities of the tail ESS (the smaller of the two quantiles' ESS)
TAIL_PROB = (0.05, 0.95)
#: label-switching-invariant trace columns that are diagnosed: (trace column, column suffix)
DIAGNOSED = (("log_joint", "log_joint"), ("n_clusters", "n_clusters"), ("alpha", "alpha"))
#: diagnosed columns on which chains all constant at one value agree (R-hat 1, see diagnostics)
DISCRETE = ("n_clusters",)
#: ``rhat_note`` of a method that is no sampler, by its kind (:attr:`algorithms.base.Sampler.kind`)
NOT_A_SAMPLER = dict(zip(NOT_SAMPLERS, ("n/a: optimiser (it climbs to one partition; not a sampler)",
                                        "n/a: variational inference (it iterates to a fixed point; not a sampler)")))
#: ``rhat_note`` of a sampler none of whose chains moved over its draws
STUCK = "stuck: no chain's log joint moved over its draws"
#: ``rhat_note`` of a method not known here (no kind) none of whose chains moved over its draws
STILL = "no chain's log joint moved over its draws (a sampler would be stuck; the method is not known here)"
#: (per-run column, summary column) of the quantities given as median and interval over chains
OVER_CHAINS = (("final_log_joint", "final_log_joint"), ("final_vi", "final_vi"), ("final_nmi", "final_nmi"),
               ("final_n_clusters", "final_n_clusters"), ("heldout_lpd", "heldout_lpd"), ("time_s", "time_s"))


def interval(values, probs=INTERVAL) -> tuple[float, float, float]:
    """Median and interval of ``values`` over chains, NaN- and infinity-aware.

    NaN (not measured) is left out. ``inf`` (a chain that never reached a target) sorts last
    and counts: a quantile that falls on or next to such a chain is ``inf``, so a median over
    chains of which half never got there is "not reached", not a number.

    Parameters
    ----------
    values : array_like of float
        One value per chain.
    probs : (float, float)
        Quantile probabilities of the interval bounds.

    Returns
    -------
    (median, lo, hi) : tuple of float
        NaN when no value was measured. Quantiles interpolate linearly between order
        statistics (numpy's default).
    """
    v = np.sort(np.asarray(values, dtype=float).ravel())
    v = v[~np.isnan(v)]
    q = np.array([0.5, *probs])
    if not len(v):
        return (math.nan,) * 3
    reached = int(np.isfinite(v).sum())
    if reached == len(v):
        return tuple(float(x) for x in np.quantile(v, q))
    # numpy interpolates inf into NaN; a quantile whose upper order statistic is inf is inf
    out = np.quantile(np.where(np.isfinite(v), v, v[reached - 1] if reached else 0.0), q)
    out[np.ceil(q * (len(v) - 1)) >= reached] = math.inf
    return tuple(float(x) for x in out)


def time_to_target(chain: pd.DataFrame, threshold: float) -> float:
    """Sampler time of the first row of ``chain`` whose log joint is at or above ``threshold``.

    Parameters
    ----------
    chain : pandas.DataFrame
        One chain's trace rows (``time_s``, ``log_joint``), in iteration order.
    threshold : float
        The target log joint.

    Returns
    -------
    float
        Seconds; ``inf`` when the chain never got there, NaN when ``threshold`` is NaN.
    """
    if math.isnan(threshold):
        return math.nan
    above = chain["log_joint"].to_numpy(float) >= threshold
    return float(chain["time_s"].to_numpy(float)[above.argmax()]) if above.any() else math.inf


def check_tolerance(tolerance) -> float:
    """Return ``tolerance`` if it is a relative tolerance of the target (a number in [0, 1)),
    else raise ValueError naming it."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 1:
        raise ValueError(f"target tolerance must be a number in [0, 1), a fraction of the best log joint "
                         f"(0.001 = 0.1 %), got {tolerance!r}")
    return tolerance


def target_threshold(best: float, tolerance: float = TARGET_TOLERANCE) -> float:
    """The log joint a chain must reach: within ``tolerance`` (relative) of ``best``.

    Parameters
    ----------
    best : float
        The best log joint any chain reached (nats; usually negative).
    tolerance : float
        Relative tolerance, >= 0 (0.001 = 0.1 %).
    """
    return best - tolerance * abs(best)


def draws(chains, column: str) -> np.ndarray:
    """The (chain, draw) array of ``column`` that R-hat and ESS are computed on.

    Parameters
    ----------
    chains : sequence of pandas.DataFrame
        The trace rows of each chain, in iteration order (row 0 = the initial state).
    column : str
        A trace column.

    Returns
    -------
    numpy.ndarray
        Shape ``(chains, draws)``: the steps (iteration >= 1) of every chain cut to the
        shortest chain's L steps, of which the last ``max(ceil(L / 2), min(L, MIN_DRAWS))``:
        the first half is burn-in, but a short chain keeps at least :data:`MIN_DRAWS` draws
        when it has them. Empty (0 draws) when a chain has no step or lacks the column.
    """
    steps = [c.loc[c["iteration"] > 0, column].to_numpy(float) if column in c else np.empty(0) for c in chains]
    length = min((len(s) for s in steps), default=0)
    kept = min(length, max(length - length // 2, MIN_DRAWS))
    return np.array([s[length - kept:length] for s in steps]).reshape(len(steps), kept)


def diagnostics(values: np.ndarray, agree_when_constant: bool = False) -> dict:
    """Split R-hat and bulk and tail ESS of a (chain, draw) array, with arviz-stats.

    Parameters
    ----------
    values : numpy.ndarray
        Shape ``(chains, draws)`` (see :func:`draws`).
    agree_when_constant : bool
        Give R-hat 1, not NaN, when every chain holds one and the same value throughout: right
        for a discrete quantity such as the number of clusters, on which the chains then agree,
        not for the log joint (chains that do not move at all have not shown that they mix).

    Returns
    -------
    dict
        ``rhat`` (rank-normalised split R-hat; NaN with one chain or fewer than
        :data:`MIN_DRAWS` draws, ``inf`` when the chains are constant at different values,
        NaN when they are all constant at the same value, or 1 with ``agree_when_constant``),
        ``ess_bulk``, ``ess_tail`` (NaN with fewer than :data:`MIN_DRAWS` draws, a NaN draw,
        or when the quantity does not move within any chain).
    """
    from arviz_stats.base import array_stats

    nan = {"rhat": math.nan, "ess_bulk": math.nan, "ess_tail": math.nan}
    if values.ndim != 2 or values.shape[0] == 0 or values.shape[1] < MIN_DRAWS or not np.isfinite(values).all():
        return nan
    axes = {"chain_axis": 0, "draw_axis": 1}
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        # constant chains divide by a zero within-chain variance: the inf or NaN is the answer
        warnings.simplefilter("ignore", RuntimeWarning)
        out = dict(nan)
        if values.shape[0] > 1 and agree_when_constant and np.ptp(values) == 0:
            # every chain holds one and the same value (say, the same number of clusters):
            # they agree, with nothing to compare; arviz-stats would give 0 / 0 = NaN
            out["rhat"] = 1.0
        elif values.shape[0] > 1:
            out["rhat"] = float(array_stats.rhat(values, method="rank", **axes))
        if (np.ptp(values, axis=1) > 0).any():
            out["ess_bulk"] = float(array_stats.ess(values, method="bulk", **axes))
            out["ess_tail"] = float(array_stats.ess(values, method="tail", prob=TAIL_PROB, **axes))
    return out


def diagnostics_note(kind: str, log_joint: np.ndarray) -> str:
    """Why a group's R-hat and ESS are not given, or do not mean what they seem.

    Parameters
    ----------
    kind : str
        The method's :attr:`algorithms.base.Sampler.kind` (``sampler``, ``optimiser``,
        ``variational``), or ``""`` when it is not known.
    log_joint : numpy.ndarray
        The (chain, draw) array of the log joint (:func:`draws`).

    Returns
    -------
    str
        :data:`NOT_A_SAMPLER` of ``kind`` for an optimiser or variational method (R-hat and
        ESS are n/a whatever its chains did); for a sampler whose every chain stood still over
        at least :data:`MIN_DRAWS` draws :data:`STUCK` (:data:`STILL` when the kind is not
        known); else ``""``: R-hat and ESS apply.

    Examples
    --------
    >>> import numpy as np
    >>> from dpmmbench.reports.chains import diagnostics_note
    >>> flat = np.full((2, 5), -100.0)
    >>> diagnostics_note("optimiser", flat)
    'n/a: optimiser (it climbs to one partition; not a sampler)'
    >>> diagnostics_note("sampler", flat)
    "stuck: no chain's log joint moved over its draws"
    >>> diagnostics_note("sampler", np.arange(10.0).reshape(2, 5))
    ''
    """
    if kind in NOT_A_SAMPLER:
        return NOT_A_SAMPLER[kind]
    if (log_joint.ndim == 2 and log_joint.shape[0] and log_joint.shape[1] >= MIN_DRAWS
            and np.isfinite(log_joint).all() and not np.ptp(log_joint, axis=1).any()):
        return STUCK if kind == "sampler" else STILL
    return ""


def convergence_verdict(row) -> tuple[str, bool]:
    """What a row of :func:`chain_statistics` says of convergence, in words.

    Parameters
    ----------
    row : mapping
        A row of :func:`chain_statistics` (``rhat_note``, ``converged``, ``rhat_log_joint``,
        ``rhat_n_clusters``), e.g. from ``DataFrame.iterrows`` or a summary.csv read back.

    Returns
    -------
    (text, bad) : tuple of (str, bool)
        ``text``: the ``rhat_note`` when there is one, ``"not converged"`` when R-hat exceeds
        :data:`RHAT_THRESHOLD`, else ``""``. ``bad``: the group has not shown that it
        converged (R-hat above the threshold, or a stuck sampler); never for a method that is
        no sampler, whose R-hat is n/a.
    """
    note = row.get("rhat_note")
    note = note if isinstance(note, str) else ""
    if note in NOT_A_SAMPLER.values():
        return note, False
    flagged = not_converged(row["rhat_log_joint"], row["rhat_n_clusters"]) or note == STUCK
    return note or ("not converged" if flagged else ""), flagged


def best_log_joints(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.Series:
    """Per dataset, the best log joint any chain reached, over runs with a fixed alpha.

    A run that learns alpha scores its log joint at its own alpha, another target: it neither
    sets nor chases the common one.

    Parameters
    ----------
    frame : pandas.DataFrame
        Trace rows with ``run`` and ``log_joint``.
    runs : pandas.DataFrame
        One row per run: ``run``, ``dataset``, ``learned_alpha``.

    Returns
    -------
    pandas.Series
        dataset -> best log joint (datasets whose runs all learn alpha are absent).
    """
    fixed = runs.loc[~runs["learned_alpha"].astype(bool), ["run", "dataset"]]
    return frame[["run", "log_joint"]].merge(fixed, on="run").groupby("dataset")["log_joint"].max()


def chain_statistics(frame: pd.DataFrame, runs: pd.DataFrame, by, tolerance: float = TARGET_TOLERANCE,
                     ) -> pd.DataFrame:
    """One row per group of chains (e.g. per dataset, algorithm and workers): intervals,
    convergence diagnostics, ESS per second and time to target.

    Parameters
    ----------
    frame : pandas.DataFrame
        Trace rows of every run, with a ``run`` column (the run's id in ``runs``),
        ``iteration``, ``time_s``, ``log_joint``, ``n_clusters`` and, when present, ``alpha``.
    runs : pandas.DataFrame
        One row per run: ``run``, ``dataset``, the ``by`` columns, ``learned_alpha``, the
        per-run columns of :data:`OVER_CHAINS` (a missing one is NaN) and, when known,
        ``kind`` (:attr:`algorithms.base.Sampler.kind`; without it, or empty, the chains
        decide alone, see :func:`diagnostics_note`). Failed runs (``status``
        ``"failed"``) are counted in ``failed`` and otherwise left out: their traces stop where
        the error struck.
    by : list of str
        Columns of ``runs`` that define a group; must include ``dataset``.
    tolerance : float
        Relative tolerance of the time to target, in [0, 1) (see :func:`target_threshold`).

    Returns
    -------
    pandas.DataFrame
        The ``by`` columns, then ``chains`` (chains used), ``failed``, ``draws`` (per chain,
        after cutting and burn-in), ``learned_alpha``; for each quantity ``Q`` of
        :data:`OVER_CHAINS` the median ``Q`` and ``Q_lo``, ``Q_hi``; ``rhat_X``,
        ``ess_bulk_X``, ``ess_tail_X`` for ``X`` in ``log_joint``, ``n_clusters``, ``alpha``;
        ``ess_per_s`` (``ess_bulk_log_joint`` / the sampler seconds all chains spent up to
        their last draw, burn-in included); ``target_log_joint`` (the dataset's target),
        ``time_to_target_s`` with ``_lo``, ``_hi`` (``inf`` for a chain that never reached it;
        NaN for runs that learn alpha) and ``reached`` (chains that reached it); ``converged``
        (False when R-hat of the log joint or of the number of clusters exceeds
        :data:`RHAT_THRESHOLD` or the sampler is stuck, True when both are known and below,
        missing otherwise); ``rhat_note`` (:func:`diagnostics_note`: why R-hat and ESS are
        n/a, for a method that is no sampler, whose ``rhat_*``, ``ess_*``, ``ess_per_s`` and
        ``converged`` are then missing; or that a sampler is stuck; ``""`` otherwise); the
        chains' diagnosis (:func:`reports.diagnosis.diagnose`): ``outcome`` (a key of
        :data:`reports.diagnosis.OUTCOMES`), ``diagnosis`` (it in words, with its numbers),
        ``settled_chains``, ``iterations_median``, ``rhat_settled`` (R̂ across the settled
        chains), ``plateau_spread`` (nats), ``modes_vi`` (VI between the settled chains' final
        partitions, NaN where the runs' metadata lack ``final_partition``), ``slope`` (nats per
        second, of the chains that did not settle) and ``settle_s`` (median time to settle).
        Groups in order of first appearance in ``runs``.
    """
    by = list(by)
    check_tolerance(tolerance)
    if "dataset" not in by:
        raise ValueError(f"chain statistics are grouped by dataset and more, got by={by}")
    failed = runs["status"].eq("failed") if "status" in runs else pd.Series(False, index=runs.index)
    ok = runs[~failed]
    traces = {run: chain.sort_values("iteration", kind="stable")
              for run, chain in frame[frame["run"].isin(ok["run"])].groupby("run", sort=False)}
    thresholds = best_log_joints(frame[frame["run"].isin(ok["run"])], ok).map(
        lambda best: target_threshold(best, tolerance))
    rows = []
    for key, group in runs.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        broke = failed.loc[group.index]
        members = group[~broke]
        chains = [traces[run] for run in members["run"] if run in traces]
        learned = bool(members["learned_alpha"].astype(bool).any())
        row.update(chains=len(chains), failed=int(broke.sum()), learned_alpha=learned)
        for column, name in OVER_CHAINS:
            values = members[column] if column in members else pd.Series(math.nan, index=members.index)
            row[name], row[f"{name}_lo"], row[f"{name}_hi"] = interval(values)
        log_joint = draws(chains, "log_joint")
        row["draws"] = log_joint.shape[1]
        kinds = [k for k in (members["kind"] if "kind" in members else ()) if isinstance(k, str) and k]
        note = diagnostics_note(kinds[0] if kinds else "", log_joint)
        for column, suffix in DIAGNOSED:
            stats = diagnostics(draws(chains, column), agree_when_constant=column in DISCRETE)
            if note in NOT_A_SAMPLER.values():
                stats = dict.fromkeys(stats, math.nan)
            row.update({f"{stat}_{suffix}": value for stat, value in stats.items()})
        row["ess_per_s"] = _ess_per_second(chains, row["ess_bulk_log_joint"])
        threshold = math.nan if learned else thresholds.get(row["dataset"], math.nan)
        hits = [time_to_target(chain, threshold) for chain in chains]
        row["target_log_joint"] = threshold
        row["time_to_target_s"], row["time_to_target_s_lo"], row["time_to_target_s_hi"] = interval(hits)
        row["reached"] = int(np.isfinite(hits).sum()) if hits else 0
        row["converged"] = False if note == STUCK else _converged(row["rhat_log_joint"], row["rhat_n_clusters"])
        row["rhat_note"] = note
        row.update(_diagnosis(chains, kinds[0] if kinds else "", members, traces))
        rows.append(row)
    table = pd.DataFrame(rows)
    if len(table):
        table["converged"] = table["converged"].astype("boolean")  # missing where R-hat is unknown
    return table


def _diagnosis(chains, kind: str, members: pd.DataFrame, traces: dict) -> dict:
    """The columns of :func:`reports.diagnosis.diagnose` for one group's chains: the
    ``outcome`` key and its words (``diagnosis``), ``settled_chains``, ``iterations_median``,
    ``rhat_settled``, ``plateau_spread``, ``modes_vi``, ``slope``, ``settle_s``."""
    from .traces import decode_partition

    steps = [c.loc[c["iteration"] > 0] for c in chains]
    metas = [m if isinstance(m, dict) else {} for m in (members["meta"] if "meta" in members else ())]
    partitions = ([decode_partition(m.get("final_partition")) for m, run in zip(metas, members["run"])
                   if run in traces] if metas else None)
    found = diagnose([(c["log_joint"].to_numpy(float), c["time_s"].to_numpy(float)) for c in steps],
                     kind or "sampler", partitions)
    return {"outcome": found.outcome, "diagnosis": found.describe(), "settled_chains": found.settled,
            "iterations_median": found.iterations, "rhat_settled": found.rhat, "plateau_spread": found.spread,
            "modes_vi": found.vi, "slope": found.slope, "settle_s": found.settle_s}


def _ess_per_second(chains, ess: float) -> float:
    """``ess`` over the sampler seconds the chains spent up to their last draw (cut to the
    shortest chain, as :func:`draws` does)."""
    if not chains or not math.isfinite(ess):
        return math.nan
    length = min(int((c["iteration"] > 0).sum()) for c in chains)
    seconds = sum(float(c.loc[c["iteration"] > 0, "time_s"].iloc[length - 1]) for c in chains) if length else 0.0
    return ess / seconds if seconds > 0 else math.nan


def not_converged(*rhats) -> bool:
    """Whether any of the R-hats exceeds :data:`RHAT_THRESHOLD` (``inf`` does; NaN, unknown,
    does not)."""
    return any(r > RHAT_THRESHOLD for r in rhats)


def _converged(*rhats):
    """False when :func:`not_converged`, True when every R-hat is known and at most the
    threshold, None when one is unknown (NaN) and none exceeds it."""
    if not_converged(*rhats):
        return False
    return None if any(math.isnan(r) for r in rhats) else True
