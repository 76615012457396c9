"""Side by side with peers: our samplers and other libraries' DPMM methods, measured in one run.

Usage::

    python -m benchmarks.peers [--cap 60] [--scale-cap 120] [--budget 20] [--json results/peers.json] [--only target]

Three measurements, every method in this one process, scored by the suite's own scorer
(``reports.metrics``) and, for the last, the suite's held-out predictive density:

- ``target``: on 100k x 2-D points from four well-separated Gaussians (:data:`TARGET_DATASET`),
  the wall time from the start of ``init`` (included) to the first state with NMI >= 0.99 and
  K = 4, capped at ``--cap`` seconds (a method that does not get there is reported with its
  final NMI and K); a peer that declares itself converged stops there;
- ``scale``: the same on a million 10-D points from 20 Gaussians (:data:`SCALE_DATASET`, Chang &
  Fisher's recipe in 10-D), to NMI >= 0.99 and K = 20, capped at ``--scale-cap`` seconds;
- ``equal-time``: on MNIST-10k and Fashion-MNIST-10k (PCA 50), every method runs for the same
  ``--budget`` seconds (it stops at the first step past it) on the training part of the suite's
  seeded held-out split (``datasets.holdout``); NMI on the training points and the mean
  held-out log predictive density of the last states (as the workflow's driver scores it);
  then ``subc`` once more from the last partition of the peer with the best NMI (:func:`equal_time`).

Every peer the registry knows is listed: an installed one runs (``algorithms.available()``,
so a newly installed peer joins without a change here), a missing one is reported as not
installed with how to get it. Each row keeps the method's settings (a peer's ``settings()``,
our sampler's options). Every chain runs on the suite's chain runner
(``algorithms.runner.run_sampler``), compilation warmed up off the clock (``algorithms.runner.warm_up``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections import deque
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from benchmarks.report import machine_info
from dpmmbench import algorithms, datasets
from dpmmbench.algorithms.constraints import RUN_DEFAULTS
from dpmmbench.algorithms.joint import log_joint
from dpmmbench.algorithms.runner import run_sampler, warm_up
from dpmmbench.reports.metrics import n_clusters, nmi
from dpmmbench.reports.results_doc import peers_section
from dpmmbench.workflows.driver import heldout_lpd

#: four well-separated full-covariance Gaussians, 100k x 2-D (closest centres ~9 units apart,
#: largest cluster standard deviation ~1.2)
TARGET_DATASET = "synth-chang2013?n=100000&n_clusters=4"
TARGET_NMI, TARGET_K = 0.99, 4
#: a million points from 20 clusters in 10-D: where the papers' speed matters
SCALE_DATASET = "synth-chang2013?n=1000000&n_clusters=20&dim=10"
SCALE_K = 20
EQUAL_TIME_DATASETS = ("mnist10k?n=10000&pca=50", "fashion-mnist?n=10000&pca=50")

#: our samplers in each measurement (the peers are every peer the registry knows)
OURS = {"target": ("subc",), "scale": ("subc",), "equal-time": ("subc", "gibbs")}

#: option sets run for a method besides its defaults, per measurement: settings a user would
#: reasonably pick from the library's own documentation, never a handicap (the defaults always
#: run too)
VARIANTS = {
    "target": {
        # bnpy's birth/merge demo for DP Gaussian mixtures starts from a single cluster
        "bnpy-memovb": ({"K": 1},),
        # dpgmm's sequential sweep (batch_size 1) of 100k points takes minutes here; its batched
        # sweep is its own way to go faster
        "dpgmm": ({"batch_size": 1024},),
    },
    "scale": {"bnpy-memovb": ({"K": 1},), "dpgmm": ({"batch_size": 1024},)},
    "equal-time": {"dpgmm": ({"batch_size": 256},)},
}

SEED = 0

#: our sampler that :func:`equal_time` also starts from the best-NMI peer's last partition
RELAY = "subc"


def peers() -> tuple[list[str], dict[str, str]]:
    """The registry's peers: those installed, and the missing optional ones with how to get them."""
    return [name for name in algorithms.available() if algorithms.get(name).external], algorithms.missing()


def methods(measurement: str) -> tuple[list[tuple[str, dict]], dict[str, str]]:
    """``(name, options)`` pairs to run in ``measurement`` (our samplers first, then each
    installed peer with its defaults and its :data:`VARIANTS` there), and the missing peers."""
    installed, missing = peers()
    runs = [(name, {}) for name in OURS[measurement]]
    for name in installed:
        variants = VARIANTS[measurement].get(name, ())
        runs += [(name, {})] + [(name, dict(options)) for options in variants]
    return runs, missing


def _settings(sampler) -> dict:
    """A peer's own settings; for our samplers their options, the concentration and the prior."""
    if sampler.external:
        return sampler.settings()
    return {"options": dict(sampler.params), "alpha": sampler.alpha, "family": repr(sampler.family),
            "initialisation": f"{RUN_DEFAULTS['init_clusters']} cluster(s)"}


def _chain(name, options, X, truth, family, cap, target=None, X_test=None, seed=SEED, labels=None,
           report=None) -> dict:
    """Run one method until its state reaches ``target`` (NMI, K), its library says it
    converged, or its sampler time passes ``cap`` seconds (the step that passes it is the last).

    Only ``init`` and ``step`` are timed; each state is scored between them and passed to
    ``report`` as ``("state", iteration, time_s, nmi, K)`` (``("started", settings)`` comes just
    before ``init``, ``("ended",)`` once the chain has stopped). Returns a row: ``status``
    ("reached", "not reached", "converged" or "budget" without a target), ``time_s`` (sampler
    time up to the last state), ``iterations``, ``init_s``, final ``nmi`` and ``n_clusters``,
    ``k_changes`` ([iteration, time_s, K] whenever K changed) and ``settings``; given held-out
    points ``X_test``, also the ``heldout_lpd`` of the last states (off the clock, as the
    workflow's driver scores a run), their number ``heldout_draws``, and ``log_joint``, the log
    joint of the last state's partition under the suite's model (``family``, the default alpha),
    and that partition itself, ``last_labels`` (for :func:`equal_time`'s relay; not recorded).
    ``labels``: the chain's initial partition (default: the run's ``init_clusters``).
    """
    report = report or (lambda *message: None)
    sampler = algorithms.make(name, family=family, seed=seed, **options)
    warm_up(sampler, X)
    settings = _settings(sampler)
    k_changes, draws, last = [], deque(maxlen=RUN_DEFAULTS["heldout_draws"]), {}

    def score(iteration, state, elapsed):
        z = np.asarray(state.labels)
        last.update(nmi=float(nmi(z, truth)), k=int(n_clusters(z)))
        report("state", iteration, elapsed, last["nmi"], last["k"])
        if not k_changes or k_changes[-1][2] != last["k"]:
            k_changes.append([iteration, elapsed, last["k"]])
        draws.append((z.copy(), float(state.alpha)))

    def reached(state):  # of the state just scored
        return target is not None and last["nmi"] >= target[0] and last["k"] == target[1]

    def done(state):
        return reached(state) or bool((state.info or {}).get("peer_converged"))

    report("started", settings)
    chain = run_sampler(sampler, X, time_budget=cap, target=done, callback=score, labels=labels)
    report("ended")
    if chain.stopped == "target":
        status = "reached" if reached(chain.state) else "converged"
    else:
        status = "not reached" if target is not None else "budget"
    row = dict(method=name, options=options, status=status, time_s=chain.sampler_s, iterations=chain.iterations,
               init_s=chain.init_s, nmi=last["nmi"], n_clusters=last["k"], k_changes=k_changes, settings=settings)
    if X_test is not None:
        # the fit of the last state to the suite's model (its prior, the run's default alpha),
        # whatever model the method itself fitted: it tells a better sampler from another model
        row.update(heldout_lpd=heldout_lpd(family, X, list(draws), X_test), heldout_draws=len(draws),
                   log_joint=log_joint(X, draws[-1][0], family, RUN_DEFAULTS["alpha"]), last_labels=draws[-1][0])
    return row


def _child(conn, args):
    """A chain in its own process: every message of :func:`_chain` and its row (or error) go to ``conn``."""
    try:
        conn.send(("done", _chain(*args, report=lambda *message: conn.send(message))))
    except Exception as exc:  # noqa: BLE001 - the parent reports it in the row
        traceback.print_exc()
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_isolated(name, options, X, truth, family, cap, target=None, X_test=None, grace=None, seed=SEED,
                 labels=None) -> dict:
    """:func:`_chain` in a fresh process, stopped ``grace`` seconds after ``cap`` if still running.

    A step cannot be interrupted, and one step of some peers (a sequential sweep over 100k
    points) takes minutes: its process is ended ``cap + grace`` seconds after ``init`` started
    and the row keeps the last state it scored, with ``status`` "stopped", ``time_s`` the time
    it was given and a ``note``. Every
    method also starts from a clean process (no thread pools or caches of the one before).
    ``grace`` defaults to half the cap, at least 10 s; ``seed`` is the chain's seed; ``labels``
    its initial partition.

    Returns
    -------
    dict
        The row of :func:`_chain`; ``status`` "failed: ..." when the chain raised.
    """
    import multiprocessing

    grace = max(10.0, cap / 2) if grace is None else grace
    context = multiprocessing.get_context("spawn")  # no fork of a process with thread pools running
    receive, send = context.Pipe(duplex=False)
    args = (name, options, X, truth, family, cap, target, X_test, seed, labels)
    process = context.Process(target=_child, args=(send, args), daemon=True, name=f"peers-{name}")
    process.start()
    send.close()
    deadline, last, row, settings = None, None, None, None
    try:
        while row is None:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not receive.poll(wait):
                process.kill()
                iteration, _, score, k = last[1:] if last else (None, None, None, None)
                row = dict(method=name, options=options, status="stopped", time_s=cap + grace, iterations=iteration,
                           nmi=score, n_clusters=k,
                           note=f"ended {cap + grace:g} s after init started, a step still running; NMI and K "
                                f"of the last state it scored (iteration {iteration})", settings=settings)
                break
            try:
                message = receive.recv()
            except EOFError:
                row = dict(method=name, options=options,
                           status=f"failed: its process ended without a result (exit code {process.exitcode})")
                break
            kind = message[0]
            if kind == "started":
                deadline, settings = time.monotonic() + cap + grace, message[1]
            elif kind == "state":
                last = message
            elif kind == "ended":
                deadline = None  # scoring the held-out points is not under the cap
            elif kind == "done":
                row = message[1]
            else:
                row = dict(method=name, options=options, status=f"failed: {message[1]}")
    finally:
        receive.close()
        process.join(timeout=30)
        if process.is_alive():
            process.kill()
            process.join()
    return row


def _not_installed(missing: dict[str, str]) -> list[dict]:
    return [dict(method=name, options={}, status="not installed", install=hint) for name, hint in missing.items()]


def time_to_target(dataset=TARGET_DATASET, cap=60.0, runs=None, missing=None, nmi_target=TARGET_NMI,
                   k_target=TARGET_K, measurement="target") -> dict:
    """Wall time of each method to NMI >= ``nmi_target`` with K = ``k_target`` on ``dataset``.

    Parameters
    ----------
    dataset : str
        Registered dataset name (with labels).
    cap : float
        Seconds of sampler time after which a method stops (> 0).
    runs, missing : optional
        ``(name, options)`` pairs and missing peers; default :func:`methods` ``(measurement)``.
    nmi_target : float
        NMI to reach, in (0, 1].
    k_target : int
        Number of clusters the state must have at the same time.
    measurement : {"target", "scale"}
        Whose methods run by default (:func:`methods`).

    Returns
    -------
    dict
        ``dataset``, ``n_points``, ``cap_s``, ``nmi_target``, ``k_target`` and ``rows`` (see
        :func:`_chain`, run by :func:`run_isolated`; stopped, failed and not-installed methods
        have a ``status`` saying so) and ``peers`` (the names among them that are peers).
    """
    if runs is None:
        runs, default_missing = methods(measurement)
        missing = default_missing if missing is None else missing
    ds = datasets.load(dataset)
    rows = []
    for name, options in runs:
        print(f"time to target: {name} {options or ''}", file=sys.stderr, flush=True)
        rows.append(run_isolated(name, options, ds.X, ds.labels, ds.family, cap, target=(nmi_target, k_target)))
    rows += _not_installed(missing or {})
    return dict(dataset=dataset, n_points=int(ds.X.shape[0]), dim=int(ds.X.shape[1]), cap_s=cap,
                nmi_target=nmi_target, k_target=k_target, rows=rows,
                peers=sorted({name for name, _ in runs if algorithms.get(name).external} | set(missing or {})))


def equal_time(dataset_names=EQUAL_TIME_DATASETS, budget=20.0, runs=None, missing=None) -> dict:
    """NMI and held-out log predictive density of each method after ``budget`` seconds.

    Parameters
    ----------
    dataset_names : sequence of str
        Registered dataset names (with labels).
    budget : float
        Seconds of sampler time for every method (it stops at the first step past them).
    runs, missing : optional
        ``(name, options)`` pairs and missing peers; default :func:`methods` ``("equal-time")``.

    After the runs, :data:`RELAY` runs once more for the same budget from the last partition of
    the peer with the best NMI (its row has ``start``: that peer's method, options, NMI, K and
    log joint): whether the suite's model keeps the partition a peer found from another model,
    or a sampler of it moves away (a lead on NMI then comes from the model, not the search).

    Returns
    -------
    dict
        ``budget_s``, ``test_fraction``, ``split_seed``, ``heldout_draws`` and ``datasets``: per
        dataset its name, training and held-out sizes and ``rows`` (as :func:`_chain`, with
        ``heldout_lpd`` in nats per held-out point; the relay last).
    """
    if runs is None:
        runs, default_missing = methods("equal-time")
        missing = default_missing if missing is None else missing
    keep, fraction, split_seed = RUN_DEFAULTS["heldout_draws"], RUN_DEFAULTS["test_fraction"], RUN_DEFAULTS["split_seed"]
    out = []
    for dataset in dataset_names:
        train, test = datasets.holdout(datasets.load(dataset), fraction, split_seed)
        rows = []
        for name, options in runs:
            print(f"equal time: {dataset} {name} {options or ''}", file=sys.stderr, flush=True)
            rows.append(run_isolated(name, options, train.X, train.labels, train.family, budget, X_test=test.X))
        rows += _relay(rows, train, test, budget)
        for row in rows:
            row.pop("last_labels", None)
        rows += _not_installed(missing or {})
        out.append(dict(dataset=dataset, n_train=int(train.X.shape[0]), n_test=int(test.X.shape[0]),
                        dim=int(train.X.shape[1]), rows=rows))
    return dict(budget_s=budget, test_fraction=fraction, split_seed=split_seed, heldout_draws=keep, datasets=out)


def _relay(rows, train, test, budget) -> list[dict]:
    """:data:`RELAY`'s row from the last partition of the peer row with the best NMI, if any ran."""
    started = [r for r in rows if r.get("last_labels") is not None and algorithms.get(r["method"]).external]
    if not started:
        return []
    peer = max(started, key=lambda r: r["nmi"])
    print(f"equal time: {RELAY} from {peer['method']}'s partition", file=sys.stderr, flush=True)
    row = run_isolated(RELAY, {}, train.X, train.labels, train.family, budget, X_test=test.X,
                       labels=peer["last_labels"])
    row["start"] = {key: peer[key] for key in ("method", "options", "nmi", "n_clusters", "log_joint", "heldout_lpd")}
    return [row]


def _plain(value):
    """numpy scalars and arrays in a peer's settings as JSON values."""
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=60.0, help="seconds each method gets to reach the target")
    parser.add_argument("--scale-cap", type=float, default=120.0,
                        help="seconds each method gets to reach the target on the million-point set")
    parser.add_argument("--budget", type=float, default=20.0, help="seconds every method gets in equal-time")
    parser.add_argument("--only", nargs="+", choices=("target", "scale", "equal-time"), help="just these measurements")
    parser.add_argument("--json", type=Path, help="also write the rows and machine info to this JSON file")
    args = parser.parse_args(argv)
    if not (args.cap > 0 and args.scale_cap > 0 and args.budget > 0):
        parser.error("--cap, --scale-cap and --budget must be > 0 seconds")

    wanted = args.only or ("target", "scale", "equal-time")
    result = dict(machine=machine_info(), load_before=list(os.getloadavg()))
    if "target" in wanted:
        result["time_to_target"] = time_to_target(cap=args.cap)
    if "scale" in wanted:
        result["time_to_target_scale"] = time_to_target(SCALE_DATASET, cap=args.scale_cap, k_target=SCALE_K,
                                                        measurement="scale")
    if "equal-time" in wanted:
        result["equal_time"] = equal_time(budget=args.budget)
    result["load_after"] = list(os.getloadavg())
    print(peers_section(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps(result, indent=2, default=_plain) + "\n")
        os.replace(tmp, args.json)  # never leave a half-written file behind
    return 0


if __name__ == "__main__":
    sys.exit(main())
