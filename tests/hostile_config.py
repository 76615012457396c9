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


def load_dataset(spec: str) -> dict:
    """Canonical name of ``spec``, then the loaded dataset's size (a spec the parser accepts
    must load within the memory limit)."""
    from dpmmbench import datasets

    _limit_memory()
    canonical = datasets.canonical_name(spec)
    data = datasets.load(spec)
    return {"name": canonical, "n": data.X.shape[0], "dim": data.X.shape[1]}


def canonical_name(spec) -> str:
    """Canonical name of ``spec`` (parses it; generates nothing)."""
    from dpmmbench import datasets

    _limit_memory()
    return datasets.canonical_name(spec)
