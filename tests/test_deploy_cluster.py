"""The workflow on a cluster started the way a deployment starts one (docs/deploy.md): a
``dask scheduler --scheduler-file F`` process and two ``dask worker --scheduler-file F``
processes on 127.0.0.1, each in a session of its own, as a batch job or a supervisor would
launch them. The real Snakemake workflow with ``dask: {scheduler_file: F}`` gives the traces
of the same config on the workflow's own embedded cluster, seed for seed; a worker process
tree killed (SIGKILL) in the middle of a sharded run is survived with the same trace; and
the workflow leaves the cluster it did not start running, as it found it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path

import pytest

from dpmmbench.algorithms.backends.dask_backend import live_workers
from dpmmbench.reports.traces import read_trace
from dpmmbench.workflows.cluster import MALLOC_ENVIRONMENT, scheduler_file_address, thread_environment
from dpmmbench.workflows.service_client import SERVICE_VARIABLE
from test_faults import NOT_REPRODUCIBLE
from test_service import left_behind, no_scheduler_env, snakemake, tiny_config, untimed  # noqa: F401 (autouse)

# each starts Dask processes and runs Snakemake to the end: seconds to tens of seconds apiece
pytestmark = pytest.mark.slow

#: the venv's own `dask` command (the one a deployment's job script runs)
DASK = Path(sys.executable).parent / "dask"
#: long enough that a sharded run lasts seconds on two workers (about 10 ms an iteration), so
#: that a worker can be killed well inside its chain; the data stay small
DATASET = "synth-chang2013?n=2000"
ITERATIONS = 300
#: the grid of the comparison: a serial sampler and a sharded one on 1 and 2 workers
GRID = {"datasets": {"chang": DATASET}, "algorithms": ["gibbs", "subc"], "iterations": ITERATIONS,
        "time_budget": 600}
#: seconds to wait for a process of the deployment to come up, or a run to reach its chain
STARTUP_S = 60.0


class Deployment:
    """A scheduler and workers started as separate ``dask`` commands, as on a real cluster.

    Every process runs in ``folder`` (so that :func:`test_service.left_behind` finds any left
    over) and in a session of its own (so that a kill takes a worker's nanny and its worker
    process together, as a lost node would). The workers get the thread limits of the
    workflow's embedded workers (``cluster.thread_environment``, and its malloc settings), so
    that the numerical libraries compute the same way.
    """

    def __init__(self, folder: Path):
        self.folder = folder
        self.scheduler_file = folder / "scheduler.json"
        self.env = {k: v for k, v in os.environ.items() if k not in ("DASK_SCHEDULER_ADDRESS", SERVICE_VARIABLE)}
        self.env.update(thread_environment(1), **MALLOC_ENVIRONMENT)
        self.scheduler = None
        self.workers: list[subprocess.Popen] = []
        self._started = 0

    def _launch(self, name, *args):
        log = open(self.folder / f"{name}.log", "w")
        with log:  # the child keeps its own copy of the descriptor
            return subprocess.Popen([str(DASK), *args], cwd=self.folder, env=self.env, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def start_scheduler(self):
        self.scheduler = self._launch("scheduler", "scheduler", "--scheduler-file", str(self.scheduler_file),
                                      "--host", "127.0.0.1", "--port", "0", "--dashboard-address", "127.0.0.1:0")
        deadline = time.monotonic() + STARTUP_S
        while not self.scheduler_file.exists():
            assert self.scheduler.poll() is None, self.log("scheduler")
            assert time.monotonic() < deadline, "the scheduler wrote no scheduler file"
            time.sleep(0.05)

    def start_worker(self) -> subprocess.Popen:
        """One more ``dask worker`` (a nanny and its worker process), as a supervisor restarts one."""
        name = f"worker{self._started}"
        self._started += 1
        proc = self._launch(name, "worker", "--scheduler-file", str(self.scheduler_file), "--host", "127.0.0.1",
                            "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                            "--local-directory", str(self.folder / name))
        self.workers.append(proc)
        return proc

    @property
    def address(self) -> str:
        return scheduler_file_address(self.scheduler_file)

    def kill(self, proc: subprocess.Popen):
        """SIGKILL a whole ``dask`` command: its process group (nanny and worker together)."""
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def stop(self):
        for proc in [*self.workers, self.scheduler]:
            if proc is not None:
                self.kill(proc)

    def log(self, name) -> str:
        with suppress(OSError):
            return (self.folder / f"{name}.log").read_text()[-3000:]
        return ""


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """A scheduler and two workers started as separate commands, and a client of them; every
    process is killed at the end, and none may be left."""
    import distributed

    deployment = Deployment(tmp_path_factory.mktemp("deployment"))
    try:
        deployment.start_scheduler()
        for _ in range(2):
            deployment.start_worker()
        with distributed.Client(scheduler_file=str(deployment.scheduler_file), timeout=STARTUP_S) as client:
            client.wait_for_workers(2, timeout=STARTUP_S)
            yield deployment, client
    finally:
        deployment.stop()
        assert left_behind(deployment.folder) == []


def run_workflow(folder: Path, *options, **changes) -> Path:
    """The grid of :data:`GRID` (with ``changes``) run to the end by Snakemake in ``folder``
    (with its command-line ``options``); its results folder."""
    folder.mkdir()
    config = tiny_config(folder, **{**GRID, **changes})
    proc = snakemake(folder / "work", config, "results/summary.csv", *options)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    assert left_behind(folder / "work") == []  # its run service stopped
    return folder / "work" / "results"


def traces(results: Path) -> dict:
    """Relative path -> (trace, metadata) of every trace of a results folder."""
    return {p.relative_to(results).as_posix(): read_trace(p) for p in sorted((results / "traces").rglob("*.parquet"))}


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """The traces of the grid on the workflow's own embedded cluster (2 workers x 1 thread)."""
    results = run_workflow(tmp_path_factory.mktemp("embedded") / "run",
                           dask={"scheduler": None, "workers": [1, 2], "threads": 1})
    found = traces(results)
    assert len(found) == 3 and all(meta["dask"]["embedded"] for _, meta in found.values())
    return found


def cluster_state(deployment, client) -> dict:
    """What must outlive a workflow unchanged: the scheduler's process, each worker's address
    and process (both answering), and the ``dask`` commands that are running."""
    return {"scheduler": client.run_on_scheduler(os.getpid), "workers": client.run(os.getpid),
            "commands": [p.pid for p in [deployment.scheduler, *deployment.workers] if p.poll() is None]}


def test_the_workflow_on_a_deployed_cluster_gives_the_embedded_traces_and_leaves_it_running(
        deployed, embedded, tmp_path):
    """``dask: {scheduler_file: F}``: every run of the grid computes on the deployed cluster
    (its metadata say so: not embedded, shared by the workflow's run service) and its trace
    is the embedded cluster's, row for row, but for the timings; afterwards the scheduler and
    both workers are the same processes, at the same addresses, and still take work."""
    deployment, client = deployed
    before = cluster_state(deployment, client)
    results = run_workflow(tmp_path / "run", dask={"scheduler_file": str(deployment.scheduler_file),
                                                   "workers": [1, 2], "threads": 1})
    found = traces(results)
    assert sorted(found) == sorted(embedded)
    for path, (trace, meta) in found.items():
        expected, expected_meta = embedded[path]
        assert untimed(trace).equals(untimed(expected)), path
        assert meta["heldout_lpd"] == expected_meta["heldout_lpd"], path
        assert meta["dask"]["scheduler"] == deployment.address and not meta["dask"]["embedded"], path
        assert meta["dask"]["shared"] and meta["dask"]["n_workers"] == 2 and meta["threads"] == 1, path
        assert len(meta["dask"]["reserved"]) == meta["workers"], path
    assert cluster_state(deployment, client) == before and len(before["commands"]) == 3
    assert client.submit(sum, [1, 2], pure=False).result(timeout=30) == 3


def test_jobs_without_the_run_service_use_the_scheduler_files_cluster(deployed, embedded, tmp_path):
    """With ``--no-hooks`` (as Snakemake runs a job spawned on another machine, e.g. by an
    executor plugin) there is no run service: each job is a `dpmmbench run` of its own, and
    it computes on the cluster the scheduler file names, not on a cluster of its own."""
    deployment, client = deployed
    before = cluster_state(deployment, client)
    results = run_workflow(tmp_path / "run", "--no-hooks", algorithms=["gibbs"],
                           dask={"scheduler_file": str(deployment.scheduler_file), "workers": [1], "threads": 1})
    ((path, (trace, meta)),) = traces(results).items()
    assert untimed(trace).equals(untimed(embedded[path][0]))
    assert meta["dask"]["scheduler"] == deployment.address
    assert not meta["dask"]["embedded"] and not meta["dask"]["shared"]
    assert cluster_state(deployment, client) == before


class Killer(threading.Thread):
    """SIGKILLs one ``dask worker`` command once a sharded run is inside its chain.

    The run's shards are Dask actors (keys ``shard-actor-<group>-...``, one group per shard
    set): the driver's warm-up on a few points makes the first group, the chain the second.
    The worker is killed when the second group's actors have stood for ``delay`` seconds.
    """

    def __init__(self, deployment, client, victim, delay=0.5):
        super().__init__(daemon=True)
        self.deployment, self.client, self.victim, self.delay = deployment, client, victim, delay
        self.killed_at = None  #: seconds after the chain's actors appeared
        self.groups: list[str] = []
        self.done = threading.Event()

    def run(self):
        deadline = time.monotonic() + 10 * STARTUP_S
        chain_since = None
        while not self.done.is_set() and time.monotonic() < deadline:
            keys = {str(k) for held in self.client.has_what().values() for k in held}
            for group in sorted({k.split("-")[2] for k in keys if k.startswith("shard-actor-")}):
                if group not in self.groups:
                    self.groups.append(group)
            if len(self.groups) >= 2 and chain_since is None:
                chain_since = time.monotonic()
            if chain_since is not None and time.monotonic() - chain_since >= self.delay:
                self.deployment.kill(self.victim)
                self.killed_at = time.monotonic() - chain_since
                return
            time.sleep(0.01)


def test_a_worker_killed_mid_run_is_survived_with_the_same_trace(deployed, embedded, tmp_path):
    """A whole ``dask worker`` (nanny and worker) SIGKILLed while `subc` runs on both workers:
    the run completes every iteration on the survivor, its trace records one lost worker and
    is otherwise the embedded run's; the scheduler and the survivor are untouched, and a
    worker started again, as a supervisor would, joins and takes work."""
    deployment, client = deployed
    victim, survivor = deployment.workers[-2:]
    killer = Killer(deployment, client, victim)
    killer.start()
    try:
        results = run_workflow(tmp_path / "run", algorithms=["subc"],
                               dask={"scheduler_file": str(deployment.scheduler_file), "workers": [2], "threads": 1})
    finally:
        killer.done.set()
        killer.join()
    assert killer.killed_at is not None, f"the worker was never killed (actor groups seen: {killer.groups})"
    ((path, (trace, meta)),) = traces(results).items()
    expected, _ = embedded[path]
    assert len(trace) == ITERATIONS + 1 and meta["status"] == "completed"
    lost = trace["workers_lost"].to_numpy()
    assert lost.sum() == 1 and lost[0] == 0, lost  # one loss, inside the chain
    assert expected["workers_lost"].sum() == 0
    reproducible = [c for c in expected.columns if c not in NOT_REPRODUCIBLE]
    assert trace[reproducible].equals(expected[reproducible])
    assert meta["dask"]["scheduler"] == deployment.address and not meta["dask"]["embedded"]

    assert victim.poll() is not None and deployment.scheduler.poll() is None and survivor.poll() is None
    assert len(live_workers(client)) == 1
    deployment.start_worker()
    client.wait_for_workers(2, timeout=STARTUP_S)
    assert sorted(client.run(lambda: 3).values()) == [3, 3]
