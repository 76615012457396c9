"""Threads share the per-point work without changing the chain: the same seed and the same
number of workers give the same labels, statistics and info with one thread or two (the label
steps draw each chunk's uniforms from its own seeded stream, docs/deploy.md "Choosing workers
and threads")."""
from __future__ import annotations

import numba
import numpy as np
import pytest
from conftest import untimed

from dpmmbench import algorithms, datasets
from dpmmbench.algorithms.backends import SerialBackend

#: big enough that the parallel kernels run (several chunks of rows, rows x clusters >= 2**15)
DATASET = "synth-chang2013?n=9000"


def chain(name, threads, steps=12, dataset=DATASET, **options):
    ds = datasets.load(dataset)
    previous = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        s = algorithms.make(name, family=ds.family, seed=3, **options)
        state = s.init(ds.X, init_clusters=4)
        out = []
        for _ in range(steps):
            state = s.step(state)
            out.append((state.labels.copy(), untimed(state.info)))
        return out
    finally:
        numba.set_num_threads(previous)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads (NUMBA_NUM_THREADS >= 2)")
@pytest.mark.parametrize("name, options", [("subc", {}), ("subc", {"backend": SerialBackend(2)}), ("fsd", {}),
                                           ("subc-supc", {}), ("slice-mr", {"backend": SerialBackend(2)}),
                                           ("subc", {"dataset": "synth-wang2017?scale=0.1"}),
                                           ("subc", {"dataset": "synth-chang2013?n=9000&dim=24"})],
                         ids=["subc", "subc-2-shards", "fsd", "subc-supc", "slice-mr-2-shards", "subc-isotropic",
                              "subc-24-d"])  # 24-D: block products, weights bounded (niw.PRUNE_MIN_D)
def test_one_thread_or_two_give_the_same_chain(name, options):
    one, two = chain(name, 1, **options), chain(name, 2, **options)
    assert any(info["n_clusters"] != 4 for _, info in one)  # the chain moved
    for (labels_1, info_1), (labels_2, info_2) in zip(one, two):
        np.testing.assert_array_equal(labels_1, labels_2)
        assert info_1 == info_2
