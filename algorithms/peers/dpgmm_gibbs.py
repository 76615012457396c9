"""dpgmm's collapsed Gibbs sampler in PyTorch (``dpgmm``).

dpgmm 0.2.0 (``FullCovarianceCollapsedGibbsSampler``) samples the DP mixture of
full-covariance Gaussians under a Normal-inverse-Wishart prior of its own, with the component
parameters integrated out (Student-t predictives). One step is one sweep: every point, in
batches of ``batch_size`` (1, the library's default, is sequential Gibbs; a larger batch draws
its points together given the rest, an approximation), removed from its cluster and redrawn.
dpgmm only exposes a whole fit (``fit(iterations_num)``, which restarts from a random
partition at every call), so the adapter runs its sweep through the sampler's own parts, in
the order its fit calls them: its alpha update, its removal of a batch, its batched draw
(``TorchCgsSharedComputationsManager``) and its update of the assignment, then the shuffle of
the visiting order. Its own per-sweep objective, the data log likelihood at component
parameters drawn from their posteriors, is the ``peer_objective`` column.

What it runs with, recorded by :meth:`DpgmmGibbs.settings`: its own random initial partition
(every point uniform over ``max_clusters_num`` labels), its own data-dependent prior (mean of
the data; scale the diagonal of the data's covariance over ``max_clusters_num ** (2 / D)``;
``kappa_0 = 0.01``, ``nu_0 = D + 2``: the family's prior is not used, only the family's
scoring), and its own alpha, resampled once per batch under its Gamma(``a``, ``b``) prior by
its auxiliary-variable update. That update is not the suite's (docs/algorithms.md §0.7), so
the suite's ``alpha`` stays the one of the log joint and dpgmm's is the ``peer_alpha`` column.

dpgmm draws from the process-wide generators of Python (``random``), NumPy (``np.random``) and
PyTorch. They are seeded from the chain's generator at ``init``; every call into dpgmm runs
with the chain's own generator states swapped in and the host's put back after, so chains
interleaved in one process do not disturb each other or the host (chains stepping at the same
moment in two threads of one process would: the driver runs one chain per task). The calls also run with
``WANDB_MODE=disabled`` (restored after): the adapter never calls ``fit``, which is where
dpgmm would start a Weights & Biases run, and no code path of a chain may start one. PyTorch
computes on the CPU with the threads it is given (``OMP_NUM_THREADS``, which the run driver
sets to the run's ``threads`` in a worker). Installed with ``pip install torch==2.13.0`` (a
CPU build where one is at hand) then ``pip install dpgmm==0.2.0`` (docs/design.md "Peers").
"""
from __future__ import annotations

import os
import random
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Real

import numpy as np

from ..constraints import Interval, Option
from ..families import NormalInverseWishart, NormalKnownCovariance
from ..partitions import compact
from ..state import State
from ._base import Peer

@dataclass
class DpgmmState(State):
    sampler: object = None  #: dpgmm's ``FullCovarianceCollapsedGibbsSampler``
    manager: object = None  #: its batched draws and posterior statistics
    data: object = None  #: X as a torch tensor
    clusters: list = None  #: dpgmm's partition: a set of point indices per cluster
    assignment: list = None  #: dpgmm's cluster of every point
    params: dict = None  #: dpgmm's posterior parameters of every cluster (its objective needs them)
    order: list = None  #: the order of the next sweep
    peer_alpha: float = float("nan")  #: dpgmm's own current alpha
    seed: int = 0  #: the seed of the chain's generators for dpgmm, drawn from the chain's generator
    rng_states: tuple = None  #: the chain's states of Python's, NumPy's and PyTorch's generators


class DpgmmGibbs(Peer):
    """dpgmm's collapsed Gibbs sampler (registry name ``dpgmm``)."""

    name = "dpgmm"
    info_columns = {
        "peer_objective": "dpgmm's data log likelihood at component parameters drawn from their posteriors",
        "peer_alpha": "dpgmm's own alpha, resampled under its own Gamma prior",
    }
    families = (NormalInverseWishart, NormalKnownCovariance)
    options = {
        "max_clusters_num": Option(10, Interval(int, 1), "clusters of dpgmm's random initial partition "
                                                         "(capped at the number of points; its README's value)"),
        "batch_size": Option(1, Interval(int, 1), "points drawn together; 1 is sequential collapsed Gibbs"),
        "a": Option(1.0, Interval(Real, 0, None, closed="neither"), "shape of dpgmm's Gamma prior of alpha"),
        "b": Option(1.0, Interval(Real, 0, None, closed="neither"), "rate of dpgmm's Gamma prior of alpha"),
    }

    def settings(self) -> dict:
        from importlib.metadata import version

        # its prior's constants, read from the library rather than restated
        from dpgmm.samplers.cgs.variants.base.utils import init_kappa_0, init_nu_0

        p = self.params
        return {"library": f"dpgmm {version('dpgmm')}, torch {version('torch')} on the CPU",
                "method": "collapsed Gibbs (FullCovarianceCollapsedGibbsSampler), one sweep per step",
                "batch_size": p["batch_size"],
                "alpha": f"dpgmm's own, resampled once per batch (its auxiliary-variable update) under its "
                         f"Gamma(a={p['a']}, b={p['b']}) prior (shape, rate), first drawn as "
                         "scipy.stats.gamma.rvs(a, b) (shape a, location b); the suite's alpha only scores the "
                         "partition",
                "component_prior": {"mean_0": "mean of the data",
                                    "scale": "diag(data covariance) / K0 ** (2 / D), K0 the clusters of the "
                                             "initial partition",
                                    "kappa_0": init_kappa_0(), "nu_0": f"D + {init_nu_0(0):g}",
                                    "family_prior": "not used"},
                "max_clusters_num": p["max_clusters_num"], "dtype": "float32 (dpgmm's)",
                "initialisation": f"dpgmm's random partition: every point uniform over "
                                  f"{p['max_clusters_num']} labels (max_clusters_num), seeded from the chain's "
                                  "seed (init_clusters is not used)"}

    def _init(self, X, labels, rng):
        if len(X) < 2:
            raise ValueError(f"{self.name!r} needs at least 2 points (its prior's scale is the data's variance), "
                             f"got {len(X)}")
        # dpgmm computes in single precision: a variance that float32 rounds to (near) zero makes
        # its prior's scale singular and its Cholesky factorisation fail
        if not (np.var(np.asarray(X, dtype=np.float32).astype(np.float64), axis=0) > np.finfo(np.float32).tiny).all():
            raise ValueError(f"{self.name!r} needs data of positive variance in every coordinate in single "
                             "precision, as dpgmm computes (its prior's scale is their diagonal)")
        import torch

        seed = int(rng.integers(2**31 - 1))
        # the chain's own generators: NumPy's legacy one, Python's, PyTorch's
        np_state = np.random.RandomState(seed).get_state()
        py_state = random.Random(seed).getstate()
        torch_state = torch.Generator().manual_seed(seed).get_state()
        state = DpgmmState(X, labels, rng, seed=seed, rng_states=(py_state, np_state, torch_state))
        with self._scope(state):
            from dpgmm.samplers import FullCovarianceCollapsedGibbsSampler

            p = self.params
            sampler = FullCovarianceCollapsedGibbsSampler(
                init_strategy="init_data_stats", max_clusters_num=p["max_clusters_num"],
                batch_size=p["batch_size"], device=torch.device("cpu"), a=p["a"], b=p["b"], verbose=False)
            state.sampler, state.data = sampler, torch.as_tensor(np.asarray(X, dtype=np.float32))
            state.clusters, state.assignment = sampler.get_initial_assignment(X)
            state.peer_alpha = float(sampler.alpha)
            prior = sampler.compute_prior_params(state.data, len(state.clusters))
            state.params = sampler.assign_initial_params(state.clusters, state.data, prior)
            state.manager = _quiet(sampler.create_computations_manager, state.data, state.params,
                                   p["batch_size"])
            state.order = list(range(len(X)))
            return self._report(state)

    def _step(self, state):
        with self._scope(state):
            sampler, manager, clusters, assignment = state.sampler, state.manager, state.clusters, state.assignment
            order, size, n = state.order, self.params["batch_size"], len(state.order)
            alpha = state.peer_alpha
            for start in range(0, n, size):
                alpha = sampler.update_alpha(alpha, n, len(clusters))
                batch = order[start:start + size]
                sizes_before = [len(c) for c in clusters]
                batch_clusters, emptied = sampler.remove_assignment_for_batch(batch, clusters, assignment)
                drawn = manager.sample_clusters_for_data_batch(
                    batch, batch_clusters, emptied, sizes_before, [len(c) for c in clusters], alpha,
                    return_curr_params=start + size >= n)
                sampler._update_assignments_from_batch(drawn["sampled_clusters"], batch, clusters, assignment)
            # the last batch returned every cluster's posterior parameters
            state.params = {name: drawn[name] for name in sampler.posterior_params_names()}
            state.peer_alpha = float(alpha)
            random.shuffle(order)
            return self._report(state)

    def _report(self, state):
        state.labels, K = compact(np.asarray(state.assignment, dtype=np.int64))
        objective = state.sampler.data_log_likelihood(state.clusters, state.data, state.params)
        state.info = {"n_clusters": K, "peer_objective": float(objective), "peer_alpha": state.peer_alpha}
        return state

    @staticmethod
    @contextmanager
    def _scope(state):
        """Run dpgmm with the chain's generator states and Weights & Biases disabled; put the
        host's generator states and ``WANDB_MODE`` back after."""
        import torch

        host = (random.getstate(), np.random.get_state(), torch.get_rng_state())
        wandb_mode = os.environ.get("WANDB_MODE")
        os.environ["WANDB_MODE"] = "disabled"
        py_state, np_state, torch_state = state.rng_states
        random.setstate(py_state)
        np.random.set_state(np_state)
        torch.set_rng_state(torch_state)
        try:
            with warnings.catch_warnings():
                # dpgmm calls the deprecated torch.cholesky, and its objective's Wishart draws
                # warn on nearly singular samples of small clusters (which it then repairs)
                warnings.filterwarnings("ignore", "torch.cholesky is deprecated", UserWarning)
                warnings.filterwarnings("ignore", "Singular sample detected", UserWarning)
                yield
        finally:
            state.rng_states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
            random.setstate(host[0])
            np.random.set_state(host[1])
            torch.set_rng_state(host[2])
            if wandb_mode is None:
                os.environ.pop("WANDB_MODE", None)
            else:
                os.environ["WANDB_MODE"] = wandb_mode


def _quiet(function, *args):
    """Call ``function`` with dpgmm's loguru messages off (its computations manager announces
    itself on every chain); put them back after."""
    from loguru import logger

    logger.disable("dpgmm")
    try:
        return function(*args)
    finally:
        logger.enable("dpgmm")
