"""Hostile clusters: a step that fails on one shard every time, a cluster whose workers never
come, and peers that are not Dask schedulers. Each ends in a clear error after the timeout
it is given (the message says which), and a failed run leaves its trace so far, marked
``status: failed``.

Only loopback addresses. The hostile-peer cases run in a child interpreter (tests/isolation.py)
with a hard timeout, so a hang fails the test instead of the test run.
"""
from __future__ import annotations

import struct

import dask
import distributed
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from isolation import Isolated

import hostile_cluster as hc
from dpmmbench import algorithms
from dpmmbench.algorithms.backends import DaskBackend
from dpmmbench.algorithms.backends.dask_backend import ShardFailedError, live_workers, wait_for_workers
from dpmmbench.reports.traces import read_trace
from dpmmbench.workflows import cluster, driver

#: the probe's timeout in the connect cases (seconds)
CONNECT_TIMEOUT = 2.0
#: ... with a hostile peer, which the probe waits for until the timeout (a real Dask server
#: greets at once: the probe then needs no more)
HOSTILE_TIMEOUT = 1.0
DATASET = f"synth-chang2013?n={hc.N_POINTS}"


@pytest.fixture(scope="module")
def child():
    # the hang guard of the connect cases: 15 times the probe's timeout (a case that does
    # not answer in time fails, and the next one gets a fresh child)
    runner = Isolated(timeout=15 * CONNECT_TIMEOUT)
    yield runner
    runner.close()


@pytest.fixture(scope="module")
def empty_cluster():
    """A scheduler with no workers, on the loopback interface."""
    with distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address="127.0.0.1:0") as lc:
        yield lc


def connect_to(child, served, timeout=CONNECT_TIMEOUT):
    """``hostile_cluster.connect_case`` on the address of ``served`` (a ``(server, address)``
    pair, shut down after); ``(outcome, message, seconds)``."""
    server, address = served
    try:
        return child.run("hostile_cluster:connect_case", address, timeout).value
    finally:
        server.shutdown()
        server.server_close()


def attempts(marker) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


# ---- item 2: the retry budget ----------------------------------------------------------
def test_a_step_that_kills_its_worker_every_time_fails_after_the_retry_budget(tmp_path):
    """The step kills its worker on shard 1 every time it runs. Without a budget the
    backend rebuilt the shard on the next worker, which died too, for ever. Now: the step
    is sent ``1 + retries`` times, then an error names the shard, the worker and the
    cause."""
    marker = tmp_path / "attempts"
    with cluster.dask_client(workers=2, threads=1) as client:
        backend = DaskBackend(client, n_workers=2, retries=1, timeout=20)
        group = backend.distribute(np.zeros((10, 1)), np.zeros(10, dtype=np.int64), seed=0)
        assert group.map(hc.raise_on_shard, 5) == [0, 1]  # a healthy step first
        with pytest.raises(ShardFailedError, match=r"shard 1 failed.* 2 times in a row.*retries = 1.*"
                                                   r"last worker tcp://127\.0\.0\.1:\d+, cause \w+"):
            group.map(hc.kill_worker_on_shard, (1, str(marker)))
        assert attempts(marker) == 2  # the budget, not one more


def test_a_map_function_that_raises_is_not_retried_and_names_its_shard(client):
    """A map function's own exception is deterministic: raised at once, with its type, and
    a note naming the shard and its worker (the group is then unusable: its steps are
    inconsistent)."""
    group = DaskBackend(client, n_workers=2).distribute(np.zeros((10, 1)), np.zeros(10, dtype=np.int64), seed=0)
    try:
        with pytest.raises(ArithmeticError, match="deterministic failure on shard 1") as info:
            group.map(hc.raise_on_shard, 1)
        notes = info.value.__notes__
        assert len(notes) == 1 and notes[0].startswith("(raised by shard 1 on Dask worker tcp://127.0.0.1:")
    finally:
        group.close()


def test_retries_and_timeouts_are_checked_and_read_from_the_dask_config(client):
    """Arguments win over the Dask config keys (also set as DASK_DPMMBENCH__... variables);
    a bad value of either is a ValueError naming it."""
    with dask.config.set({"dpmmbench.retries": 4, "dpmmbench.worker-timeout": 7}):
        backend = DaskBackend(client, n_workers=2)
    assert (backend.retries, backend.timeout) == (4, 7.0)
    assert (DaskBackend(client).retries, DaskBackend(client).timeout) == (2, 30.0)
    with dask.config.set({"dpmmbench.worker-timeout": "1.5s"}):  # as DASK_DPMMBENCH__WORKER_TIMEOUT=1.5s
        assert DaskBackend(client).timeout == 1.5
    for bad in ({"retries": -1}, {"retries": 1.5}, {"retries": True}, {"retries": "2"}, {"timeout": 0},
                {"timeout": float("nan")}, {"timeout": float("inf")}, {"timeout": "soon"}, {"timeout": True}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            DaskBackend(client, **bad)
    with dask.config.set({"dpmmbench.retries": -2}), pytest.raises(ValueError, match=r"dpmmbench\.retries"):
        DaskBackend(client)
    with dask.config.set({"dpmmbench.scheduler-timeout": "never"}), \
            pytest.raises(ValueError, match=r"dpmmbench\.scheduler-timeout must be a positive number of seconds"):
        cluster.connect(client.scheduler.address)


# ---- item 2: a failed run leaves its trace so far -------------------------------------------
def test_a_sharded_run_that_fails_writes_its_partial_trace_marked_failed(tmp_path, monkeypatch):
    marker = tmp_path / "attempts"
    monkeypatch.setattr(hc.ShardKillingSliceMR, "marker", str(marker))
    monkeypatch.setattr(algorithms, "get", lambda name: hc.ShardKillingSliceMR)
    out = tmp_path / "trace.parquet"
    with dask.config.set({"dpmmbench.retries": 1}), pytest.raises(ShardFailedError, match="shard 1 failed"):
        driver.run(driver.RunSpec("slice-mr", DATASET, 6, seed=1, workers=2, test_fraction=0), out=out)
    assert attempts(marker) == 2
    trace, meta = read_trace(out)
    assert list(trace["iteration"]) == list(range(hc.FAIL_AT))  # every step before the failed one
    assert meta["status"] == "failed" and meta["iterations"] == hc.FAIL_AT - 1
    assert meta["error"].startswith("ShardFailedError: shard 1 failed")


def test_a_serial_run_that_fails_in_its_worker_writes_its_partial_trace(tmp_path, monkeypatch):
    """The chain of a serial sampler runs in a worker process: its rows come back too."""
    monkeypatch.setattr(algorithms, "get", lambda name: hc.FailingGibbs)
    out = tmp_path / "trace.csv"
    with pytest.raises(ArithmeticError, match="the step failed on purpose"):
        driver.run(driver.RunSpec("gibbs", DATASET, 6, seed=1, workers=1, test_fraction=0), out=out)
    trace, meta = read_trace(out)
    assert list(trace["iteration"]) == list(range(hc.FAIL_AT))
    assert meta["status"] == "failed" and meta["error"] == "ArithmeticError: the step failed on purpose"
    assert meta["algorithm"] == "gibbs" and meta["dask"]["n_workers"] == 1


def test_a_run_says_how_it_ended(tmp_path, scheduler):
    _, meta = driver.run(driver.RunSpec("gibbs", "synth-chang2013?n=50", 2, seed=1, warmup=False,
                                        scheduler=scheduler), out=tmp_path / "t.csv")
    assert meta["status"] == "completed"
    assert not (tmp_path / "t.csv").exists()  # a successful run's trace is the caller's to write
    _, meta = driver.run(driver.RunSpec("gibbs", "synth-chang2013?n=50", 5, seed=1, warmup=False, time_budget=1e-9,
                                        scheduler=scheduler))
    assert meta["status"] == "stopped: time budget" and meta["iterations"] < 5


# ---- item 2: workers that never come ----------------------------------------------------
def test_waiting_for_workers_that_never_come_times_out_naming_the_address(empty_cluster):
    address = empty_cluster.scheduler_address
    with cluster.dask_client(scheduler=address) as client:
        # each waits the timeout it is given, and says so
        with pytest.raises(ValueError, match=rf"n_workers = 2: .*scheduler at {address} has 0 worker\(s\), "
                                             rf"2 expected, after waiting 1 s"):
            DaskBackend(client, n_workers=2, timeout=1)
        with dask.config.set({"dpmmbench.worker-timeout": 1}), \
                pytest.raises(TimeoutError, match=rf"no worker to run.*{address} has 0 worker\(s\), 1 expected, "
                                                  rf"after waiting 1 s"):
            wait_for_workers(client, 1, why="no worker to run the chain on")


@pytest.mark.parametrize("algorithm", ["gibbs", "slice-mr"])
def test_a_run_on_a_cluster_without_workers_fails_in_bounded_time(empty_cluster, algorithm):
    """Before, a serial run waited for ever in ``scatter``; a sharded one failed after 30 s.
    Now each waits the configured worker timeout, and says so."""
    with dask.config.set({"dpmmbench.worker-timeout": 1}), \
            pytest.raises((TimeoutError, ValueError), match=rf"{empty_cluster.scheduler_address} has 0 worker\(s\), "
                                                            rf"\d expected, after waiting 1 s"):
        driver.run(driver.RunSpec(algorithm, "synth-chang2013?n=50", 2, scheduler=empty_cluster.scheduler_address,
                                  warmup=False))


# ---- item 3: peers that are not Dask schedulers ------------------------------------------
@pytest.mark.parametrize("name", sorted(hc.GREETINGS))
def test_a_peer_that_is_not_a_dask_scheduler_is_reported(child, name):
    served = hc.raw_server(hc.GREETINGS[name])
    address = served[1]
    kind, message, _ = connect_to(child, served, timeout=HOSTILE_TIMEOUT)
    assert kind == "ConnectionError", message
    if name == "silence":
        assert message.startswith(f"no answer from {address} within 1 s")
    else:
        assert message.startswith(f"{address} answered but is not a Dask scheduler"), message


def test_a_web_server_is_reported_without_a_memory_error(child):
    """distributed read the first 8 bytes of a web server's reply as a message length."""
    served = hc.http_server()
    address = served[1]
    kind, message, _ = connect_to(child, served, timeout=HOSTILE_TIMEOUT)
    assert kind == "ConnectionError" and address in message and "MemoryError" not in message, message


def test_a_dashboard_address_is_reported(child, empty_cluster):
    host_port = empty_cluster.dashboard_link.split("//")[1].split("/")[0]
    kind, message, _ = child.run("hostile_cluster:connect_case", f"tcp://{host_port}", HOSTILE_TIMEOUT).value
    assert kind == "ConnectionError" and host_port in message, message


def test_a_closed_port_and_a_real_scheduler(child, empty_cluster):
    address = f"tcp://127.0.0.1:{hc.free_port()}"
    kind, message, _ = child.run("hostile_cluster:connect_case", address, CONNECT_TIMEOUT).value
    assert kind == "ConnectionError" and message.startswith(f"Dask scheduler at {address} did not answer")
    # the probe lets a real scheduler through
    assert child.run("hostile_cluster:connect_case", empty_cluster.scheduler_address, CONNECT_TIMEOUT).value[0] \
        == "connected"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.binary(max_size=64),
                 st.integers(0, 2 ** 64 - 1).map(lambda n: struct.pack("<Q", n)),
                 st.tuples(st.integers(16, 4096), st.binary(min_size=8, max_size=64))
                 .map(lambda t: struct.pack("<Q", t[0]) + t[1])))
@pytest.mark.slow
def test_whatever_a_hostile_peer_sends_ends_in_a_clear_error(child, greeting):
    served = hc.raw_server(greeting, hold=5.0)
    address = served[1]
    kind, message, _ = connect_to(child, served, timeout=HOSTILE_TIMEOUT)
    assert kind == "ConnectionError" and address in message, message


def test_a_worker_or_nanny_address_is_not_taken_for_a_scheduler(child, client):
    """A worker or a nanny greets like any Dask server; its identity tells it apart."""
    worker, info = next(iter(live_workers(client).items()))
    for address, kind in ((worker, "Worker"), (info["nanny"], "Nanny")):
        outcome, message, _ = child.run("hostile_cluster:connect_case", address, CONNECT_TIMEOUT).value
        assert outcome == "ConnectionError", message
        assert message == f"{address} answered but is not a Dask scheduler (it is a Dask {kind})"
