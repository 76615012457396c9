"""Quality at scale: clusters and NMI against time of every sharded sampler on a million points,
from one cluster, on a Dask cluster of 1..W workers, written to ``docs/scaling/quality/<machine>.json``.

Usage::

    python -m benchmarks.quality [--workers 1,2] [--budget 60] [--iterations I] [--only ALGORITHM ...]
                                 [--dataset NAME] [--out PATH] [--quick]

Every sampler with a sharded path (``supports_backend``) starts where a user's run starts (one
cluster) and runs ``--budget`` seconds of sampler time on an embedded Dask cluster of W
single-threaded workers, one shard each, the same seed for every W (``--iterations`` also caps
the steps: a chain of so many steps is the same on a busy machine as on an idle one, where a
budget in seconds is not; the quick check runs on it). After each step, off the
clock, the labels are gathered and scored: the record keeps the trajectory ``[seconds, K, NMI]``
(at most :data:`POINTS` of them, evenly thinned, the last always kept). What it answers: does a
sampler reach the truth's number of clusters (within +-30 %) in its budget, and does it lose
clusters as workers are added. ``reports.scaling_doc`` renders the records into
``docs/results.md`` (with, for a sampler that does not get there, whether K was still rising or
had settled).

The record::

    {"machine": {...}, "commit", "versions", "date", "dataset", "n_points", "truth_k", "budget_s",
     "iterations_cap" (null: none), "runs": [{"algorithm", "workers", "threads", "iterations", "seconds", "n_clusters", "nmi",
               "trajectory": [[seconds, K, NMI], ...]}]}

A consolidation sampler's run also says how many components its workers created
(``new_components``) and how many of them, with its pooled merges, were merged into existing
ones (``merged``): the sum of its ``n_new_components`` and ``n_merges`` over the run.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# nothing heavy at import (spawned Dask workers import the main module again; benchmarks.scaling)

#: Chang & Fisher's recipe at a million points (ten clusters)
DATASET = "synth-chang2013?n=1000000"
#: seconds of sampler time per run
BUDGET = 60.0
#: trajectory points kept per run
POINTS = 200
#: the check run (tests, a first look): a fixed number of steps, so that what it finds does not
#: depend on the machine's load (the budget only bounds a run that compiles or stalls); subc
#: reaches the ten clusters in about 40 steps from one cluster on either layout
QUICK = {"dataset": "synth-chang2013?n=4000", "budget": 120.0, "iterations": 60}


def sharded_samplers() -> list[str]:
    """Every registered sampler with a sharded path."""
    from dpmmbench import algorithms

    return [n for n in algorithms.available() if getattr(algorithms.get(n), "supports_backend", False)]


def thin(points: list, keep: int = POINTS) -> list:
    """At most ``keep`` of ``points``, evenly spaced, the first and the last always kept."""
    if len(points) <= keep:
        return list(points)
    step = (len(points) - 1) / (keep - 1)
    return [points[round(i * step)] for i in range(keep)]


def trajectory(algorithm: str, ds, budget: float, backend, iterations: int | None = None) -> dict:
    """One run of ``algorithm`` from one cluster on ``backend`` for ``budget`` seconds (and at
    most ``iterations`` steps)."""
    import numpy as np

    from dpmmbench import algorithms
    from dpmmbench.algorithms.runner import run_sampler, warm_up
    from dpmmbench.reports.metrics import n_clusters, nmi

    sampler = algorithms.make(algorithm, family=ds.family, seed=0, backend=backend)
    warm_up(sampler, ds.X)  # compilation off the clock (on a copy, in this process)
    points = []
    # what the consolidation samplers say of their new components: created on the workers and
    # merged into existing ones at the master (docs/algorithms.md §8.6)
    keys = ("n_new_components", "n_merges")
    counts = dict.fromkeys(keys, 0) if set(keys) <= set(sampler.info_columns) else {}

    def score(iteration, state, elapsed):
        z = np.asarray(state.labels)
        points.append([round(elapsed, 4), int(n_clusters(z)), round(float(nmi(z, ds.labels)), 4)])
        if iteration > 0:
            for key in counts:
                counts[key] += int((state.info or {}).get(key) or 0)

    chain = run_sampler(sampler, ds.X, iterations=iterations, time_budget=budget, callback=score)
    shards = getattr(chain.state, "shards", None)
    if shards is not None:
        shards.close()
    born = {"new_components": counts["n_new_components"], "merged": counts["n_merges"]} if counts else {}
    return {"iterations": chain.iterations, "seconds": round(chain.sampler_s, 3), "n_clusters": points[-1][1],
            "nmi": points[-1][2], **born, "trajectory": thin(points)}


def run(out: Path, workers: list[int], algorithms_: list[str], dataset: str = DATASET, budget: float = BUDGET,
        iterations: int | None = None, log=print) -> dict:
    """Every algorithm on ``dataset`` at every worker count; the record is rewritten (atomically)
    after each run, so a run cut short keeps what it had."""
    import numpy as np

    from dpmmbench import datasets
    from dpmmbench.algorithms.backends import DaskBackend
    from dpmmbench.reports.traces import atomic_write
    from dpmmbench.workflows.cluster import dask_client
    from dpmmbench.workflows.provenance import environment

    from benchmarks.scaling import machine

    env = environment()
    ds = datasets.load(dataset)
    record = {"machine": machine(), "commit": env["git_commit"] and env["git_commit"] + ("+dirty" if env["git_dirty"]
                                                                                         else ""),
              "versions": env["versions"], "date": time.strftime("%Y-%m-%d %H:%M:%S"), "dataset": ds.name,
              "n_points": int(ds.X.shape[0]), "truth_k": int(np.unique(ds.labels).size), "budget_s": budget,
              "iterations_cap": iterations, "runs": []}
    for w in workers:
        with dask_client(workers=w, threads=1) as client:
            for a in algorithms_:
                row = {"algorithm": a, "workers": w, "threads": 1,
                       **trajectory(a, ds, budget, DaskBackend(client, n_workers=w), iterations)}
                record["runs"].append(row)
                atomic_write(out, lambda f: f.write((json.dumps(record, indent=1) + "\n").encode()))
                log(f"{a:12s} {w:2d} worker(s): {row['iterations']} iterations in {row['seconds']:.1f} s, "
                    f"K {row['n_clusters']} (truth {record['truth_k']}), NMI {row['nmi']:.3f}", flush=True)
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quality", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts, e.g. 1,2,8,16 (default %(default)s)")
    parser.add_argument("--budget", type=float, help=f"seconds of sampler time per run (default {BUDGET:g})")
    parser.add_argument("--iterations", type=int, help="at most this many steps per run (default: the budget "
                                                            "alone; --quick: %d)" % QUICK["iterations"])
    parser.add_argument("--only", nargs="+", help="just these algorithms (default: every sharded sampler)")
    parser.add_argument("--dataset", help=f"registered data set with labels (default {DATASET})")
    parser.add_argument("--out", type=Path, help="the record (default docs/scaling/quality/<N>-core.json)")
    parser.add_argument("--quick", action="store_true",
                        help=f"a small data set, {QUICK['iterations']} steps per run (a check)")
    args = parser.parse_args(argv)
    from dpmmbench.workflows.provenance import available_cores

    try:
        workers = [int(w) for w in args.workers.split(",")]
        if not workers or min(workers) < 1:
            raise ValueError
    except ValueError:
        print(f"benchmarks.quality: --workers takes counts >= 1 separated by commas, got {args.workers!r}",
              file=sys.stderr)
        return 2
    known = sharded_samplers()
    unknown = sorted(set(args.only or ()) - set(known))
    budget = args.budget if args.budget is not None else QUICK["budget"] if args.quick else BUDGET
    iterations = args.iterations if args.iterations is not None else QUICK["iterations"] if args.quick else None
    problem = (f"not sharded samplers: {unknown} (these are: {known})" if unknown else
               f"--budget must be > 0 seconds, got {budget:g}" if not budget > 0 else
               f"--iterations must be >= 1, got {iterations}" if iterations is not None and iterations < 1 else None)
    if problem:
        print(f"benchmarks.quality: {problem}", file=sys.stderr)
        return 2
    dataset = args.dataset or (QUICK["dataset"] if args.quick else DATASET)
    out = args.out or Path("docs") / "scaling" / "quality" / f"{available_cores()}-core.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    run(out, workers, args.only or known, dataset, budget, iterations)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
