"""Hostile data: malformed sparse count matrices, extreme but finite values and crafted
dataset files end in a clear ValueError/TypeError naming the problem, or in a valid run with a
finite log joint -- never a crash, never a silent NaN. Every case runs in a child interpreter
(the ``isolated`` fixture, cases in tests/hostile_data.py): before the data were checked where
they enter, a column index past the vocabulary segfaulted ``fsd`` and ``subc``."""
import io
import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpmmbench import algorithms
from hostile_data import MALFORMED, VOCAB, valid_triple

ALL = algorithms.available()
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))


def clear_or_finite(outcome, finite_value=None):
    """The outcome is a clear error, or a run (with a finite score if it returned one)."""
    if outcome.kind == "raised":
        assert outcome.clear_error, outcome
        return
    if finite_value is not None:
        assert math.isfinite(finite_value(outcome.value)), outcome


# ---- malformed CSR, through every sampler and the scorers ---------------------------------

# a peer that does not fit the counts family refuses it when built (tests/test_peers.py)
@pytest.mark.parametrize("name", [n for n in ALL if algorithms.get(n).families is None])
def test_every_sampler_refuses_every_malformed_csr(isolated, name):
    for kind, word in MALFORMED.items():
        outcome = isolated.run("hostile_data:init_and_step", name, kind)
        assert outcome.clear_error, (kind, outcome)
        assert word in outcome.message, (kind, outcome.message)


@pytest.mark.parametrize("where", ["log_joint", "log_marginal"])
def test_scorers_refuse_every_malformed_csr(isolated, where):
    for kind, word in MALFORMED.items():
        outcome = isolated.run("hostile_data:score", kind, where)
        assert outcome.clear_error and word in outcome.message, (kind, outcome)


def test_the_message_names_the_column_the_bound_and_the_row(isolated):
    outcome = isolated.run("hostile_data:init_and_step", "gibbs", "index-too-large")
    assert "column 5 >= vocab_size 5 in row 1" in outcome.message


@pytest.mark.parametrize("fmt", ["coo", "csc"])
def test_other_sparse_formats_are_checked_too(isolated, fmt):
    assert isolated.run("hostile_data:other_format", "none", fmt).kind == "returned"
    for kind in ("column-too-large", "row-too-large", "row-negative"):
        outcome = isolated.run("hostile_data:other_format", kind, fmt)
        assert outcome.clear_error, (fmt, kind, outcome)


def test_unsorted_and_duplicate_indices_are_canonicalised_on_a_copy():
    from dpmmbench.algorithms.families import DirichletMultinomial
    from dpmmbench.reports.metrics import log_joint

    fam = DirichletMultinomial(0.5, VOCAB)
    data, indices, indptr, shape = valid_triple()
    # row 1 unsorted (4, 2, 1) and row 0 with column 3 stored twice (1 + 1)
    messy = sp.csr_matrix((np.array([2.0, 1.0, 1.0, 4.0, 1.0, 3.0, 1.0, 2.0]),
                           np.array([0, 3, 3, 4, 2, 1, 0, 4]), np.array([0, 3, 6, 6, 8])), shape=shape)
    tidy = sp.csr_matrix((np.array([2.0, 2.0, 3.0, 1.0, 4.0, 1.0, 2.0]), np.array([0, 3, 1, 2, 4, 0, 4]),
                          np.array([0, 2, 5, 5, 7])), shape=shape)
    before = (messy.data.copy(), messy.indices.copy(), messy.indptr.copy())
    out = fam.validate(messy)
    assert out.has_canonical_format and (out != tidy).nnz == 0
    for a, b in zip(before, (messy.data, messy.indices, messy.indptr)):
        np.testing.assert_array_equal(a, b)  # the caller's matrix is left as it was
    labels = np.array([0, 1, 0, 1])
    assert log_joint(messy, labels, fam, 1.0) == log_joint(tidy, labels, fam, 1.0)
    s = algorithms.make("gibbs", family=fam, alpha=1.0, seed=0)
    t = algorithms.make("gibbs", family=fam, alpha=1.0, seed=0)
    np.testing.assert_array_equal(s.step(s.init(messy)).labels, t.step(t.init(tidy)).labels)


def test_the_sparse_check_is_vectorised_at_a_million_nonzeros():
    from conftest import python_lines
    from dpmmbench.algorithms.families import DirichletMultinomial

    def counts(n, vocab=5_000, per_row=50):
        rng = np.random.default_rng(0)
        indices = np.sort(rng.choice(vocab, size=(n, per_row)), axis=1).ravel()  # duplicates included
        return sp.csr_matrix((rng.integers(1, 5, size=n * per_row).astype(np.float64), indices,
                              np.arange(0, n * per_row + 1, per_row)), shape=(n, vocab))

    # the Python lines the check runs do not grow with the rows (~600 either way; a loop over
    # rows or nonzeros in Python would run one or more per row)
    checked, lines = python_lines(DirichletMultinomial(0.5, 5_000).validate, counts(20_000))
    _, small_lines = python_lines(DirichletMultinomial(0.5, 5_000).validate, counts(2_000))
    assert checked.shape == (20_000, 5_000) and lines < 20_000 / 10 and lines < 2 * small_lines


# ---- random malformed CSR triples and random dense arrays ---------------------------------

_INDEX_DTYPES = st.sampled_from([np.int32, np.int64, np.uint8, np.float64])
_GOOD_COUNTS = st.integers(0, 5).map(float)
_BAD_COUNTS = st.sampled_from([-1.0, 0.5, np.nan, np.inf, -np.inf, 1e300, 2.0 ** 60, 5e-324])


@st.composite
def csr_triples(draw):
    """(data, indices, indptr, shape, vocab): valid CSR arrays (unsorted and duplicate indices
    included) that are, about every other time, broken in one place (lengths, bounds, order,
    dtypes, values, shape)."""
    rows = draw(st.integers(1, 5))
    vocab = draw(st.integers(1, 6))
    lengths = draw(st.lists(st.integers(0, 4), min_size=rows, max_size=rows))
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    nnz = int(indptr[-1])
    indices = np.array(draw(st.lists(st.integers(0, vocab - 1), min_size=nnz, max_size=nnz)), dtype=np.int64)
    data = np.array(draw(st.lists(_GOOD_COUNTS, min_size=nnz, max_size=nnz)), dtype=np.float64)
    shape = (rows, vocab)
    index_dtype = np.int64
    what = draw(st.sampled_from(["none"] * 4 + ["indptr", "indices-length", "index", "data-length", "value",
                                               "reversed", "shape", "dtype"]))
    if what == "indptr":
        indptr[draw(st.integers(0, len(indptr) - 1))] = draw(st.integers(-3, nnz + 3))
    elif what == "indices-length":
        indices = np.append(indices, 1) if draw(st.booleans()) or not nnz else indices[:-1]
    elif what == "index" and nnz:
        indices[draw(st.integers(0, nnz - 1))] = draw(st.sampled_from([-1, -2 ** 31, vocab, vocab + 1, 2 ** 40]))
    elif what == "data-length":
        data = np.append(data, 1.0) if draw(st.booleans()) or not nnz else data[:-1]
    elif what == "value" and nnz:
        data[draw(st.integers(0, nnz - 1))] = draw(_BAD_COUNTS)
    elif what == "reversed":
        indptr = indptr[::-1].copy()
    elif what == "shape":
        shape = (rows + draw(st.sampled_from([-1, 1, 100])), vocab + draw(st.sampled_from([-1, 0, 1])))
    elif what == "dtype":
        index_dtype = draw(_INDEX_DTYPES)
    return data, indices.astype(index_dtype), indptr, shape, vocab


@SETTINGS
@given(triple=csr_triples(), name=st.sampled_from(ALL))
def test_random_csr_triples_end_in_a_clear_error_or_a_valid_run(isolated, triple, name):
    clear_or_finite(isolated.run("hostile_data:init_and_step_triple", name, *triple), lambda v: v[1])


_VALUES = st.one_of(st.floats(-3, 3), st.floats(-3, 3), st.floats(-3, 3), st.sampled_from([np.nan, np.inf, -np.inf, 1e300, -1e300, 1e150, 1e100,
                                                        1.5e100, 5e-324, 1.7976931348623157e308]))


@SETTINGS
@given(values=st.lists(_VALUES, min_size=2, max_size=12), dim=st.integers(1, 2),
       family=st.sampled_from(["niw", "normal"]), name=st.sampled_from(ALL))
def test_random_dense_data_ends_in_a_clear_error_or_a_finite_log_joint(isolated, values, dim, family, name):
    X = np.array(values[: len(values) // dim * dim]).reshape(-1, dim)
    clear_or_finite(isolated.run("hostile_data:dense_run", name, X, family), lambda v: v[1])


# ---- extreme but finite values ----------------------------------------------------------

_X2 = np.random.default_rng(0).normal(size=(10, 2))
_COUNTS_X = sp.csr_matrix(np.random.default_rng(0).integers(0, 4, size=(10, 6)).astype(np.float64))


@pytest.mark.parametrize("family, params, X, word", [
    ("dm", {"gamma": 5e-324, "vocab_size": 6}, _COUNTS_X, "gamma"),
    ("dm", {"gamma": 1e-310, "vocab_size": 6}, _COUNTS_X, "gamma"),
    ("dm", {"gamma": 1e306, "vocab_size": 6}, _COUNTS_X, "gamma"),
    ("dm", {"gamma": 1e299, "vocab_size": 60}, _COUNTS_X, "gamma * vocab_size"),
    ("niw", {"mu0": [0.0, 0.0], "kappa0": 1.0, "nu0": 1e306, "psi0": np.eye(2)}, _X2, "nu0"),
    ("niw", {"mu0": [0.0, 0.0], "kappa0": 5e-324, "nu0": 4.0, "psi0": np.eye(2)}, _X2, "kappa0"),
    ("niw", {"mu0": [1e300, 0.0], "kappa0": 1.0, "nu0": 4.0, "psi0": np.eye(2)}, _X2, "mu0"),
    ("niw", {"mu0": [0.0, 0.0], "kappa0": 1.0, "nu0": 4.0, "psi0": np.diag([np.inf, 1.0])}, _X2, "psi0"),
    ("niw", {"mu0": [0.0, 0.0], "kappa0": 1.0, "nu0": 4.0, "psi0": np.eye(2)}, _X2 * 1e300, "1e+100"),
    ("normal", {"sigma": 1e-80, "mu0": [0.0, 0.0], "sigma0": 1.0}, _X2, "sigma"),
    ("normal", {"sigma": 1e80, "mu0": [0.0, 0.0], "sigma0": 1.0}, _X2, "sigma"),
    ("normal", {"sigma": 1.0, "mu0": [0.0, 0.0], "sigma0": 1e200}, _X2, "sigma0"),
    ("normal", {"sigma": 1.0, "mu0": [0.0, 0.0], "sigma0": 1.0}, _X2 * 1e155, "1e+100"),
    # both in range, together past float64: the scorer raises instead of returning NaN
    ("normal", {"sigma": 1e-75, "mu0": [0.0, 0.0], "sigma0": 1.0}, _X2 * 1e99, "not finite"),
])
def test_extreme_values_are_refused_with_the_limit_named(isolated, family, params, X, word):
    outcome = isolated.run("hostile_data:family_score", family, params, X)
    assert outcome.clear_error and word in outcome.message, outcome


def test_a_non_finite_log_joint_raises_instead_of_returning_nan():
    from dpmmbench.algorithms.families import NormalKnownCovariance
    from dpmmbench.reports.metrics import log_joint

    fam = NormalKnownCovariance(1.0, [0.0, 0.0], 1.0)
    with pytest.raises(ValueError, match="log joint .* is inf"):
        log_joint(_X2, np.arange(10) % 2, fam, 1e-320)  # alpha > 0, but gammaln of a subnormal is inf


_SCALES = st.sampled_from([5e-324, 1e-310, 1e-300, 1e-160, 1e-150, 1e-20, 0.5, 3.0, 1e20, 1e150, 1e200, 1e300,
                           1e306, 1.7976931348623157e308])


@SETTINGS
@given(a=_SCALES, b=_SCALES, c=_SCALES, data_scale=_SCALES, family=st.sampled_from(["niw", "normal", "dm"]))
def test_random_extreme_hyperparameters_end_in_a_clear_error_or_a_finite_score(isolated, a, b, c, data_scale,
                                                                               family):
    if family == "dm":
        params, X = {"gamma": a, "vocab_size": 6}, _COUNTS_X * min(round(data_scale), 2 ** 60)
    elif family == "niw":
        params, X = {"mu0": [0.0, 0.0], "kappa0": a, "nu0": 2.0 + b, "psi0": np.eye(2) * c}, _X2 * data_scale
    else:
        params, X = {"sigma": a, "mu0": [0.0, 0.0], "sigma0": b}, _X2 * data_scale
    outcome = isolated.run("hostile_data:family_score", family, params, X)
    clear_or_finite(outcome, lambda v: v[0] + v[1])


# ---- crafted dataset files ----------------------------------------------------------------

@pytest.fixture(scope="module")
def stored_text(tmp_path_factory):
    """The arrays of a valid stored text dataset, and its name."""
    from dpmmbench import datasets
    from dpmmbench.datasets.store import save

    name = "synth-multinomial?n=40&vocab=12"
    path = tmp_path_factory.mktemp("store") / "ok.npz"
    save(datasets.load(name), path)
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}, name


def crafted(tmp_path, arrays, **changes):
    arrays = {**arrays, **changes}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    path = tmp_path / "crafted.npz"
    path.write_bytes(buffer.getvalue())
    return str(path)


def _broken(arrays):
    """Every kind of damage to the stored arrays of a text dataset, with a word of the error."""
    indices, indptr, data = arrays["X.indices"], arrays["X.indptr"], arrays["X.data"]
    far = indices.copy()
    far[3] = 10 ** 9
    negative = indices.copy()
    negative[3] = -1
    decreasing = indptr.copy()
    decreasing[2] = decreasing[1] - 1
    return {
        "far index": ({"X.indices": far}, "vocab_size"),
        "negative index": ({"X.indices": negative}, "negative"),
        "indptr decreasing": ({"X.indptr": decreasing}, "indptr"),
        "indptr past the end": ({"X.indptr": np.append(indptr[:-1], len(data) + 100)}, "indptr"),
        "data too long": ({"X.data": np.append(data, 1.0)}, "data"),
        "indices too short": ({"X.indices": indices[:-1]}, "indices"),
        "shape rows": ({"X.shape": np.array([400, 12])}, "indptr"),
        "shape 3-D": ({"X.shape": np.array([40, 12, 1])}, "X.shape"),
        "float indices": ({"X.indices": indices.astype(float)}, "integer"),
        "NaN count": ({"X.data": np.where(np.arange(len(data)) == 2, np.nan, data)}, "NaN"),
        "fractional count": ({"X.data": data + 0.5}, "fractional"),
        "labels too short": ({"labels": arrays["labels"][:-1]}, "labels"),
        "negative label": ({"labels": -arrays["labels"] - 1}, "labels"),
        "labels not integers": ({"labels": arrays["labels"] + 0.5}, "labels"),
        "gamma subnormal": ({"family.gamma": np.array(5e-324)}, "gamma"),
        "vocab mismatch": ({"family.vocab_size": np.array(11)}, "vocab_size"),
        "indices missing": ({"X.indices": None}, "X.indices"),
        "name not text": ({"name": np.arange(3)}, "name"),
        "meta not JSON": ({"meta": np.array("{")}, "meta"),
        "meta not a dict": ({"meta": np.array("[1]")}, "meta"),
    }


def test_crafted_dataset_files_are_refused_on_load(isolated, tmp_path, stored_text):
    arrays, name = stored_text
    assert isolated.run("hostile_data:load_stored", crafted(tmp_path, arrays)).kind == "returned"
    for what, (changes, word) in _broken(arrays).items():
        present = {k: v for k, v in changes.items() if v is not None}
        base = {k: v for k, v in arrays.items() if not (k in changes and changes[k] is None)}
        path = crafted(tmp_path, base, **present)
        outcome = isolated.run("hostile_data:load_stored", path)
        assert outcome.clear_error and word in outcome.message and path in outcome.message, (what, outcome)


def test_run_data_file_refuses_a_crafted_file(isolated, tmp_path, stored_text):
    arrays, name = stored_text
    changes, word = _broken(arrays)["far index"]
    outcome = isolated.run("hostile_data:driver_run", crafted(tmp_path, arrays, **changes), name)
    assert outcome.clear_error and word in outcome.message, outcome


def test_a_file_that_is_not_a_zip_is_refused(isolated, tmp_path):
    path = tmp_path / "junk.npz"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    outcome = isolated.run("hostile_data:load_stored", str(path))
    assert outcome.clear_error, outcome
