"""The FSD blocked-Gibbs step, its label step alone, and the GEMM rate it is measured against.

docs/design.md "Performance model": the label step is "every point x every component" work,
``2 N D^2 K`` flops for full-covariance Gaussians. Written as ``X @ [W_1 ... W_K]`` it can
run near the machine's GEMM rate, so the suite measures that rate on the very same shapes,
in the same run, and reports the achieved fraction (``track_label_step_gemm_fraction``).
"""
from __future__ import annotations

from . import common

_SHAPE_NAME = ["(N, D, K)"]


class FSDStep:
    """One full FSD iteration: weights, component parameters, then every label."""

    params = (list(common.FSD_SHAPES),)
    param_names = _SHAPE_NAME
    tiny_params = [((300, 2, 12),), ((300, 9, 4),)]  # for tests/test_benchmarks.py

    def setup(self, shape):
        self.chain = common.fsd_chain(*shape)

    def time_fsd_step(self, shape):
        self.chain.step()


class FSDLabelStep:
    """The label step alone (``algorithms.fsd.sample_labels``) on fixed parameters."""

    params = (list(common.FSD_SHAPES),)
    param_names = _SHAPE_NAME
    tiny_params = [((300, 2, 12),), ((300, 9, 4),)]

    def setup(self, shape):
        self.problem = common.label_step(*shape)

    def time_label_step(self, shape):
        self.problem.run()

    def track_label_step_gflops(self, shape):
        """Nominal ``2 N D^2 K`` flops over the best-of-5 time (for D = 2 the real cost is
        exp/log and the draw, so this rate is low by design)."""
        return common.gflops(self.problem.flops, common.best_of(self.problem.run, warmup=0))

    track_label_step_gflops.unit = "GFLOP/s"


class GEMMPeak:
    """The machine's GEMM rate on the label step's matrix product, ``X (N x D) @ W (D x K*D)``,
    and the fraction of it the label step achieves.

    Only the 50-D shape: for D = 2 a (N x 2) @ (2 x 2K) product is memory-bound, so there is no
    meaningful peak to compare with.
    """

    params = ([common.GEMM_SHAPE],)
    param_names = _SHAPE_NAME
    tiny_params = [((300, 9, 4),)]

    def setup(self, shape):
        self.label = common.label_step(*shape)
        self.gemm = common.gemm(*shape, X=self.label.X)

    def time_gemm_peak(self, shape):
        self.gemm.run()

    def track_gemm_gflops(self, shape):
        return common.gflops(self.gemm.flops, common.best_of(self.gemm.run, warmup=0))

    track_gemm_gflops.unit = "GFLOP/s"

    def track_label_step_gemm_fraction(self, shape):
        """GEMM time / label-step time for the same flops (1.0 = the label step runs at the
        GEMM rate); both best-of-5 in the same process, so machine load affects both."""
        label_time = common.best_of(self.label.run, warmup=0)
        gemm_time = common.best_of(self.gemm.run, warmup=0)
        return gemm_time / label_time

    track_label_step_gemm_fraction.unit = "ratio"
