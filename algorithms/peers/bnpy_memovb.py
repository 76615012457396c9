"""bnpy's memoized variational inference with birth and merge moves (``bnpy-memovb``).

Hughes & Sudderth's memoVB for the DP mixture of full-covariance Gaussians
(``DPMixtureModel`` + ``Gauss``): stick-breaking variational posterior whose number of
components grows by birth moves and shrinks by merges. The data form one batch, so one step is
one lap (a pass over the data with the moves of that lap). bnpy only runs a whole fit, so the
fit runs in a thread of its own that pauses at the end of every lap, through bnpy's per-lap
callback, until the next ``step``; the clock of a step is the time of its lap. The labels are the
components of largest responsibility, compacted. The suite's ``alpha`` is bnpy's ``gamma0``;
the Gaussian prior is bnpy's (``sF``, ``ECovMat``, ``kappa``, ``nu``), not the family's.

bnpy 0.1.7 pins joblib 0.14.1, which does not install on current Python: it is installed
without its dependencies (``pip install --no-deps bnpy``, docs/design.md "Peers"), and on
Python 3.11 / NumPy 2 it needs a few removed aliases back before it is imported, which
:func:`_import_bnpy` restores (the installed package is left as it is).
"""
from __future__ import annotations

import inspect
import logging
import shutil
import tempfile
import threading
import warnings
import weakref
from dataclasses import dataclass
from numbers import Real

import numpy as np

from ..constraints import Interval, OneOf, Option
from ..families import NormalInverseWishart, NormalKnownCovariance
from ..partitions import compact
from ..state import State
from ._base import Peer

#: what bnpy 0.1.7 still calls that Python 3.11 and NumPy 2 removed, and what stands in for it
_ALIASES = {"float": float, "bool8": np.bool_, "unicode_": np.str_, "in1d": np.isin}


def _import_bnpy():
    """Import bnpy after restoring the aliases it needs (only those that are missing)."""
    if not hasattr(inspect, "getargspec"):
        inspect.getargspec = lambda f: inspect.getfullargspec(f)[:4]
    for name, value in _ALIASES.items():
        if name not in np.__dict__:
            setattr(np, name, value)
    with warnings.catch_warnings():
        # its plotting helpers import the long-deprecated imp module
        warnings.simplefilter("ignore", DeprecationWarning)
        import bnpy

    return bnpy


class _Stop(Exception):
    """Raised in the fitting thread to end a fit whose chain has ended."""


class _PausedFit:
    """bnpy's fit in a daemon thread that pauses after every lap (bnpy calls ``onLapComplete``
    and ``onAlgorithmComplete`` of the object given as ``customFuncPath``)."""

    def __init__(self, bnpy, data, kwargs):
        self._bnpy, self._data, self._kwargs = bnpy, data, kwargs
        self._resume, self._paused = threading.Semaphore(0), threading.Semaphore(0)
        self._thread = None
        self._stopping = False
        self.error = None
        self.finished = False
        #: (model, loss, laps, converged) at the last pause
        self.last = None

    # -- bnpy's callbacks (run in the fitting thread) ---------------------------------------
    def onLapComplete(self, args=None, hmodel=None, lapFrac=0.0, loss=np.nan, isConverged=False, **_):
        self.last = (hmodel, float(loss), float(lapFrac), bool(isConverged))
        self._paused.release()
        self._resume.acquire()
        if self._stopping:
            raise _Stop

    def onAlgorithmComplete(self, args=None, hmodel=None, lapFrac=0.0, loss=np.nan, isConverged=False, **_):
        self.last = (hmodel, float(loss), float(lapFrac), bool(isConverged))

    def _fit(self):
        bnpy, names = self._bnpy, ("DPMixtureModel", "Gauss", "memoVB")
        try:
            # bnpy.run, but with this object as the callback: run() turns every keyword into text
            required = dict(zip(("allocModelName", "obsModelName", "algName"), names), dataName=self._data)
            kwargs, unknown = bnpy.ioutil.BNPYArgParser.parseKeywordArgs(required, **self._kwargs)
            kwargs["OutputPrefs"].update(doSaveToDisk=True, doWriteStdOut=False, customFuncPath=self)
            taskid = kwargs["OutputPrefs"]["taskid"]
            bnpy.Runner._run_task_internal(kwargs["OutputPrefs"]["jobname"], taskid, 1, required, kwargs, unknown,
                                           self._data, *names, True, False)
        except _Stop:
            pass
        except Exception as exc:  # noqa: BLE001 - handed to the chain's thread, which raises it
            self.error = exc
        finally:
            self.finished = True
            self._paused.release()

    # -- the chain's side ---------------------------------------------------------------------
    def advance(self):
        """Run to the next pause (the first call: to the initialised model)."""
        if self._thread is None:
            # bnpy's set-up empties the root logger's handlers (the host's, e.g. pytest's or a
            # Dask worker's): they are put back once it has paused
            root = logging.getLogger()
            handlers = list(root.handlers)
            self._thread = threading.Thread(target=self._fit, daemon=True, name="bnpy-memovb")
            self._thread.start()
            self._paused.acquire()
            root.handlers[:] = handlers
        elif self.finished:
            return
        else:
            self._resume.release()
            self._paused.acquire()
        if self.error is not None:
            raise self.error

    def close(self):
        """End a fit that is still paused (its thread raises :class:`_Stop` and exits)."""
        if self._thread is not None and not self.finished:
            self._stopping = True
            self._resume.release()


@dataclass
class BnpyState(State):
    fit: object = None  #: the paused fit (:class:`_PausedFit`)
    data: object = None  #: bnpy's view of X


class BnpyMemoVB(Peer):
    """bnpy's memoized VB with birth/merge moves (registry name ``bnpy-memovb``)."""

    name = "bnpy-memovb"
    kind = "variational"
    info_columns = {
        "peer_objective": "bnpy's evidence lower bound per point after this lap (minus its loss)",
        "peer_laps": "laps (passes over the data) bnpy has completed",
        "peer_converged": "1 once bnpy considers the fit converged or has stopped",
        "peer_components": "components of bnpy's model, occupied or not (births and merges change it)",
    }
    families = (NormalInverseWishart, NormalKnownCovariance)
    options = {
        "K": Option(6, Interval(int, 1), "initial number of components (bnpy's default)"),
        "initname": Option("randexamples", OneOf(("randexamples", "randexamplesbydist", "kmeans")),
                           "bnpy's initialisation of the components"),
        "moves": Option("birth,merge,shuffle", OneOf(("birth,merge,shuffle", "birth,merge", "merge", "none")),
                        "moves of every lap"),
        "sF": Option(1.0, Interval(Real, 0, None, closed="neither"), "scale of the expected covariance"),
        "ECovMat": Option("eye", OneOf(("eye", "covdata")), "expected covariance of the Wishart prior"),
        "convergeThr": Option(0.01, Interval(Real, 0, None, closed="neither"),
                              "change of the cluster sizes below which bnpy stops"),
        "nLap": Option(1000, Interval(int, 1), "laps after which bnpy stops"),
    }

    def settings(self) -> dict:
        from importlib.metadata import version

        p = self.params
        return {"library": f"bnpy {version('bnpy')}", "method": "memoized VB (memoVB), DPMixtureModel + Gauss, "
                "one batch: one lap per step", "gamma0": self.alpha, "initial_K": p["K"],
                "moves": p["moves"], "gaussian_prior": {"sF": p["sF"], "ECovMat": p["ECovMat"], "kappa": 1e-4,
                                                        "nu": "D + 2 (bnpy's 0)"},
                "convergeThr": p["convergeThr"], "nLap": p["nLap"], "nBatch": 1, "truncation": "none (births)",
                "initialisation": f"bnpy's {p['initname']!r} with K = {p['K']}, seeded from the chain's seed "
                                  "(init_clusters is not used)"}

    def _init(self, X, labels, rng):
        if len(X) < 2:
            raise ValueError(f"{self.name!r} needs at least 2 points, got {len(X)}")
        bnpy = _import_bnpy()
        p = self.params
        out = tempfile.mkdtemp(prefix="dpmmbench-bnpy-")
        # bnpy seeds its fit from the task id (with the job name): drawn from the chain's generator
        kwargs = {"output_path": out, "taskid": int(rng.integers(1, 2**31 - 1)), "jobname": "dpmmbench",
                  "nTask": 1, "nBatch": 1, "nLap": p["nLap"], "K": min(p["K"], len(X)), "initname": p["initname"],
                  "gamma0": self.alpha, "sF": p["sF"], "ECovMat": p["ECovMat"], "convergeThr": p["convergeThr"],
                  "saveEvery": -1, "printEvery": -1, "traceEvery": -1}
        if p["moves"] != "none":
            kwargs["moves"] = p["moves"]
        data = bnpy.data.XData(np.asarray(X, dtype=np.float64))
        fit = _PausedFit(bnpy, data, kwargs)
        state = BnpyState(X, labels, rng, fit=fit, data=data)
        # the thread and the output folder go with the chain's state
        weakref.finalize(state, _close, fit, out)
        return self._advance(state)

    def _step(self, state):
        return self._advance(state)

    def _advance(self, state):
        state.fit.advance()
        model, loss, laps, converged = state.fit.last
        resp = model.calc_local_params(state.data)["resp"]
        state.labels, K = compact(np.argmax(resp, axis=1))
        # bnpy minimises a loss, the negative evidence lower bound per point
        state.info = {"n_clusters": K, "peer_objective": -loss, "peer_laps": laps,
                      "peer_converged": bool(converged or state.fit.finished), "peer_components": int(model.obsModel.K)}
        return state


def _close(fit, out):
    fit.close()
    shutil.rmtree(out, ignore_errors=True)
