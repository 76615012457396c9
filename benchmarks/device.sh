#!/usr/bin/env bash
# The many-core scaling record (issue 32) on a lent machine that has Python 3.12, numpy, scipy,
# numba, pandas and scikit-learn but no dask, no distributed and no network.
#
#   bash benchmarks/device.sh prepare        # here, with pip and the package registry: the
#                                            # Python 3.12 wheels the machine lacks, into .whl/
#   bash benchmarks/device.sh run COMMIT [ARGS]  # there, from the repository root, .whl/ carried:
#                                            # python -m benchmarks.scaling [ARGS] into $OUT/<cores>-core.json
#
# Then, here: copy the record to docs/scaling/, and regenerate docs/results.md and docs/deploy.md
# (python -m dpmmbench.reports.scaling_doc; python -m dpmmbench.reports.deploy_doc).
# The whole run takes about 4 minutes on 16 cores (2026-11-28).
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
prepare)
    # dask and distributed at this checkout's versions, and what they need beyond the machine's
    # image (docs of the lending tool list its packages: tornado, tblib, zict, partd and locket
    # are not there)
    python=${PYTHON:-.venv/bin/python}
    wheels=(dask distributed partd locket tblib tornado zict)
    pins=()
    for name in "${wheels[@]}"; do
        pins+=("$name==$("$python" -c "import importlib.metadata as m; print(m.version('$name'))")")
    done
    rm -rf .whl && mkdir -p .whl
    "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 -d .whl "${pins[@]}"
    ls .whl
    ;;
run)
    commit=${2:?"give the commit the tree is at (git rev-parse --short HEAD, here)"}
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    # the import name dpmmbench is the repository root (an editable install here, a link there)
    mkdir -p /tmp/pkg && ln -sfn "$PWD" /tmp/pkg/dpmmbench
    export PYTHONPATH=/tmp/site:/tmp/pkg PYTHONUNBUFFERED=1
    cores=$(python3 -c "import os; print(len(os.sched_getaffinity(0)))")
    python3 -m benchmarks.scaling --out "${OUT:?}/${cores}-core.json" --commit "$commit" "${@:3}"
    ;;
*)
    echo "usage: bash benchmarks/device.sh prepare | run COMMIT [benchmarks.scaling arguments]" >&2
    exit 2
    ;;
esac
