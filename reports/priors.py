"""The prior-sensitivity results (``results/priors.csv``, written by
``workflows/scripts/prior_sensitivity.py``): read, summarised and drawn for the report.

Per dataset one figure of three panels -- final number of clusters, NMI to the labels and
mean held-out log predictive density per point -- against the concentration alpha (log
axis): one line per base measure through the fixed-alpha grid (mean over seeds, bars from
the lowest to the highest seed), and the learned-alpha chains as a star of the same colour
at their posterior mean alpha. See docs/design.md "Default priors".
"""
from __future__ import annotations

import pandas as pd

from . import figures

#: columns the report needs
REQUIRED = ("dataset", "dataset_name", "algorithm", "prior", "prior_detail", "alpha_mode", "alpha", "alpha_mean",
            "seed", "iterations", "n_train", "n_test", "n_clusters", "nmi", "heldout_lpd")
#: (column, axis label) of the panels
PANELS = (("n_clusters", "clusters (final state)"), ("nmi", "NMI to the labels (train)"),
          ("heldout_lpd", "held-out log predictive\n(nats per point)"))
#: what the section says before the figures
DESCRIPTION = ("How the number of clusters, the agreement with the labels and the held-out predictive density "
               "depend on the concentration alpha and on the base measure: the dataset's default prior "
               "(default_for) against an empirical-Bayes prior fitted to a quick k-means of the training split "
               "(for Gaussians E[Sigma] = the pooled within-cluster covariance; for documents the symmetric gamma "
               "that maximises the clustering's marginal likelihood). Each chain runs on the training split; the "
               "held-out density is the DP posterior predictive averaged over the chain's last draws, per "
               "held-out point.")


def read_priors(path) -> pd.DataFrame:
    """Read ``results/priors.csv``.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not a prior-sensitivity table (a required column missing) or no rows.
    """
    table = pd.read_csv(path)
    missing = [c for c in REQUIRED if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: lacks column(s) {missing}; is it a prior-sensitivity table?")
    if table.empty:
        raise ValueError(f"{path}: no rows")
    return table


def summary_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per prior and alpha setting of one dataset: K, NMI, held-out density,
    and the alpha (the posterior mean estimate for learned alpha)."""
    key = rows["alpha_mode"].where(rows["alpha_mode"] == "learned", "fixed")
    grouped = rows.assign(setting=key).groupby(["prior", "setting", "alpha"], sort=False)
    out = grouped.agg(seeds=("seed", "nunique"), alpha_mean=("alpha_mean", "mean"), K=("n_clusters", "mean"),
                      NMI=("nmi", "mean"), heldout=("heldout_lpd", "mean")).reset_index()
    out["alpha"] = [f"learned, mean {m:.3g}" if s == "learned" else f"{a:g}"
                    for s, a, m in zip(out["setting"], out["alpha"], out["alpha_mean"])]
    out = out.drop(columns=["setting", "alpha_mean"])
    return out.rename(columns={"heldout": "held-out log predictive (nats/point)", "K": "clusters"})


def describe(rows: pd.DataFrame) -> str:
    """One or two sentences of what one dataset's results show, computed from them."""
    table = rows.groupby(["prior", "alpha_mode", "alpha"], sort=False)[["n_clusters", "heldout_lpd", "nmi",
                                                                        "alpha_mean"]].mean().reset_index()
    best = table.loc[table["heldout_lpd"].idxmax()]
    where = (f"alpha learned (posterior mean {best['alpha_mean']:.3g})" if best["alpha_mode"] == "learned"
             else f"alpha = {best['alpha']:g}")
    parts = [f"Best held-out density: {best['prior']} prior, {where}, {best['heldout_lpd']:.4g} nats per point."]
    for prior, group in table.groupby("prior", sort=False):
        fixed = group[group["alpha_mode"] == "fixed"]
        text = (f"{prior}: {fixed['n_clusters'].min():.3g} to {fixed['n_clusters'].max():.3g} clusters over the "
                f"alpha grid, held-out {fixed['heldout_lpd'].min():.4g} to {fixed['heldout_lpd'].max():.4g}")
        if group["nmi"].notna().any():
            text += f", NMI {group['nmi'].min():.2f} to {group['nmi'].max():.2f}"
        parts.append(text + ".")
    if not rows["nmi"].notna().any():
        parts.append("The dataset has no labels: no NMI.")
    return " ".join(parts)


def priors_figure(rows: pd.DataFrame) -> tuple[bytes, str]:
    """The figure of one dataset's rows and its caption.

    Parameters
    ----------
    rows : pandas.DataFrame
        The rows of :func:`read_priors` of one dataset.

    Returns
    -------
    png : bytes
    caption : str
    """
    from matplotlib.figure import Figure
    import seaborn as sns

    priors = list(dict.fromkeys(rows["prior"]))
    colours = dict(zip(priors, sns.color_palette("tab10", max(len(priors), 1))))
    with figures._style():
        fig = Figure(figsize=(12.0, 3.4), layout="constrained")
        axes = fig.subplots(1, len(PANELS))
        for ax, (column, title) in zip(axes, PANELS):
            ax.set_xscale("log")
            ax.set_xlabel("alpha (DP concentration)")
            ax.set_ylabel(title)
            if not rows[column].notna().any():
                ax.text(0.5, 0.5, "no labels:\nnot available", transform=ax.transAxes, ha="center",
                        va="center", color="0.4")
                ax.set_yticks([])
                continue
            for prior in priors:
                mine = rows[rows["prior"] == prior]
                fixed = mine[mine["alpha_mode"] == "fixed"].groupby("alpha")[column].agg(["mean", "min", "max"])
                ax.errorbar(fixed.index, fixed["mean"], yerr=[fixed["mean"] - fixed["min"], fixed["max"] - fixed["mean"]],
                            color=colours[prior], marker="o", markersize=4, capsize=2, linewidth=1.5,
                            label=f"{prior}, alpha fixed")
                learned = mine[mine["alpha_mode"] == "learned"]
                if len(learned) and learned[column].notna().any():
                    ax.plot([learned["alpha_mean"].mean()], [learned[column].mean()], linestyle="none",
                            marker="*", markersize=13, markeredgecolor="black", markeredgewidth=0.6,
                            color=colours[prior], label=f"{prior}, alpha learned", zorder=4)
        handles, labels = axes[-1].get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="outside right center", frameon=False)
        png = figures.png_bytes(fig)
    first = rows.iloc[0]
    learned = rows[rows["alpha_mode"] == "learned"]
    gamma = (f"; alpha learned under Gamma({learned['alpha_prior_shape'].iloc[0]:g}, "
             f"{learned['alpha_prior_rate'].iloc[0]:g}) (shape, rate), star at its posterior mean"
             if len(learned) and "alpha_prior_shape" in learned else "")
    details = "; ".join(f"{p}: {d}" for p, d in rows.drop_duplicates("prior")[["prior", "prior_detail"]]
                        .itertuples(index=False))
    caption = (f"{first['dataset_name']}: {first['algorithm']}, {int(first['iterations'])} iterations from one "
               f"cluster on {int(first['n_train'])} training points, held-out density on {int(first['n_test'])}; "
               f"{rows['seed'].nunique()} seed(s): points are means, bars the range over seeds{gamma}. "
               f"Priors (first seed): {details}.")
    return png, caption

