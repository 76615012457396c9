"""Running the benchmark: the run driver, the ``dpmmbench`` CLI and (later) the Snakemake rules.

- :mod:`workflows.driver`: one run = (dataset, algorithm, options, seed, workers) -> one tidy
  trace; ``run_chain`` (the loop, timing and scoring), ``run`` (by names, with provenance),
  ``write_trace`` / ``read_trace`` (atomic parquet or csv).
- :mod:`workflows.cli`: ``dpmmbench run`` and ``dpmmbench list``.

Nothing heavy is imported here, so ``dpmmbench --help`` stays fast.
"""
