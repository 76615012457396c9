"""The run driver (traces, timing, atomic writes) and the ``dpmmbench`` command line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import refuse
from dpmmbench import algorithms, datasets
from dpmmbench.algorithms.families import NormalKnownCovariance
from dpmmbench.reports.traces import TRACE_COLUMNS, read_trace, remove_stale_temporaries, write_trace
from dpmmbench.workflows import cluster, driver
from dpmmbench.workflows.cli import main, parse_option
from dpmmbench.workflows.driver import run_chain
from hostile_cli import own_files, plant_user_files, run_cli, user_files_intact

REPO = Path(__file__).resolve().parent.parent
UNREACHABLE = "tcp://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.fixture(autouse=True)
def no_scheduler_env(monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)


def two_clusters(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(-3.0, 0.5, (n, 2)), rng.normal(3.0, 0.5, (n, 2))])
    truth = np.repeat([0, 1], n)
    return X, truth, NormalKnownCovariance(sigma=0.5, mu0=[0.0, 0.0], sigma0=3.0)


def chain(name="gibbs", iterations=5, seed=0, truth=True, **kwargs):
    X, labels, fam = two_clusters()
    s = algorithms.make(name, family=fam, seed=seed)
    return run_chain(s, X, iterations, truth=labels if truth else None, **kwargs)


class Wrapped:
    """A real sampler with a slow step, to test the driver alone."""

    def __init__(self, sampler, delay=0.0):
        self.sampler, self.delay = sampler, delay
        self.name, self.seed, self.family, self.alpha = sampler.name, sampler.seed, sampler.family, sampler.alpha

    def init(self, X, init_clusters=1, labels=None):
        return self.sampler.init(X, init_clusters=init_clusters, labels=labels)

    def step(self, state):
        time.sleep(self.delay)
        return self.sampler.step(state)

    def step_info(self, state):
        return self.sampler.step_info(state)


# ---- run_chain -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gibbs", "fsd"])
def test_trace_columns_rows_and_clock(name):
    df = chain(name, iterations=6)
    assert list(df.columns[:len(TRACE_COLUMNS)]) == list(TRACE_COLUMNS)
    assert df["iteration"].tolist() == list(range(7))
    assert (df["algorithm"] == name).all() and (df["name"] == name).all()
    assert (df["seed"] == 0).all() and (df["workers"] == 1).all()
    assert (np.diff(df["time_s"]) >= 0).all() and df["time_s"].iloc[0] >= 0
    assert df["log_joint"].notna().all() and df["vi"].between(0, np.log(60)).all()
    assert (df[["bytes_sent", "bytes_received", "messages"]] == 0).all().all()
    assert df["n_clusters"].iloc[0] == 1  # init_clusters=1


def test_vi_is_nan_without_truth():
    df = chain(iterations=2, truth=False)
    assert df["vi"].isna().all()


def test_same_seed_same_trace_and_warmup_changes_nothing():
    a = chain(iterations=5, seed=3)
    b = chain(iterations=5, seed=3, warmup=False)
    cols = ["log_joint", "n_clusters", "vi"]
    pd.testing.assert_frame_equal(a[cols], b[cols])


def test_time_budget_stops_early():
    X, truth, fam = two_clusters()
    s = Wrapped(algorithms.make("gibbs", family=fam, seed=0), delay=0.05)
    df = run_chain(s, X, 100, time_budget=0.12, warmup=False)
    assert 2 <= len(df) - 1 <= 5  # ~3 steps of 0.05 s exceed 0.12 s
    assert df["time_s"].iloc[-1] > 0.12


def test_metric_time_is_off_the_clock(monkeypatch):
    slow_scorer = driver.StateScorer.__call__

    def slow(self, *args, **kwargs):
        time.sleep(0.05)
        return slow_scorer(self, *args, **kwargs)

    monkeypatch.setattr(driver.StateScorer, "__call__", slow)
    df = chain(iterations=5)
    assert df["time_s"].iloc[-1] < 0.1  # six scorer calls took >= 0.3 s


def test_declared_step_columns_after_the_fixed_ones():
    from dpmmbench.algorithms.gibbs import CollapsedGibbs

    class Reporting(CollapsedGibbs):
        info_columns = {"accepted_splits": "splits accepted", "queue": "states queued"}

        def _step(self, state):  # reported on odd steps only; undeclared keys are not columns
            state, it = super()._step(state), state.iteration + 1
            state.info = dict(state.info, **({"accepted_splits": it, "note": "x"} if it % 2 else {"queue": 1.5}))
            return state

    X, truth, fam = two_clusters()
    df = run_chain(Reporting(fam, seed=0), X, 4, warmup=False)
    assert list(df.columns) == list(TRACE_COLUMNS) + ["accepted_splits", "queue"]
    np.testing.assert_array_equal(df["accepted_splits"], [np.nan, 1, np.nan, 3, np.nan])
    np.testing.assert_array_equal(df["queue"], [np.nan, np.nan, 1.5, np.nan, 1.5])


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="iterations"):
        chain(iterations=-1)
    with pytest.raises(ValueError, match="time_budget"):
        chain(time_budget=0)
    with pytest.raises(ValueError, match="NaN|finite"):
        X, truth, fam = two_clusters()
        X[3, 1] = np.nan
        run_chain(algorithms.make("gibbs", family=fam), X, 2)


# ---- trace files -----------------------------------------------------------------------
@pytest.mark.parametrize("ext", [".parquet", ".csv"])
def test_round_trip_with_meta(tmp_path, ext):
    df = chain(iterations=3)
    meta = {"algorithm": "gibbs", "count": np.int64(3), "dataset_meta": {"n": 60}}
    path = write_trace(df, tmp_path / "deep" / "dir" / f"trace{ext}", meta)
    back, meta_back = read_trace(path)
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    assert meta_back == {"algorithm": "gibbs", "count": 3, "dataset_meta": {"n": 60}}
    expected = {f"trace{ext}"} | ({"trace.csv.meta.json"} if ext == ".csv" else set())
    assert set(os.listdir(path.parent)) == expected  # no temporary files left


def test_bad_extension_raises_before_writing(tmp_path):
    with pytest.raises(ValueError, match=r"\.txt"):
        write_trace(chain(iterations=1), tmp_path / "sub" / "trace.txt", {})
    assert not (tmp_path / "sub").exists()


@pytest.mark.parametrize("ext", [".parquet", ".csv"])
def test_interrupted_write_leaves_no_partial_file(tmp_path, monkeypatch, ext):
    import pyarrow.parquet as pq

    def half_then_interrupt(data, f, *args, **kwargs):  # a write cut short by Ctrl-C
        f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", half_then_interrupt)
    monkeypatch.setattr(pd.DataFrame, "to_csv", half_then_interrupt)
    path = tmp_path / f"trace{ext}"
    path.write_bytes(b"previous")
    with pytest.raises(KeyboardInterrupt):
        write_trace(chain(iterations=1), path, {})
    assert path.read_bytes() == b"previous"  # the old file is intact, never half-replaced
    leftovers = {p.name for p in tmp_path.iterdir()} - {path.name, f"{path.name}.meta.json"}
    assert not leftovers


# ---- run by names and the scheduler --------------------------------------------------------
def test_run_records_provenance(scheduler):
    df, meta = driver.run(driver.RunSpec("fsd", "synth-chang2013?n=200", 3, seed=2, options={"truncation": 20},
                                         scheduler=scheduler))
    assert len(df) == 4 and (df["dataset"] == "synth-chang2013?n=200").all()
    assert df["vi"].notna().all()  # synthetic data carry ground truth
    assert meta["iterations"] == 3 and meta["options"] == {"truncation": 20}
    assert meta["seed"] == 2 and meta["workers"] == 1 and meta["exact"] is False and meta["kind"] == "sampler"
    assert meta["dataset_meta"]["n"] == 200
    for key in ("numpy", "scipy", "numba", "dask", "pandas", "python"):
        assert meta["versions"][key]
    for key in ("cpu_model", "cores", "platform", "git_commit", "started_utc", "command", "backend"):
        assert key in meta
    json.dumps(meta)


@pytest.mark.parametrize("name, alpha_prior", [("synth-chang2013?n=200", (2.0, 1.0)),
                                               ("synth-multinomial?n=60&vocab=20", None)])
def test_run_scores_its_heldout_split(scheduler, name, alpha_prior):
    """The run trains on the split's training part and scores the test part under its final
    state: the same number as the predictive density recomputed from the same chain here."""
    from dpmmbench.algorithms.predictive import log_predictive_density

    trace, meta = driver.run(driver.RunSpec("gibbs", name, 4, seed=3, alpha_prior=alpha_prior, test_fraction=0.2,
                                            split_seed=5, heldout_draws=1, scheduler=scheduler))
    data = datasets.load(name)
    train, test = datasets.holdout(data, 0.2, 5)
    sampler = algorithms.make("gibbs", family=data.family, seed=3, alpha_prior=alpha_prior)
    state = sampler.init(train.X)
    for _ in range(4):
        state = sampler.step(state)
    assert trace["alpha"].iloc[-1] == state.alpha and (alpha_prior is None) == (state.alpha == 1.0)
    expected = log_predictive_density(data.family, train.X, state.labels, state.alpha, test.X).mean()
    assert np.isfinite(meta["heldout_lpd"]) and meta["heldout_lpd"] == pytest.approx(expected, rel=1e-12)
    assert meta["heldout_points"] == test.X.shape[0] == 0.2 * data.X.shape[0]
    assert meta["n_points"] == train.X.shape[0] and meta["heldout_draws"] == 1
    assert meta["alpha_prior"] == (None if alpha_prior is None else list(alpha_prior))
    assert (meta["test_fraction"], meta["split_seed"]) == (0.2, 5)
    assert (trace["dataset"] == data.name).all()
    json.dumps(meta)


def test_heldout_draws_are_the_last_states_and_nothing_held_out_scores_nothing(scheduler):
    name = "synth-chang2013?n=200"
    _, several = driver.run(driver.RunSpec("gibbs", name, 4, seed=3, heldout_draws=10, scheduler=scheduler))
    assert several["heldout_draws"] == 4  # the chain's steps, when fewer than asked
    _, none = driver.run(driver.RunSpec("gibbs", name, 0, seed=3, heldout_draws=10, scheduler=scheduler))
    assert none["heldout_draws"] == 1 and np.isfinite(none["heldout_lpd"])  # the initial state
    trace, nothing = driver.run(driver.RunSpec("gibbs", name, 2, seed=3, test_fraction=0, scheduler=scheduler))
    assert nothing["heldout_lpd"] is None and nothing["heldout_points"] == 0 and nothing["n_points"] == 200
    local = run_chain(algorithms.make("gibbs", family=datasets.load(name).family, seed=3),
                      datasets.load(name).X, 2)
    pd.testing.assert_frame_equal(trace[["log_joint", "n_clusters"]], local[["log_joint", "n_clusters"]])


def test_unreachable_scheduler_fails_fast(monkeypatch):
    """The run waits the scheduler timeout (its message says which), and starts no embedded
    cluster in the scheduler's place."""
    import copy

    import dask.config

    # dask copies DASK_* variables into its config when distributed is first imported: that
    # must happen before the variable is set, and no copy of it may outlive the test (later
    # tests in this process would see an existing scheduler configured)
    pytest.importorskip("distributed")
    monkeypatch.setattr(dask.config, "config", copy.deepcopy(dask.config.config))
    monkeypatch.setattr(cluster, "SCHEDULER_TIMEOUT", 1.0)
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", UNREACHABLE)
    monkeypatch.setattr(cluster, "_local_cluster", refuse("an embedded cluster was started"))
    with pytest.raises(ConnectionError, match=f"Dask scheduler at {UNREACHABLE} did not answer within 1 s"):
        driver.run(driver.RunSpec("gibbs", "synth-chang2013?n=50", 1))


def test_reachable_scheduler_is_recorded():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as external:
        df, meta = driver.run(driver.RunSpec("gibbs", "synth-chang2013?n=50", 1, scheduler=external.scheduler_address))
        workers = set(external.scheduler.workers)
    assert meta["scheduler"] == external.scheduler_address and meta["dask"]["embedded"] is False
    assert meta["worker"]["address"] in workers  # the chain ran on that cluster
    assert len(df) == 2


# ---- the command line --------------------------------------------------------------------------
def test_parse_option():
    assert parse_option("truncation=50") == ("truncation", 50)
    assert parse_option("rate=0.5") == ("rate", 0.5)
    assert parse_option("scan=fixed") == ("scan", "fixed")
    with pytest.raises(ValueError):
        parse_option("novalue")


def test_cli_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "gibbs" in out and "exact=True" in out and "exact=False" in out
    assert "synth-chang2013" in out


BASE = ["run", "--dataset", "synth-chang2013?n=100", "--iterations", "2", "--seed", "0"]


@pytest.mark.parametrize("args, needle, code", [
    (["--algorithm", "nope"], "nope", 2),
    (["--algorithm", "gibbs", "--option", "bogus=1"], "bogus", 2),
    (["--algorithm", "fsd", "--option", "truncation=0"], "truncation", 2),
    (["--algorithm", "gibbs", "--init-clusters", "0"], "init_clusters", 2),
    (["--algorithm", "gibbs", "--init-clusters", "101"], "init_clusters", 2),
    (["--algorithm", "gibbs", "--alpha", "-1"], "alpha", 2),
    (["--algorithm", "gibbs", "--alpha-prior", "1", "0"], "alpha_prior rate must be in", 2),
    (["--algorithm", "gibbs", "--alpha-prior", "nan", "1"], "alpha_prior shape must be a finite number", 2),
    (["--algorithm", "gibbs", "--alpha-prior", "1"], "--alpha-prior: expected 2 arguments", 2),
    (["--algorithm", "gibbs", "--alpha-prior", "1", "x"], "--alpha-prior", 2),
    (["--algorithm", "gibbs", "--test-fraction", "0.6"], "test_fraction must be in [0, 0.5], got 0.6", 2),
    (["--algorithm", "gibbs", "--test-fraction", "-0.1"], "test_fraction", 2),
    (["--algorithm", "gibbs", "--split-seed", "-1"], "split_seed", 2),
    (["--algorithm", "gibbs", "--heldout-draws", "0"], "heldout_draws must be >= 1", 2),
    (["--algorithm", "gibbs", "--init-clusters", "91"], "N = 90 (the training points)", 2),
    (["--algorithm", "gibbs", "--dataset", "no-such-data"], "no-such-data", 3),
    (["--algorithm", "gibbs", "--iterations", "x"], "--iterations", 2),
    (["--algorithm", "gibbs", "--scheduler", "not-an-address"], "not-an-address", 2),
])
def test_cli_user_errors(tmp_path, capsys, args, needle, code):
    out = tmp_path / "trace.parquet"
    assert main(BASE + args + ["--out", str(out)]) == code
    err = capsys.readouterr().err
    assert err.startswith("dpmmbench: error:") and err.count("\n") == 1
    assert needle in err and "Traceback" not in err
    assert not out.exists()


def test_cli_bad_extension(tmp_path, capsys):
    out = tmp_path / "trace.xlsx"
    assert main(BASE + ["--algorithm", "gibbs", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "dpmmbench: error:" in err and ".xlsx" in err
    assert not out.exists()


def test_cli_interrupted_run_writes_nothing(tmp_path, capsys, monkeypatch, scheduler):
    import distributed

    def interrupted(*args, **kwargs):  # Ctrl-C while the chain runs on the cluster
        raise KeyboardInterrupt

    monkeypatch.setattr(distributed.Future, "result", interrupted)
    out = tmp_path / "trace.csv"
    assert main(BASE + ["--algorithm", "gibbs", "--scheduler", scheduler, "--out", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_cli_runs_a_spec_as_its_flags_run_it(tmp_path, capsys, scheduler):
    """``dpmmbench run --spec JSON`` (what a workflow's trace records) runs the run its flags
    give: the same trace; ``--spec`` takes no run flag beside it, and the flags stay required
    without it."""
    flags = [*BASE, "--algorithm", "gibbs", "--scheduler", scheduler, "--option", "scan=fixed",
             "--time-budget", "60"]
    assert main([*flags, "--out", str(tmp_path / "flags.parquet")]) == 0
    spec = driver.RunSpec("gibbs", "synth-chang2013?n=100", 2, seed=0, scheduler=scheduler, time_budget=60,
                          options={"scan": "fixed"})
    argv = ["run", "--spec", spec.to_json(), "--out", str(tmp_path / "spec.parquet")]
    assert main(argv) == 0
    (by_flags, _), (by_spec, meta) = read_trace(tmp_path / "flags.parquet"), read_trace(tmp_path / "spec.parquet")
    timing = [c for c in ("time_s", "compute_s", "compute_max_s") if c in by_spec]
    assert by_spec.drop(columns=timing).equals(by_flags.drop(columns=timing))
    assert meta["command"] == ["dpmmbench", *argv] and driver.RunSpec.from_dict(meta["spec"]) == spec
    capsys.readouterr()
    for args, needle in [(["--spec", spec.to_json(), "--seed", "1"], "leave out --seed"),
                         (["--spec", "[1]"], "JSON object"), (["--spec", "{"], "not JSON"),
                         (["--dataset", "x"], "required: --algorithm, --iterations, --seed")]:
        assert main(["run", *args, "--out", str(tmp_path / "bad.parquet")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dpmmbench: error:") and err.count("\n") == 1 and needle in err, err
    assert not (tmp_path / "bad.parquet").exists()


def test_cli_unreachable_scheduler_subprocess(tmp_path):
    out = tmp_path / "trace.parquet"
    res = run_cli([*BASE, "--algorithm", "gibbs", "--scheduler", UNREACHABLE, "--out", out], cwd=tmp_path,
                  env={"DASK_DPMMBENCH__SCHEDULER_TIMEOUT": "1"}, timeout=60)
    assert res.returncode == 5  # a cluster problem
    (line,) = res.stderr_lines  # the configured timeout, and no traceback
    assert line.startswith(f"dpmmbench: error: Dask scheduler at {UNREACHABLE} did not answer within 1 s"), line
    assert res.spawned == 0  # no embedded cluster in its place
    assert not out.exists() and not list(tmp_path.iterdir())


def test_cli_end_to_end_subprocess(tmp_path):
    """The real command, one run: its trace and metadata (the option, the threads, the run's
    own name), no progress bar off a terminal, the stale temporaries of a killed writer
    removed and every file of the user's kept (some named like temporaries, one like this
    suite's of a live writer). It is also the positive control of the hostile command-line
    tests (tests/test_hostile_cli.py): the watch sees the cluster a real run starts."""
    folder = tmp_path / "traces"
    planted = plant_user_files(folder)
    out = folder / "trace.parquet"
    # What a SIGKILL during atomic_write leaves behind (trace and sidecar), a neighbour's,
    # and user files that look like temporaries.
    pid = dead_pid()
    stale = [folder / f".trace.parquet.dpmmbench-tmp-{pid}-0badc0de",
             folder / f".trace.parquet.meta.json.dpmmbench-tmp-{pid}-0badc0de"]
    kept = [folder / f".other.csv.dpmmbench-tmp-{pid}-0badc0de", folder / ".trace.parquet.4242.0badc0de.tmp",
            folder / "trace.parquet.tmp", folder / ".trace.parquet.swp"]
    for path in stale + kept:
        path.write_bytes(b"partial")
        age(path)
    planted.update((path.name, b"partial") for path in kept)
    res = run_cli(["run", "--algorithm", "gibbs", "--dataset", "synth-chang2013?n=500", "--iterations", "3",
                   "--seed", "1", "--threads", "2", "--name", "gibbs-two-threads", "--out", out,
                   "--option", "scan=fixed"], cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.spawned > 0  # the cluster a real run starts
    df, meta = read_trace(out)
    assert list(df.columns[:len(TRACE_COLUMNS)]) == list(TRACE_COLUMNS)
    assert df["iteration"].tolist() == [0, 1, 2, 3] and (df["name"] == "gibbs-two-threads").all()
    assert (df["algorithm"] == "gibbs").all()
    assert meta["options"] == {"scan": "fixed"} and meta["dataset"] == "synth-chang2013?n=500"
    assert meta["command"][:2] == ["dpmmbench", "run"]
    assert meta["algorithm"] == "gibbs" and meta["name"] == "gibbs-two-threads" and meta["threads"] == 2
    assert meta["dask"]["threads_per_worker"] == 2 and meta["worker"]["numba_threads"] == 2
    assert "\r" not in res.stderr  # no progress bar when stderr is not a terminal
    # the stale pair is gone (a Parquet trace holds its metadata: no sidecar), the rest kept
    assert own_files(folder, planted) == [out.name] and user_files_intact(folder, planted)



def dead_pid() -> int:
    """The process id of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def age(path, seconds=3600):
    """Set ``path``'s modification time ``seconds`` in the past."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_remove_stale_temporaries_only_touches_its_own(tmp_path):
    target = tmp_path / "a[1].csv"  # regex and glob characters in the name are taken literally
    dead, alive = dead_pid(), os.getpid()
    own = [tmp_path / f".a[1].csv.dpmmbench-tmp-{dead}-0123abcd",
           tmp_path / f".a[1].csv.meta.json.dpmmbench-tmp-{dead}-0123abcd"]
    kept = [tmp_path / f".a[1].csv.dpmmbench-tmp-{alive}-0123abcd",   # its writer is running
            tmp_path / f".a1.csv.dpmmbench-tmp-{dead}-0123abcd",      # another file's
            tmp_path / f".a[1].csv.{dead}.0123abcd.tmp",              # not this suite's marker
            tmp_path / f".a[1].csv.dpmmbench-tmp-{dead}-0123abcd.bak",  # a user's copy
            tmp_path / f".a[1].csv.dpmmbench-tmp-{dead}-0123abc"]     # not 8 hex digits
    recent = tmp_path / f".a[1].csv.dpmmbench-tmp-{dead}-89abcdef"   # written a moment ago
    for path in [target, *own, *kept, recent]:
        path.write_bytes(b"x")
    for path in [*own, *kept]:
        age(path)
    assert sorted(remove_stale_temporaries(target)) == sorted(own)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in [target, *kept, recent])
    assert remove_stale_temporaries(tmp_path / "missing" / "t.csv") == []


def test_interrupted_pair_write_leaves_the_old_pair_or_nothing(tmp_path, monkeypatch):
    """Ctrl-C (or any exception) between the sidecar's rename and the CSV's."""
    real_replace, calls = os.replace, []

    def fail_second(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_replace(src, dst)

    old = chain(iterations=1)
    path = write_trace(old, tmp_path / "trace.csv", {"run": "old"})
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    monkeypatch.setattr(os, "replace", fail_second)
    with pytest.raises(KeyboardInterrupt):
        write_trace(chain(iterations=3), path, {"run": "new"})
    assert calls[:2] == [tmp_path / "trace.csv.meta.json", path]  # the sidecar goes first
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # the old pair, nothing else
    back, meta = read_trace(path)
    assert meta == {"run": "old"} and len(back) == 2

    calls.clear()  # the first write of a pair: nothing remains
    with pytest.raises(KeyboardInterrupt):
        write_trace(old, tmp_path / "new.csv", {"run": "new"})
    assert {p.name for p in tmp_path.iterdir()} == set(before)


def test_read_trace_refuses_a_mismatched_pair(tmp_path):
    path = write_trace(chain(iterations=1), tmp_path / "a.csv", {"run": "a"})
    write_trace(chain(iterations=2), tmp_path / "b.csv", {"run": "b"})
    # What a kill between the two renames leaves: the new sidecar next to the old CSV.
    os.replace(tmp_path / "b.csv.meta.json", tmp_path / "a.csv.meta.json")
    with pytest.raises(ValueError, match="does not match its sidecar"):
        read_trace(path)
    edited = write_trace(chain(iterations=2), tmp_path / "e.csv", {"run": "e"})
    edited.write_bytes(edited.read_bytes().replace(b"gibbs", b"gibbz"))
    with pytest.raises(ValueError, match="does not match its sidecar"):
        read_trace(edited)
    legacy = tmp_path / "legacy.csv"  # a sidecar written before digests: taken as it is
    legacy.write_bytes(path.read_bytes())
    (tmp_path / "legacy.csv.meta.json").write_text(json.dumps({"run": "legacy"}))
    assert read_trace(legacy)[1] == {"run": "legacy"}
    with pytest.raises(ValueError, match="reserved"):
        write_trace(chain(iterations=1), tmp_path / "c.csv", {"csv_sha256": "x"})


def test_run_from_a_preprocessed_data_file(tmp_path, monkeypatch, scheduler):
    from dpmmbench.datasets.store import save

    name = "synth-multinomial?n=40&vocab=12"
    data = datasets.load(name)
    path = tmp_path / "data.npz"
    save(data, path)
    trace, meta = driver.run(driver.RunSpec("gibbs", name, 3, seed=1, data_file=path, scheduler=scheduler))
    train, _ = datasets.holdout(data)  # the chain runs on the training part of the default split
    local = run_chain(algorithms.make("gibbs", family=data.family, seed=1), train.X, 3,
                      truth=train.labels, dataset=data.name)
    cols = ["dataset", "iteration", "log_joint", "n_clusters", "vi"]
    pd.testing.assert_frame_equal(trace[cols], local[cols])
    assert meta["data_file"] == str(path) and meta["dataset"] == data.name

    monkeypatch.setattr(cluster, "dask_client", refuse("a cluster was started for a run that cannot succeed"))
    with pytest.raises(ValueError, match="holds dataset"):
        driver.run(driver.RunSpec("gibbs", "synth-multinomial?n=41&vocab=12", 3, data_file=path))


def test_summarize_and_report_errors_have_their_codes(tmp_path, capsys):
    good = write_trace(chain(iterations=1), tmp_path / "good.csv", {"algorithm": "gibbs"})
    bad = write_trace(chain(iterations=2), tmp_path / "bad.csv", {"algorithm": "gibbs"})
    os.replace(tmp_path / "good.csv.meta.json", tmp_path / "bad.csv.meta.json")  # a mismatched pair
    (tmp_path / "a-file").write_text("x")
    cases = [
        (["summarize", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "s.csv")], 3, "missing.csv"),
        (["summarize", str(bad), "--out", str(tmp_path / "s.csv")], 3, "does not match its sidecar"),
        (["summarize", str(good), "--out", str(tmp_path / "a-file" / "s.csv")], 4, "a-file"),
        (["report", str(bad), "--out", str(tmp_path / "r.html")], 3, "does not match its sidecar"),
        (["report", str(good), "--out", str(tmp_path / "a-file" / "r.html")], 4, "a-file"),
        (["report", str(good), "--out", str(tmp_path / "r.html"), "--config", str(tmp_path / "no.yaml")], 2, "no.yaml"),
        (["summarize", str(good), "--out", str(tmp_path / "s.csv"), "--runs", str(tmp_path / "a-file" / "r.csv")], 4,
         "a-file"),
        (["summarize", str(good), "--out", str(tmp_path / "s.csv"), "--runs", str(tmp_path / "r.txt")], 2, "--runs"),
        (["summarize", str(good), "--out", str(tmp_path / "s.csv"), "--target-tolerance", "nan"], 2, "target tolerance"),
        (["report", str(good), "--out", str(tmp_path / "r.html"), "--target-tolerance", "1"], 2, "target tolerance"),
    ]
    for args, code, needle in cases:
        assert main(args) == code, args
        err = capsys.readouterr().err
        assert err.startswith("dpmmbench: error:") and err.count("\n") == 1 and needle in err, (args, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "bad.csv", "bad.csv.meta.json", "good.csv"]
