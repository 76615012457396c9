"""The ``dpmmbench`` command line.

::

    dpmmbench run --algorithm gibbs --dataset "synth-chang2013?n=2000" --iterations 100 \\
                  --seed 0 --out results/traces/gibbs.parquet [--workers W] [--threads T] [--scheduler ADDR]
                  [--time-budget S] [--alpha A] [--alpha-prior SHAPE RATE] [--init-clusters K]
                  [--option key=value ...] [--name NAME] [--data-file PREPROCESSED.npz]
                  [--test-fraction F] [--split-seed S] [--heldout-draws D]
    dpmmbench run --spec JSON --out PATH      (the whole run as one spec, as a workflow's trace records it)
    dpmmbench summarize TRACE... --out summary.csv [--runs runs.csv] [--target-tolerance F]
    dpmmbench report TRACE... --out results/report/index.html [--config CONFIG.yaml] [--target-tolerance F]
    dpmmbench list
    dpmmbench check ALGORITHM [--samples N] [--chains C] [--seed S] [--no-progress]

Every user mistake ends with one line, ``dpmmbench: error: <message>``, on stderr and the
exit code of its class (:data:`EXIT_CODES`, also in ``dpmmbench --help``), and no file at
``--out``; everything that can be checked is checked before any work starts
(``--traceback`` shows the full traceback instead, for debugging). A run that fails once its
chain has started leaves the rows so far at ``--out``, with status ``failed``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import contextmanager

from .errors import EXIT_CODES, DataError, classify, message, writable, write_to
from .service_client import SERVICE_VARIABLE

_EPILOG = """exit codes:
  0    success
  1    internal error (a bug: the traceback is shown); for `check`: the sampler failed a check
       or declares exact but is not
  2    usage: unknown command, algorithm or option; a missing or invalid option value
  3    data: bad dataset name or parameters; a data or trace file missing, unreadable,
       corrupt, of another dataset, or with values its family refuses
  4    output: --out cannot be written (checked before any work starts)
  5    cluster: the Dask scheduler did not answer; a worker or a shard was lost mid-run
       (the rows recorded so far are written to --out with status "failed")
  130  interrupted (Ctrl-C)
Every error is one line on stderr; --traceback shows the traceback instead."""


class _Parser(argparse.ArgumentParser):
    """argparse, but every usage error reads ``dpmmbench: error: ...`` (also in subcommands),
    and ``run`` takes either ``--spec`` or the run's own flags (:func:`_spec_or_flags`)."""

    def error(self, message):
        # One line: the usage is one `--help` away.
        message = " ".join(message.split())
        self.exit(EXIT_CODES["usage"], f"dpmmbench: error: {message} (see `{self.prog} --help`)\n")

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if self.prog.endswith(" run"):
            _spec_or_flags(self, namespace, sys.argv[1:] if args is None else list(args))
        return namespace, extras


#: ``run``'s arguments that are required unless ``--spec`` gives the run (``--out`` always is)
_REQUIRED = ("algorithm", "dataset", "iterations", "seed")
#: ``run``'s arguments that are not the run's fields (``--spec`` leaves them free)
_NOT_FIELDS = ("help", "spec", "out", "progress")


def _spec_or_flags(parser, namespace, arg_strings) -> None:
    """Check that ``run`` got ``--spec`` or the run's own required flags, not both; else
    end as argparse ends a usage error (argparse cannot say "required unless")."""
    spec = getattr(namespace, "spec", None)
    required = ("out",) if spec is not None else (*_REQUIRED, "out")
    missing = [action.option_strings[0] for action in parser._actions
               if action.dest in required and getattr(namespace, action.dest, None) is None]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    if spec is None:
        return
    # a unique prefix of a flag names it (argparse took it so); a value never starts with --
    flags = [flag for action in parser._actions if action.dest not in _NOT_FIELDS for flag in action.option_strings]
    given = sorted({flag for word in arg_strings if word.startswith("--")
                    for flag in flags if flag.startswith(word.partition("=")[0])})
    if given:
        parser.error(f"--spec gives the whole run; leave out {', '.join(given)}")


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


def build_parser(defaults=None) -> argparse.ArgumentParser:
    """The argument parser of ``dpmmbench`` (``run``, ``summarize``, ``report`` and ``list``).

    The run parameters' defaults come from :data:`algorithms.constraints.RUN_DEFAULTS`;
    their values are checked where the run is specified (:class:`workflows.driver.RunSpec`), not here.

    Parameters
    ----------
    defaults : mapping, optional
        The run parameters' defaults instead (:func:`run_request` leaves them out).
    """
    if defaults is None:
        from dpmmbench.algorithms.constraints import RUN_DEFAULTS as defaults
    default = defaults
    parser = _Parser(prog="dpmmbench", description="Benchmark suite for Dirichlet process mixture model inference.",
                     epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traceback", "--debug", action="store_true",
                        help="show full tracebacks on errors, and Dask's log (debugging)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run one chain and write its trace",
                         description="Run one chain (algorithm, dataset, seed, workers) and write its trace "
                                     "(one row per iteration) atomically to --out.",
                         epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    # required unless --spec gives the run (checked by _spec_or_flags)
    run.add_argument("--spec", metavar="JSON",
                     help="the whole run as one JSON object (RunSpec.to_json, as a workflow's trace records its "
                          "command), instead of the run's flags; with --out (and --progress) only")
    run.add_argument("--algorithm", metavar="NAME", help="registry name (see `dpmmbench list`)")
    run.add_argument("--dataset", metavar="NAME",
                     help='dataset name, with parameters, e.g. "synth-chang2013?n=2000&seed=3"')
    run.add_argument("--data-file", metavar="PATH",
                     help="the dataset preprocessed into an .npz (`python -m dpmmbench.datasets preprocess`); "
                          "default: generate or fetch it by name")
    run.add_argument("--iterations", type=int, metavar="N", help="number of sampler steps")
    run.add_argument("--seed", type=int, metavar="S", help="seed of the chain")
    run.add_argument("--out", metavar="PATH", help="trace file: .parquet or .csv")
    run.add_argument("--workers", type=int, default=default["workers"], metavar="W",
                     help="number of Dask workers (default %(default)s)")
    run.add_argument("--threads", type=int, default=default["threads"], metavar="T",
                     help="threads per worker of the embedded Dask cluster, for Dask and numba/BLAS "
                          "(default %(default)s)")
    run.add_argument("--name", metavar="NAME",
                     help="the run's name (its trace's name column), e.g. a workflow variant "
                          "(default: --algorithm with its options that differ from the defaults, "
                          "e.g. search[beam=10])")
    run.add_argument("--scheduler", metavar="ADDRESS",
                     help="existing Dask scheduler, e.g. tcp://host:8786 (default: $DASK_SCHEDULER_ADDRESS)")
    run.add_argument("--time-budget", type=float, default=default["time_budget"], metavar="SECONDS",
                     help="stop once the cumulative sampler time exceeds this (default: no limit)")
    run.add_argument("--alpha", type=float, default=default["alpha"], metavar="A",
                     help="DP concentration, the starting value when it is learned (default %(default)s)")
    run.add_argument("--alpha-prior", type=float, nargs=2, default=default["alpha_prior"], metavar=("SHAPE", "RATE"),
                     help="learn alpha under a Gamma(SHAPE, RATE) prior (rate parameterisation), resampled "
                          "every step (default: alpha fixed)")
    run.add_argument("--test-fraction", type=float, default=default["test_fraction"], metavar="F",
                     help="fraction of the points held out to score the posterior predictive density, "
                          "in [0, 0.5] (default %(default)s)")
    run.add_argument("--split-seed", type=int, default=default["split_seed"], metavar="S",
                     help="seed of the held-out split (default %(default)s)")
    run.add_argument("--heldout-draws", type=int, default=default["heldout_draws"], metavar="D",
                     help="last states of the chain whose predictive densities are averaged "
                          "(default %(default)s)")
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

    summ = sub.add_parser("summarize", help="statistics over chains (and one row per run) from trace files",
                          description="Summarise trace files into one CSV row per dataset, algorithm and "
                                      "workers (statistics over its chains: intervals, R-hat, ESS, time to "
                                      "target), and optionally one row per run (written atomically).")
    summ.add_argument("traces", nargs="+", metavar="TRACE", help="trace files (.parquet or .csv)")
    summ.add_argument("--out", required=True, metavar="PATH", help="summary CSV")
    summ.add_argument("--runs", metavar="PATH", help="per-run CSV (e.g. results/runs.csv)")
    summ.add_argument("--target-tolerance", type=_tolerance, default=None, metavar="F",
                      help="time to target: the first time a chain's log joint is within this fraction of "
                           "the best any method reached on the dataset (default: 0.001, i.e. 0.1 %%)")
    summ.set_defaults(func=_cmd_summarize)

    rep = sub.add_parser("report", help="HTML comparison report from trace files",
                         description="Build the self-contained HTML comparison report (figures embedded, "
                                     "opens offline) from trace files; written atomically.")
    rep.add_argument("traces", nargs="+", metavar="TRACE", help="trace files (.parquet or .csv)")
    rep.add_argument("--out", required=True, metavar="PATH", help="HTML file, e.g. results/report/index.html")
    shown = rep.add_mutually_exclusive_group()
    shown.add_argument("--config", metavar="CONFIG", help="workflow config file (YAML or JSON) to show in the report")
    shown.add_argument("--config-json", metavar="JSON", help="the same, given inline as a JSON object")
    rep.add_argument("--priors", metavar="CSV", help="prior-sensitivity table (results/priors.csv) to show")
    rep.add_argument("--target-tolerance", type=_tolerance, default=None, metavar="F",
                     help="time to target's tolerance, as for summarize (default: 0.001)")
    rep.set_defaults(func=_cmd_report)

    lst = sub.add_parser("list", help="list algorithms and datasets",
                         description="List the registered algorithms (exact or not) and datasets.")
    lst.set_defaults(func=_cmd_list)

    chk = sub.add_parser("check", help="certify a sampler: conformance, bad input, exactness",
                         description="Run the suite's conformance, bad-input and exactness checks on one sampler: "
                                     "its long-run partition frequencies against the posterior enumerated on tiny "
                                     "problems (docs/algorithms.md section 9). Exit 1 when it fails a check or "
                                     "declares exact but is not.")
    chk.add_argument("algorithm", help="registry name (see `dpmmbench list`)")
    chk.add_argument("--samples", type=int, default=None, metavar="N",
                     help="thinned samples per chain (default 1500; fewer checks less finely, never more loosely)")
    chk.add_argument("--chains", type=int, default=None, metavar="C", help="independent chains per problem (default 8)")
    chk.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the first chain")
    chk.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    chk.set_defaults(func=_cmd_check)
    return parser


def _cmd_run(args) -> int:
    from . import driver

    # Before any work: a bad destination or option must not cost a run (the driver checks
    # the rest, and the data, before it starts a cluster).
    out = writable(args.out, trace=True)
    spec = driver.RunSpec.from_dict(spec_fields(args))
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    with _quiet_dask(not args.traceback):
        print(driver.execute(spec, out, progress=progress, command=["dpmmbench", *args.argv]))
    return 0


#: fields of a run spec (:meth:`workflows.driver.RunSpec.from_dict`) that ``run`` takes as flags of their name
_SPEC_FLAGS = ("algorithm", "dataset", "seed", "workers", "threads", "name", "scheduler", "alpha", "alpha_prior",
               "init_clusters", "data_file", "test_fraction", "split_seed", "heldout_draws", "warmup")


def spec_fields(args) -> dict:
    """The run spec of parsed ``run`` arguments, as :meth:`workflows.driver.RunSpec.to_dict`
    writes it (the CLI is one adapter from argv to a spec): ``--spec`` as it is, else the
    flags; flags left out (parsed without defaults) are left to the spec's defaults. Only the
    standard library is used.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    dict

    Raises
    ------
    ValueError
        An ``--option`` that is not ``key=value``, or one given twice; a ``--spec`` that
        is not a JSON object.
    """
    given = vars(args)
    if given.get("spec") is not None:
        try:
            spec = json.loads(given["spec"])
        except ValueError as exc:
            raise ValueError(f"--spec is not JSON: {exc}") from None
        if not isinstance(spec, dict):
            raise ValueError(f"--spec must be a JSON object, got {type(spec).__name__}")
        return spec
    fields = {key: given[key] for key in _SPEC_FLAGS if key in given}
    options = {}
    for text in given.get("option") or []:
        key, value = parse_option(text)
        if key in options:
            raise ValueError(f"option {key!r} given twice")
        options[key] = value
    fields["options"] = options
    fields["stop"] = {"iterations": given["iterations"], "seconds": given.get("time_budget")}
    return fields


def run_request(argv, cwd=None) -> dict:
    """The request a ``dpmmbench run`` job hands to the workflow's run service
    (:func:`workflows.service_client.forward`): its spec (:func:`spec_fields`), trace path,
    command line and working folder; parsed without importing numpy or Dask.

    Parameters
    ----------
    argv : list of str
        ``dpmmbench`` arguments (``["run", ...]``).
    cwd : str, optional
        The folder relative paths in ``argv`` are relative to; default this process's.

    Returns
    -------
    dict

    Raises
    ------
    SystemExit
        A usage error, told by argparse.
    ValueError
        A bad ``--option``.
    """
    import collections

    # no defaults here: they are the spec's, filled in where it is built (and importing them needs numpy)
    args = build_parser(defaults=collections.defaultdict(lambda: argparse.SUPPRESS)).parse_args(argv)
    return {"spec": spec_fields(args), "out": args.out, "command": ["dpmmbench", *argv], "cwd": cwd or os.getcwd()}


@contextmanager
def _quiet_dask(quiet: bool):
    """Keep Dask's log lines in this process (a worker's death, its restart) and the
    resource tracker's warning about a dead worker's semaphores off stderr, where an error
    is one line; restored afterwards (``--traceback`` keeps them)."""
    if not quiet:
        yield
        return
    import logging

    # All of this process's logging up to ERROR: distributed sets its loggers' levels when
    # it is imported, which comes later (the parameters are checked before).
    disabled, options = logging.root.manager.disable, list(sys.warnoptions)
    logging.disable(logging.ERROR)
    # The tracker process is started with this process's -W options.
    ignore = "ignore::UserWarning:multiprocessing.resource_tracker"
    if ignore not in sys.warnoptions:
        sys.warnoptions.append(ignore)
    try:
        yield
    finally:
        logging.disable(disabled)
        sys.warnoptions[:] = options


def _read_traces(read):
    """``read()``, whatever reading the trace files raises being a data error."""
    try:
        return read()
    except (ValueError, OSError, LookupError) as exc:
        raise DataError(f"trace files: {exc}") from exc


def _tolerance(text) -> float:
    """``--target-tolerance``: a fraction in [0, 1)."""
    from dpmmbench.reports.chains import check_tolerance

    try:
        return check_tolerance(float(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cmd_summarize(args) -> int:
    from pathlib import Path

    from dpmmbench.reports.chains import TARGET_TOLERANCE
    from dpmmbench.reports.runs import read_runs
    from dpmmbench.reports.summary import runs_table, summary_table
    from dpmmbench.reports.traces import atomic_write

    outs = [Path(args.out)] + ([Path(args.runs)] if args.runs else [])
    for flag, out in zip(("--out", "--runs"), outs):
        if out.suffix != ".csv":
            raise ValueError(f"{flag} must end in .csv, got {str(out)!r}")
        writable(out)
    frame, runs = _read_traces(lambda: read_runs(args.traces))
    tolerance = TARGET_TOLERANCE if args.target_tolerance is None else args.target_tolerance
    tables = [summary_table(frame, runs, tolerance)] + ([runs_table(runs)] if args.runs else [])
    for out, table in zip(outs, tables):
        def write(out=out, table=table):
            out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(out, lambda f: f.write(table.to_csv(index=False).encode()))

        write_to(out, write)
    shown = ["dataset", "name", "workers", "chains", "final_log_joint", "rhat_log_joint", "ess_per_s",
             "time_to_target_s", "heldout_lpd"]
    print(tables[0][shown].to_string(index=False))
    return 0


def _cmd_report(args) -> int:
    import json
    from pathlib import Path

    from dpmmbench.reports.report import build_report

    out = Path(args.out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"--out must end in .html, got {args.out!r}")
    writable(out)
    config = None
    if args.config is not None:
        import yaml

        try:
            config = yaml.safe_load(Path(args.config).read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ValueError(f"--config {args.config}: not valid YAML/JSON ({exc})") from None
        except OSError as exc:
            raise ValueError(f"--config {args.config}: cannot read it ({exc.strerror or exc})") from None
    elif args.config_json is not None:
        try:
            config = json.loads(args.config_json)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--config-json: not valid JSON ({exc})") from None
    if config is not None and not isinstance(config, dict):
        raise ValueError(f"the config must be a mapping of keys to values, got {type(config).__name__}")
    tolerance = {} if args.target_tolerance is None else {"target_tolerance": args.target_tolerance}
    _read_traces(lambda: build_report(args.traces, out, config=config, priors=args.priors, **tolerance))
    print(f"{out}: report on {len(args.traces)} trace(s)")
    return 0


def _cmd_list(args) -> int:
    from dpmmbench import algorithms
    from dpmmbench import datasets

    print("algorithms:")
    from_plugin = algorithms.plugins()
    for name in algorithms.available():
        cls = algorithms.get(name)
        print(f"  {name:<20} exact={cls.exact}" + ("  peer (another library's method)" if cls.external else "")
              + (f"  plugin from {from_plugin[name]}" if name in from_plugin else ""))
    for name, hint in algorithms.missing().items():
        print(f"  {name:<20} peer, not installed: {hint}")
    print("datasets:")
    from_plugin = datasets.plugins()
    for name in datasets.available():
        try:
            text = _one_line(datasets.describe(name)["description"])
        except Exception as exc:  # noqa: BLE001 -- a plugin's describe() must not end the listing
            text = f"(cannot describe it: {type(exc).__name__}: {_one_line(exc)})"
        print(f"  {name:<20} {text}" + (f"  (plugin from {from_plugin[name]})" if name in from_plugin else ""))
    refused = {**algorithms.refused_plugins(), **datasets.refused_plugins()}.values()
    if refused:
        print("plugins left out:")
        for reason in refused:
            print(f"  {reason}")
    return 0


def _cmd_check(args) -> int:
    from dpmmbench.algorithms import certify

    def progress(problem, chain, chains):
        bar = "#" * chain + "." * (chains - chain)
        print(f"\r  {problem:<10} [{bar}] chain {chain}/{chains}", end="\n" if chain == chains else "",
              file=sys.stderr, flush=True)

    cert = certify.certify(args.algorithm, samples=certify.SAMPLES if args.samples is None else args.samples,
                           chains=certify.CHAINS if args.chains is None else args.chains, seed=args.seed,
                           progress=None if args.no_progress else progress)
    print(f"{cert.algorithm}: declares exact={cert.exact}")
    for finding in cert.findings:
        if not finding.passed:
            print(f"  FAILED {finding.check}: {finding.detail}")
    passed = sum(f.passed for f in cert.findings)
    print(f"  conformance and bad input: {passed} of {len(cert.findings)} checks passed")
    for problem, res in cert.exactness.items():
        print(f"  {problem:<10} TV {res.tv:.4f}  threshold {res.threshold:.4f}  "
              f"({res.n_samples} samples)  {'within' if res.passed else 'beyond'} the threshold")
    print(f"verdict: {cert.verdict}")
    return 0 if cert.passed else 1


def _one_line(text) -> str:
    return " ".join(str(text or "").split())


def main(argv=None) -> int:
    """Entry point of ``dpmmbench``; returns the exit code.

    When ``$DPMMBENCH_SERVICE`` names a workflow's run service (:mod:`workflows.service`),
    ``dpmmbench run`` hands its run request (:func:`run_request`) to it and relays its output
    and exit code, having imported nothing heavy; a service that does not answer is a
    cluster error (exit 5).

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, else the code of the mistake's class (:data:`EXIT_CODES`), after one
        line on stderr; an unexpected exception (a bug) propagates with its traceback.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    service = os.environ.get(SERVICE_VARIABLE)
    if service and _command(argv) == "run" and not {"-h", "--help"} & set(argv):
        return _forward(argv, service)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help or a usage error, already printed by argparse
        return exc.code if isinstance(exc.code, int) else EXIT_CODES["usage"]
    args.argv = argv
    try:
        return args.func(args)
    except BrokenPipeError:
        # Output piped into e.g. `head`, which stopped reading: not an error worth a message.
        # Point stdout at devnull so that flushing it at exit cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except BaseException as exc:
        kind = classify(exc)
        if kind is None or args.traceback:
            raise
        print(f"dpmmbench: {message(exc, kind)}", file=sys.stderr)
        return EXIT_CODES[kind]


def _command(argv) -> str | None:
    """The subcommand ``argv`` names (its first word after the global flags), if any."""
    return next((word for word in argv if not word.startswith("-")), None)


def _forward(argv, service) -> int:
    """``dpmmbench run`` through the run service ``service``: its output relayed, its exit code."""
    from .service_client import relay

    try:
        request = run_request(argv)
    except SystemExit as exc:  # a usage error, already printed by argparse
        return exc.code if isinstance(exc.code, int) else EXIT_CODES["usage"]
    except ValueError as exc:  # a bad --option or --spec
        print(f"dpmmbench: {message(exc, 'usage')}", file=sys.stderr)
        return EXIT_CODES["usage"]
    return relay(request, service)


if __name__ == "__main__":
    sys.exit(main())
