"""The Snakemake workflow: every config dry-runs its grid (read from the registry) without
downloading anything, the smoke config end to end on Dask, rejection of a bad config before
any job runs, and resuming a killed run."""
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from contextlib import suppress
from numbers import Integral
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from conftest import needs_config
from dpmmbench import algorithms
from dpmmbench.algorithms.constraints import RUN_PARAMETERS, Pair, check_parameter
from dpmmbench.reports.runs import run_name
from dpmmbench.reports.traces import read_trace
from dpmmbench.workflows._config import algorithm_names, check_algorithms, check_config, run_names

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "workflows" / "config").glob("*.yaml"))
SMOKE = ROOT / "workflows" / "config" / "smoke.yaml"


def job_specs(out: str) -> list[dict]:
    """The run spec of every run job a Snakemake ``-p`` run printed: the ``--spec`` JSON its
    command hands over (``workflows/common.smk`` ``job_args``), as a dict."""
    specs = []
    for line in out.splitlines():
        if "-m dpmmbench.workflows.service_client" in line or "-m dpmmbench.workflows.cli run" in line:
            words = shlex.split(line)
            specs.append(json.loads(words[words.index("--spec") + 1]))
    return specs


def snakemake_cmd(workdir, *args):
    return [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
            "--cores", "2", *args]


def snakemake(tmp_path, *args, env=None):
    return subprocess.run(snakemake_cmd(tmp_path, *args), capture_output=True, text=True, timeout=600, env=env)


def ours():
    """What "all" selects: the suite's own samplers (peers are named or run as variants)."""
    return [name for name in algorithms.available(plugins=False) if not algorithms.get(name).external]


def expected_grid(config):
    """(dataset key, run name, workers) of every run the config asks for, per seed: the
    registry's own algorithms ("all") or the listed ones, then the variants; algorithms that
    shard their data run at every worker count, the others at the smallest."""
    names = ours() if config["algorithms"] == "all" else list(config["algorithms"])
    workers = config.get("dask", {}).get("workers", 1)
    workers = sorted(workers) if isinstance(workers, list) else [workers]
    grid = []
    for name, spec in [(n, {"algorithm": n}) for n in names] + list(config.get("variants", {}).items()):
        own = spec.get("workers", workers)  # a variant may have its own worker counts
        own = sorted(own) if isinstance(own, list) else [own]
        counts = own if algorithms.get(spec["algorithm"]).supports_backend else own[:1]
        grid += [(d, name, w) for d in spec.get("datasets", config.get("grid_datasets", config["datasets"]))
                 for w in counts]
    return grid


def expected_runs(config):
    """How many runs the config asks for: its grid's, each with the variant's seeds or the config's."""
    own = {name: len(spec.get("seeds", config["seeds"])) for name, spec in config.get("variants", {}).items()}
    return sum(own.get(name, len(config["seeds"])) for _, name, _ in expected_grid(config))


def test_a_config_file_replaces_the_default_config(tmp_path):
    """Where the default config is present (as at the repository root), a config named with
    --configfile still defines the whole grid: Snakemake would merge the two otherwise."""
    (tmp_path / "workflows" / "config").mkdir(parents=True)
    (tmp_path / "workflows" / "config" / "default.yaml").write_text((ROOT / "workflows/config/default.yaml").read_text())
    res = snakemake(tmp_path, "-n", "--configfile", str(SMOKE))
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    config = yaml.safe_load(SMOKE.read_text())
    planned = re.search(r"^run_chain\s+(\d+)\s*$", res.stdout, re.MULTILINE)
    assert planned and int(planned.group(1)) == expected_runs(config)
    default = yaml.safe_load((ROOT / "workflows/config/default.yaml").read_text())
    assert not (set(default["datasets"]) - set(config["datasets"])) & set(re.findall(r"results/traces/([^/]+)/", res.stdout))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_config_passes_the_check_before_any_job_and_names_its_grid(path):
    """In-process, what the workflow checks of each config (the schema, then check_config),
    and its grid: the runs below plan exactly these."""
    config = yaml.safe_load(path.read_text())
    missing = {name for name in algorithm_names(config) if name in algorithms.missing()}
    if missing:  # the config check names them (test_a_missing_optional_peer_...)
        with pytest.raises(ValueError, match="not installed"):
            check_before_any_job(config)
        return
    check_before_any_job(config)
    assert sorted(run_names(config)) == sorted({name for _, name, _ in expected_grid(config)})


#: configs whose Snakemake dry run is in the fast loop: the default, the smoke run's and the
#: peers' (an optional peer named); the paper configs are parsed and checked above, and dry
#: run with the slow tests
DRY_RUN_FAST = {"default", "smoke", "peers"}


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem, marks=[needs_config(p)] + (
    [] if p.stem in DRY_RUN_FAST else [pytest.mark.slow])) for p in CONFIGS])
def test_every_config_dry_runs_its_grid_without_downloading(tmp_path, path):
    config = yaml.safe_load(path.read_text())
    data = tmp_path / "data"  # where a fetch would put its downloads
    res = snakemake(tmp_path, "-n", "-p", "--configfile", str(path), env=dict(os.environ, DPMMBENCH_DATA=str(data)))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    n_runs = expected_runs(config)
    planned = re.search(r"^run_chain\s+(\d+)\s*$", out, re.MULTILINE)
    assert planned and int(planned.group(1)) == n_runs
    threads = config.get("dask", {}).get("threads", 1)
    assert len([spec for spec in job_specs(out) if spec["threads"] == threads]) == n_runs
    assert not data.exists() and not (tmp_path / "data").exists()  # a dry run downloads nothing
    assert not (tmp_path / "results").exists()


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """The smoke config run once to the end; the tests below share its directory."""
    workdir = tmp_path_factory.mktemp("smoke")
    return workdir, snakemake(workdir, "--configfile", str(SMOKE))


@pytest.mark.slow
def test_smoke_config_end_to_end(smoke_run):
    workdir, res = smoke_run
    assert res.returncode == 0, res.stderr[-3000:]
    config = yaml.safe_load(SMOKE.read_text())
    summary = pd.read_csv(workdir / "results/summary.csv")
    runs = pd.read_csv(workdir / "results/runs.csv")
    # a run's name: its variant's, else the registry name with the config's non-default options
    named = {run_name(name, config["options"].get(name, {})) for name in ours()}
    assert set(summary["name"]) == set(runs["name"]) == named | set(config["variants"])
    assert "fsd[truncation=20]" in named and set(summary["algorithm"]) == set(ours()) | {
        v["algorithm"] for v in config["variants"].values()}
    assert len(runs) == expected_runs(config)
    # one row per (dataset, algorithm, workers), over its chains, with the statistics' columns
    assert len(config["seeds"]) > 1 and len(summary) == len(expected_grid(config))
    assert (summary["chains"] == len(config["seeds"])).all()
    for stem in ("final_log_joint", "final_vi", "final_nmi", "final_n_clusters", "heldout_lpd", "time_s",
                 "time_to_target_s"):
        assert {stem, f"{stem}_lo", f"{stem}_hi"} <= set(summary.columns), stem
    for column in ("rhat_log_joint", "rhat_n_clusters", "ess_bulk_log_joint", "ess_tail_log_joint", "ess_per_s"):
        assert column in summary, column
    gibbs = summary[(summary["name"] == "gibbs") & summary["dataset"].str.startswith("synth-chang2013")].iloc[0]
    assert not math.isnan(gibbs["rhat_log_joint"]) and gibbs["ess_bulk_log_joint"] > 0 and gibbs["ess_per_s"] > 0
    assert (summary.groupby("dataset")["reached"].max() >= 1).all()  # the best chain reaches its own level
    assert summary["final_log_joint"].notna().all()
    assert (summary.loc[summary["name"] != "search-decreasing", "iterations"] == 5).all()
    schedulers = set()
    for path in (workdir / "results/traces").rglob("*.parquet"):
        trace, meta = read_trace(path)
        # every run went through the workflow's one Dask cluster on the loopback interface, on
        # a worker of its own; the cluster has a worker per core (--cores 2, 1 thread each)
        assert meta["dask"]["embedded"] and meta["dask"]["shared"], path
        assert meta["dask"]["scheduler"].startswith("tcp://127.0.0.1:"), path
        assert meta["dask"]["n_workers"] == 2 and len(meta["dask"]["reserved"]) == 1 and meta["threads"] == 1
        assert meta["command"][:2] == ["dpmmbench", "run"]  # the job's command, not the service's
        schedulers.add(meta["dask"]["scheduler"])
        # the run's name is its trace folder's (a variant's), or the registry name there with its options
        given = path.parent.parent.name
        assert (trace["name"] == run_name(meta["algorithm"], meta["options"], given)).all()
        assert (trace["algorithm"] == meta["algorithm"]).all() and meta["name"] == trace["name"].iloc[0]
    assert len(schedulers) == 1
    # Snakemake's own measure of every run job's wall time
    assert len(list((workdir / "results/jobs").rglob("*.tsv"))) == len(runs)
    variant = read_trace(next((workdir / "results/traces").glob("*/search-decreasing/w1/seed0.parquet")))[1]
    assert variant["algorithm"] == "search" and variant["options"]["order"] == "decreasing"
    # every run scored its dataset's held-out points; the learned-alpha variant moved alpha
    assert runs["heldout_lpd"].map(math.isfinite).all() and summary["heldout_lpd"].map(math.isfinite).all()
    learned = runs["name"] == "gibbs-learned-alpha"
    assert learned.sum() == len(config["seeds"]) and (runs.loc[learned, "alpha"] != config["alpha"]).all()
    assert (runs.loc[~learned, "alpha"] == config["alpha"]).all()
    trace, meta = read_trace(next((workdir / "results/traces").glob("*/gibbs-learned-alpha/w1/seed0.parquet")))
    assert meta["alpha_prior"] == [1.0, 1.0] and trace["alpha"].nunique() > 1
    assert meta["test_fraction"] == config["test_fraction"] and meta["heldout_draws"] == config["heldout_draws"]
    assert meta["heldout_points"] == round(config["test_fraction"] * 300)  # chang2013-tiny
    # the prior-sensitivity experiment: every grid point, and its section in the report
    block = config["priors"]
    priors = pd.read_csv(workdir / "results/priors.csv")
    assert len(priors) == len(block["datasets"]) * 2 * (len(block["alphas"]) + 1) * len(block["seeds"])
    assert "<section id='priors'>" in (workdir / "results/report/index.html").read_text()


BAD_CONFIGS = [
    ({"iteration": 5}, "iteration"),
    ({"iterations": 0}, "iterations"),
    ({"seeds": "zero"}, "seeds"),
    ({"dask": {"workerz": 2}}, "workerz"),
    ({"dask": {"workers": 0}}, "['workers']"),
    ({"variants": {"gibbs": {"algorithm": "search"}}}, "'gibbs' is a registry algorithm"),
    ({"options": {"fsd": {"truncaton": 5}}}, "truncaton"),
    ({"datasets": {"x": "synth-chang2013?m=3"}}, "unknown parameter 'm'"),
    ({"alpha_prior": [1.0, 0.0]}, "alpha_prior"),
    ({"variants": {"g": {"algorithm": "gibbs", "alpha_prior": [1.0]}}}, "alpha_prior"),
    ({"variants": {"g": {"algorithm": "auxvar", "workers": [2, 0]}}}, "workers"),
    ({"dask": {"workers": 10**5}}, "config 'dask: workers': an embedded cluster of 100000 workers"),
    ({"variants": {"g": {"algorithm": "auxvar", "workers": [2, 10**5]}}}, "config 'variants: g: workers'"),
    ({"test_fraction": 0.6}, "test_fraction"),
    ({"heldout_draws": 0}, "heldout_draws"),
    ({"target_tolerance": 1.5}, "target_tolerance"),
    ({"target_tolerance": float("nan")}, "target_tolerance"),
    ({"dask": {"scheduler": "tcp://127.0.0.1:8786", "scheduler_file": "s.json"}}, "not both"),
    ({"budgets": {"nope": 3}}, "config 'budgets': 'nope' is not a dataset key"),
    ({"budgets": {"chang2013-tiny": 0}}, "budgets"),
    ({"grid_datasets": ["chang2013-tiny", "nope"]}, "config 'grid_datasets': unknown dataset key(s) ['nope']"),
]
BAD_IDS = [f"{next(iter(edit))}-{i}" for i, (edit, _) in enumerate(BAD_CONFIGS)]


def check_before_any_job(config):
    """What the workflow does with a config before any job (the Snakefile, then
    workflows/common.smk): the schema, then ``_config.check_config``."""
    validate(config, str(ROOT / "workflows/schemas/config.schema.yaml"))
    check_config(config)


@pytest.mark.parametrize("edit, message", BAD_CONFIGS, ids=BAD_IDS)
def test_bad_config_is_refused_naming_the_culprit(edit, message):
    config = {**yaml.safe_load(SMOKE.read_text()), **edit}
    with pytest.raises((WorkflowError, ValueError, TypeError)) as info:
        check_before_any_job(config)
    assert message in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize("edit, message", BAD_CONFIGS, ids=BAD_IDS)
def test_bad_config_stops_before_any_job(tmp_path, edit, message):
    config = {**yaml.safe_load(SMOKE.read_text()), **edit}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    res = snakemake(tmp_path, "--configfile", str(path))
    assert res.returncode != 0
    assert message in res.stdout + res.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("case", [3, 6], ids=["schema", "check_config"])
def test_a_bad_config_stops_snakemake_before_any_job(tmp_path, case):
    """The end-to-end path of a case the schema refuses and one the config check refuses (all
    of them run with the slow tests)."""
    test_bad_config_stops_before_any_job(tmp_path, *BAD_CONFIGS[case])


def test_config_schema_agrees_with_the_run_parameters():
    """The schema is the config file's boundary, RUN_PARAMETERS the runs': every run parameter
    the schema admits is a valid run parameter (the config may narrow a constraint, never
    widen it), and the schema declares no default of its own."""
    schema = yaml.safe_load((ROOT / "workflows/schemas/config.schema.yaml").read_text())
    props = schema["properties"]
    variant = props["variants"]["additionalProperties"]["properties"]
    dask = props["dask"]["properties"]
    prior = schema["$defs"]["alpha_prior"]
    assert props["alpha_prior"] == variant["alpha_prior"] == {"$ref": "#/$defs/alpha_prior"}
    (pair,) = [form for form in prior["oneOf"] if form["type"] == "array"]
    assert pair["minItems"] == pair["maxItems"] == 2 and {"type": "null"} in prior["oneOf"]
    nodes = {
        "seed": [props["seeds"]["items"]],
        "iterations": [props["iterations"], variant["iterations"]],
        "time_budget": [props["time_budget"], variant["time_budget"]],
        "alpha": [props["alpha"], variant["alpha"]],
        "alpha_prior": [pair["items"]],
        "init_clusters": [props["init_clusters"], variant["init_clusters"]],
        "workers": [form.get("items", form) for node in (dask["workers"], variant["workers"])
                    for form in node["oneOf"]],
        "threads": [dask["threads"]],
        "test_fraction": [props["test_fraction"]],
        "split_seed": [props["split_seed"]],
        "heldout_draws": [props["heldout_draws"]],
    }
    assert set(nodes) == set(RUN_PARAMETERS)
    assert "default" not in dask["workers"] and "default" not in prior
    for name, found in nodes.items():
        constraint = RUN_PARAMETERS[name].constraint
        (interval,) = [c for c in (constraint if isinstance(constraint, list) else [constraint]) if c is not None]
        of_pairs = isinstance(interval, Pair)  # the node is each member's, e.g. alpha_prior's shape and rate
        interval = interval.member if of_pairs else interval
        for node in found:
            assert "default" not in node, name
            assert node["type"] == ("integer" if issubclass(interval.type, Integral) else "number"), name
            if "minimum" in node:
                check_parameter(name, (node["minimum"],) * 2 if of_pairs else node["minimum"])  # the least is valid
            elif "exclusiveMinimum" in node:
                assert interval.left is None or node["exclusiveMinimum"] >= interval.left, name
            else:
                assert interval.left is None, f"{name}: the schema has no lower bound"
            assert "exclusiveMaximum" not in node, name
            if "maximum" in node:
                check_parameter(name, (node["maximum"],) * 2 if of_pairs else node["maximum"])  # the greatest is valid
            else:
                assert interval.right is None, f"{name}: the schema has no upper bound"


def test_unknown_algorithm_in_config_is_named(tmp_path):
    config = yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text())
    config["algorithms"] = ["gibbs", "gibs"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    res = snakemake(tmp_path, "-n", "--configfile", str(path))
    assert res.returncode != 0 and "config 'algorithms': unknown algorithm 'gibs'; available: " in res.stdout + res.stderr


PEERS = ROOT / "workflows" / "config" / "peers.yaml"

#: runs Snakemake with the libraries named on its command line hidden, as if not installed
#: (``importlib.util.find_spec`` answers None for a module set to None in ``sys.modules``)
_WITHOUT = """
import sys
hidden, sys.argv = sys.argv[1].split(","), ["snakemake", *sys.argv[2:]]
for library in hidden:
    sys.modules[library] = None
from snakemake.cli import main
main()
"""


def hide_library(monkeypatch, library):
    """``library`` is not installed, for this test (whether or not it is)."""
    monkeypatch.setitem(sys.modules, library, None)


@pytest.mark.parametrize("edit, where", [
    ({}, "algorithms"),  # peers.yaml as it is: dpgmm in 'algorithms' and in 'options'
    ({"algorithms": ["gibbs"]}, "options"),
    ({"algorithms": ["gibbs"], "options": {}, "variants": {"d": {"algorithm": "dpgmm"}}}, "variants: d"),
])
def test_a_missing_optional_peer_is_one_line_naming_it_and_its_install(monkeypatch, edit, where):
    """A config naming a known peer whose library is missing stops on one line that names the
    peer and the command that installs it (before, the workflow said "unknown algorithm")."""
    hide_library(monkeypatch, "dpgmm")
    config = {**yaml.safe_load(PEERS.read_text()), **edit}
    with pytest.raises(ValueError) as info:
        check_algorithms(config)
    message = str(info.value)
    assert "\n" not in message and "unknown" not in message
    assert (f"config '{where}': algorithm 'dpgmm' needs the 'dpgmm' library, which is not installed; "
            f"install it with pip install torch") in message
    assert algorithms.missing()["dpgmm"] in message


def test_every_missing_peer_of_a_config_is_named_and_an_unknown_name_still_says_unknown(monkeypatch):
    for library in ("bnpy", "bmcc", "dpgmm"):
        hide_library(monkeypatch, library)
    config = yaml.safe_load(PEERS.read_text())
    with pytest.raises(ValueError) as info:
        check_algorithms(config)
    message = str(info.value)
    assert "\n" not in message
    missing = algorithms.missing()
    parts = message.split(" | ")
    assert [part.split("'")[3] for part in parts] == ["bnpy-memovb", "bmcc", "dpgmm"]  # in the config's order
    for part, name in zip(parts, ["bnpy-memovb", "bmcc", "dpgmm"]):
        assert part.startswith(f"config 'algorithms': algorithm '{name}' needs") and part.endswith(missing[name])
    config["algorithms"] = ["gibbs", "gibs", "dpgmm"]  # a typo outranks a missing peer
    with pytest.raises(ValueError, match=r"^config 'algorithms': unknown algorithm 'gibs'; available: "):
        check_algorithms(config)
    check_algorithms(yaml.safe_load(SMOKE.read_text()))  # names no optional peer


def test_a_missing_optional_peer_stops_the_workflow_before_any_job(tmp_path, monkeypatch):
    """Snakemake itself, with the peers' libraries hidden (CI has them all installed): the
    config check stops it on one line naming each peer of peers.yaml and its install command,
    not on "unknown algorithm 'dpgmm'"."""
    libraries = ["bnpy", "bmcc", "dpgmm"]
    for library in libraries:
        hide_library(monkeypatch, library)  # here too, for the registry's hints
    cmd = [sys.executable, "-c", _WITHOUT, ",".join(libraries),
           *snakemake_cmd(tmp_path, "-n", "--configfile", str(PEERS))[3:]]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    assert "unknown algorithm" not in out
    missing = algorithms.missing()
    expected = " | ".join(f"config 'algorithms': algorithm '{name}' needs the '{library}' library, which is not "
                          f"installed; {missing[name]}"
                          for name, library in [("bnpy-memovb", "bnpy"), ("bmcc", "bmcc"), ("dpgmm", "dpgmm")])
    assert expected in out.splitlines(), out[-3000:]
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_killed_run_resumes_with_every_trace_valid(smoke_run):
    workdir, res = smoke_run
    assert res.returncode == 0, "the smoke run failed; see test_smoke_config_end_to_end"
    traces = sorted((workdir / "results/traces").rglob("*.parquet"))
    redo = traces[:4]  # two rounds of jobs on 2 cores: a kill after the first trace lands mid-run
    config = ["--configfile", str(SMOKE)]
    for path in redo + [workdir / "results/summary.csv"]:  # (with the summary there, nothing is missing)
        path.unlink()
    with open(workdir / "interrupted.log", "w") as log:
        # its own process group: Snakemake, its jobs and their Dask workers
        proc = subprocess.Popen(snakemake_cmd(workdir, "results/summary.csv", *config), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while not any(p.exists() for p in redo) and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            done_at_kill = [p for p in redo if p.exists()]
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
    assert done_at_kill, (workdir / "interrupted.log").read_text()[-3000:]
    assert len(done_at_kill) < len(redo), "the run ended before the kill: nothing was interrupted"
    # Jobs and their Dask workers died with the group (processes in another user's name
    # report no cwd and are not ours).
    ours = [p for p in psutil.process_iter(["cwd"]) if p.info["cwd"] and Path(p.info["cwd"]) == workdir]
    _, alive = psutil.wait_procs(ours, timeout=10)
    for p in alive:
        p.kill()
    assert not alive, [p.cmdline() for p in alive]

    unlocked = snakemake(workdir, "--unlock", *config)
    assert unlocked.returncode == 0, unlocked.stderr[-3000:]
    resumed = snakemake(workdir, "results/summary.csv", "--rerun-incomplete", *config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert sorted((workdir / "results/traces").rglob("*.parquet")) == traces
    for path in traces:
        trace, meta = read_trace(path)
        assert len(trace) == meta["iterations"] + 1 and trace["log_joint"].notna().all()
    assert not [p for p in (workdir / "results").rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]
    summary = pd.read_csv(workdir / "results/summary.csv")
    assert summary["chains"].sum() == len(traces)


def test_budgets_give_every_method_on_a_dataset_the_same_time_and_grid_datasets_limit_the_grid(tmp_path):
    """`budgets` sets the time budget of every run on a dataset (a variant's own time_budget
    wins); the selected algorithms run on `grid_datasets` only, variants where they say."""
    config = yaml.safe_load(SMOKE.read_text())
    config.update(grid_datasets=["chang2013-tiny"], budgets={"chang2013-tiny": 7, "multinomial-tiny": 11})
    config["variants"]["gibbs-learned-alpha"]["time_budget"] = 13
    path = tmp_path / "budgets.yaml"
    path.write_text(yaml.safe_dump(config))
    res = snakemake(tmp_path, "-n", "-p", "--configfile", str(path))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    # the budget as the job hands it over, in the spec's JSON, written as the config writes it
    budget = {(spec["dataset"], spec["name"] or spec["algorithm"]): format(spec["stop"]["seconds"], "g")
              for spec in job_specs(out)}
    # the grid: every selected algorithm on chang2013-tiny only; the variants where they say
    assert {name for dataset, name in budget if dataset.startswith("synth-multinomial")} == {"search-decreasing"}
    assert budget[("synth-chang2013?n=300", "gibbs")] == "7" and budget[("synth-chang2013?n=300", "subc")] == "7"
    assert budget[("synth-multinomial?n=60&vocab=20", "search-decreasing")] == "11"
    assert budget[("synth-chang2013?n=300", "gibbs-learned-alpha")] == "13"
