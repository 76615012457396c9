"""Running the benchmark: the run driver, the ``dpmmbench`` CLI and (later) the Snakemake rules.

- :mod:`workflows.driver`: one run = (dataset, algorithm, options, seed, workers) -> one tidy
  trace; ``run_chain`` (a chain on :mod:`algorithms.runner`, scored off the clock),
  ``RunSpec`` (a run's parameters, checked once) and ``run`` (a spec on Dask, with provenance).
  Trace files are written and read by :mod:`reports.traces`.
- :mod:`workflows.provenance`: environment, git state and process facts of a run.
- :mod:`workflows.cli`: ``dpmmbench run`` and ``dpmmbench list``.

Nothing heavy is imported here, so ``dpmmbench --help`` stays fast.
"""
