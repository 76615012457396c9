"""The ``dpmmbench`` command line.

::

    dpmmbench run --algorithm gibbs --dataset "synth-chang2013?n=2000" --iterations 100 \\
                  --seed 0 --out results/traces/gibbs.parquet [--workers W] [--threads T] [--scheduler ADDR]
                  [--time-budget S] [--alpha A] [--init-clusters K] [--option key=value ...] [--name NAME]
                  [--data-file PREPROCESSED.npz]
    dpmmbench summarize TRACE... --out summary.csv
    dpmmbench report TRACE... --out results/report/index.html [--config CONFIG.yaml]
    dpmmbench list

Every user error ends with ``dpmmbench: error: <message>`` on stderr and exit code 2, and
no file at ``--out`` (``--traceback`` shows the full traceback instead, for debugging).
"""
from __future__ import annotations

import argparse
import os
import sys


class _Parser(argparse.ArgumentParser):
    """argparse, but every usage error reads ``dpmmbench: error: ...`` (also in subcommands)."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, f"dpmmbench: error: {message}\n")


def parse_option(text: str) -> tuple[str, object]:
    """Parse ``key=value``; the value becomes an int, else a float, else stays a string.

    Parameters
    ----------
    text : str
        One ``--option`` argument.

    Returns
    -------
    (str, int or float or str)
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"--option expects key=value, got {text!r}")
    for convert in (int, float):
        try:
            return key, convert(value)
        except ValueError:
            pass
    return key, value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``dpmmbench`` (``run``, ``summarize``, ``report`` and ``list``).

    The run parameters' defaults come from :data:`algorithms.constraints.RUN_DEFAULTS`;
    their values are checked where the run is specified (:func:`workflows.driver.run`), not here.
    """
    from dpmmbench.algorithms.constraints import RUN_DEFAULTS as default
    parser = _Parser(prog="dpmmbench", description="Benchmark suite for Dirichlet process mixture model inference.")
    parser.add_argument("--traceback", action="store_true", help="show full tracebacks on errors (debugging)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run one chain and write its trace",
                         description="Run one chain (algorithm, dataset, seed, workers) and write its trace "
                                     "(one row per iteration) atomically to --out.")
    run.add_argument("--algorithm", required=True, metavar="NAME", help="registry name (see `dpmmbench list`)")
    run.add_argument("--dataset", required=True, metavar="NAME",
                     help='dataset name, with parameters, e.g. "synth-chang2013?n=2000&seed=3"')
    run.add_argument("--data-file", metavar="PATH",
                     help="the dataset preprocessed into an .npz (`python -m dpmmbench.datasets preprocess`); "
                          "default: generate or fetch it by name")
    run.add_argument("--iterations", required=True, type=int, metavar="N", help="number of sampler steps")
    run.add_argument("--seed", required=True, type=int, metavar="S", help="seed of the chain")
    run.add_argument("--out", required=True, metavar="PATH", help="trace file: .parquet or .csv")
    run.add_argument("--workers", type=int, default=default["workers"], metavar="W",
                     help="number of Dask workers (default %(default)s)")
    run.add_argument("--threads", type=int, default=default["threads"], metavar="T",
                     help="threads per worker of the embedded Dask cluster, for Dask and numba/BLAS "
                          "(default %(default)s)")
    run.add_argument("--name", metavar="NAME",
                     help="name of the run in the trace's algorithm column, e.g. a workflow variant "
                          "(default: --algorithm)")
    run.add_argument("--scheduler", metavar="ADDRESS",
                     help="existing Dask scheduler, e.g. tcp://host:8786 (default: $DASK_SCHEDULER_ADDRESS)")
    run.add_argument("--time-budget", type=float, default=default["time_budget"], metavar="SECONDS",
                     help="stop once the cumulative sampler time exceeds this (default: no limit)")
    run.add_argument("--alpha", type=float, default=default["alpha"], metavar="A",
                     help="DP concentration (default %(default)s)")
    run.add_argument("--init-clusters", type=int, default=default["init_clusters"], metavar="K",
                     help="initial clusters (default %(default)s)")
    run.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                     help="algorithm option, repeatable (values parsed as int, then float, else string)")
    run.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                     help="run the sampler briefly on a few points first, off the clock, so that "
                          "time_s excludes numba compilation (default: on)")
    run.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="progress bar on stderr (default: when stderr is a terminal)")
    run.set_defaults(func=_cmd_run)

    summ = sub.add_parser("summarize", help="one row per run from trace files",
                          description="Summarise trace files into one CSV row per run (written atomically).")
    summ.add_argument("traces", nargs="+", metavar="TRACE", help="trace files (.parquet or .csv)")
    summ.add_argument("--out", required=True, metavar="PATH", help="summary CSV")
    summ.set_defaults(func=_cmd_summarize)

    rep = sub.add_parser("report", help="HTML comparison report from trace files",
                         description="Build the self-contained HTML comparison report (figures embedded, "
                                     "opens offline) from trace files; written atomically.")
    rep.add_argument("traces", nargs="+", metavar="TRACE", help="trace files (.parquet or .csv)")
    rep.add_argument("--out", required=True, metavar="PATH", help="HTML file, e.g. results/report/index.html")
    shown = rep.add_mutually_exclusive_group()
    shown.add_argument("--config", metavar="CONFIG", help="workflow config file (YAML or JSON) to show in the report")
    shown.add_argument("--config-json", metavar="JSON", help="the same, given inline as a JSON object")
    rep.set_defaults(func=_cmd_report)

    lst = sub.add_parser("list", help="list algorithms and datasets",
                         description="List the registered algorithms (exact or not) and datasets.")
    lst.set_defaults(func=_cmd_list)
    return parser


def _cmd_run(args) -> int:
    from dpmmbench.reports.traces import check_trace_path, remove_stale_temporaries, write_trace

    from . import driver

    # Before any work: a bad destination or option must not cost a run.
    out = check_trace_path(args.out)
    options = {}
    for text in args.option:
        key, value = parse_option(text)
        if key in options:
            raise ValueError(f"option {key!r} given twice")
        options[key] = value
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    # This command owns --out: temporary files next to it are left by an earlier, killed run.
    remove_stale_temporaries(out)

    trace, meta = driver.run(args.algorithm, args.dataset, args.iterations, seed=args.seed,
                             workers=args.workers, scheduler=args.scheduler, time_budget=args.time_budget,
                             alpha=args.alpha, init_clusters=args.init_clusters, options=options,
                             progress=progress, warmup=args.warmup, threads=args.threads, name=args.name,
                             data_file=args.data_file)
    meta["command"] = ["dpmmbench", *args.argv]
    write_trace(trace, out, meta)
    last = trace.iloc[-1]
    print(f"{out}: {meta['algorithm']} on {meta['dataset']}, {meta['iterations']} iterations in "
          f"{last['time_s']:.3g} s, {last['n_clusters']} clusters, log joint {last['log_joint']:.6g}")
    return 0


def _cmd_summarize(args) -> int:
    from pathlib import Path

    from dpmmbench.reports.summary import summarize
    from dpmmbench.reports.traces import atomic_write

    out = Path(args.out)
    if out.suffix != ".csv":
        raise ValueError(f"--out must end in .csv, got {args.out!r}")
    table = summarize(args.traces)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, lambda f: f.write(table.to_csv(index=False).encode()))
    print(table.to_string(index=False))
    return 0


def _cmd_report(args) -> int:
    import json
    from pathlib import Path

    from dpmmbench.reports.report import build_report

    out = Path(args.out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"--out must end in .html, got {args.out!r}")
    config = None
    if args.config is not None:
        import yaml

        try:
            config = yaml.safe_load(Path(args.config).read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ValueError(f"--config {args.config}: not valid YAML/JSON ({exc})") from None
    elif args.config_json is not None:
        try:
            config = json.loads(args.config_json)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--config-json: not valid JSON ({exc})") from None
    if config is not None and not isinstance(config, dict):
        raise ValueError(f"the config must be a mapping of keys to values, got {type(config).__name__}")
    build_report(args.traces, out, config=config)
    print(f"{out}: report on {len(args.traces)} trace(s)")
    return 0


def _cmd_list(args) -> int:
    from dpmmbench import algorithms
    from dpmmbench import datasets

    print("algorithms:")
    for name in algorithms.available():
        print(f"  {name:<20} exact={algorithms.get(name).exact}")
    print("datasets:")
    describe = getattr(datasets, "describe", None)
    for name in datasets.available():
        text = describe(name) if describe is not None else ""
        if isinstance(text, dict):
            text = text.get("description", "")
        text = _one_line(text)
        print(f"  {name:<20} {text}".rstrip())
    return 0


def _one_line(text) -> str:
    return " ".join(str(text or "").split())


def main(argv=None) -> int:
    """Entry point of ``dpmmbench``; returns the exit code.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 2 on a user error, 130 when interrupted.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help or a usage error, already printed by argparse
        return exc.code if isinstance(exc.code, int) else 2
    args.argv = argv
    try:
        return args.func(args)
    except BrokenPipeError:
        # Output piped into e.g. `head`, which stopped reading: not an error worth a message.
        # Point stdout at devnull so that flushing it at exit cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        if args.traceback:
            raise
        print("dpmmbench: interrupted", file=sys.stderr)
        return 130
    # Library code reports bad input as ValueError/TypeError (unknown names and options,
    # bad values, NaN data), LookupError (registries) or OSError (files, scheduler).
    except (ValueError, TypeError, LookupError, OSError) as exc:
        if args.traceback:
            raise
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"dpmmbench: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
