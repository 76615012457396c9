"""How a run reaches Dask (workflows/cluster.py) and what the driver does with it: embedded
clusters on the loopback interface with thread-limited workers, shut down even on Ctrl-C;
existing clusters by address; every chain computed in a worker process; spawn safety of
the workflow scripts."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from contextlib import nullcontext
from pathlib import Path

import distributed
import numpy as np
import pandas as pd
import psutil
import pytest

from conftest import refuse
from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.workflows import cluster, driver

ROOT = Path(__file__).resolve().parents[1]
UNREACHABLE = "tcp://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.fixture(autouse=True)
def no_scheduler_env(monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)


def wait_gone(pids, timeout=10.0):
    """The pids that are still running processes after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE}
        time.sleep(0.1)
    return alive


# ---- embedded clusters ---------------------------------------------------------------------
@pytest.mark.parametrize("workers, threads, interrupt", [(2, 1, False), (1, 2, True)])
def test_embedded_cluster_loopback_sized_and_thread_limited(monkeypatch, workers, threads, interrupt):
    # Values the parent happens to have must not leak into the workers.
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "7")

    def probe():
        import numba
        from threadpoolctl import threadpool_info

        return ({name: os.environ.get(name) for name in (*cluster.THREAD_VARIABLES, *cluster.MALLOC_ENVIRONMENT)},
                numba.get_num_threads(),
                {pool["internal_api"]: pool["num_threads"] for pool in threadpool_info()}, os.getpid())

    with (pytest.raises(KeyboardInterrupt) if interrupt else nullcontext(),
          cluster.dask_client(workers=workers, threads=threads) as client):
        facts = cluster.describe(client)
        seen = client.run(probe)
        parent_env = os.environ["OMP_NUM_THREADS"]
        default = distributed.default_client()
        if interrupt:
            raise KeyboardInterrupt  # Ctrl-C during a run

    assert facts["embedded"] is True
    assert default is client  # the run's one client, for Dask helpers that look it up
    with pytest.raises(ValueError, match="No clients found"):
        distributed.default_client()  # and no longer once the run is over
    assert facts["n_workers"] == workers and facts["threads_per_worker"] == threads
    assert facts["scheduler"].startswith("tcp://127.0.0.1:")
    assert facts["dashboard"].startswith("http://127.0.0.1:")
    assert len(seen) == workers and all(addr.startswith("tcp://127.0.0.1:") for addr in seen)
    for env, numba_threads, pools, pid in seen.values():
        assert pid != os.getpid()  # worker processes, not threads of this one
        assert env == {**{name: str(threads) for name in cluster.THREAD_VARIABLES}, **cluster.MALLOC_ENVIRONMENT}
        assert numba_threads == threads
        assert pools and set(pools.values()) == {threads}, pools  # BLAS and OpenMP pools as sized
    assert parent_env == "7"  # the parent's own environment is left as it was
    assert not wait_gone([pid for *_, pid in seen.values()]), "worker processes outlived the cluster"


def test_worker_restarts_leave_numbas_thread_count_in_this_process_alone(monkeypatch):
    """The Nanny writes its pre-spawn variables into this process's environment at every
    worker start; numba re-reads NUMBA_NUM_THREADS at each compilation and raises if it no
    longer matches its running pool, so that variable must reach the workers another way."""
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    with cluster.dask_client(workers=1, threads=1) as client:
        client.restart()  # as after a lost worker
        assert "NUMBA_NUM_THREADS" not in os.environ
        import numba

        seen = client.run(lambda: (os.environ.get("NUMBA_NUM_THREADS"), numba.get_num_threads()))
    assert list(seen.values()) == [("1", 1)]
    assert "NUMBA_NUM_THREADS" not in os.environ


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="workers"), cluster.dask_client(workers=0):
        pass
    with pytest.raises(TypeError, match="threads"), cluster.dask_client(threads=1.5):
        pass


def test_an_embedded_cluster_larger_than_the_machine_is_refused(monkeypatch):
    """A huge worker or thread count would spawn that many processes: refused with the limit
    named (a few per core is allowed, to try scaling on a small machine)."""
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    cluster.check_embedded(4, 2)  # 8 threads on 2 cores: allowed
    message = r"9 workers x 1 threads exceeds 8 threads \(4 per core of the 2 available here\).*--scheduler"
    with pytest.raises(ValueError, match=message), cluster.dask_client(workers=9):
        pass
    with pytest.raises(ValueError, match="exceeds 8 threads"), cluster.dask_client(workers=1, threads=10**6):
        pass


# ---- existing clusters ---------------------------------------------------------------------
def test_existing_cluster_by_argument_or_environment_is_left_running(monkeypatch):
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as external:
        address = external.scheduler_address
        with cluster.dask_client(scheduler=address, workers=3) as client:
            facts = cluster.describe(client)
            assert client.submit(sum, [1, 2], pure=False).result() == 3
        assert facts["scheduler"] == address and facts["embedded"] is False
        assert facts["n_workers"] == 1  # an existing cluster is used as it is
        monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", address)
        with cluster.dask_client() as client:
            assert cluster.describe(client)["scheduler"] == address
        assert external.status.name == "running"  # only a client was closed


def test_shared_cluster_reserves_every_worker_while_its_client_refreshes():
    """A client refreshes its cached view of the scheduler on a timer, without the workers:
    reservations and descriptions ask the scheduler itself, so a full cluster never reads as
    empty (it did: a workflow run on a loaded machine reserved no worker)."""
    import dask

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address="127.0.0.1:0") as local:
        with dask.config.set({"distributed.client.scheduler-info-interval": "1ms"}):
            client = distributed.Client(local.scheduler_address)
        shared = cluster.SharedCluster(client)
        try:
            sizes = set()
            for _ in range(300):  # the cached view read 2 workers as 0 in 1 call of 6 here
                with shared.reserve(2) as reserved:
                    sizes.add(len(reserved))
                sizes.add(cluster.describe(client)["n_workers"])
            assert sizes == {2}
        finally:
            shared.close()  # the client; the cluster is the ``with`` block's


def test_unreachable_or_malformed_scheduler_fails_fast(monkeypatch):
    """An unreachable scheduler is a ConnectionError after the scheduler timeout (its message
    says which), with no embedded cluster started in its place."""
    monkeypatch.setattr(cluster, "SCHEDULER_TIMEOUT", 1.0)
    monkeypatch.setattr(cluster, "_local_cluster", refuse("an embedded cluster was started"))
    with (pytest.raises(ConnectionError, match=r"127\.0\.0\.1:9 did not answer within 1 s"),
          cluster.dask_client(scheduler=UNREACHABLE)):
        pass
    with pytest.raises(ValueError, match="not-an-address"):
        cluster.check_address("not-an-address")
    with pytest.raises(TypeError, match="string"):
        cluster.check_address(8786)


# ---- the driver on Dask ------------------------------------------------------------------
def test_serial_run_is_one_task_in_a_worker_and_startup_is_off_the_clock(monkeypatch):
    data = datasets.load("synth-chang2013?n=300")
    # The same chain in this process: it also leaves every kernel in numba's disk cache.
    local = driver.run_chain(algorithms.make("gibbs", family=data.family, seed=4), data.X, 4,
                             truth=data.labels, dataset=data.name)

    slow_start = 1.5
    real_local_cluster = cluster._local_cluster

    def slow_local_cluster(*args, **kwargs):
        time.sleep(slow_start)
        return real_local_cluster(*args, **kwargs)

    monkeypatch.setattr(cluster, "_local_cluster", slow_local_cluster)
    trace, meta = driver.run(driver.RunSpec("gibbs", "synth-chang2013?n=300", 4, seed=4, name="gibbs-on-dask",
                                            test_fraction=0))

    worker = meta["worker"]
    assert worker["pid"] != os.getpid() and worker["address"].startswith("tcp://127.0.0.1:")
    assert worker["numba_threads"] == 1
    # Each run is a fresh worker process: its kernels must come from the disk cache.
    assert worker["numba_cache_hits"] > 0 and worker["numba_cache_misses"] == 0, worker
    assert meta["dask"]["embedded"] and meta["dask"]["n_workers"] == 1
    assert meta["dask"]["startup_s"] >= slow_start
    assert trace["time_s"].iloc[-1] < slow_start / 3  # the cluster's start is not sampler time
    assert meta["wall_s"] > meta["dask"]["startup_s"] + trace["time_s"].iloc[-1]
    assert (trace["name"] == "gibbs-on-dask").all() and meta["name"] == "gibbs-on-dask"
    assert (trace["algorithm"] == "gibbs").all()
    assert meta["algorithm"] == "gibbs" and meta["backend"].startswith("serial")
    cols = ["iteration", "log_joint", "n_clusters", "vi"]
    pd.testing.assert_frame_equal(trace[cols], local[cols])  # the same chain, computed elsewhere
    assert np.all(np.diff(trace["time_s"]) >= 0)


def test_user_errors_fail_before_a_cluster_starts(monkeypatch):
    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started for a run that cannot succeed")

    monkeypatch.setattr(cluster, "dask_client", no_cluster)
    for kwargs, needle in [({"options": {"bogus": 1}}, "bogus"), ({"alpha": -1.0}, "alpha"),
                           ({"threads": 0}, "threads"), ({"name": " "}, "name"),
                           ({"workers": 10**6}, "embedded cluster of 1000000 workers")]:
        with pytest.raises((TypeError, ValueError), match=needle):
            driver.run(driver.RunSpec("fsd", "synth-chang2013?n=50", 1, **kwargs))
    with pytest.raises(ValueError, match="no-such-data"):
        driver.run(driver.RunSpec("fsd", "no-such-data", 1))
    with pytest.raises(ValueError, match="nope"):
        driver.run(driver.RunSpec("nope", "synth-chang2013?n=50", 1))


# ---- spawn safety (docs/design.md "Dask clusters") --------------------------------------------
# Dask starts worker processes with `spawn`, which first re-imports the parent's main module
# as `__mp_main__`: by module name for `python -m`, by path for a script (and for a Snakemake
# `script:`, without its `snakemake` object). Whatever a workflow entry point does at module
# level therefore runs again in every worker. The check imports each entry point exactly that
# way, with cluster and client construction refused.
SPAWN_CHECK = textwrap.dedent("""
    import runpy, sys
    import distributed
    from distributed.deploy.spec import SpecCluster

    class Started(Exception):
        pass

    def refuse(self, *args, **kwargs):
        raise Started(type(self).__name__)

    SpecCluster.__init__ = refuse
    distributed.Client.__init__ = refuse
    failures = []
    for target in sys.argv[1:]:
        try:
            if target.endswith(".py"):
                runpy.run_path(target, run_name="__mp_main__")
            else:
                runpy.run_module(target, run_name="__mp_main__", alter_sys=True)
        except Started as exc:
            failures.append(f"{target}: starts a Dask {exc} when imported")
        except BaseException as exc:
            failures.append(f"{target}: fails when imported as a spawned worker's main module: {exc!r}")
    print("\\n".join(failures))
    sys.exit(1 if failures else 0)
""")


def spawn_check(*targets):
    return subprocess.run([sys.executable, "-c", SPAWN_CHECK, *map(str, targets)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, check=False)


def test_spawn_check_catches_module_level_clusters(tmp_path):
    bad = tmp_path / "bad_script.py"
    bad.write_text("from workflows.cluster import dask_client\n\nwith dask_client() as client:\n    pass\n")
    uses_snakemake = tmp_path / "uses_snakemake.py"
    uses_snakemake.write_text("out = snakemake.output[0]\n")
    good = tmp_path / "good_script.py"
    good.write_text("from workflows.cluster import dask_client\n\n\ndef main():\n"
                    "    with dask_client() as client:\n        pass\n\n\n"
                    "if __name__ == '__main__':\n    main()\n")
    res = spawn_check(bad, uses_snakemake, good)
    assert res.returncode == 1
    assert "bad_script.py: starts a Dask LocalCluster" in res.stdout
    assert "uses_snakemake.py" in res.stdout and "snakemake" in res.stdout.split("uses_snakemake.py")[1]
    assert "good_script" not in res.stdout


def test_workflow_entry_points_start_nothing_when_imported_by_a_worker():
    # `python -m dpmmbench.workflows` is not checked: spawn never re-imports a package's __main__.
    scripts = sorted((ROOT / "workflows" / "scripts").glob("*.py"))
    res = spawn_check("workflows.cli", *scripts)
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]


def test_parallel_ceiling_runs_the_probe_alone_and_on_every_worker():
    from dpmmbench.workflows.probe import parallel_ceiling

    with cluster.dask_client(workers=2, threads=1) as client:
        probe = parallel_ceiling(client, reps=3, blocks=2, n=200_000)
    assert probe["workers"] == 2
    # every repetition ran: 3 on one worker alone, 3 on each of the two at once
    assert probe["alone_runs"] == 3 and probe["together_runs"] == 6
    assert probe["alone_s"] > 0 and probe["together_s"] > 0
    assert probe["scaling"] == pytest.approx(2 * probe["alone_s"] / probe["together_s"])
    # No bound on the scaling itself: a few 3 ms runs while the other pytest process computes
    # are noise (CI once saw 3.7x from two runs); the asv MachineCeiling benchmark measures it.
