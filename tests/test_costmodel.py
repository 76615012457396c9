"""The scaling cost model (reports/costmodel.py): it recovers known parameters from synthetic
traces, reproduces the real runs it was fitted on, behaves like a cost model should (linear
speed-up when communication is free, a peak where per-worker compute meets communication),
and says what is missing instead of failing."""
from __future__ import annotations

import math
import struct

import numpy as np
import pandas as pd
import pytest

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.algorithms.backends import SerialBackend
from dpmmbench.reports import costmodel as cm
from dpmmbench.reports import figures
from dpmmbench.reports.runs import read_runs
from dpmmbench.reports.traces import read_trace, write_trace
from dpmmbench.workflows import driver

DATA = "synth-wang2017?n_clusters=10&scale=0.05"
ITERATIONS = 40
SEEDS = (0, 1)

#: parameters of a consolidation-like sampler: the shards' compute dominates at 1 worker
CONS = dict(serial_s=0.004, compute_s=0.030, shard_s=0.002, imbalance=1.25, bytes_fixed=200.0,
            bytes_per_worker=1500.0, moved_bytes=0.0, messages_fixed=0.0, messages_per_worker=2.0)
#: an auxvar-like sampler: rows of whole clusters move between workers
MOVING = dict(CONS, messages_per_worker=4.0, moved_bytes=24_000.0, bytes_fixed=0.0, bytes_per_worker=600.0)


def synthetic_trace(params, workers=(1, 2), seeds=(0, 1), iterations=60, noise=0.02, sequential=False, seed=0):
    """Trace rows generated from ``params`` the way the model reads them: per iteration the
    master's share, the shards' compute and the loopback transport add up to the step time.
    Times get independent log-normal noise with median 1, so medians are unbiased."""
    rng = np.random.default_rng(seed)
    rows = []
    for W in workers:
        n_bytes = params["bytes_fixed"] + params["bytes_per_worker"] * W + 2 * params["moved_bytes"] * (W - 1) / W
        moved = params["moved_bytes"] * (W - 1) / W
        messages = params["messages_fixed"] + params["messages_per_worker"] * W
        for s in seeds:
            # iteration 0 ships the data: huge and slow, and must not count
            t = 5.0
            rows.append(dict(seed=s, workers=W, iteration=0, time_s=t, compute_s=1.0, compute_max_s=1.0,
                             bytes_sent=10**7, bytes_received=0, messages=W, moved_bytes=0))
            for it in range(1, iterations + 1):
                compute = (params["compute_s"] + params["shard_s"] * W) * rng.lognormal(0, noise)
                compute_max = compute / W * (params["imbalance"] if W > 1 else 1.0)
                path = compute if sequential else compute_max
                t += (params["serial_s"] * rng.lognormal(0, noise) + path
                      + float(cm.LOOPBACK.transport_s(n_bytes, messages)))
                rows.append(dict(seed=s, workers=W, iteration=it, time_s=t, compute_s=compute,
                                 compute_max_s=compute_max, bytes_sent=n_bytes / 2, bytes_received=n_bytes / 2,
                                 messages=messages, moved_bytes=moved))
    return pd.DataFrame(rows).assign(sequential=sequential)


def true_model(params):
    return cm.CostModel(**params, measured=pd.DataFrame())


# ---- recovery of known parameters -------------------------------------------------------------
@pytest.mark.parametrize("params", [CONS, MOVING], ids=["consolidation-like", "rows-move"])
@pytest.mark.parametrize("workers", [(1, 2), (1, 2, 4)])
def test_fit_recovers_the_parameters_of_synthetic_traces(params, workers):
    model = cm.fit(synthetic_trace(params, workers))
    assert model.serial_s == pytest.approx(params["serial_s"], rel=0.03)
    assert model.compute_s == pytest.approx(params["compute_s"], rel=0.03)
    # c is a difference of two noisy totals: judged on the scale of the total compute
    assert model.shard_s == pytest.approx(params["shard_s"], abs=0.02 * params["compute_s"])
    assert model.imbalance == pytest.approx(params["imbalance"], rel=1e-9)
    for key in ("bytes_fixed", "bytes_per_worker", "moved_bytes", "messages_fixed", "messages_per_worker"):
        assert getattr(model, key) == pytest.approx(params[key], abs=1e-6), key
    # and so it predicts what the true parameters predict, far beyond the measured counts
    fitted = cm.predict(model, 0.1)
    true = cm.predict(true_model(params), 0.1)
    np.testing.assert_allclose(fitted["iteration_s"], true["iteration_s"], rtol=0.03)


def test_sequential_shards_are_fitted_as_such():
    """On the serial backend the shards of a step run one after another: their whole compute,
    not the slowest shard, is on the critical path; told so, the fit recovers the same model."""
    trace = synthetic_trace(CONS, sequential=True)
    model = cm.fit(trace)
    assert model.serial_s == pytest.approx(CONS["serial_s"], rel=0.03)
    assert model.compute_s == pytest.approx(CONS["compute_s"], rel=0.03)
    # read as parallel, the other shard's compute would be taken for master time
    parallel = cm.fit(trace.assign(sequential=False))
    assert parallel.serial_s > model.serial_s + 0.25 * CONS["compute_s"] / 2


def test_iteration_zero_and_lost_workers_are_left_out():
    trace = synthetic_trace(CONS)
    lost = trace.assign(workers_lost=0)
    hit = lost.index[(lost["iteration"] == 5) & (lost["workers"] == 2)]
    lost.loc[hit, "workers_lost"] = 1
    # the iteration that lost a worker took 100 times longer: recovery, not an iteration
    later = lost.index[(lost["workers"] == 2) & (lost["iteration"] >= 5)]
    lost.loc[later, "time_s"] += 100 * CONS["compute_s"]
    assert cm.fit(lost).serial_s == pytest.approx(cm.fit(trace).serial_s, rel=0.05)
    assert cm.measure(trace)["iterations"].tolist() == [120, 120]


# ---- the model's behaviour ---------------------------------------------------------------------
def test_free_communication_and_no_master_give_linear_speedup():
    model = true_model(dict(CONS, serial_s=0.0, shard_s=0.0, imbalance=1.0))
    free = cm.Network(bandwidth=1e30, latency=0.0)
    curve = cm.predict(model, reference_s=0.05, network=free)
    np.testing.assert_allclose(curve["speedup"] / curve["speedup"].iloc[0], curve["workers"], rtol=1e-9)


def test_speedup_peaks_where_per_worker_compute_meets_communication():
    """T(W) = S + C/W + k W with k the per-worker traffic cost: the speed-up grows while
    C/W dominates, peaks at W* = sqrt(C / k), falls beyond, and never exceeds what the
    master alone allows."""
    params = dict(CONS, shard_s=0.0, imbalance=1.0, bytes_fixed=0.0, compute_s=1.0)
    model = true_model(params)
    k = params["messages_per_worker"] * cm.GIGABIT.latency + params["bytes_per_worker"] / cm.GIGABIT.bandwidth
    best = math.sqrt(params["compute_s"] / k)
    assert 1 < best < 64
    curve = cm.predict(model, reference_s=1.0).set_index("workers")["speedup"]
    peak = int(curve.idxmax())
    assert abs(peak - best) <= 1
    assert curve.loc[:peak].is_monotonic_increasing and curve.loc[peak:].is_monotonic_decreasing
    assert curve.max() < 1.0 / params["serial_s"]
    # a slower network moves the peak to fewer workers and lowers it
    slow = cm.predict(model, reference_s=1.0, network=cm.Network(cm.GIGABIT.bandwidth / 10, 10 * cm.GIGABIT.latency))
    assert slow.set_index("workers")["speedup"].idxmax() < peak and slow["speedup"].max() < curve.max()


def test_moved_rows_saturate_and_latency_counts_per_message():
    model = true_model(MOVING)
    w = np.array([1, 2, 64, 10_000])
    moved = model.bytes(w) - MOVING["bytes_per_worker"] * w
    assert moved[0] == 0 and np.all(np.diff(moved) > 0) and moved[-1] < 2 * MOVING["moved_bytes"]
    slower = cm.Network(cm.GIGABIT.bandwidth, cm.GIGABIT.latency + 1e-3)
    extra = model.iteration_s(w, slower) - model.iteration_s(w, cm.GIGABIT)
    np.testing.assert_allclose(extra, model.messages(w) * 1e-3)
    with pytest.raises(ValueError, match="bandwidth"):
        cm.Network(0.0, 1e-3)


# ---- real traces --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """Real traces on the serial backend (shards one after another): gibbs, and three sharded
    samplers at 1 and 2 workers, two seeds; run metadata as the driver writes it. The worker
    counts of a seed run back to back, so that a burst of load from elsewhere on a shared
    machine falls on both rather than on one."""
    out = tmp_path_factory.mktemp("costmodel")
    data = datasets.load(DATA)
    paths = {}
    for seed in SEEDS:
        for name in ("gibbs", "slice-mr", "cons-prog", "auxvar"):
            for workers in (1,) if name == "gibbs" else (1, 2):
                backend = None if name == "gibbs" else SerialBackend(workers)
                sampler = algorithms.make(name, family=data.family, alpha=1.0, seed=seed,
                                          **({"backend": backend} if backend else {}))
                trace = driver.run_chain(sampler, data.X, ITERATIONS, truth=data.labels,
                                         dataset=data.name, workers=workers)
                meta = {"algorithm": name, "options": sampler.params,
                        "backend": backend.describe() if backend else "serial: one task"}
                paths[name, workers, seed] = write_trace(trace, out / f"{name}-{workers}-{seed}.parquet", meta)
    return paths


def test_model_reproduces_the_real_runs_it_was_fitted_on(traces):
    frame, runs = read_runs(traces.values())
    scaling = cm.scaling(frame, runs)
    assert set(scaling.models) == {"slice-mr", "cons-prog", "auxvar"}  # gibbs is serial: no model
    assert scaling.reference_s > 0
    for variant, model in scaling.models.items():
        check = cm.in_sample(model)
        assert check["workers"].tolist() == [1, 2]
        assert model.measured["sequential"].all() and (model.measured["runs"] == len(SEEDS)).all()
        # Its parts add up to what was measured: with the master share measured at each
        # worker count instead of their average, each measured median step time comes back.
        m = model.measured
        composed = check["model_s"] - model.serial_s + m["master_s"]
        np.testing.assert_allclose(composed, check["measured_s"], rtol=0.15, err_msg=variant)
        # With one master share for all worker counts: right on average, and each point
        # within reason (the master's share differs between worker counts by what the
        # machine was doing, and by the extra shard the master handles).
        assert check["model_s"].mean() == pytest.approx(check["measured_s"].mean(), rel=0.15), (variant, check)
        assert (check["error"].abs() < 0.5).all(), (variant, check)
        # W = 1 on the modelled network: the fitted parts plus real transport, nothing else
        one = cm.predict(model, scaling.reference_s, workers=[1]).iloc[0]
        assert one["iteration_s"] == pytest.approx(model.serial_s + model.compute_s + model.shard_s
                                                   + float(cm.GIGABIT.transport_s(one["bytes"], one["messages"])))
    # bytes and messages at the measured counts are the measured ones
    for variant, model in scaling.models.items():
        m = model.measured
        np.testing.assert_allclose(model.messages(m["workers"]), m["messages"])
        np.testing.assert_allclose(model.bytes(m["workers"]), m["bytes"], rtol=0.2)
    # auxvar moves rows: their bytes saturate instead of growing with W
    aux = scaling.models["auxvar"]
    assert aux.moved_bytes > 0 and aux.bytes(64) < aux.bytes(2) * 40
    assert scaling.measured.groupby("name")["workers"].apply(list).to_dict() == {
        "slice-mr": [1, 2], "cons-prog": [1, 2], "auxvar": [1, 2]}
    assert any("one after another" in note for note in scaling.notes)


def test_missing_runs_give_notes_not_errors(traces, tmp_path):
    # a trace written before the backends reported compute_s
    old, meta = read_trace(traces["slice-mr", 2, 0])
    stale = write_trace(old.drop(columns=["compute_s", "compute_max_s", "workers_lost"]),
                               tmp_path / "old.parquet", meta)
    frame, runs = read_runs([stale, traces["cons-prog", 2, 0], traces["auxvar", 1, 0], traces["auxvar", 2, 0]])
    scaling = cm.scaling(frame, runs)
    assert set(scaling.models) == {"cons-prog", "auxvar"}
    assert math.isnan(scaling.reference_s) and scaling.predictions["speedup"].isna().all()
    notes = " ".join(scaling.notes)
    assert "slice-mr" in notes and "compute_s" in notes
    assert "cons-prog: measured at 2 worker(s) only" in notes
    assert "No single-worker gibbs runs" in notes
    # one measured count: bytes and messages proportional to W, no per-shard cost
    model = scaling.models["cons-prog"]
    assert model.shard_s == 0 and model.messages_fixed == 0 and model.messages(4) == 2 * model.messages(2)

    # a serial sampler has nothing to fit; a data set with no sharded run has no model
    gibbs, _ = read_trace(traces["gibbs", 1, 0])
    with pytest.raises(ValueError, match="compute_s"):
        cm.fit(gibbs)
    frame, runs = read_runs([traces["gibbs", 1, 0]])
    empty = cm.scaling(frame, runs)
    assert not empty.models and not empty.notes and empty.predictions.empty


def png_size(data: bytes):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_figures_render(traces):
    frame, runs = read_runs(traces.values())
    scaling = cm.scaling(frame, runs)
    colours = dict(zip(scaling.models, ("C0", "C1", "C2")))
    for reference in ("gibbs", None):
        width, height = png_size(figures.scaling_figure(scaling.predictions, scaling.measured, colours,
                                                        "model (1 Gbit/s, 0.2 ms)", reference))
        assert width > 500 and height > 300
    aux = frame[frame["name"] == "auxvar"]
    width, height = png_size(figures.load_figure(aux))
    assert width > 500 and height > 300
