"""Every registered sampler declares the per-step trace columns it reports (``info_columns``)
and ``step_info`` reads exactly those from a step (docs/design.md "Samplers")."""
import math

import numpy as np
import pytest

from dpmmbench import algorithms
from dpmmbench.algorithms.backends import SerialBackend
from dpmmbench.algorithms.backends.base import SHARD_INFO_COLUMNS
from dpmmbench.algorithms.base import INDEX
from dpmmbench.algorithms.families import NormalInverseWishart, NormalKnownCovariance
from dpmmbench.algorithms.gibbs import CollapsedGibbs
from dpmmbench.reports.traces import COMM_COLUMNS, TRACE_COLUMNS
from conftest import fits

ALL = algorithms.available()
#: keys of ``state.info`` that belong to every trace, not to one sampler: the communication
#: counts, and the sampler's own cluster count (the trace's ``n_clusters`` is scored from the
#: labels)
COMMON = frozenset(COMM_COLUMNS) | {"n_clusters"}


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating, np.bool_)) and np.ndim(value) == 0


def check_info_columns(sampler, state) -> set:
    """Assert that ``state``'s numeric ``info`` keys are declared by ``sampler`` (or common)
    and that ``step_info`` gives exactly the declared columns with the reported values;
    return the declared columns the step reported."""
    info = state.info or {}
    undeclared = sorted(k for k, v in info.items() if _is_number(v) and k not in COMMON and not sampler.declares(k))
    assert not undeclared, f"{sampler.name!r} reports undeclared per-step columns {undeclared}"
    indexed = {k for k in info if k not in sampler.info_columns and sampler.declares(k)}
    expected = {c for c in sampler.info_columns if INDEX not in c} | indexed
    row = sampler.step_info(state)
    assert set(row) == expected
    for column, value in row.items():
        assert type(value) in (int, float), (column, value)
        if info.get(column) is None:
            assert math.isnan(value), column
        else:
            assert value == info[column] or (math.isnan(value) and math.isnan(info[column])), column
    return {c for c in row if info.get(c) is not None}


def _blobs():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(centre, 0.5, size=(10, 2)) for centre in ([-3.0, 0.0], [3.0, 0.0], [0.0, 4.0])])
    return X, [NormalInverseWishart.default_for(X), NormalKnownCovariance(0.5, [0.0, 0.0], 3.0)]


@pytest.mark.parametrize("name", ALL)
def test_every_sampler_declares_the_columns_it_reports_and_reports_what_it_declares(name):
    cls = algorithms.get(name)
    assert not set(cls.info_columns) & set(TRACE_COLUMNS), "the fixed trace columns are not a sampler's own"
    assert all(isinstance(m, str) and m.strip() for m in cls.info_columns.values())
    X, families = _blobs()
    family = next(f for f in families if fits(name, f))
    # with a backend of two shards too: the shards' columns and one load per worker
    backends = [None] + ([SerialBackend(2)] if cls.supports_backend else [])
    reported = set()
    for backend in backends:
        sampler = algorithms.make(name, family=family, seed=3, backend=backend)
        state = sampler.init(X, init_clusters=2)
        reported |= check_info_columns(sampler, state)
        for _ in range(4):
            state = sampler.step(state)
            reported |= check_info_columns(sampler, state)
    never = [c for c in cls.info_columns if not any(c == r or (INDEX in c and cls.declares(r)) for r in reported)]
    assert not never, f"{name!r} declares columns no step reported: {never}"


#: per-step columns read by name (a rename breaks them): by the report, its figures, the cost
#: model, benchmarks.peers and docs/design.md
READ_BY_REPORTS = {
    "search": ("states_generated", "states_pushed", "states_popped", "queue_max"),
    "auxvar": ("load_{j}", "load_imbalance", "moved_bytes", "compute_s", "compute_max_s", "workers_lost"),
    "gibbs-supercluster": ("load_{j}", "load_imbalance"),
    "slice-mr": ("compute_s", "compute_max_s", "workers_lost"),
    "subc": ("compute_s", "compute_max_s", "workers_lost"),
    "cons-prog": ("compute_s", "compute_max_s", "workers_lost"),
    "sklearn-bgm": ("peer_objective", "peer_converged"),
}


@pytest.mark.parametrize("name", sorted(READ_BY_REPORTS))
def test_the_columns_the_reports_read_keep_their_names(name):
    assert set(READ_BY_REPORTS[name]) <= set(algorithms.get(name).info_columns)


def test_the_shards_report_the_communication_and_the_shard_columns():
    X, (family, _) = _blobs()
    shards = SerialBackend(2).distribute(X, np.zeros(len(X), dtype=np.int64), 0, static={"family": family})
    assert set(shards.take_stats()) == set(COMM_COLUMNS) | set(SHARD_INFO_COLUMNS)


class _Chatty(CollapsedGibbs):
    """Collapsed Gibbs that reports a per-step number it does not declare."""

    name = "chatty"

    def _step(self, state):
        state = super()._step(state)
        state.info["empty_tables"] = 2
        return state


class _Declared(_Chatty):
    """The same with the number declared, and a flag it reports and one it never does."""

    name = "declared"
    info_columns = {"empty_tables": "tables left empty", "moved": "whether a point moved",
                    "never_reported": "a column this sampler leaves empty"}

    def _step(self, state):
        state = super()._step(state)
        state.info["moved"] = np.bool_(True)
        return state


def _stepped(cls):
    X, (_, family) = _blobs()
    sampler = cls(family, seed=0)
    return sampler, sampler.step(sampler.init(X))


def test_a_sampler_reporting_an_undeclared_column_fails_the_check():
    sampler, state = _stepped(_Chatty)
    with pytest.raises(AssertionError, match="undeclared per-step columns.*empty_tables"):
        check_info_columns(sampler, state)
    assert sampler.step_info(state) == {}  # an undeclared key never becomes a column


def test_step_info_gives_the_declared_columns_as_numbers_nan_where_unreported():
    sampler, state = _stepped(_Declared)
    check_info_columns(sampler, state)
    row = sampler.step_info(state)
    assert list(row) == ["empty_tables", "moved", "never_reported"]
    assert row["empty_tables"] == 2 and row["moved"] == 1 and type(row["moved"]) is int
    assert math.isnan(row["never_reported"])
    state.info["empty_tables"] = "two"
    with pytest.raises(TypeError, match="'declared' reported its per-step column 'empty_tables' as 'two'"):
        sampler.step_info(state)


def test_indexed_columns_come_in_index_order():
    sampler = algorithms.make("gibbs-supercluster", family=_blobs()[1][0], seed=0, n_superclusters=12)
    state = sampler.step(sampler.init(_blobs()[0], init_clusters=12))
    assert list(sampler.step_info(state)) == [f"load_{j}" for j in range(12)] + ["load_imbalance"]
    assert sampler.declares("load_11") and not sampler.declares("load_x") and not sampler.declares("load_")


def test_declarations_are_checked_and_frozen_when_the_class_is_defined():
    with pytest.raises(TypeError, match="mapping"):
        type("Listed", (CollapsedGibbs,), {"info_columns": ["moves"]})
    with pytest.raises(ValueError, match="'two words' is not a column name"):
        type("Spaced", (CollapsedGibbs,), {"info_columns": {"two words": "a meaning"}})
    with pytest.raises(ValueError, match="one-line meaning"):
        type("Mute", (CollapsedGibbs,), {"info_columns": {"moves": " "}})
    with pytest.raises(ValueError, match="one-line meaning"):
        type("Wordy", (CollapsedGibbs,), {"info_columns": {"moves": "a first line\nand a second"}})
    with pytest.raises(TypeError):
        _Declared.info_columns["extra"] = "a meaning"
    assert CollapsedGibbs.info_columns == {}
