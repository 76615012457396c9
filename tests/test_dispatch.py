"""The collapsed loops reach each family's kernels through ``algorithms._dispatch`` (so that
numba can cache the loops on disk) and must still get the kernels compiled into them.

When the dispatch's overload was a small function that called the jitted kernel, that
function stayed a call in the compiled sweep, once per (point, cluster) pair: the NIW
``gibbs`` sweep ran 3.5x slower (100k x 2-D: 170 ms instead of 46 ms) with every test
passing. The sweep's own machine code is what tells: after a ``gibbs`` step it must contain
no call into ``_dispatch`` nor to the family's ``logpred`` kernel. (The kernels run once per
point, add/remove, may stay calls.) numba shows the code only of what it compiled in the same
process, so the sweeps are compiled afresh in a subprocess with an empty cache.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, re
import numpy as np
from scipy import sparse
from dpmmbench import algorithms
from dpmmbench.algorithms import collapsed
from dpmmbench.algorithms.families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance

rng = np.random.default_rng(0)
X2 = np.concatenate([rng.normal(size=(60, 2)), rng.normal(size=(60, 2)) + 6.0])
counts = sparse.csr_matrix(rng.integers(0, 3, size=(120, 6)).astype(float))
out = {}
for family, X in ((NormalInverseWishart.default_for(X2), X2),
                  (NormalKnownCovariance(1.0, np.zeros(2), 10.0), X2),
                  (DirichletMultinomial(0.5, 6), counts)):
    sampler = algorithms.make("gibbs", family=family, seed=0)
    state = sampler.init(X, init_clusters=3)
    for _ in range(2):
        state = sampler.step(state)
    code = collapsed.collapsed_sweep(family.kernels).inspect_llvm()
    out[type(family).__name__] = {
        "logpred": family.kernels.logpred.py_func.__name__,
        "called": sorted({name for ir in code.values() for name in re.findall(r"call [^\n]*?@([\w.$]+)\(", ir)})}
print(json.dumps(out))
"""


@pytest.mark.slow  # compiles the sweep in a fresh process (~7 s)
def test_gibbs_sweeps_have_the_logpred_kernel_compiled_in(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(found) == {"NormalInverseWishart", "NormalKnownCovariance", "DirichletMultinomial"}
    for family, seen in found.items():
        assert any("collapsed" in name for name in seen["called"]), f"{family}: the sweep's code was not shown"
        # numba mangles names as <length><name>: 9_dispatch is the module, 11niw_logpred a kernel
        kernel = f"{len(seen['logpred'])}{seen['logpred']}"
        offenders = [name for name in seen["called"] if "9_dispatch" in name or kernel in name]
        assert not offenders, f"{family}: the sweep calls out for its kernels instead of inlining them: {offenders}"
