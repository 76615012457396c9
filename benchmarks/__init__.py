"""asv benchmark suite of dpmmbench (configuration: ``asv.conf.json`` at the repository root).

Modules ``bench_*.py`` hold the benchmark classes; ``common.py`` builds every problem (shared
with ``report.py``, which prints the README's headline numbers without asv). Each class has
a ``tiny_params`` list that ``tests/test_benchmarks.py`` runs as a smoke test.
"""
