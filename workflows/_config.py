"""A workflow config: what its JSON schema cannot check, and the run grid it describes.

The schema (``workflows/schemas/config.schema.yaml``) checks the config's shape and keys; a
YAML float such as ``.nan`` or ``.inf`` passes any numeric bound of a JSON schema, and an
integral float (``10.0``) passes ``type: integer``. :func:`check_config` is everything the
workflow checks after the schema, before any job (``workflows/common.smk`` calls it):
:func:`check_algorithms` checks every algorithm name against the registry (an optional peer
whose library is missing is named with the command that installs it), :func:`check_values`
checks every run parameter against its declared constraint
(:data:`~dpmmbench.algorithms.constraints.RUN_PARAMETERS`, the one table of their bounds),
parses every dataset name, and compares ``init_clusters`` with each dataset's size where the
name tells it without loading; then the variants and the options, and every run of the grid
is built as the value the run service executes (:class:`~dpmmbench.workflows.driver.RunSpec`,
which checks it). The grid's run names, what each of its columns is and each run's spec
(:func:`run_names`, :func:`run_column`, :func:`run_spec`) are read here too, for the workflow
and its check alike: the workflow's job sends the spec this module built, as JSON.
"""
from __future__ import annotations

from numbers import Integral

from dpmmbench import algorithms, datasets
from dpmmbench.algorithms.constraints import RUN_DEFAULTS, RUN_PARAMETERS, Interval, check_value, resolve_options
from dpmmbench.datasets.split import heldout_count
from dpmmbench.reports.papers import PAPERS
from dpmmbench.reports.chains import check_tolerance

from . import cluster
from .driver import RunSpec


def check_run_parameter(where: str, name: str, value):
    """Return the run parameter ``name`` given at config key ``where``, checked, else raise.

    Parameters
    ----------
    where : str
        The config key, for the message (e.g. ``"variants: fast: iterations"``).
    name : str
        A key of ``RUN_PARAMETERS``.
    value : object

    Raises
    ------
    TypeError, ValueError
        The message starts with ``config 'where'`` and names the problem. An integer
        parameter must be written as an integer: the command line of a run would get
        ``10.0``.
    """
    constraint = RUN_PARAMETERS[name].constraint
    members = constraint if isinstance(constraint, list) else [constraint]
    integral = any(isinstance(m, Interval) and issubclass(m.type, Integral) for m in members)
    if integral and isinstance(value, float):
        raise TypeError(f"config '{where}' must be an integer, got {value!r}")
    return check_value(f"config '{where}'", value, constraint)


def algorithm_names(config: dict) -> dict[str, str]:
    """Every registry name a config uses, with the first config key that uses it.

    Parameters
    ----------
    config : dict
        The workflow config, after ``snakemake.utils.validate`` against the schema.

    Returns
    -------
    dict
        Registry name -> config key: the names of ``algorithms`` (none for ``"all"``, which
        selects from the registry), the keys of ``options`` and each variant's ``algorithm``
        (key ``"variants: NAME"``), in that order.
    """
    names = {}
    listed = config.get("algorithms")
    for name in listed if isinstance(listed, list) else []:
        names.setdefault(name, "algorithms")
    for name in config.get("options") or {}:
        names.setdefault(name, "options")
    for variant, spec in (config.get("variants") or {}).items():
        names.setdefault(spec["algorithm"], f"variants: {variant}")
    return names


def check_algorithms(config: dict) -> None:
    """Check that every algorithm the config names (:func:`algorithm_names`) can run here.

    Parameters
    ----------
    config : dict
        The workflow config, after ``snakemake.utils.validate`` against the schema.

    Raises
    ------
    ValueError
        One line. An unknown name: ``config 'KEY': unknown algorithm ...`` with the
        available ones. Else every optional peer whose library is not installed, as
        ``config 'KEY': algorithm 'NAME' needs the 'LIBRARY' library, which is not
        installed; install it with ...`` (the registry's message), separated by `` | ``: a
        config may name several peers this machine lacks, and the user learns at once what
        to install instead of one peer per attempt.
    """
    names = algorithm_names(config)
    missing = algorithms.missing()
    not_installed = []
    for name, where in names.items():
        try:
            algorithms.get(name)
        except ValueError as exc:
            if name not in missing:
                raise ValueError(f"config '{where}': {exc}") from None
            not_installed.append(f"config '{where}': {exc}")
    if not_installed:
        raise ValueError(" | ".join(not_installed))  # the hints hold semicolons of their own


def check_values(config: dict) -> None:
    """Check the values of a config that passed the schema (see the module docstring).

    Parameters
    ----------
    config : dict
        The workflow config, after ``snakemake.utils.validate`` against the schema.

    Raises
    ------
    TypeError, ValueError
        The first bad value; the message names its config key and the problem.
    """
    if "reproduces" in config and config["reproduces"] not in PAPERS:
        raise ValueError(f"config 'reproduces': unknown paper {config['reproduces']!r}; known: {sorted(PAPERS)}")
    for key in ("alpha", "alpha_prior", "init_clusters", "iterations", "time_budget", "test_fraction",
                "split_seed", "heldout_draws"):
        if key in config:
            check_run_parameter(key, key, config[key])
    for i, seed in enumerate(config.get("seeds", [])):
        check_run_parameter(f"seeds[{i}]", "seed", seed)
    if "target_tolerance" in config:
        try:
            check_tolerance(config["target_tolerance"])
        except ValueError as exc:
            raise ValueError(f"config 'target_tolerance': {exc}") from None
    unknown = [key for key in config.get("grid_datasets", []) if key not in config.get("datasets", {})]
    if unknown:
        raise ValueError(f"config 'grid_datasets': unknown dataset key(s) {unknown}; the config's datasets are "
                         f"{list(config.get('datasets', {}))}")
    for key, seconds in (config.get("budgets") or {}).items():
        if key not in config.get("datasets", {}):
            raise ValueError(f"config 'budgets': {key!r} is not a dataset key; the config's datasets are "
                             f"{list(config.get('datasets', {}))}")
        check_run_parameter(f"budgets: {key}", "time_budget", seconds)
    for name, variant in (config.get("variants") or {}).items():
        for key in ("iterations", "time_budget", "alpha", "alpha_prior", "init_clusters"):
            if key in variant:
                check_run_parameter(f"variants: {name}: {key}", key, variant[key])
        for i, seed in enumerate(variant.get("seeds", [])):
            check_run_parameter(f"variants: {name}: seeds[{i}]", "seed", seed)
    dask = config.get("dask") or {}
    counts = [("dask: workers", dask.get("workers", []))]
    counts += [(f"variants: {name}: workers", v["workers"]) for name, v in (config.get("variants") or {}).items()
               if "workers" in v]
    for where, workers in counts:
        for i, count in enumerate(workers if isinstance(workers, list) else [workers]):
            check_run_parameter(where + (f"[{i}]" if isinstance(workers, list) else ""), "workers", count)
    if "threads" in dask:
        check_run_parameter("dask: threads", "threads", dask["threads"])
    if dask.get("scheduler") and dask.get("scheduler_file"):
        raise ValueError("config 'dask': give 'scheduler' or 'scheduler_file', not both (each names the existing "
                         "cluster to use)")
    # with neither, every run starts on a cluster the workflow starts, which must fit this machine
    if not dask.get("scheduler_file") and cluster.scheduler_address(dask.get("scheduler")) is None:
        threads = dask.get("threads", RUN_PARAMETERS["threads"].default)
        for where, workers in counts:
            for count in workers if isinstance(workers, list) else [workers]:
                try:
                    cluster.check_embedded(count, threads)
                except ValueError as exc:
                    raise ValueError(f"config '{where}': {exc}") from None
    test_fraction = config.get("test_fraction", RUN_PARAMETERS["test_fraction"].default)
    # where each dataset's largest start comes from: the config, or a variant that runs on it
    starts = {key: ("init_clusters", config.get("init_clusters", RUN_PARAMETERS["init_clusters"].default))
              for key in config.get("datasets", {})}
    for name, variant in (config.get("variants") or {}).items():
        for key in run_column(config, name)["datasets"] if "init_clusters" in variant else ():
            if key in starts and variant["init_clusters"] > starts[key][1]:
                starts[key] = (f"variants: {name}: init_clusters", variant["init_clusters"])
    for key, name in config.get("datasets", {}).items():
        try:
            # parses the name (bounded sizes, known parameters); loads and downloads nothing
            n = datasets.describe(name)["n"]
        except ValueError as exc:
            raise ValueError(f"config 'datasets': {key}: {exc}") from None
        # A text corpus's size is an upper bound (documents left empty are dropped when it
        # loads): a larger init_clusters is surely too large, a smaller one is checked by
        # the run itself (Sampler.init). The chains see the training part of the split.
        where, init_clusters = starts[key]
        if isinstance(n, Integral) and init_clusters > (n_train := n - heldout_count(n, test_fraction)):
            raise ValueError(f"config '{where}' = {init_clusters} exceeds the training points of dataset "
                             f"{key!r} ({name}: {n} points, {n_train} after holding out test_fraction = "
                             f"{test_fraction}); use at most {n_train}")


def selected_algorithms(config: dict) -> list[str]:
    """Registry names selected by the config's ``algorithms``.

    Parameters
    ----------
    config : dict
        The workflow config.

    Returns
    -------
    list of str
        For ``"all"``, the suite's own samplers (peers, which fit some families only, are
        named, or run as variants on the datasets they fit; so are plugins' algorithms, so
        that what is installed does not change a config's grid); else the list as it is (its
        names are checked by :func:`check_algorithms`).
    """
    names = config["algorithms"]
    if names == "all":
        return [name for name in algorithms.available(plugins=False) if not algorithms.get(name).external]
    return list(names)


def variants(config: dict) -> dict:
    """The config's ``variants``: run name -> ``{algorithm, options, ...}`` (empty if none);
    ``algorithm`` is the registry name."""
    return config.get("variants") or {}


def run_column(config: dict, name: str, dataset: str | None = None) -> dict:
    """What the grid's column ``name`` (a run name: a registry name or a variants key) is:
    its runs' settings.

    Parameters
    ----------
    config : dict
        The workflow config.
    name : str
        A run name of the config: a registry name, or a key of its ``variants``.
    dataset : str, optional
        A dataset key: the time budget is then that of its runs (the variant's own, else the
        dataset's entry of ``budgets``, else ``time_budget``).

    Returns
    -------
    dict
        ``algorithm`` (the registry name), ``options`` (the algorithm's ``options`` entry,
        then the variant's), ``datasets`` (the variant's, else ``grid_datasets``, else every
        dataset key), ``seeds``, ``iterations``, ``time_budget``, ``alpha``,
        ``alpha_prior`` and ``init_clusters`` (the variant's, else the config's, else the run
        defaults).

    Examples
    --------
    >>> from dpmmbench.workflows._config import run_column
    >>> config = {"datasets": {"a": "digits", "b": "reuters"}, "iterations": 100, "time_budget": 5,
    ...           "budgets": {"a": 20}, "variants": {"g-10s": {"algorithm": "gibbs", "time_budget": 10}}}
    >>> run_column(config, "gibbs", "a")["time_budget"], run_column(config, "gibbs", "b")["time_budget"]
    (20, 5)
    >>> run_column(config, "g-10s", "a")["time_budget"]
    10
    """
    variant = variants(config).get(name, {})
    algorithm = variant.get("algorithm", name)
    budgets = config.get("budgets") or {}
    return {
        "algorithm": algorithm,
        "options": {**config.get("options", {}).get(algorithm, {}), **variant.get("options", {})},
        "datasets": variant.get("datasets", list(config.get("grid_datasets", config["datasets"]))),
        "seeds": list(variant.get("seeds", config.get("seeds", []))),
        "iterations": variant.get("iterations", config["iterations"]),
        "time_budget": variant.get("time_budget", budgets.get(dataset, config.get("time_budget"))),
        "alpha": variant.get("alpha", config.get("alpha", RUN_DEFAULTS["alpha"])),
        "alpha_prior": variant.get("alpha_prior", config.get("alpha_prior", RUN_DEFAULTS["alpha_prior"])),
        "init_clusters": variant.get("init_clusters", config.get("init_clusters", RUN_DEFAULTS["init_clusters"])),
    }


def run_spec(config: dict, name: str, dataset: str, *, seed: int, workers: int, data_file: str | None = None,
             scheduler: str | None = None) -> RunSpec:
    """The run of column ``name`` on dataset key ``dataset``: the value the job sends, checked.

    Parameters
    ----------
    config : dict
        The workflow config.
    name : str
        A run name of the config: a registry name, or a key of its ``variants`` (then the
        spec's ``name``, its traces' ``name`` column).
    dataset : str
        A dataset key of the config.
    seed, workers : int
        The run's seed and Dask workers (the job's wildcards).
    data_file : str, optional
        The dataset preprocessed by the workflow's data rules (the job's input).
    scheduler : str, optional
        The existing Dask scheduler the run joins; default the config's ``dask: scheduler``.

    Returns
    -------
    RunSpec
        Its stop rule holds the column's ``iterations`` and the time budget of its runs on
        ``dataset`` (:func:`run_column`); threads, ``test_fraction``, ``split_seed`` and
        ``heldout_draws`` are the config's, else the run defaults.

    Raises
    ------
    TypeError, ValueError
        A value outside its constraint (:class:`~dpmmbench.workflows.driver.RunSpec`);
        :func:`check_config` has named the config key of any such value before.

    Examples
    --------
    >>> from dpmmbench.workflows._config import run_spec
    >>> config = {"datasets": {"a": "synth-chang2013?n=300"}, "iterations": 100, "budgets": {"a": 20}}
    >>> spec = run_spec(config, "gibbs", "a", seed=3, workers=1)
    >>> spec.dataset, spec.seed, spec.stop.iterations, spec.stop.seconds
    ('synth-chang2013?n=300', 3, 100, 20.0)
    """
    column = run_column(config, name, dataset)
    dask = config.get("dask") or {}
    alpha_prior = column["alpha_prior"]
    return RunSpec(column["algorithm"], config["datasets"][dataset], column["iterations"], seed=seed, workers=workers,
                   time_budget=column["time_budget"], alpha=column["alpha"],
                   alpha_prior=None if alpha_prior is None else tuple(alpha_prior),
                   init_clusters=column["init_clusters"], options=column["options"],
                   threads=dask.get("threads", RUN_DEFAULTS["threads"]),
                   name=None if name == column["algorithm"] else name, data_file=data_file,
                   scheduler=dask.get("scheduler") if scheduler is None else scheduler,
                   **{key: config.get(key, RUN_DEFAULTS[key])
                      for key in ("test_fraction", "split_seed", "heldout_draws")})


def run_names(config: dict) -> list[str]:
    """Every run name of the grid (a column of it): the selected registry names, then the variants' keys."""
    return selected_algorithms(config) + list(variants(config))


def check_config(config: dict) -> None:
    """Everything the workflow checks before any job, after the schema (``workflows/common.smk``).

    Unknown algorithm names and optional peers that are not installed
    (:func:`check_algorithms`), run parameters, dataset names and the paper of
    ``reproduces`` (:func:`check_values`),
    variants that clash with a registry name or name an unknown dataset key, an empty grid,
    unknown option names and bad option values.

    Parameters
    ----------
    config : dict
        The workflow config, after ``snakemake.utils.validate`` against the schema.

    Raises
    ------
    TypeError, ValueError
        The first problem; the message names its config key and the culprit.
    """
    check_algorithms(config)
    check_values(config)
    known = algorithms.available() + list(algorithms.missing())  # every registry name, installed or not
    for name, variant in variants(config).items():
        # a peer left out of "all" may be a variant of its own name (e.g. run on some datasets only)
        if name in known and (variant["algorithm"] != name or name in selected_algorithms(config)):
            raise ValueError(f"config 'variants': {name!r} is a registry algorithm; give the variant another name")
        missing = [d for d in variant.get("datasets", []) if d not in config["datasets"]]
        if missing:
            raise ValueError(f"config 'variants': {name}: unknown dataset key(s) {missing}; "
                             f"the config's datasets are {list(config['datasets'])}")
    names = run_names(config)
    if not names:
        raise ValueError("config selects no run: 'algorithms' is empty and there are no 'variants'")
    for name in names:
        column = run_column(config, name)
        cls = algorithms.get(column["algorithm"])
        where = f"config 'variants': {name}" if name in variants(config) else f"config 'options': {name}"
        try:
            resolve_options(cls.name, cls.options, column["options"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        # every run the column makes, as the value its job sends (seeds and workers are the
        # wildcards: the column's first seed and one worker stand for them, checked above)
        for dataset in column["datasets"]:
            try:
                run_spec(config, name, dataset, seed=(column["seeds"] or [RUN_DEFAULTS["seed"]])[0],
                         workers=RUN_DEFAULTS["workers"])
            except (TypeError, ValueError) as exc:
                raise ValueError(f"config: run {name!r} on {dataset!r}: {exc}") from None
