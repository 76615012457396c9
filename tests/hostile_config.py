"""Cases of tests/test_hostile_config.py that run in a child interpreter (tests/isolation.py):
samplers with a huge concentration and dataset specs, each under a memory limit so that
unbounded growth ends in a MemoryError the test reports instead of exhausting the machine."""
from __future__ import annotations

import resource

#: address-space limit of a case's child (bytes): far above what a few hundred points need
MEMORY_LIMIT = 3 * 2 ** 30


def _limit_memory(limit: int = MEMORY_LIMIT):
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft > limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def run_sampler(name: str, alpha: float, n: int = 300, steps: int = 3, **options) -> dict:
    """``steps`` iterations of sampler ``name`` on ``n`` points of synth-chang2013 with
    concentration ``alpha``; returns the last state's info (number of components)."""
    from dpmmbench import algorithms, datasets

    data = datasets.load(f"synth-chang2013?n={n}")
    _limit_memory()
    sampler = algorithms.make(name, family=data.family, alpha=alpha, seed=1, **options)
    state = sampler.init(data.X, init_clusters=1)
    for _ in range(steps):
        state = sampler.step(state)
    return {key: value for key, value in state.info.items() if key.startswith("n_")}


def parse_or_load(spec) -> dict:
    """``spec`` parsed (canonical name, described size); a generated dataset of at most
    20000 points is also loaded, and must have the described size."""
    from dpmmbench import datasets

    _limit_memory()
    canonical = datasets.canonical_name(spec)
    n = datasets.describe(spec)["n"]
    out = {"name": canonical, "n": n}
    if canonical.startswith("synth-") and n <= 20_000:
        data = datasets.load(spec)
        assert data.X.shape[0] == n and data.name == canonical, (data.X.shape, data.name)
        out["loaded"] = True
    return out
