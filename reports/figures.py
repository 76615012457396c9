"""The report's figures, in seaborn's style, on matplotlib ``Figure`` objects, rendered to PNG.

No pyplot and no global style: figures are built as :class:`matplotlib.figure.Figure`
(rendered by Agg on ``savefig``) inside seaborn/matplotlib style contexts, so importing or
calling this module changes no global state, and the same inputs give the same bytes (PNG
written without the "Software" metadata key).

Every function takes the tidy trace frame of the report (one row per run and iteration, with
the report's ``label`` column naming the line) and ``styles`` from :func:`palette` (label ->
colour and dash pattern), so an algorithm looks the same in every figure.
"""
from __future__ import annotations

import io
import math
import re
import warnings
from contextlib import contextmanager

import numpy as np
import pandas as pd

#: what the lines and bands show
BAND_TEXT = "lines: median over seeds; bands: range (min to max) over seeds"
#: points of the common time grid that chains of different speeds are compared on
TIME_GRID_POINTS = 80
#: the log joint axes may hide this lowest fraction of the values after the first step
CROP_QUANTILE = 0.05
DPI = 100

#: (trace column, axis label) of the rows of the convergence figure
_ROWS = (("log_joint", "log joint p(x, z) (nats)"),
         ("vi", "VI to ground truth (nats)"),
         ("n_clusters", "number of clusters"))


@contextmanager
def _style():
    import matplotlib
    import seaborn as sns

    # Styles apply to figures built inside the context only; hashsalt pins SVG ids should
    # anyone switch the output format.
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.9), \
            matplotlib.rc_context({"svg.hashsalt": "dpmmbench", "figure.dpi": DPI}):
        yield


def palette(labels) -> dict:
    """A fixed (colour, dash pattern) per label, in the order given.

    Colours cycle through tab10; the dash pattern (solid, dashed, dotted) changes from one
    label to the next, so neighbours in the legend (often variants of one algorithm that
    overlap) stay distinguishable, and labels past the tenth differ from the first ten.

    Parameters
    ----------
    labels : sequence of str
        Every label of the report, in display order.

    Returns
    -------
    dict
        label -> ``(rgb, dashes)``; ``dashes`` is ``""`` (solid) or an on/off sequence.
    """
    import seaborn as sns

    labels = list(labels)
    colours = sns.color_palette("tab10", 10)
    dashes = ("", (4, 1.6), (1.2, 1.2))
    return {label: (colours[i % 10], dashes[(i + i // 10) % 3]) for i, label in enumerate(labels)}


def png_bytes(fig) -> bytes:
    """Render a matplotlib figure to PNG bytes (no timestamp or software metadata)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def on_time_grid(frame: pd.DataFrame, value: str, points: int = TIME_GRID_POINTS) -> pd.DataFrame:
    """Resample each chain's ``value`` onto a time grid shared by the seeds of its label.

    Seeds of one algorithm finish their iterations at different times, so their raw points
    never share an x value and no band over seeds could be drawn. At grid time t a chain's
    value is that of its last iteration completed by t: the state a user stopping at t would
    hold (a chain that has already finished holds its final state; one still in its
    initialisation has none yet and is left out).

    Parameters
    ----------
    frame : pandas.DataFrame
        Trace rows with ``label``, ``seed``, ``time_s`` and ``value`` columns.
    value : str
        Column to resample.
    points : int
        Grid size; the grid is geometric (time axes are logarithmic), from the label's
        earliest record to its latest.

    Returns
    -------
    pandas.DataFrame
        Columns ``label``, ``seed``, ``time_s``, ``value``.
    """
    out = []
    for label, group in frame.groupby("label", sort=False):
        times = group["time_s"].to_numpy(float)
        lo = max(times.min(), 1e-6)
        hi = max(times.max(), lo)
        grid = np.unique(np.geomspace(lo, hi, points)) if hi > lo else np.array([lo])
        for seed, chain in group.groupby("seed", sort=False):
            chain = chain.sort_values("time_s", kind="stable")
            t, y = chain["time_s"].to_numpy(float), chain[value].to_numpy(float)
            idx = np.searchsorted(t, grid, side="right") - 1
            started = idx >= 0
            out.append(pd.DataFrame({"label": label, "seed": seed, "time_s": grid[started], value: y[idx[started]]}))
    if not out:
        return pd.DataFrame(columns=["label", "seed", "time_s", value])
    return pd.concat(out, ignore_index=True)


def over_seeds(frame: pd.DataFrame, x: str, value: str) -> pd.DataFrame:
    """Median, minimum and maximum of ``value`` over the seeds of each label at each ``x``.

    Vectorised (one groupby): seaborn's own estimator runs Python code per point and costs
    seconds per figure on the default grid.

    Returns
    -------
    pandas.DataFrame
        Columns ``label``, ``x``, ``median``, ``min``, ``max``, sorted by label and x.
    """
    stats = frame.groupby(["label", x], sort=True)[value].agg(["median", "min", "max"])
    return stats.reset_index()


def on_iteration_grid(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Each chain's ``column`` at every iteration any chain of its label recorded (the value of
    its last recorded iteration up to it; none past its own last).

    The curves are thinned geometrically per chain, so chains of different lengths keep
    different iterations; a median over seeds at an iteration only one of them kept would be
    that chain's value alone, and the median line would zig-zag between the seeds.
    """
    out = []
    for lab, group in frame.groupby("label", sort=False):
        grid = np.unique(group["iteration"].to_numpy())
        for seed, chain in group.groupby("seed", sort=False):
            chain = chain.sort_values("iteration", kind="stable")
            its, values = chain["iteration"].to_numpy(), chain[column].to_numpy(float)
            points = grid[(grid >= its.min()) & (grid <= its.max())]
            idx = np.searchsorted(its, points, side="right") - 1
            out.append(pd.DataFrame({"label": lab, "seed": seed, "iteration": points, column: values[idx]}))
    if not out:
        return pd.DataFrame(columns=["label", "seed", "iteration", column])
    return pd.concat(out, ignore_index=True)



def paper_panels(grid, order, styles, x: str = "time_s", share_rows: bool = True) -> tuple[bytes | None, bool]:
    """A paper's panels: the log joint against sampler time (log scale) or iteration, one
    panel per cell of ``grid``, the median over seeds with its range, one legend.

    Parameters
    ----------
    grid : list of list of (str, pandas.DataFrame)
        Rows of panels: each a title and its trace rows (``label``, ``seed``, ``iteration``,
        ``time_s``, ``log_joint``).
    order : sequence of str
        Every label a panel may show, in legend order (labels no panel has are left out).
    styles : dict
        :func:`palette` of ``order``.
    x : {"time_s", "iteration"}
        The horizontal axis: sampler time (log scale; at each time a chain counts with its
        last completed iteration) or iteration.
    share_rows : bool
        Panels of a row share their log joint axis (and its crop).

    Returns
    -------
    png : bytes or None
        None when no panel has a trace.
    cropped : bool
        Whether a log joint axis was cropped to where the chains go.
    """
    from matplotlib.figure import Figure

    if x not in ("time_s", "iteration"):
        raise ValueError(f"x must be 'time_s' or 'iteration', got {x!r}")
    if all(frame.empty for row in grid for _, frame in row):
        return None, False
    shown = {label for row in grid for _, frame in row for label in frame["label"]}
    order = [label for label in order if label in shown]
    columns = max(len(row) for row in grid)
    cropped = False
    with _style():
        fig = Figure(figsize=(4.6 * columns + 2.6, 3.3 * len(grid) + 0.4), layout="constrained")
        axes = fig.subplots(len(grid), columns, squeeze=False, sharey="row" if share_rows else False)
        for r, row in enumerate(grid):
            for c, (title, frame) in enumerate(row):
                _log_joint_panel(axes[r][c], title, frame, order, styles, x)
                if not share_rows and not frame.empty:
                    cropped = _focus_log_joint(axes[r][c], frame) or cropped
            together = [frame.assign(label=f"{c}:" + frame["label"]) for c, (_, frame) in enumerate(row)
                        if not frame.empty]
            if share_rows and together:
                # one crop for the row, from every panel's chains, as the panels share the axis
                cropped = _focus_log_joint(axes[r][0], pd.concat(together, ignore_index=True)) or cropped
            for c in range(len(row), columns):
                axes[r][c].set_visible(False)
        _legend(fig, order, styles)
        return png_bytes(fig), cropped


def _log_joint_panel(ax, title: str, frame: pd.DataFrame, order, styles, x: str):
    """One panel of :func:`paper_panels`: median log joint over seeds against ``x``, with its range."""
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter

    ax.set_title(title, fontsize="medium")
    ax.set_xlabel("sampler time (s, log scale)" if x == "time_s" else "iteration")
    ax.set_ylabel("log joint p(x, z) (nats)")
    data = frame[["label", "seed", "iteration", "time_s", "log_joint"]].dropna(subset=["log_joint"])
    if data.empty:
        ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes, color="0.4")
        return
    if x == "time_s":
        stats = over_seeds(on_time_grid(data, "log_joint"), "time_s", "log_joint")
        _lines(ax, stats, "time_s", order, styles, step=True)
        ax.set_xscale("log")
        _readable_log_axis(ax, "x")
    else:
        stats = over_seeds(on_iteration_grid(data, "log_joint"), "iteration", "log_joint")
        _lines(ax, stats, "iteration", order, styles, step=False)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    # whole nats with separators: an offset ("1e6") would hide the gaps the panels are about
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))


def _focus_log_joint(ax, frame: pd.DataFrame) -> bool:
    """Crop the log joint axis to where the chains go; return whether it cropped.

    Chains start from one cluster, far below where they finish; on the full range the
    differences that matter (a few hundred nats between a stuck chain and the plateau) would
    be flat lines. The axis keeps every label's final median and all but the lowest
    :data:`CROP_QUANTILE` of the values after the first step in view, with a margin.
    """
    last = frame.sort_values("iteration").groupby(["label", "seed"], sort=False)["log_joint"].last()
    finals = last.groupby(level="label", sort=False).median()
    stepped = frame.loc[frame["iteration"] > 0, "log_joint"]
    bottom = min(float(finals.min()), float(stepped.quantile(CROP_QUANTILE)) if len(stepped) else np.inf)
    top = float(frame["log_joint"].max())
    span = top - bottom
    if not np.isfinite(span):
        return False
    if span <= 0:
        span = max(abs(top) * 1e-3, 1.0)
    lower = bottom - 0.1 * span
    if lower <= float(frame["log_joint"].min()):
        return False  # nothing would be cropped
    ax.set_ylim(lower, top + 0.06 * span)
    return True


def _lines(ax, stats, x, order, styles, step):
    """Median line and min-max band per label.

    Drawn with matplotlib directly: the summary is already computed (:func:`over_seeds`),
    and ``seaborn.lineplot`` would add a second of bookkeeping per figure for nothing.
    """
    for label, band in stats.groupby("label", sort=False):
        if label not in styles:
            continue
        colour, dashes = styles[label]
        line, = ax.plot(band[x], band["median"], color=colour, linewidth=1.5,
                        drawstyle="steps-post" if step else "default", zorder=3)
        if dashes:
            line.set_dashes(dashes)
        ax.fill_between(band[x], band["min"], band["max"], color=colour, alpha=0.16, linewidth=0,
                        step="post" if step else None, zorder=2)


def convergence_figure(frame: pd.DataFrame, order, styles, with_truth: bool) -> tuple[bytes, bool]:
    """Log joint, VI (if ``with_truth``) and clusters against iteration and sampler time.

    Parameters
    ----------
    frame : pandas.DataFrame
        Trace rows of one dataset (columns ``label``, ``seed``, ``iteration``, ``time_s``,
        ``log_joint``, ``vi``, ``n_clusters``).
    order : sequence of str
        Labels to draw, in legend order.
    styles : dict
        label -> (colour, dashes) (see :func:`palette`).
    with_truth : bool
        Draw the VI row.

    Returns
    -------
    png : bytes
    cropped : bool
        Whether the log joint axes were cropped to the final values (say so in the caption).
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    rows = [r for r in _ROWS if with_truth or r[0] != "vi"]
    order = [label for label in order if label in set(frame["label"])]
    cropped = False
    with _style():
        fig = Figure(figsize=(11.5, 3.2 * len(rows) + 0.3), layout="constrained")
        axes = fig.subplots(len(rows), 2, squeeze=False)
        for (column, ylabel), (ax_it, ax_t) in zip(rows, axes):
            data = frame[["label", "seed", "iteration", "time_s", column]].dropna(subset=[column])
            _lines(ax_it, over_seeds(data, "iteration", column), "iteration", order, styles, step=False)
            _lines(ax_t, over_seeds(on_time_grid(data, column), "time_s", column), "time_s", order, styles, step=True)
            ax_t.set_xscale("log")
            _readable_log_axis(ax_t, "x")
            ax_it.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax_it.set_xlabel("iteration")
            ax_t.set_xlabel("sampler time (s, log scale)")
            for ax in (ax_it, ax_t):
                ax.set_ylabel(ylabel)
                if column == "log_joint":
                    cropped = _focus_log_joint(ax, data) or cropped
                elif column == "n_clusters" and data[column].max() > 50:
                    ax.set_yscale("log")
                elif column == "n_clusters":
                    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        _legend(fig, order, styles)
        return png_bytes(fig), cropped


def pareto_front(cost, quality) -> np.ndarray:
    """Which points no other point dominates (at most the cost and at least the quality, one
    of them strictly); NaN points are never on the front.

    Parameters
    ----------
    cost, quality : array_like of float
        One value per method: lower cost and higher quality are better.

    Returns
    -------
    numpy.ndarray of bool
    """
    cost, quality = np.asarray(cost, float), np.asarray(quality, float)
    known = np.isfinite(cost) & np.isfinite(quality)
    front = known.copy()
    for i in np.flatnonzero(known):
        others = known & (cost <= cost[i]) & (quality >= quality[i]) & ((cost < cost[i]) | (quality > quality[i]))
        front[i] = not others.any()
    return front


#: (summary column, axis label) of the quality panels of :func:`pareto_figure`
PARETO_PANELS = (("heldout_lpd", "held-out log predictive (nats / point)"),
                 ("final_nmi", "NMI to ground truth"))


def pareto_figure(stats: pd.DataFrame, order, styles) -> bytes | None:
    """Quality against sampler time, one point per method with its interval over chains.

    One panel per quality of :data:`PARETO_PANELS` that some method measured (held-out log
    predictive; NMI where there is ground truth). The x axis is each chain's total sampler
    time (log scale, ticks from :func:`log_ticks`); points are medians over chains, bars their
    5-95 % intervals; the grey line joins the methods no other method beats on both axes (the
    Pareto front).

    Parameters
    ----------
    stats : pandas.DataFrame
        One row per label (:func:`reports.chains.chain_statistics` by ``label``): ``label``,
        ``time_s``, ``time_s_lo``, ``time_s_hi`` and each panel's column with its bounds.
    order, styles
        As for :func:`convergence_figure`.

    Returns
    -------
    bytes or None
        The PNG; None when no method measured any quality.
    """
    with _style():
        fig = pareto_plot(stats, order, styles)
        return None if fig is None else png_bytes(fig)


def pareto_plot(stats: pd.DataFrame, order, styles):
    """The figure of :func:`pareto_figure` before it is rendered (None when no method
    measured any quality): its axes can be inspected."""
    from matplotlib.figure import Figure

    panels = [(col, text) for col, text in PARETO_PANELS if col in stats and stats[col].notna().any()]
    if not panels:
        return None
    rows = stats.set_index("label")
    order = [label for label in order if label in rows.index]
    with _style():
        fig = Figure(figsize=(5.2 * len(panels) + 2.2, 4.2), layout="constrained")
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        for ax, (column, ylabel) in zip(axes, panels):
            _pareto_panel(ax, rows.loc[order], column, ylabel, styles)
        _legend(fig, order, styles)
        return fig


def _pareto_panel(ax, rows: pd.DataFrame, column: str, ylabel: str, styles):
    """One panel of quality ``column`` against sampler time: a point per method (``rows``,
    indexed by label, in legend order) with its intervals over chains, and the Pareto front."""
    shown = rows.dropna(subset=[column, "time_s"])
    front = shown[pareto_front(shown["time_s"], shown[column])].sort_values("time_s")
    ax.plot(front["time_s"], front[column], color="0.55", linewidth=1.0, drawstyle="steps-post", zorder=1)
    for label, r in shown.iterrows():
        ax.errorbar(r["time_s"], r[column],
                    xerr=[[r["time_s"] - r["time_s_lo"]], [r["time_s_hi"] - r["time_s"]]],
                    yerr=[[r[column] - r[f"{column}_lo"]], [r[f"{column}_hi"] - r[column]]],
                    color=styles[label][0], marker="o", markersize=6, capsize=2.5, linewidth=1.1, zorder=3)
    ax.set_xscale("log")
    _readable_log_axis(ax, "x")
    ax.set_xlabel("sampler time per chain (s, log scale)")
    ax.set_ylabel(ylabel)


#: panels per row of :func:`pareto_grid`: three stay legible in a 1,400 px window
GRID_COLUMNS = 3


def pareto_grid(panels, order, styles) -> bytes | None:
    """Small multiples of quality against sampler time: one panel per data set, each as a
    panel of :func:`pareto_figure`, with one legend for all.

    Parameters
    ----------
    panels : sequence of (str, pandas.DataFrame, str, str)
        Per panel its title, its methods' chain statistics (as for :func:`pareto_figure`),
        the quality column and its axis label.
    order, styles
        As for :func:`convergence_figure`.

    Returns
    -------
    bytes or None
        The PNG; None when no panel has a point.
    """
    from matplotlib.figure import Figure

    panels = [(title, stats.set_index("label"), column, ylabel) for title, stats, column, ylabel in panels
              if len(stats.dropna(subset=[column, "time_s"]))]
    if not panels:
        return None
    shown = {label for _, rows, _, _ in panels for label in rows.index}
    order = [label for label in order if label in shown]
    columns = min(GRID_COLUMNS, len(panels))
    lines = math.ceil(len(panels) / columns)
    with _style():
        # the legend goes below in five columns: a long one beside the panels would be cut
        fig = Figure(figsize=(max(4.1 * columns, 9.0) + 0.4, 3.4 * lines + 0.3 * math.ceil(len(order) / 5) + 0.7),
                     layout="constrained")
        axes = fig.subplots(lines, columns, squeeze=False).ravel()
        for ax, (title, rows, column, ylabel) in zip(axes, panels):
            _pareto_panel(ax, rows.loc[[label for label in order if label in rows.index]], column, ylabel, styles)
            ax.set_title(title, fontsize="medium")
        for ax in axes[len(panels):]:
            ax.set_visible(False)
        _legend(fig, order, styles, below=True)
        return png_bytes(fig)


#: the most labelled ticks of a logarithmic axis: a panel a third of a page wide holds them apart
LOG_TICKS = 6
#: mantissas of the tick values of a logarithmic axis, from the sparsest choice to the densest
_MANTISSAS = ((1,), (1, 3), (1, 2, 5), (1, 1.5, 2, 3, 4, 5, 6, 8))


def log_ticks(lo: float, hi: float, most: int = LOG_TICKS) -> list[float]:
    """Round tick values for a logarithmic axis from ``lo`` to ``hi``, at most ``most`` of them.

    Matplotlib labels a log axis at its decades, and where the range holds fewer than two of
    them it labels every minor tick in scientific notation (``3.2×10⁻¹``, ``3.3×10⁻¹``, ...),
    which overlap. Here: decades (every k-th over a wide range), else the sparsest of
    1-3, 1-2-5 and 1-1.5-2-3-4-5-6-8 per decade that gives three ticks, else (a range of less
    than a factor of about 1.5) evenly spaced round values.

    Parameters
    ----------
    lo, hi : float
        The axis' limits, 0 < lo < hi.
    most : int
        The most ticks returned (at least 2).

    Returns
    -------
    list of float
        Increasing values within [lo, hi]; at least two.

    Examples
    --------
    >>> from dpmmbench.reports.figures import log_ticks
    >>> [float(f"{t:.3g}") for t in log_ticks(0.002, 0.9)]
    [0.003, 0.01, 0.03, 0.1, 0.3]
    >>> [float(f"{t:.3g}") for t in log_ticks(0.31, 0.39)]
    [0.32, 0.34, 0.36, 0.38]
    """
    from matplotlib.ticker import MaxNLocator

    if not (0 < lo < hi < math.inf) or most < 2:
        raise ValueError(f"log ticks need 0 < lo < hi and most >= 2, got lo={lo!r}, hi={hi!r}, most={most!r}")
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    decades = [10.0 ** k for k in range(first, last + 1) if lo <= 10.0 ** k <= hi]
    if len(decades) > most:
        return decades[::math.ceil(len(decades) / most)]
    best = []
    for mantissas in _MANTISSAS:
        ticks = [m * 10.0 ** k for k in range(first, last + 1) for m in mantissas if lo <= m * 10.0 ** k <= hi]
        if len(ticks) > most:
            break
        best = ticks
        if len(ticks) >= 3:
            break
    if len(best) >= 2:
        return best
    return [float(t) for t in MaxNLocator(nbins=most - 1, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
            if lo <= t <= hi]


def tick_labels(ticks) -> list[str]:
    """The shortest plain labels (fewest significant digits) that give each tick its value:
    positional when every tick is from 0.0001 to 99,999 (``0.03``, ``10``), else all in
    ``1e−6`` style.

    Examples
    --------
    >>> from dpmmbench.reports.figures import tick_labels
    >>> tick_labels([0.003, 0.01, 10.0])
    ['0.003', '0.01', '10']
    >>> tick_labels([1e-6, 1.5e-3, 1.0])
    ['1e−6', '1.5e−3', '1e0']
    """
    digits = next(d for d in range(1, 18)
                  if all(math.isclose(float(f"{t:.{d}g}"), t, rel_tol=1e-9) for t in ticks))
    values = [float(f"{t:.{digits}g}") for t in ticks]
    if all(1e-4 <= abs(v) < 1e5 for v in values):
        labels = [f"{v:.{digits + 5}f}".rstrip("0").rstrip(".") for v in values]
    else:
        labels = [f"{m}e{int(e)}" for m, e in (f"{v:.{digits - 1}e}".split("e") for v in values)]
        labels = [re.sub(r"\.?0+e", "e", text) if "." in text else text for text in labels]
    return [text.replace("-", "\u2212") for text in labels]


def _readable_log_axis(ax, which: str):
    """Label the logarithmic ``which`` axis ("x" or "y") of ``ax`` at :func:`log_ticks` of its
    current limits, in plain numbers, and leave its minor ticks unlabelled."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    if not (0 < lo < hi < math.inf):
        return  # nothing plotted: matplotlib's own (empty) ticks stand
    ticks = log_ticks(lo, hi)
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FixedFormatter(tick_labels(ticks)))
    axis.set_minor_formatter(NullFormatter())
    (ax.set_xlim if which == "x" else ax.set_ylim)(lo, hi)


def alpha_figure(frame: pd.DataFrame, order, styles) -> bytes:
    """The concentration alpha against iteration, for runs that learn it.

    Parameters
    ----------
    frame : pandas.DataFrame
        Trace rows (columns ``label``, ``seed``, ``iteration``, ``alpha``).
    order, styles
        As for :func:`convergence_figure`.
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    data = frame[["label", "seed", "iteration", "alpha"]].dropna(subset=["alpha"])
    order = [label for label in order if label in set(data["label"])]
    with _style():
        fig = Figure(figsize=(8.5, 3.4), layout="constrained")
        ax = fig.subplots()
        _lines(ax, over_seeds(data, "iteration", "alpha"), "iteration", order, styles, step=False)
        ax.set_yscale("log")  # alpha moves by factors, from its starting value to where K puts it
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("iteration")
        ax.set_ylabel("concentration α (log scale)")
        _legend(fig, order, styles)
        return png_bytes(fig)


def step_time_figure(steps: pd.DataFrame, order, styles) -> bytes:
    """Box plot of seconds per iteration, one box per label (all seeds pooled).

    Parameters
    ----------
    steps : pandas.DataFrame
        Columns ``label`` and ``step_s`` (seconds of one iteration, > 0).
    order, styles
        As for :func:`convergence_figure`.
    """
    import seaborn as sns
    from matplotlib.figure import Figure

    order = [label for label in order if label in set(steps["label"])]
    with _style():
        fig = Figure(figsize=(8.5, 1.2 + 0.36 * len(order)), layout="constrained")
        ax = fig.subplots()
        with warnings.catch_warnings():
            # seaborn 0.13 passes matplotlib 3.11's deprecated ``vert``; nothing to act on here
            warnings.filterwarnings("ignore", message=".*vert: bool was deprecated", category=DeprecationWarning)
            sns.boxplot(data=steps, x="step_s", y="label", hue="label", order=order, hue_order=order,
                        palette={k: styles[k][0] for k in order}, log_scale=True, ax=ax, legend=False,
                        fliersize=2, linewidth=0.9)
        _readable_log_axis(ax, "x")
        ax.set_xlabel("time per iteration (s, log scale)")
        ax.set_ylabel("")
        return png_bytes(fig)


def speedup_workers_figure(table: pd.DataFrame, styles, reference: str) -> bytes:
    """Speed-up relative to ``reference`` against the number of workers.

    Parameters
    ----------
    table : pandas.DataFrame
        Columns ``name`` (the run's name), ``workers``, ``speedup`` (NaN where the target
        was not reached).
    styles : dict
        label -> (colour, dashes); the single-worker label of a name is the name itself.
    reference : str
        Run name of the reference (axis label).
    """
    import seaborn as sns
    from matplotlib.figure import Figure

    data = table.dropna(subset=["speedup"])
    order = list(dict.fromkeys(data["name"]))
    with _style():
        fig = Figure(figsize=(7.5, 4.2), layout="constrained")
        ax = fig.subplots()
        sns.lineplot(data=data, x="workers", y="speedup", hue="name", hue_order=order,
                     palette={v: styles[v][0] if v in styles else "0.3" for v in order},
                     estimator=None, errorbar=None, marker="o", ax=ax)
        ax.axhline(1.0, color="0.4", linewidth=0.9, linestyle=":")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(set(data["workers"])), [str(w) for w in sorted(set(data["workers"]))])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.set_xlabel("workers")
        ax.set_ylabel(f"speed-up w.r.t. {reference} (×)")
        ax.legend(title="algorithm", frameon=False)
        return png_bytes(fig)


def _legend(fig, order, styles, below: bool = False):
    """One legend for the figure: at the right, or (``below``) under the panels, in columns."""
    from matplotlib.lines import Line2D

    handles = []
    for label in order:
        colour, dashes = styles[label]
        line = Line2D([], [], color=colour, linewidth=2.0, label=label)
        if dashes:
            line.set_dashes(dashes)
        handles.append(line)
    if below:
        fig.legend(handles=handles, loc="outside lower center", frameon=False, title="algorithm",
                   ncol=min(len(handles), 5) or 1)
    else:
        fig.legend(handles=handles, loc="outside right upper", frameon=False, title="algorithm")


def scaling_figure(predicted: pd.DataFrame, measured: pd.DataFrame, colours: dict, model_label: str,
                   reference: str | None) -> bytes:
    """Modelled speed-up (or iteration time) against workers, with the measured points.

    Parameters
    ----------
    predicted : pandas.DataFrame
        Columns ``name`` (the run's name), ``workers``, ``iteration_s``, ``speedup``: the cost model's
        curve (:func:`reports.costmodel.predict`).
    measured : pandas.DataFrame
        The same columns plus ``sequential`` (shards ran one after another: drawn hollow).
    colours : dict
        run name -> colour.
    model_label : str
        Legend text of the curves, e.g. ``"model (1 Gbit/s, 0.2 ms)"``: they are a model,
        and the legend must say so.
    reference : str or None
        Name of the speed-up reference; None draws the iteration time instead.
    """
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    y = "speedup" if reference else "iteration_s"
    order = list(dict.fromkeys(predicted["name"]))
    with _style():
        fig = Figure(figsize=(9.0, 4.6), layout="constrained")
        ax = fig.subplots()
        for name in order:
            colour = colours.get(name, "0.3")
            curve = predicted[predicted["name"] == name]
            ax.plot(curve["workers"], curve[y], color=colour, linewidth=1.6, zorder=2)
            points = measured[measured["name"] == name]
            for sequential, group in points.groupby("sequential"):
                ax.scatter(group["workers"], group[y], s=46, zorder=3, linewidths=1.4, edgecolors=colour,
                           facecolors="none" if sequential else colour)
        if reference:
            ax.axhline(1.0, color="0.4", linewidth=0.9, linestyle=":", zorder=1)
        # ratios, and values that can span orders of magnitude (a slow master, a fast reference)
        ax.set_yscale("log")
        _readable_log_axis(ax, "y")  # a span of less than a decade would show one label, or none
        ax.set_xscale("log", base=2)
        ticks = [w for w in (1, 2, 4, 8, 16, 32, 64) if w <= predicted["workers"].max()]
        ax.set_xticks(ticks, [str(w) for w in ticks])
        ax.minorticks_off()
        ax.set_xlabel("workers (log scale)")
        ax.set_ylabel(f"speed-up per iteration w.r.t. {reference} (×, log scale)" if reference
                      else "time per iteration (s, log scale)")
        handles = [Line2D([], [], color=colours.get(v, "0.3"), linewidth=2.0, label=v) for v in order]
        handles += [Line2D([], [], color="0.3", linewidth=1.6, label=model_label),
                    Line2D([], [], color="0.3", marker="o", linestyle="", label="measured (this machine)")]
        if measured["sequential"].astype(bool).any():
            handles.append(Line2D([], [], color="0.3", marker="o", markerfacecolor="none", linestyle="",
                                  label="measured, shards one after another"))
        fig.legend(handles=handles, loc="outside right upper", frameon=False, title="algorithm")
        return png_bytes(fig)


def load_figure(trace: pd.DataFrame) -> bytes:
    """Per-worker load of a sharded sampler over iterations, one column per worker count.

    Top row: points swept by each worker (``load_0`` … ``load_{W-1}``) in every iteration of
    the lowest seed (workers of different seeds are different workers: their lines do not
    pool), with the mean load. Bottom row: the imbalance ``load_imbalance`` (max / mean),
    median over seeds with the min-max band.

    Parameters
    ----------
    trace : pandas.DataFrame
        Trace rows of the runs of one name: ``workers``, ``seed``, ``iteration``,
        ``load_imbalance`` and the ``load_j`` columns.
    """
    import seaborn as sns
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    trace = trace.dropna(subset=["load_imbalance"])
    counts = sorted(int(w) for w in trace["workers"].unique())
    # one imbalance scale for every worker count, so that the panels compare at a glance
    top_imbalance = max(1.1, float(trace["load_imbalance"].max()) * 1.05)
    with _style():
        fig = Figure(figsize=(max(5.0, 4.2 * len(counts)) + 1.2, 5.6), layout="constrained")
        axes = fig.subplots(2, len(counts), squeeze=False, sharex="col")
        for col, workers in enumerate(counts):
            runs = trace[trace["workers"] == workers]
            first = runs[runs["seed"] == runs["seed"].min()].sort_values("iteration")
            loads = [f"load_{j}" for j in range(workers) if f"load_{j}" in first]
            colours = sns.color_palette("tab10" if len(loads) <= 10 else "husl", len(loads))
            top, bottom = axes[0, col], axes[1, col]
            for j, (column, colour) in enumerate(zip(loads, colours)):
                top.plot(first["iteration"], first[column], color=colour, linewidth=1.2,
                         label=f"worker {j}" if workers <= 8 else None)
            top.plot(first["iteration"], first[loads].mean(axis=1), color="0.2", linewidth=1.0,
                     linestyle="--", label="mean")
            top.set_title(f"{workers} worker{'s' if workers > 1 else ''} (seed {int(first['seed'].iloc[0])})")
            top.set_ylabel("points swept")
            top.set_ylim(bottom=0)
            top.legend(frameon=False, fontsize="small", ncols=2)
            stats = runs.groupby("iteration")["load_imbalance"].agg(["median", "min", "max"]).reset_index()
            bottom.plot(stats["iteration"], stats["median"], color="C3", linewidth=1.4)
            bottom.fill_between(stats["iteration"], stats["min"], stats["max"], color="C3", alpha=0.16, linewidth=0)
            bottom.axhline(1.0, color="0.4", linewidth=0.9, linestyle=":")
            bottom.set_ylim(0.95, top_imbalance)
            bottom.set_ylabel("imbalance (max / mean load)")
            bottom.set_xlabel("iteration")
            bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
        return png_bytes(fig)
