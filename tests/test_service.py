"""The workflow's run service (workflows/service.py): one Dask cluster for every run of a
workflow. A run through it is the run of ``dpmmbench run`` (same chains, same errors, its own
command in the metadata), the job's side imports nothing heavy and says so in one line when
the service is gone, an existing cluster is used and left running, a job that goes away has
its run cancelled, and no Dask process outlives a workflow that succeeded, failed or was
interrupted (with real Snakemake)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import yaml

from dpmmbench.algorithms.backends.dask_backend import live_workers
from dpmmbench.reports.traces import read_trace
from dpmmbench.workflows import _config, service
from dpmmbench.workflows import service_client
from dpmmbench.workflows.cli import EXIT_CODES, run_request
from dpmmbench.workflows.service_client import SERVICE_VARIABLE, socket_path

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "workflows" / "config" / "smoke.yaml"
#: trace columns that measure wall-clock time (the rest is decided by the seeds)
TIMING_COLUMNS = ("time_s", "compute_s", "compute_max_s")
#: modules the job's side must not import
HEAVY = ("numpy", "pandas", "scipy", "numba", "dask", "distributed", "pyarrow")


@pytest.fixture(autouse=True)
def no_scheduler_env(monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    monkeypatch.delenv(SERVICE_VARIABLE, raising=False)


@pytest.fixture(scope="module")
def running():
    """A run service of its own cluster (2 workers x 1 thread), for the module."""
    state = service.start(workers=2, threads=1)
    yield state
    service.stop(state)


def run_args(out, algorithm="gibbs", workers=1, iterations=5, dataset="synth-chang2013?n=300", *extra):
    return ["run", "--algorithm", algorithm, "--dataset", dataset, "--iterations", str(iterations), "--seed", "3",
            "--workers", str(workers), "--threads", "1", "--no-progress", "--out", str(out), *extra]


def forward(argv, where):
    """``dpmmbench ARGV`` handed to the run service ``where`` as a job hands it."""
    return service_client.forward(run_request(argv), where)


def command(argv, env_service=None, cwd=None):
    """``python -m dpmmbench.workflows.cli ARGV`` as a job runs it (through the service when
    ``env_service`` is given)."""
    env = {k: v for k, v in os.environ.items() if k not in (SERVICE_VARIABLE, "DASK_SCHEDULER_ADDRESS")}
    if env_service is not None:
        env[SERVICE_VARIABLE] = str(env_service)
    return subprocess.run([sys.executable, "-m", "dpmmbench.workflows.cli", *argv], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


def untimed(trace):
    return trace.drop(columns=[c for c in TIMING_COLUMNS if c in trace])


def service_processes(state):
    """The service process of ``state`` and every process it started (its Dask workers)."""
    pid = service.read_state(state)["pid"]
    proc = psutil.Process(pid)
    return [proc, *proc.children(recursive=True)]


def all_gone(processes, timeout=30.0):
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    for p in alive:
        p.kill()
    return [p.pid for p in alive]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm, workers", [("gibbs", 1), ("subc", 2)])
def test_a_run_through_the_service_is_the_run_of_an_embedded_cluster(running, tmp_path, algorithm, workers):
    """Same seeds, same chain: the serial sampler's chain as a task on a reserved worker and
    the sharded sampler's master loop in the service give the traces of a cluster per run;
    the metadata says which cluster, that it was shared, and the job's own command."""
    argv = run_args(tmp_path / "own.parquet", algorithm, workers, 8)
    own = command(argv)
    assert own.returncode == 0, own.stderr
    argv = run_args(tmp_path / "shared.parquet", algorithm, workers, 8)
    code, out, err = forward(argv, running)
    assert code == 0, err
    assert "shared.parquet: " in out and err == ""
    trace, meta = read_trace(tmp_path / "shared.parquet")
    expected, expected_meta = read_trace(tmp_path / "own.parquet")
    assert untimed(trace).equals(untimed(expected))
    assert meta["heldout_lpd"] == expected_meta["heldout_lpd"]
    info = service.read_state(running)
    assert meta["dask"]["shared"] and meta["dask"]["embedded"] and info["owns_cluster"]
    assert meta["dask"]["scheduler"] == info["scheduler"] and meta["dask"]["scheduler"].startswith("tcp://127.0.0.1:")
    assert len(meta["dask"]["reserved"]) == workers and meta["dask"]["n_workers"] == 2
    assert not expected_meta["dask"]["shared"] and expected_meta["dask"]["embedded"]
    assert meta["command"] == ["dpmmbench", *argv]
    assert {k: v for k, v in meta.items() if k not in ("dask", "command", "worker", "wall_s", "time_s", "warmup_s",
                                                       "started_utc", "finished_utc", "score_s", "heldout_s",
                                                       "scheduler", "backend")} == \
        {k: v for k, v in expected_meta.items() if k not in ("dask", "command", "worker", "wall_s", "time_s",
                                                            "warmup_s", "started_utc", "finished_utc", "score_s",
                                                            "heldout_s", "scheduler", "backend")}


@pytest.mark.slow
def test_a_workflow_job_hands_over_the_spec_the_config_built(running, tmp_path):
    """A workflow's run job, ``python -m dpmmbench.workflows.service_client --spec JSON --out
    PATH``, hands the spec built from the config (``_config.run_spec``) to the service without
    parsing a command line or importing anything heavy; its trace is the run's by flags and
    records ``dpmmbench run --spec``, which reruns it on a cluster of its own."""
    config = yaml.safe_load(SMOKE.read_text())
    spec = _config.run_spec(config, "gibbs", "chang2013-tiny", seed=3, workers=1)
    probe = ("import sys, json\nfrom dpmmbench.workflows.service_client import main\ncode = main(sys.argv[1:])\n"
             f"print(json.dumps([code, sorted(m for m in {HEAVY!r} if m in sys.modules)]))")
    env = dict(os.environ, **{SERVICE_VARIABLE: running})
    res = subprocess.run([sys.executable, "-c", probe, "--spec", spec.to_json(), "--out", "job.parquet"],
                         capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert json.loads(res.stdout.splitlines()[-1]) == [0, []], res.stderr
    trace, meta = read_trace(tmp_path / "job.parquet")
    assert meta["dask"]["shared"] and meta["command"] == ["dpmmbench", "run", "--spec", spec.to_json(), "--out",
                                                          "job.parquet"]
    again = command(meta["command"][1:-1] + [str(tmp_path / "again.parquet")])
    assert again.returncode == 0, again.stderr
    assert untimed(read_trace(tmp_path / "again.parquet")[0]).equals(untimed(trace))
    # with no service to hand it to, the job says so (workflows/common.smk gives such a job `dpmmbench run --spec`)
    alone = subprocess.run([sys.executable, "-m", "dpmmbench.workflows.service_client", "--spec", spec.to_json(),
                            "--out", "alone.parquet"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                           env={k: v for k, v in os.environ.items() if k != SERVICE_VARIABLE})
    assert alone.returncode == EXIT_CODES["cluster"] and "no run service" in alone.stderr
    assert not (tmp_path / "alone.parquet").exists()


@pytest.mark.slow
def test_errors_and_exit_codes_are_the_commands(running, tmp_path):
    """A mistake through the service ends as the command ends it: one line, its exit code, no trace."""
    cases = [(run_args(tmp_path / "a.parquet", "gibbbs"), EXIT_CODES["usage"], "unknown algorithm"),
             (run_args(tmp_path / "b.parquet", "gibbs", 1, 5, "synth-chang2013?m=3"), EXIT_CODES["data"], "'m'"),
             (run_args(tmp_path / "c.txt"), EXIT_CODES["usage"], "c.txt"),
             (run_args(tmp_path / "d.parquet", "gibbs", 1, 5, "synth-chang2013?n=300", "--option", "nope=1"),
              EXIT_CODES["usage"], "nope")]
    for argv, code, text in cases:
        got, out, err = forward(argv, running)
        expected = command(argv)
        assert (got, err) == (expected.returncode, expected.stderr) and got == code, (argv, err, expected.stderr)
        assert err.startswith("dpmmbench: error: ") and err.count("\n") == 1 and text in err
    assert not [p for p in tmp_path.iterdir()]


def test_the_job_side_imports_nothing_heavy_and_a_gone_service_is_one_line(tmp_path):
    """With $DPMMBENCH_SERVICE naming a service that is gone, `dpmmbench run` says so in one
    line with the cluster's exit code, having imported no numerical library or Dask (what
    it imports on its way to any service)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    probe = ("import sys, json\nfrom dpmmbench.workflows.cli import main\ncode = main(sys.argv[1:])\n"
             f"print(json.dumps([code, sorted(m for m in {HEAVY!r} if m in sys.modules)]))")
    env = dict(os.environ, **{SERVICE_VARIABLE: str(gone)})
    res = subprocess.run([sys.executable, "-c", probe, *run_args(tmp_path / "t.parquet")], capture_output=True,
                         text=True, timeout=60, env=env)
    assert json.loads(res.stdout.splitlines()[-1]) == [EXIT_CODES["cluster"], []]
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("dpmmbench: error: the run service at ")
    assert SERVICE_VARIABLE in res.stderr and not (tmp_path / "t.parquet").exists()


@pytest.mark.slow
def test_the_job_side_imports_nothing_heavy_through_a_running_service(running, tmp_path):
    probe = ("import sys, json\nfrom dpmmbench.workflows.cli import main\ncode = main(sys.argv[1:])\n"
             f"print(json.dumps([code, sorted(m for m in {HEAVY!r} if m in sys.modules)]))")
    env = dict(os.environ, **{SERVICE_VARIABLE: running})
    res = subprocess.run([sys.executable, "-c", probe, *run_args("t.parquet")], capture_output=True, text=True,
                         timeout=120, env=env, cwd=tmp_path)
    assert json.loads(res.stdout.splitlines()[-1]) == [0, []], res.stderr
    trace, meta = read_trace(tmp_path / "t.parquet")  # relative to the job's folder, not the service's
    assert meta["dask"]["shared"] and len(trace) == 6


@pytest.mark.slow
def test_a_job_that_goes_away_has_its_run_cancelled(running, tmp_path):
    """A job killed mid-run closes its connection: its chain stops (its worker is restarted,
    no task of it is left) and the next run gets the workers."""
    import distributed

    argv = run_args(tmp_path / "long.parquet", "gibbs", 1, 10**6, "synth-chang2013?n=2000", "--time-budget", "300")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(socket_path(running))
    sock.sendall(json.dumps({**run_request(argv, cwd=str(tmp_path)), "started": time.time()}).encode() + b"\n")
    with distributed.Client(service.read_state(running)["scheduler"], timeout=30) as client:
        def chains():
            return [k for keys in client.processing().values() for k in keys if str(k).startswith("chain-")]

        deadline = time.monotonic() + 120
        while not chains() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert chains(), "the long run never started"
        sock.close()
        deadline = time.monotonic() + 60
        while chains() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not chains()
    code, _, err = forward(run_args(tmp_path / "next.parquet", "subc", 2), running)
    assert code == 0, err
    assert not (tmp_path / "long.parquet").exists()


@pytest.mark.slow
@pytest.mark.parametrize("by", ["address", "file"])
def test_an_existing_cluster_is_used_and_left_running(client, tmp_path, by):
    """dask.scheduler or dask.scheduler_file: the service runs on that cluster, says so, and
    stopping it leaves the cluster and its workers as they were."""
    address = client.scheduler.address
    workers = sorted(live_workers(client))
    if by == "address":
        state = service.start(workers=1, threads=1, scheduler=address)
    else:
        path = tmp_path / "scheduler.json"
        path.write_text(json.dumps({"address": address}))
        state = service.start(workers=1, threads=1, scheduler_file=str(path))
    try:
        # the workflow's jobs name the config's scheduler too: the service's own is fine, another is not
        code, _, err = forward(run_args(tmp_path / "t.parquet", "subc", 2, 5, "synth-chang2013?n=300",
                                        "--scheduler", address), state)
        assert code == 0, err
        code, _, err = forward(run_args(tmp_path / "u.parquet", "gibbs", 1, 5, "synth-chang2013?n=300",
                                        "--scheduler", "tcp://127.0.0.1:9"), state)
        assert code == EXIT_CODES["cluster"] and f"runs on the shared cluster at {address}" in err
        info = service.read_state(state)
        assert info["scheduler"] == address and info["owns_cluster"] is False
    finally:
        service.stop(state)
    meta = read_trace(tmp_path / "t.parquet")[1]
    assert meta["dask"]["shared"] and not meta["dask"]["embedded"] and meta["dask"]["scheduler"] == address
    assert sorted(live_workers(client)) == workers and client.submit(sum, [1, 2]).result() == 3
    assert not Path(state).exists()


def test_a_service_that_cannot_start_says_why(tmp_path):
    with pytest.raises(RuntimeError, match="the run service did not start: .*scheduler file"):
        service.start(workers=1, threads=1, scheduler_file=str(tmp_path / "missing.json"))


@pytest.mark.slow
def test_the_service_stops_with_its_parent_and_on_sigterm(tmp_path):
    """Its parent gone (a killed Snakemake), or a SIGTERM: the service, its cluster and its
    state folder are gone."""
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        state = service.start(workers=1, threads=1, parent=parent.pid)
        wait_for_cluster(state)
        processes = service_processes(state)
        assert len(processes) > 1  # the service and its worker processes
        parent.kill()
        assert all_gone(processes) == [] and not Path(state).exists()
    finally:
        parent.kill()
        parent.wait()
    state = service.start(workers=1, threads=1)
    wait_for_cluster(state)
    processes = service_processes(state)
    processes[0].send_signal(signal.SIGTERM)
    assert all_gone(processes) == [] and not Path(state).exists()


def test_the_folders_of_services_gone_without_cleaning_up_are_removed(tmp_path, monkeypatch):
    """A state folder whose service is gone (a SIGKILL) is removed by the next start; a folder
    still starting, another user's or a running service's is not."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{service.STATE_PREFIX}killed"
    stale.mkdir()
    (stale / service.STATE_FILE).write_text(json.dumps({"pid": dead.pid}))
    (stale / "socket").write_text("")
    reused = tmp_path / f"{service.STATE_PREFIX}reused"  # its pid now another process's
    reused.mkdir()
    (reused / service.STATE_FILE).write_text(json.dumps({"pid": os.getpid()}))
    never = tmp_path / f"{service.STATE_PREFIX}never-started"
    never.mkdir()
    os.utime(never, (time.time() - 2 * service.START_TIMEOUT,) * 2)
    starting = tmp_path / f"{service.STATE_PREFIX}starting"
    starting.mkdir()
    other = tmp_path / "not-ours"
    other.mkdir()
    removed = service.remove_stale_states()
    assert sorted(removed) == sorted(str(p) for p in (stale, reused, never))
    assert starting.is_dir() and other.is_dir() and not stale.exists()


@pytest.mark.slow
def test_a_killed_services_folder_is_removed_by_the_next_start(monkeypatch):
    # state folders of its own: another test process starting a service meanwhile would remove
    # the killed one's folder first (every start clears the stale folders of the temp folder)
    own = tempfile.mkdtemp(prefix="svc")  # short: a Unix socket path is limited to ~100 bytes
    monkeypatch.setattr(tempfile, "tempdir", own)
    state = service.start(workers=1, threads=1)
    wait_for_cluster(state)
    processes = service_processes(state)
    processes[0].kill()  # SIGKILL: no clean-up; its workers see it gone and end
    assert all_gone(processes) == [] and Path(state).is_dir()
    again = service.start(workers=1, threads=1)
    try:
        assert not Path(state).exists() and Path(again).is_dir()
    finally:
        service.stop(again)
        shutil.rmtree(own, ignore_errors=True)


def wait_for_cluster(state, timeout=120):
    deadline = time.monotonic() + timeout
    while (service.read_state(state) or {}).get("scheduler") is None:
        assert time.monotonic() < deadline, "the service's cluster did not start"
        time.sleep(0.05)


# ---- with real Snakemake ------------------------------------------------------------------------
def tiny_config(tmp_path, **changes):
    config = yaml.safe_load(SMOKE.read_text())
    config.update(datasets={"chang2013-tiny": config["datasets"]["chang2013-tiny"]}, algorithms=["gibbs", "subc"],
                  variants={}, seeds=[0], options={}, dask={"scheduler": None, "workers": [1, 2], "threads": 1})
    config.pop("priors", None)
    config.update(changes)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


#: runs its arguments with SIGINT at its default, as a terminal's Ctrl-C finds it: a test run
#: started in the background of a non-interactive shell inherits SIGINT ignored, and so would
#: every Snakemake it starts (no KeyboardInterrupt, so the Ctrl-C test would wait for the run)
INTERRUPTIBLE = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                 "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


def snakemake(workdir, config, *targets, env=None):
    return subprocess.Popen([sys.executable, "-c", INTERRUPTIBLE, "-m", "snakemake", "--snakefile",
                             str(ROOT / "Snakefile"), "--directory", str(workdir), "--cores", "2", *targets,
                             "--configfile", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)


def left_behind(workdir):
    """Processes working in ``workdir``: the service and its Dask workers run there."""
    ours = [p for p in psutil.process_iter(["cwd"]) if p.info["cwd"] and Path(p.info["cwd"]) == Path(workdir).resolve()]
    return all_gone(ours, timeout=30)


@pytest.mark.slow
def test_workflow_success_and_failure_leave_no_dask_process(tmp_path):
    """One cluster for every run of the workflow (sized from --cores and the largest run),
    stopped when the workflow ends; a failing run (the sharded ones refuse a bad Dask setting)
    fails its job and the workflow, and still leaves nothing behind."""
    ok = tmp_path / "ok"
    proc = snakemake(ok, tiny_config(tmp_path), "results/summary.csv")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    metas = [read_trace(p)[1] for p in sorted((ok / "results/traces").rglob("*.parquet"))]
    assert len(metas) == 3  # gibbs w1, subc w1 and w2
    assert len({m["dask"]["scheduler"] for m in metas}) == 1
    assert all(m["dask"]["shared"] and m["dask"]["embedded"] and m["dask"]["n_workers"] == 2 for m in metas)
    assert sorted(len(m["dask"]["reserved"]) for m in metas) == [1, 1, 2]
    assert len(list((ok / "results/jobs").rglob("*.tsv"))) == 3
    assert left_behind(ok) == []

    failing = tmp_path / "failing"
    env = dict(os.environ, DASK_DPMMBENCH__RETRIES="-1")
    proc = snakemake(failing, tiny_config(tmp_path), "results/summary.csv", env=env)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode != 0 and "retries" in out, out[-3000:]
    assert left_behind(failing) == []


@pytest.mark.slow
def test_an_interrupted_workflow_leaves_no_dask_process(tmp_path):
    """Ctrl-C (SIGINT to Snakemake's process group) while a run is in flight: Snakemake ends,
    neither onsuccess nor onerror runs, and the service sees its parent gone and stops its
    cluster."""
    workdir = tmp_path / "work"
    config = tiny_config(tmp_path, algorithms=["gibbs"], iterations=10**6, time_budget=300,
                         datasets={"chang": "synth-chang2013?n=2000"}, dask={"scheduler": None, "workers": 1,
                                                                            "threads": 1})
    proc = snakemake(workdir, config, "results/summary.csv")
    try:
        deadline = time.monotonic() + 300
        processes = []
        while time.monotonic() < deadline and proc.poll() is None:
            states = [p for p in psutil.process_iter(["cmdline", "cwd"])
                      if "dpmmbench.workflows.service" in (p.info["cmdline"] or [])
                      and p.info["cwd"] and Path(p.info["cwd"]) == workdir.resolve()]
            logs = list((workdir / "logs/run").rglob("*.log")) if (workdir / "logs/run").exists() else []
            if states and logs:
                state = states[0].info["cmdline"][states[0].info["cmdline"].index("--state") + 1]
                if (service.read_state(state) or {}).get("scheduler"):
                    time.sleep(2)  # the run in flight on the cluster
                    processes = service_processes(state)
                    break
            time.sleep(0.1)
        assert processes, "no run in flight"
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert all_gone(processes) == []
    assert left_behind(workdir) == []
