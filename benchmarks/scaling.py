"""Measured scaling: seconds per iteration of every parallel sampler at 1 to N cores, in the
worker x thread layouts a user can choose, written to a record ``docs/scaling/<machine>.json``.

Usage::

    python -m benchmarks.scaling [--cores N] [--out docs/scaling/NAME.json] [--quick] [--append]
                                 [--only ALGORITHM ...] [--datasets DATASET ...] [--iterations I]
                                 [--threads 1,8,16] [--layouts 1x1,8x1,16x1,2x8]

Layouts, each with ``workers x threads <= N`` (``N`` = this machine's cores by default):

- ``in-process``: the sampler in this process with ``threads`` numba threads (``workers`` = 1);
  for ``subc``, ``subc-supc`` and ``fsd`` the threads share the per-point work;
- ``dask``: the sampler's shards on an embedded Dask cluster of ``workers`` processes with
  ``threads`` threads each (:func:`workflows.cluster.dask_client`), one shard per worker.

Every chain starts at the data set's true partition (the cost of an iteration near the mode,
where long runs spend their time, the same work in every layout), takes :data:`WARMUP` untimed
steps, then ``--iterations`` timed ones; a row keeps the median seconds per iteration, the
number of clusters and the NMI to the truth after the last step (a layout that loses clusters
shows there), and for a Dask layout the share of an iteration spent outside the shards
(``serial_share``: one minus the slowest shard's compute time over the iteration's,
median over iterations) with the median slowest-shard seconds (``compute_max_s``). Rows are
appended to the record as they are measured (atomically), so a run cut short keeps what it had.
Before the rows, the machine's own ceiling at each core count is measured in the same run
(:func:`workflows.probe.thread_ceiling`: pure arithmetic on that many threads against one, a
latency-bound chain and throughput-bound multiply-adds).
A Dask row also keeps the medians the cost model is fitted on (``compute_s``, ``bytes``,
``messages``, ``moved_bytes``; :func:`reports.costmodel.fit_measured`).

The record (``docs/results.md``'s scaling table and ``docs/deploy.md``'s measured rows are
generated from it, :mod:`reports.scaling_doc`)::

    {"machine": {"name", "cores", "cpu", "memory_gb"}, "commit", "versions", "date",
     "ceiling": [{"threads", "scaling", "scaling_throughput"}],
     "rows": [{"algorithm", "dataset", "backend", "workers", "threads", "seconds_per_iteration",
               "n_clusters", "nmi", "iterations", "serial_share", "compute_max_s", "compute_s", "bytes",
               "messages", "moved_bytes"}]}
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Nothing heavy at import: Dask's worker processes are spawned, and a spawned process imports
# the main module again before the Nanny sets its thread variables; numba imported then takes
# the machine's core count as its thread count and refuses, at its worker's first compilation,
# the count the Nanny set (RuntimeError "Cannot set NUMBA_NUM_THREADS ...").

#: what is measured on which data set: the algorithms of the speed-up goals (docs/deploy.md
#: "Choosing workers and threads") on Chang & Fisher's 100k set, the same at one million
#: points, and Wang & Lin's synthetic set
PLAN = {
    "synth-chang2013": ("subc", "subc-supc", "fsd"),
    "synth-chang2013?n=1000000": ("subc", "subc-supc", "fsd", "slice-mr", "cons-prog"),
    "synth-wang2017": ("cons-prog", "cons-async", "cons-pooled", "slice-mr", "auxvar", "subc"),
}
#: the backends each algorithm runs on: in-process where the threads share the per-point work,
#: Dask where the sampler has a sharded path
BACKENDS = {
    "subc": ("in-process", "dask"),
    "subc-supc": ("in-process",),
    "fsd": ("in-process",),
    "cons-prog": ("dask",),
    "cons-async": ("dask",),
    "cons-pooled": ("dask",),
    "slice-mr": ("dask",),
    "auxvar": ("dask",),
}
#: untimed steps after the start (compilation, caches)
WARMUP = 2
#: timed steps per row
ITERATIONS = 10
#: a row stops early once its timed steps took this long (slow layouts of slow samplers)
ROW_SECONDS = 30.0
#: the quick run (tests, a first look): small data, two timed steps
QUICK = {"plan": {"synth-chang2013?n=4000": tuple(BACKENDS)}, "iterations": 2}


def layouts(cores: int, backend: str) -> list[tuple[int, int]]:
    """(workers, threads) to measure on ``cores`` cores: every power of two of threads in one
    process, or of single-threaded workers, and for Dask the mixed layouts that fill the
    machine (2 x cores/2, 4 x cores/4, ...) and ``cores - 1`` single-threaded workers, which
    leave a core to the master and the scheduler (in a diagnostic run on 16 cores every sharded
    sampler took about twice as long per iteration at 16 workers as at 15 or 14)."""
    powers = [p for p in (1, 2, 4, 8, 16, 32, 64, 128) if p <= cores]
    if backend == "in-process":
        return [(1, t) for t in powers]
    mixed = [(w, cores // w) for w in powers if 1 < w < cores and cores // w > 1]
    spare = [(cores - 1, 1)] if cores > 2 and cores - 1 not in powers else []
    return [(w, 1) for w in powers] + spare + sorted(set(mixed))


def machine(name: str | None = None) -> dict:
    """The machine a record was measured on."""
    from dpmmbench.workflows.provenance import available_cores, environment

    env = environment()
    cores = available_cores()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return {"name": name or f"{cores}-core", "cores": cores, "cpu": env["cpu_model"] or platform.processor(),
            "memory_gb": round(memory, 1)}


def measure(algorithm: str, ds, iterations: int, backend=None) -> dict:
    """One row's measurements: ``algorithm`` from the true partition of ``ds``."""
    import numpy as np

    from dpmmbench import algorithms
    from dpmmbench.reports.metrics import n_clusters, nmi

    sampler = algorithms.make(algorithm, family=ds.family, alpha=1.0, seed=0,
                              **({"backend": backend} if backend is not None else {}))
    state = sampler.init(ds.X, labels=ds.labels)
    try:
        for _ in range(WARMUP):
            state = sampler.step(state)
        seconds, infos = [], []
        start = time.perf_counter()
        while len(seconds) < iterations and (not seconds or time.perf_counter() - start < ROW_SECONDS):
            t0 = time.perf_counter()
            state = sampler.step(state)
            seconds.append(time.perf_counter() - t0)
            infos.append(state.info)
        labels = state.labels
        row = {"seconds_per_iteration": float(np.median(seconds)), "iterations": len(seconds),
               "n_clusters": int(n_clusters(labels)), "nmi": round(float(nmi(labels, ds.labels)), 4),
               "serial_share": None}
        if "compute_max_s" in infos[0]:
            def median(key):
                return float(np.median([info.get(key, 0.0) for info in infos]))

            outside = [max(0.0, 1.0 - info["compute_max_s"] / t) for info, t in zip(infos, seconds)]
            row.update(serial_share=round(float(np.median(outside)), 4), compute_max_s=median("compute_max_s"),
                       compute_s=median("compute_s"), messages=median("messages"), moved_bytes=median("moved_bytes"),
                       bytes=float(np.median([i["bytes_sent"] + i["bytes_received"] for i in infos])))
        return row
    finally:
        if getattr(state, "shards", None) is not None:
            state.shards.close()


def _threads(threads: int):
    """numba and BLAS threads of this process for the in-process rows."""
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(threads)
    return threadpool_limits(threads)


def parse_layouts(text: str) -> list[tuple[int, int]]:
    """``"1x1,8x1,2x8"`` as [(workers, threads), ...]."""
    try:
        out = [tuple(int(v) for v in part.split("x")) for part in text.split(",")]
    except ValueError:
        out = []
    if not out or any(len(p) != 2 or min(p) < 1 for p in out):
        raise ValueError(f"layouts are WORKERSxTHREADS separated by commas, e.g. 1x1,8x1,2x8; got {text!r}")
    return out


def run(out: Path, cores: int, plan=PLAN, iterations=ITERATIONS, name=None, commit=None, layouts_=None,
        append=False, log=print) -> dict:
    """Measure every (data set, algorithm) of ``plan`` in every layout and write the record to
    ``out`` (``layouts_``: {"in-process": [...], "dask": [...]}, default :func:`layouts`;
    ``append``: keep the rows of an existing record at ``out``)."""
    import numba

    from dpmmbench import datasets
    from dpmmbench.reports.traces import atomic_write
    from dpmmbench.workflows.provenance import environment

    layouts_ = layouts_ or {b: layouts(cores, b) for b in ("in-process", "dask")}
    widest = max((w * t for ls in layouts_.values() for w, t in ls), default=1)
    if widest > cores:
        raise ValueError(f"a layout of {widest} cores on {cores} (--cores)")
    if max((t for _, t in layouts_["in-process"]), default=1) > numba.config.NUMBA_NUM_THREADS:
        raise ValueError(f"this process can use at most {numba.config.NUMBA_NUM_THREADS} numba threads "
                         "(NUMBA_NUM_THREADS)")
    env = environment()
    measured = commit or (env["git_commit"] and env["git_commit"] + ("+dirty" if env["git_dirty"] else ""))
    record = {"machine": machine(name), "commit": measured, "versions": env["versions"],
              "date": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": []}
    if append and out.is_file():
        record["rows"] = json.loads(out.read_text())["rows"]
    loaded = {d: datasets.load(d) for d in plan}

    def keep(row):
        record["rows"].append(row)
        atomic_write(out, lambda f: f.write((json.dumps(record, indent=1) + "\n").encode()))
        log(f"{row['dataset']:28s} {row['algorithm']:12s} {row['backend']:10s} {row['workers']:2d} x "
            f"{row['threads']:2d}: {row['seconds_per_iteration']:.4f} s/it, K {row['n_clusters']}, "
            f"NMI {row['nmi']:.3f}" + (f", outside shards {row['serial_share']:.0%}" if row["serial_share"]
                                         is not None else ""), flush=True)

    def runs_on(backend):
        return [(d, a) for d, algos in plan.items() for a in algos if backend in BACKENDS[a]]

    from dpmmbench.workflows.probe import thread_ceiling

    # the machine's own ceiling at each core count, in this run: pure arithmetic on that many
    # threads against one (a shared or hyper-threaded machine gives far less than the count)
    for cores_ in sorted({w * t for ls in layouts_.values() for w, t in ls}):
        record.setdefault("ceiling", []).append(thread_ceiling(cores_))
        c = record["ceiling"][-1]
        log(f"machine ceiling at {cores_:2d} threads: {c['scaling']:.2f}x (dependent chain), "
            f"{c['scaling_throughput']:.2f}x (independent multiply-adds)", flush=True)
    for _, threads in layouts_["in-process"]:
        with _threads(threads):
            for d, a in runs_on("in-process"):
                keep({"algorithm": a, "dataset": d, "backend": "in-process", "workers": 1, "threads": threads,
                      **measure(a, loaded[d], iterations)})
    if runs_on("dask"):
        from dpmmbench.algorithms.backends import DaskBackend
        from dpmmbench.workflows.cluster import dask_client

        for workers, threads in layouts_["dask"]:
            with dask_client(workers=workers, threads=threads) as client, _threads(1):
                for d, a in runs_on("dask"):
                    backend = DaskBackend(client, n_workers=workers)
                    keep({"algorithm": a, "dataset": d, "backend": "dask", "workers": workers, "threads": threads,
                          **measure(a, loaded[d], iterations, backend)})
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaling", description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, help="largest workers x threads (default: this machine's cores)")
    parser.add_argument("--out", type=Path, help="the record to write (default docs/scaling/<N>-core.json)")
    parser.add_argument("--name", help="the machine's name in the record (default <N>-core)")
    parser.add_argument("--only", nargs="+", choices=sorted(BACKENDS), help="just these algorithms")
    parser.add_argument("--datasets", nargs="+", choices=sorted(PLAN), help="just these data sets")
    parser.add_argument("--iterations", type=int, help=f"timed steps per row (default {ITERATIONS})")
    parser.add_argument("--threads", help="in-process thread counts, e.g. 1,8,16 (default: powers of two)")
    parser.add_argument("--layouts", help="Dask layouts WORKERSxTHREADS, e.g. 1x1,8x1,2x8 (default: see above)")
    parser.add_argument("--backend", choices=("in-process", "dask"), help="just this backend's layouts")
    parser.add_argument("--append", action="store_true", help="keep the rows already in --out")
    parser.add_argument("--commit", help="the commit measured, where git cannot tell (a copied tree)")
    parser.add_argument("--quick", action="store_true", help="a small data set and two timed steps (a check)")
    args = parser.parse_args(argv)
    from dpmmbench.workflows.provenance import available_cores

    cores = args.cores or available_cores()
    iterations = args.iterations if args.iterations is not None else QUICK["iterations"] if args.quick else ITERATIONS
    plan_of = QUICK["plan"] if args.quick else PLAN
    plan = {d: tuple(a for a in algos if not args.only or a in args.only) for d, algos in plan_of.items()
            if not args.datasets or d in args.datasets}
    name = args.name or f"{cores}-core"
    out = args.out or Path("docs") / "scaling" / f"{name}.json"
    try:
        if iterations < 1 or cores < 1:
            raise ValueError("--iterations and --cores must be >= 1")
        if not any(plan.values()):
            raise ValueError("nothing to measure: --only and --datasets leave no algorithm on a data set of the "
                             f"{'quick ' if args.quick else ''}plan ({', '.join(plan_of)})")
        chosen = {"in-process": layouts(cores, "in-process"), "dask": layouts(cores, "dask")}
        if args.threads:
            chosen["in-process"] = parse_layouts(",".join(f"1x{t}" for t in args.threads.split(",")))
        if args.layouts:
            chosen["dask"] = parse_layouts(args.layouts)
        if args.backend:
            chosen = {b: (ls if b == args.backend else []) for b, ls in chosen.items()}
        run(out, cores, plan, iterations, name, args.commit, chosen, args.append)
    except ValueError as exc:
        print(f"benchmarks.scaling: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
