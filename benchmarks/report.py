"""Headline performance numbers for the README, without asv.

Usage::

    python -m benchmarks.report [--repeat 5] [--json reports/perf.json]
    python benchmarks/report.py

Builds the same problems as the asv suite (``benchmarks/common.py``), warms each one up,
takes the best of ``--repeat`` timed calls and prints a Markdown table. Every row is
independent; add a row for a new algorithm by adding one function to ``ROWS``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# A spawned Dask worker imports this module again, as ``__mp_main__``, before its Nanny sets the
# thread variables: numba imported then takes the machine's core count, so a "single-threaded"
# worker ran its kernels on every core (measured: 2 numba threads in each 1-thread worker of the
# Dask rows; benchmarks/scaling.py keeps its imports lazy for the same reason)
if __name__ != "__mp_main__":
    import numba
    import numpy as np

    from benchmarks import common
    from dpmmbench.reports.results_doc import perf_table


def _shape(n, dim, k):
    return f"{n // 1000}k x {dim}-D, K={k}"


def gibbs_sweep(repeat):
    n = 100_000
    chain = common.gibbs_chain(f"synth-chang2013?n={n}")
    t = common.best_of(chain.step, repeat)
    return [dict(benchmark="gibbs sweep", problem=f"synth-chang2013 {_shape(n, 2, 10)}",
                 seconds=t, rate=n / t / 1e6, rate_unit="M points/s")]


def fsd_steps(repeat):
    rows = []
    for shape in common.FSD_SHAPES:
        chain = common.fsd_chain(*shape)
        t = common.best_of(chain.step, repeat)
        rows.append(dict(benchmark="fsd step", problem=_shape(*shape), seconds=t,
                         rate=shape[0] / t / 1e6, rate_unit="M points/s"))
    return rows


def fsd_label_steps(repeat):
    """The label step on both FSD shapes; for the GEMM-shaped one also the GEMM rate of the
    same product, measured right after it, and the achieved fraction."""
    rows = []
    for shape in common.FSD_SHAPES:
        label = common.label_step(*shape)
        t_label = common.best_of(label.run, repeat)
        rows.append(dict(benchmark="fsd label step", problem=_shape(*shape), seconds=t_label,
                         rate=common.gflops(label.flops, t_label), rate_unit="GFLOP/s (nominal 2ND²K)"))
        if shape == common.GEMM_SHAPE:
            n, dim, k = shape
            g = common.gemm(*shape, X=label.X)
            t_gemm = common.best_of(g.run, repeat)
            rows.append(dict(benchmark="GEMM peak (numpy matmul)",
                             problem=f"({n // 1000}k x {dim}) @ ({dim} x {k * dim})", seconds=t_gemm,
                             rate=common.gflops(g.flops, t_gemm), rate_unit="GFLOP/s"))
            rows.append(dict(benchmark="label step / GEMM peak", problem=_shape(*shape), seconds=None,
                             rate=t_gemm / t_label, rate_unit="ratio (1 = GEMM rate)"))
    return rows


def subcluster_steps(repeat):
    """``subc`` on Chang & Fisher's benchmark shape (reported as 100 iterations), on the
    million-point 10-D set of the peers' ``scale`` measurement beside the GEMM with the same
    multiply-adds (``N D^2 K``, in row blocks), and on the 50-D shape."""
    rows = []
    for problem, shape in (("synth-chang2013?n=1000000&n_clusters=6", (1_000_000, 2, 6)),
                           ("synth-chang2013?n=1000000&n_clusters=20&dim=10", (1_000_000, 10, 20)),
                           ("blobs-70000x50-K20", (70_000, 50, 20))):
        chain = common.subcluster_chain(problem)
        t = common.best_of(chain.step, repeat)
        rows.append(dict(benchmark="subc step", problem=_shape(*shape), seconds=t,
                         rate=shape[0] / t / 1e6, rate_unit="M points/s"))
        if shape == (1_000_000, 2, 6):
            rows.append(dict(benchmark="subc 100 iterations (best step x 100)", problem=_shape(*shape),
                             seconds=100 * t, rate=100 * t, rate_unit="s (target < 10 s)"))
        if shape == (1_000_000, 10, 20):
            g = common.same_work_gemm(chain)
            t_gemm = common.best_of(g.run, repeat)
            rows.append(dict(benchmark="GEMM, same multiply-adds (numpy matmul, 4096-row blocks)",
                             problem=f"({shape[0] // 1000}k x {shape[1]}) @ ({shape[1]} x {g.W.shape[1]})",
                             seconds=t_gemm, rate=common.gflops(g.flops, t_gemm), rate_unit="GFLOP/s"))
            rows.append(dict(benchmark="subc step / same-work GEMM", problem=_shape(*shape), seconds=None,
                             rate=t / t_gemm, rate_unit="x (goal <= 1.5)"))
    return rows


def dask_iterations(repeat):
    """Median iteration of the sharded samplers on 1 and 2 Dask workers, and the ratio (the
    issue's target for ``cons-prog`` and ``slice-mr``: >= 1.7x)."""
    from dpmmbench import datasets
    from benchmarks.bench_distributed import SPEEDUP_ITERATIONS, ceiling, paired_medians

    # as many iterations as asv's DaskSpeedup: with 5 the ratio moved by +-0.1 from run to run
    rows, iterations = [], max(repeat, SPEEDUP_ITERATIONS)
    n = datasets.load("synth-wang2017").X.shape[0]
    for algorithm in ("slice-mr", "cons-prog", "auxvar"):
        t = dict(zip((1, 2), paired_medians("synth-wang2017", algorithm, iterations)))
        for w in (1, 2):
            rows.append(dict(benchmark=f"{algorithm} iteration, Dask {w} worker(s) (median)",
                             problem=f"synth-wang2017 {n // 1000}k x 2-D", seconds=t[w], rate=n / t[w] / 1e6,
                             rate_unit="M points/s"))
        rows.append(dict(benchmark=f"{algorithm} speed-up 2 vs 1 worker", problem=f"synth-wang2017 {n // 1000}k x 2-D",
                         seconds=None, rate=t[1] / t[2], rate_unit="x (target >= 1.7 for slice-mr, cons-prog)"))
    probe = ceiling(2, iterations)
    rows.append(dict(benchmark="machine ceiling: 2 workers of pure arithmetic vs 1 (workflows/probe.py)",
                     problem=f"{1e3 * probe['alone_s']:.0f} ms alone, {1e3 * probe['together_s']:.0f} ms together",
                     seconds=None, rate=probe["scaling"], rate_unit="x"))
    return rows


def master_work(repeat):
    """The master's own work in one iteration of each sharded sampler on Wang & Lin's set with
    1 and 16 serial shards: step seconds minus the shards' compute seconds (median over the
    steps). It is the serial part that grows with the workers; with serial shards it also holds
    the sizing of the shards' replies, which Dask workers do themselves, and no messaging."""
    import numpy as np
    from dpmmbench import datasets
    from dpmmbench.algorithms.backends import SerialBackend

    ds = datasets.load("synth-wang2017")
    problem = f"synth-wang2017 {ds.X.shape[0] // 1000}k x 2-D"
    rows = []
    for algorithm in ("cons-prog", "cons-async", "cons-pooled", "slice-mr", "subc", "auxvar"):
        t = {}
        for shards in (1, 16):
            chain = common.chain(algorithm, ds.X, ds.labels, ds.family, backend=SerialBackend(shards))
            own = []
            for _ in range(max(repeat, 10)):
                start = time.perf_counter()
                info = chain.step().info
                own.append(time.perf_counter() - start - info["compute_s"])
            t[shards] = float(np.median(own))
            chain.state.shards.close()
        rows.append(dict(benchmark=f"{algorithm} master work per iteration, 16 serial shards (median)",
                         problem=problem, seconds=t[16], rate=t[16] / t[1], rate_unit="x its work at 1 shard"))
    return rows


def predictive_and_alpha(repeat):
    """The alpha update and the predictive density of N new points beside the label step of
    the same (N, D, K) (``benchmarks/bench_predictive.py``), each relative to that step."""
    from benchmarks import bench_predictive

    shape = bench_predictive.SHAPE
    label = common.label_step(*shape)
    t_label = common.best_of(label.run, repeat)
    rows = [dict(benchmark="label step (given parameters)", problem=_shape(*shape), seconds=t_label,
                 rate=common.gflops(label.flops, t_label), rate_unit="GFLOP/s (nominal 2ND²K)")]
    del label
    builders = [(f"predictive density of {shape[0] // 1000}k new points", bench_predictive.predictive, ())]
    builders += [(f"alpha update, {name} ({how})", bench_predictive.alpha_update, (name,))
                 for name, how in (("gibbs", "Escobar-West"), ("subc", "slice sampler"))]
    for benchmark, build, args in builders:  # one problem in memory at a time
        t = common.best_of(build(*args, *shape).run, repeat)
        rows.append(dict(benchmark=benchmark, problem=_shape(*shape), seconds=t, rate=t / t_label,
                         rate_unit="x the label step"))
    return rows


#: functions returning table rows; each builds its own problem so rows stay independent
ROWS = (gibbs_sweep, fsd_steps, fsd_label_steps, subcluster_steps, dask_iterations, master_work,
        predictive_and_alpha)


def machine_info() -> dict:
    """What the numbers depend on: code version, CPU model and count, threads, library versions."""
    from dpmmbench.workflows.provenance import environment

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parents[1], check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return dict(commit=commit, date=time.strftime("%Y-%m-%d %H:%M:%S"), python=platform.python_version(),
                machine=platform.machine(), cpu=environment()["cpu_model"] or platform.processor(),
                cpus=os.cpu_count(), numba_threads=numba.get_num_threads(),
                numpy=np.__version__, numba=numba.__version__)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=common.BEST_OF, help="timed calls per row (best is kept)")
    parser.add_argument("--json", type=Path, help="also write rows and machine info to this JSON file")
    parser.add_argument("--only", nargs="+", choices=[f.__name__ for f in ROWS], help="just these rows")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")

    rows = [row for make_rows in ROWS if not args.only or make_rows.__name__ in args.only
            for row in make_rows(args.repeat)]
    info = machine_info()
    print(perf_table(rows, info, args.repeat))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps(dict(machine=info, repeat=args.repeat, rows=rows), indent=2) + "\n")
        os.replace(tmp, args.json)  # never leave a half-written file behind
    return 0


if __name__ == "__main__":
    sys.exit(main())
