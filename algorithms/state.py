"""The sampler state every algorithm's state extends (its own module: both the samplers'
:mod:`algorithms.base` and the sharded state of :mod:`algorithms.backends` build on it, and the
backends must not import the samplers' base)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class State:
    """Explicit sampler state. Subclasses add their own fields.

    Attributes
    ----------
    X : the validated data
    labels : (N,) int64 current partition
    rng : the generator every random choice of this chain comes from
    iteration : number of ``step`` calls so far
    info : diagnostics of the last step (not needed by the next one)
    alpha : the DP concentration of the last step (the sampler's ``alpha``, or, when it learns
        alpha, the value drawn at the start of that step)
    """

    X: Any
    labels: np.ndarray
    rng: np.random.Generator
    iteration: int = 0
    info: dict = field(default_factory=dict)
    alpha: float = float("nan")
