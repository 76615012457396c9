"""Prior sensitivity: how the number of clusters, the agreement with the labels and the
held-out predictive density move with the DP concentration and the base measure
(docs/design.md "Default priors").

For every dataset of the config's ``priors`` block, every seed, and each of two base
measures -- the dataset's recommended family (``default_for``) and the family's
``empirical_bayes`` prior fitted to the training split -- one chain per concentration of the
grid ``alphas`` (alpha fixed) and one with alpha learned under the Gamma ``alpha_prior``. Each
chain runs ``iterations`` steps of the dataset's sampler on the training part of a seeded
held-out split (:func:`dpmmbench.datasets.holdout`) and is scored by its final number of
clusters, its NMI to the training labels (where the data have labels) and the mean held-out
log predictive density per point, averaged over its last ``heldout_draws`` states
(:func:`dpmmbench.algorithms.predictive.mean_log_predictive_density`).

The chains run on the suite's chain runner (``algorithms.runner.run_sampler``) rather than the
run driver: the driver's trace keeps per-iteration summaries, not the partitions the predictive
density needs, and a Dask cluster per chain would cost more than the dozens of small chains
themselves.

Usage::

    python -m dpmmbench.workflows.scripts.prior_sensitivity --config-json '{"datasets": ...}' \\
        --out results/priors.csv

The JSON is the ``priors`` block of a workflow config (see workflows/config/default.yaml).
"""
from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np
import pandas as pd

from dpmmbench import algorithms, datasets
from dpmmbench.algorithms.constraints import RUN_DEFAULTS, check_parameter, resolve_options
from dpmmbench.algorithms.predictive import mean_log_predictive_density
from dpmmbench.algorithms.runner import run_sampler
from dpmmbench.reports.metrics import n_clusters, nmi
from dpmmbench.reports.traces import atomic_write

#: the two base measures compared, as the CSV names them
PRIORS = ("default", "empirical Bayes")
#: columns of the output, in this order
COLUMNS = ("dataset", "dataset_name", "algorithm", "prior", "prior_detail", "alpha_mode", "alpha",
           "alpha_mean", "alpha_prior_shape", "alpha_prior_rate", "seed", "iterations", "n_train", "n_test",
           "n_clusters", "nmi", "heldout_lpd", "time_s")
#: keys of the ``priors`` block and of each of its datasets
SPEC_KEYS = {"datasets", "alphas", "alpha_prior", "seeds", "heldout_draws", "test_fraction", "split_seed"}
DATASET_KEYS = {"dataset", "algorithm", "iterations", "options"}


def check_spec(spec: dict) -> dict:
    """Check the ``priors`` block of a workflow config; return it with defaults filled in.

    Parameters
    ----------
    spec : dict
        ``datasets`` (key -> ``{dataset, algorithm, iterations, options}``), ``alphas`` (the
        fixed concentrations), ``alpha_prior`` (``[shape, rate]`` of the learned one),
        ``seeds``, and optionally ``heldout_draws``, ``test_fraction``, ``split_seed`` (run
        parameters, with their declared defaults).

    Returns
    -------
    dict

    Raises
    ------
    TypeError, ValueError
        A missing or unknown key, an unknown algorithm or option, or a value outside its
        declared constraint; the message names the key.
    """
    if not isinstance(spec, dict):
        raise TypeError(f"priors: expected a mapping, got {type(spec).__name__}")
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise ValueError(f"priors: unknown key(s) {sorted(unknown)}; expected {sorted(SPEC_KEYS)}")
    missing = {"datasets", "alphas", "alpha_prior", "seeds"} - set(spec)
    if missing:
        raise ValueError(f"priors: missing key(s) {sorted(missing)}")
    out = {"alphas": [_checked("alphas", "alpha", a) for a in _nonempty_list("alphas", spec["alphas"])],
           "alpha_prior": _checked("alpha_prior", "alpha_prior", spec["alpha_prior"]),
           "seeds": [_checked("seeds", "seed", s) for s in _nonempty_list("seeds", spec["seeds"])]}
    if out["alpha_prior"] is None:
        raise ValueError("priors: alpha_prior must be [shape, rate], got None")
    for key in ("heldout_draws", "test_fraction", "split_seed"):
        out[key] = _checked(key, key, spec.get(key, RUN_DEFAULTS[key]))
    if not isinstance(spec["datasets"], dict) or not spec["datasets"]:
        raise ValueError("priors: datasets must be a non-empty mapping of key -> {dataset, algorithm, iterations}")
    out["datasets"] = {}
    for key, entry in spec["datasets"].items():
        where = f"priors: datasets: {key}"
        if not isinstance(entry, dict) or not {"dataset", "algorithm", "iterations"} <= set(entry):
            raise ValueError(f"{where}: expected {{dataset, algorithm, iterations[, options]}}, got {entry!r}")
        if set(entry) - DATASET_KEYS:
            raise ValueError(f"{where}: unknown key(s) {sorted(set(entry) - DATASET_KEYS)}")
        options = dict(entry.get("options") or {})
        try:
            datasets.canonical_name(entry["dataset"])  # an unknown name or parameter fails here
            cls = algorithms.get(entry["algorithm"])
            resolve_options(cls.name, cls.options, options)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        out["datasets"][key] = {"dataset": entry["dataset"], "algorithm": entry["algorithm"], "options": options,
                                "iterations": _checked(f"{key}: iterations", "iterations", entry["iterations"])}
        if out["datasets"][key]["iterations"] < 1:
            raise ValueError(f"{where}: iterations must be >= 1 (the held-out density needs a draw)")
    return out


def _nonempty_list(key, value):
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"priors: {key} must be a non-empty list, got {value!r}")
    return value


def _checked(key, parameter, value):
    try:
        return check_parameter(parameter, value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"priors: {key}: {exc}") from None


def base_measures(family, X, seed: int) -> dict:
    """The two priors compared: ``family`` itself and its class's empirical-Bayes prior fitted
    to ``X`` with ``seed``; prior name -> (family, one-line description)."""
    if not hasattr(type(family), "empirical_bayes"):
        raise ValueError(f"{type(family).__name__} has no empirical-Bayes prior; the prior-sensitivity "
                         f"experiment needs a normal-inverse-Wishart or Dirichlet-multinomial dataset")
    fitted = type(family).empirical_bayes(X, seed=seed)
    return {"default": (family, _describe(family)), "empirical Bayes": (fitted, _describe(fitted))}


def _describe(family) -> str:
    if hasattr(family, "psi0"):
        D = family.dim
        mean_var = float(np.trace(family.psi0)) / (family.nu0 - D - 1) / D if family.nu0 > D + 1 else math.inf
        return f"kappa0={family.kappa0:g}, nu0={family.nu0:g}, mean diag E[Sigma]={mean_var:.4g}"
    if hasattr(family, "gamma"):
        return f"gamma={family.gamma:.4g}"
    return repr(family)


def score_chain(family, train, X_test, algorithm, alpha, alpha_prior, seed, iterations, draws, options=None) -> dict:
    """One chain on ``train`` and its scores.

    Parameters
    ----------
    family : algorithms.families.Family
        The prior of the chain.
    train : datasets.Dataset
        The training part of the split (its labels, if any, give the NMI).
    X_test : array_like or scipy.sparse.csr_matrix
        The held-out points.
    algorithm : str
        Registry name of the sampler.
    alpha : float
        The concentration (the starting value when ``alpha_prior`` is given).
    alpha_prior : (float, float) or None
        Gamma (shape, rate) prior under which alpha is learned; None: alpha fixed.
    seed, iterations : int
        The chain's seed and number of steps (from one cluster; >= 1).
    draws : int
        Last states averaged in the held-out density (between 1 and ``iterations``).
    options : dict, optional
        The sampler's options.

    Returns
    -------
    dict
        ``n_clusters`` (final state), ``nmi`` (final state against ``train.labels``, NaN
        without labels), ``heldout_lpd`` (mean over the rows of ``X_test`` of the log
        posterior predictive averaged over the last ``draws`` states), ``alpha_mean`` (mean
        of the state's alpha over the second half of the chain: the posterior mean estimate
        when alpha is learned, ``alpha`` otherwise) and ``time_s`` (sampler seconds of the chain:
        its ``init`` and steps).
    """
    sampler = algorithms.make(algorithm, family=family, alpha=alpha, alpha_prior=alpha_prior, seed=seed,
                              **(options or {}))
    kept, alphas = [], []

    def keep(iteration, state, seconds):  # the states after the steps, never the initial one
        if iteration > max(iterations - draws, 0):
            kept.append((np.array(state.labels, copy=True), float(state.alpha)))
        if iteration > iterations // 2:
            alphas.append(float(state.alpha))

    chain = run_sampler(sampler, train.X, iterations=iterations, callback=keep, init_clusters=1)
    labels = kept[-1][0]
    return {"n_clusters": n_clusters(labels),
            "nmi": nmi(labels, train.labels) if train.labels is not None else math.nan,
            "heldout_lpd": float(mean_log_predictive_density(family, train.X, kept, X_test).mean()),
            "alpha_mean": float(np.mean(alphas)), "time_s": chain.sampler_s}


def sensitivity(spec: dict, log=None) -> pd.DataFrame:
    """Run the whole experiment of a ``priors`` block (checked here) and return its table.

    Parameters
    ----------
    spec : dict
        See :func:`check_spec`.
    log : file-like, optional
        Where to print one line per chain.

    Returns
    -------
    pandas.DataFrame
        One row per dataset, seed, prior and alpha setting; columns :data:`COLUMNS`.
    """
    spec = check_spec(spec)
    shape, rate = spec["alpha_prior"]
    rows = []
    for key, entry in spec["datasets"].items():
        data = datasets.load(entry["dataset"])
        train, test = datasets.holdout(data, spec["test_fraction"], spec["split_seed"])
        if test is None:
            raise ValueError(f"priors: datasets: {key}: test_fraction {spec['test_fraction']} holds out no point "
                             f"of its {data.X.shape[0]}")
        draws = min(spec["heldout_draws"], entry["iterations"])
        for seed in spec["seeds"]:
            for prior, (family, detail) in base_measures(data.family, train.X, seed).items():
                settings = [("fixed", a, None) for a in spec["alphas"]]
                settings.append(("learned", RUN_DEFAULTS["alpha"], (shape, rate)))
                for mode, alpha, alpha_prior in settings:
                    scores = score_chain(family, train, test.X, entry["algorithm"], alpha, alpha_prior, seed,
                                       entry["iterations"], draws, entry["options"])
                    rows.append({"dataset": key, "dataset_name": data.name, "algorithm": entry["algorithm"],
                                 "prior": prior, "prior_detail": detail, "alpha_mode": mode, "alpha": alpha,
                                 "alpha_prior_shape": shape if alpha_prior else math.nan,
                                 "alpha_prior_rate": rate if alpha_prior else math.nan, "seed": seed,
                                 "iterations": entry["iterations"], "n_train": int(train.X.shape[0]),
                                 "n_test": int(test.X.shape[0]), **scores})
                    if log is not None:
                        r = rows[-1]
                        print(f"{key} seed {seed} {prior} alpha {mode} {alpha:g}: K {r['n_clusters']}, "
                              f"NMI {r['nmi']:.3f}, held-out {r['heldout_lpd']:.3f}, {r['time_s']:.2f} s",
                              file=log, flush=True)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpmmbench.workflows.scripts.prior_sensitivity",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config-json", required=True, metavar="JSON", help="the config's priors block, as JSON")
    parser.add_argument("--out", required=True, metavar="PATH", help="CSV to write (atomically)")
    args = parser.parse_args(argv)
    try:
        spec = json.loads(args.config_json)
    except json.JSONDecodeError as exc:
        parser.error(f"--config-json: not valid JSON ({exc})")
    table = sensitivity(spec, log=sys.stderr)
    atomic_write(args.out, lambda f: f.write(table.to_csv(index=False).encode()))
    print(f"{args.out}: {len(table)} chains")
    return 0


if __name__ == "__main__":
    sys.exit(main())
