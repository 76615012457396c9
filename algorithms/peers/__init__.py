"""Peers: other libraries' DPMM methods behind the suite's sampler contract.

One module per peer, each a :class:`~algorithms.peers._base.Peer` (a
:class:`~algorithms.base.Sampler` with ``external = True`` and ``exact = False``). A peer's
steps are its own iterations; its labels are scored by the suite's scorer like any sampler's,
its own objective is kept beside them, and :meth:`Peer.settings` reports the prior,
truncation, initialisation and tolerances it ran with (docs/design.md "Peers").

- ``sklearn_bgm.py``: scikit-learn's variational ``BayesianGaussianMixture`` with the
  Dirichlet-process weight prior (``sklearn-bgm``, in the default install);
- ``bnpy_memovb.py``: bnpy's memoized variational inference with birth and merge moves
  (``bnpy-memovb``, optional: the ``peers`` extra, then ``pip install --no-deps bnpy``);
- ``bmcc_gibbs.py``: bmcc's collapsed Gibbs sampler in C (``bmcc``, optional: built from
  source with ``CFLAGS=-fcommon pip install --no-deps --no-build-isolation bmcc``);
- ``dpgmm_gibbs.py``: dpgmm's collapsed Gibbs sampler in PyTorch (``dpgmm``, optional:
  ``pip install torch==2.13.0`` with a CPU build of torch, then ``pip install dpgmm==0.2.0``).
"""
