"""The datasets package: names, parameters, determinism, shapes and metadata."""
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import python_lines, refuse
from dpmmbench import datasets
from dpmmbench.algorithms.families import DirichletMultinomial, NormalInverseWishart, NormalKnownCovariance
from dpmmbench.datasets import synth_chang2013
from dpmmbench.datasets.base import META_KEYS

ROOT = Path(__file__).resolve().parents[1]

#: small instances of every dataset, with the family each should recommend
SMALL = {
    "synth-chang2013?n=500&seed=1": NormalInverseWishart,
    "synth-wang2017?n_clusters=8&scale=0.01": NormalKnownCovariance,
    "digits": NormalInverseWishart,
    "synth-multinomial?n=60&vocab=30": DirichletMultinomial,
}
SEEDED = ["synth-chang2013?n=300", "synth-wang2017?n_clusters=5&scale=0.02", "synth-multinomial?n=40"]


def same_matrix(a, b) -> bool:
    if sp.issparse(a) or sp.issparse(b):
        return (sp.issparse(a) and sp.issparse(b) and a.shape == b.shape
                and np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
                and np.array_equal(a.data, b.data))
    return a.shape == b.shape and np.array_equal(a, b)


@pytest.fixture(scope="module")
def loaded():
    return {name: datasets.load(name) for name in SMALL}


def test_available_lists_the_local_and_the_fetched_sets():
    # then those of installed plugins (tests/test_plugins.py)
    assert datasets.available()[:13] == ["synth-chang2013", "synth-wang2017", "digits", "synth-multinomial",
                                    "mnist10k", "reuters", "fashion-mnist", "wikipedia", "nyt",
                                    "mnist70k", "ap", "uci-enron", "uci-nytimes"]


@pytest.mark.parametrize("name", SMALL)
def test_load_shapes_labels_family_and_meta(loaded, name):
    ds = loaded[name]
    assert ds.name == name
    assert list(ds.meta) == list(META_KEYS)
    assert ds.meta == datasets.describe(name)
    assert ds.X.shape == (ds.meta["n"], ds.meta["dim"])
    assert ds.X.dtype == np.float64
    assert ds.labels.dtype == np.int64 and ds.labels.shape == (ds.meta["n"],)
    assert ds.labels.min() >= 0
    assert isinstance(ds.family, SMALL[name])
    assert ds.family.dim == ds.meta["dim"]
    ds.family.validate(ds.X)  # the data fit the recommended family
    assert isinstance(ds.meta["substitute"], bool)
    assert all(isinstance(ds.meta[k], str) and ds.meta[k] for k in
               ("source", "licence", "citation", "preprocessing", "description"))


def test_dataset_is_frozen(loaded):
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded["digits"].name = "other"


def test_registry_is_read_only():
    with pytest.raises(TypeError):
        datasets.registry.REGISTRY["new"] = None


@pytest.mark.parametrize("name", SEEDED)
def test_same_name_same_bits_other_seed_other_data(name):
    a, b = datasets.load(name), datasets.load(name)
    assert same_matrix(a.X, b.X) and np.array_equal(a.labels, b.labels)
    c = datasets.load(name + "&seed=7")
    assert not same_matrix(a.X, c.X)


def test_data_do_not_depend_on_python_hash_seed():
    name = "synth-multinomial?n=30&seed=4"
    code = ("import datasets, hashlib; d = datasets.load(%r); "
            "print(hashlib.sha256(d.X.toarray().tobytes() + d.labels.tobytes()).hexdigest())" % name)
    digests = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(h)}).stdout for h in (1, 2)}
    assert len(digests) == 1


def test_chang2013_defaults_and_clusters():
    meta = datasets.describe("synth-chang2013")
    assert (meta["n"], meta["dim"]) == (100_000, 2)
    ds = datasets.load("synth-chang2013?n=5000&seed=3")
    assert np.unique(ds.labels).size == 10
    fam = ds.family
    assert np.allclose(fam.mu0, 0) and fam.kappa0 == 0.01 and fam.nu0 == 6 and np.allclose(fam.psi0, 3 * np.eye(2))
    # the seed fixes the clusters whatever n: the first cluster's mean barely moves
    big = datasets.load("synth-chang2013?n=20000&seed=3")
    m_small = ds.X[ds.labels == 0].mean(axis=0)
    m_big = big.X[big.labels == 0].mean(axis=0)
    assert np.linalg.norm(m_small - m_big) < 1.0



def test_chang2013_in_more_dimensions_keeps_the_recipe():
    ds = datasets.load("synth-chang2013?n=20000&n_clusters=20&dim=10")
    assert ds.X.shape == (20000, 10) and np.unique(ds.labels).size == 20
    assert datasets.describe("synth-chang2013?dim=10")["dim"] == 10
    fam = ds.family
    assert fam.dim == 10 and fam.nu0 == 14 and np.allclose(fam.psi0, 3 * np.eye(10))  # E[Sigma] = I still
    # E[Sigma] = I: the points' spread about their cluster's mean is about one in every direction
    within = np.concatenate([ds.X[ds.labels == k] - ds.X[ds.labels == k].mean(axis=0) for k in range(20)])
    assert 0.5 < within.var(axis=0).mean() < 2.0
    assert datasets.canonical_name("synth-chang2013?dim=2") == "synth-chang2013"  # the paper's set

def test_wang2017_default_size_is_the_papers_and_vectorised():
    ds, lines = python_lines(datasets.load, "synth-wang2017")
    assert 40_000 <= ds.X.shape[0] <= 260_000 and ds.X.shape[1] == 2
    assert np.unique(ds.labels).size == 50
    sizes = np.bincount(ds.labels)
    assert set(sizes) <= {1000, 2000, 5000}
    assert ds.meta["n"] == ds.X.shape[0]
    # vectorised: the Python lines run do not grow with the points (~500 at either size; a
    # loop over points would run one or more per point)
    small, small_lines = python_lines(datasets.load, "synth-wang2017?scale=0.1")
    assert small.X.shape[0] * 10 == ds.X.shape[0] and lines < ds.X.shape[0] / 100
    assert lines < 2 * small_lines
    assert ds.family.sigma == 1.0 and ds.family.sigma0 == 10.0 and np.allclose(ds.family.mu0, 0)


def test_wang2017_scale_shrinks_cluster_sizes():
    full = np.bincount(datasets.load("synth-wang2017?n_clusters=6").labels)
    small = np.bincount(datasets.load("synth-wang2017?n_clusters=6&scale=0.001").labels)
    assert np.array_equal(small, np.maximum(1, np.rint(full * 0.001)))


def test_digits_shape_and_pca(loaded):
    ds = loaded["digits"]
    assert ds.X.shape == (1797, 64)
    assert set(np.unique(ds.labels)) == set(range(10))
    assert ds.meta["substitute"] is True and "optdigits" in ds.meta["source"]
    reduced = datasets.load("digits?pca=5")
    assert reduced.name == "digits?pca=5" and reduced.X.shape == (1797, 5)
    assert reduced.meta["dim"] == 5 and reduced.family.dim == 5
    var = reduced.X.var(axis=0)
    assert np.all(np.diff(var) <= 0)  # components by decreasing variance
    assert np.allclose(reduced.X.mean(axis=0), 0, atol=1e-9)
    cov = np.cov(reduced.X.T)
    assert np.allclose(cov - np.diag(np.diag(cov)), 0, atol=1e-8)


def test_pca_sign_convention():
    from dpmmbench.datasets.preprocessing import pca

    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 4)) * [5, 3, 2, 1]
    scores = pca(X, 3)
    loadings = np.linalg.lstsq(X - X.mean(axis=0), scores, rcond=None)[0]  # (4, 3)
    assert np.allclose(loadings.T @ loadings, np.eye(3))
    pivot = np.abs(loadings).argmax(axis=0)
    assert np.all(loadings[pivot, np.arange(3)] > 0)  # largest loading positive
    assert np.allclose(pca(-X, 3), -scores)  # same axes, so negated data give negated scores
    with pytest.raises(ValueError):
        pca(X, 5)


def test_multinomial_is_csr_counts(loaded):
    ds = loaded["synth-multinomial?n=60&vocab=30"]
    assert isinstance(ds.X, sp.csr_matrix)
    assert ds.X.shape == (60, 30)
    assert np.all(ds.X.data > 0) and np.all(ds.X.data == np.round(ds.X.data))
    assert np.all(np.asarray(ds.X.sum(axis=1)).ravel() == 50)
    assert ds.family.gamma == 0.5 and ds.family.vocab_size == 30


def test_canonical_name():
    assert datasets.load("synth-chang2013?seed=3&n=2000").name == "synth-chang2013?n=2000&seed=3"
    assert datasets.canonical_name("synth-chang2013?n=02000&seed=0") == "synth-chang2013?n=2000"
    assert datasets.canonical_name("synth-wang2017?scale=1&seed=101") == "synth-wang2017"
    assert datasets.canonical_name("synth-multinomial?gamma=.25") == "synth-multinomial?gamma=0.25"
    assert datasets.canonical_name("digits?") == "digits"
    # a canonical name loads the same bits as the name it came from
    a = datasets.load("synth-multinomial?seed=2&n=20")
    assert same_matrix(datasets.load(a.name).X, a.X)


@pytest.mark.parametrize("name, culprit, listed", [
    ("mnist", "'mnist'", "synth-chang2013"),
    ("synth-chang2013?m=5", "'m'", "n_clusters"),
    ("synth-chang2013?n=2.5", "'2.5'", "seed"),
    ("synth-chang2013?n=abc", "'abc'", "seed"),
    ("synth-chang2013?n=5", "'n'", "[10, 10000000]"),
    ("digits?seed=1", "'seed'", "pca"),
    ("digits?pca=65", "'pca'", "[0, 64]"),
    ("synth-wang2017?scale=0", "'scale'", "(0, 1]"),
    ("synth-wang2017?scale=nan", "'scale'", "(0, 1]"),
    ("synth-multinomial?gamma=-1", "'gamma'", "> 0"),
    ("synth-multinomial?n", "'n'", "key=value"),
    ("synth-multinomial?n=3&n=4", "'n'", "twice"),
])
def test_bad_names_raise_value_error(name, culprit, listed):
    with pytest.raises(ValueError) as info:
        datasets.load(name)
    assert culprit in str(info.value) and listed in str(info.value)
    with pytest.raises(ValueError):
        datasets.describe(name)


def test_non_string_name_raises():
    with pytest.raises(ValueError, match="string"):
        datasets.load(3)


def test_describe_does_not_generate(monkeypatch):
    # the largest n (20 s if generated): no component, label or point is drawn
    for method in ("sample_params", "sample_data"):
        monkeypatch.setattr(NormalInverseWishart, method, refuse(f"describe() drew the data ({method})"))
    monkeypatch.setattr(synth_chang2013, "mixture_labels", refuse("describe() drew the labels"))
    meta = datasets.describe("synth-chang2013?n=10000000")
    assert meta["n"] == 10**7 and meta["dim"] == 2
    with pytest.raises(pytest.fail.Exception, match="drew"):  # the generator does use them
        datasets.load("synth-chang2013?n=10")
    import sklearn.datasets

    monkeypatch.setattr(sklearn.datasets, "load_digits", refuse("describe() read the data"))
    assert datasets.describe("digits?pca=7")["dim"] == 7
    with pytest.raises(pytest.fail.Exception, match="read the data"):
        datasets.load("digits")


# ---- the fetched datasets: names, parameters and metadata without any download ----------------
FETCHED = ["mnist10k", "reuters", "fashion-mnist", "wikipedia", "nyt", "mnist70k", "ap", "uci-enron", "uci-nytimes"]


@pytest.mark.parametrize("name", FETCHED)
def test_fetched_datasets_describe_without_downloading(name, tmp_path, monkeypatch):
    monkeypatch.setenv("DPMMBENCH_DATA", str(tmp_path / "empty"))
    meta = datasets.describe(name)
    assert list(meta) == list(META_KEYS) and meta["n"] > 0 and meta["dim"] > 0
    assert "sha256" in meta["source"]  # every fetched source is verified
    assert datasets.registry.REGISTRY[name].fetch is not None
    assert not (tmp_path / "empty").exists()


def test_fashion_mnist_is_labelled_a_substitute_never_mnist():
    meta = datasets.describe("fashion-mnist")
    assert meta["substitute"] is True
    assert meta["description"].startswith("Fashion-MNIST (substitute for MNIST)")
    assert "not MNIST" in meta["description"]
    assert (meta["n"], meta["dim"]) == (70_000, 50)
    assert datasets.describe("fashion-mnist?n=12000&pca=0")["dim"] == 784
    assert datasets.describe("mnist70k")["substitute"] is False  # the real one, when the user has it


@pytest.mark.parametrize("name, dim", [("wikipedia", 6130), ("wikipedia?drop_top=10&vocab=1000", 1000),
                                       ("nyt?drop_top=3000", 12), ("nyt?drop_top=10&vocab=3005", 3002),
                                       ("ap?vocab=2000", 2000), ("uci-enron?drop_top=100", 28002)])
def test_text_dims_follow_the_pruning(name, dim):
    assert datasets.describe(name)["dim"] == dim


def test_a_corpus_cut_to_a_seeded_subset_of_its_documents():
    """``n`` documents of a corpus (e.g. Wikipedia cut to AP's 2,246): the same for one seed,
    others for another, each a document of the whole corpus, and said in the metadata."""
    whole = datasets.load("reuters")
    a, again, b = (datasets.load(f"reuters?n=120&seed={s}") for s in (1, 1, 2))
    assert a.X.shape == (120, whole.X.shape[1]) and a.name == "reuters?n=120&seed=1"
    assert same_matrix(a.X, again.X) and not same_matrix(a.X, b.X)
    rows = {tuple(r) for r in np.asarray(whole.X.todense() if sp.issparse(whole.X) else whole.X)}
    assert all(tuple(r) in rows for r in np.asarray(a.X.todense() if sp.issparse(a.X) else a.X))
    assert "seeded subset (seed 1) of 120 of the 395 documents" in a.meta["preprocessing"]
    assert datasets.describe("wikipedia?n=2246")["n"] == 2246 and datasets.describe("wikipedia")["n"] == 7961
    assert "seeded subset" not in whole.meta["preprocessing"]  # the whole corpus keeps its name and text
    with pytest.raises(ValueError, match="'n'"):
        datasets.describe("nyt?n=8448")


@pytest.mark.parametrize("name, culprit, listed", [
    ("fashion-mnist?n=70001", "'n'", "[10, 70000]"),
    ("fashion-mnist?pca=785", "'pca'", "[0, 784]"),
    ("fashion-mnist?vocab=3", "'vocab'", "seed"),
    ("wikipedia?vocab=6131", "'vocab'", "drop_top"),
    ("nyt?drop_top=3012", "'drop_top'", "[0, 3011]"),
    ("mnist70k?seed=-1", "'seed'", ">= 0"),
])
def test_bad_fetched_dataset_names(name, culprit, listed):
    with pytest.raises(ValueError) as info:
        datasets.describe(name)
    assert culprit in str(info.value) and listed in str(info.value)


# ---- the held-out split ------------------------------------------------------------------
@pytest.mark.parametrize("name", SMALL)
def test_holdout_is_disjoint_covering_and_keeps_format_family_and_labels(loaded, name):
    ds = loaded[name]
    n = ds.X.shape[0]
    train, test = datasets.holdout(ds, 0.2, seed=7)
    rows_train, rows_test = datasets.split.holdout_indices(n, 0.2, 7)
    assert test.X.shape[0] == round(0.2 * n) == rows_test.size
    assert np.intersect1d(rows_train, rows_test).size == 0
    assert np.array_equal(np.sort(np.concatenate([rows_train, rows_test])), np.arange(n))
    for part, rows in ((train, rows_train), (test, rows_test)):
        assert part.family is ds.family
        assert sp.issparse(part.X) == sp.issparse(ds.X) and (not sp.issparse(part.X) or part.X.format == "csr")
        assert same_matrix(part.X, ds.X[rows])
        assert np.array_equal(part.labels, ds.labels[rows])
        assert part.meta == dict(ds.meta, n=rows.size)
        part.family.validate(part.X)


def test_holdout_depends_only_on_the_data_size_fraction_and_seed(loaded):
    ds = loaded["synth-chang2013?n=500&seed=1"]
    again = datasets.load("synth-chang2013?n=500&seed=1")
    first, second = datasets.holdout(ds, 0.1, 3), datasets.holdout(again, 0.1, 3)
    assert all(same_matrix(a.X, b.X) for a, b in zip(first, second))
    other = datasets.holdout(ds, 0.1, 4)[1]
    assert not same_matrix(first[1].X, other.X)
    # one seed's larger test set contains its smaller one (a prefix of one permutation)
    small, large = (datasets.split.holdout_indices(500, f, 3)[1] for f in (0.1, 0.3))
    assert np.isin(small, large).all()


def test_holdout_of_nothing_is_none_and_the_dataset_itself(loaded):
    ds = loaded["synth-chang2013?n=500&seed=1"]
    assert datasets.holdout(ds, 0.0, 0) == (ds, None)
    tiny = datasets.load("synth-chang2013?n=10")
    assert datasets.holdout(tiny, 0.01, 0) == (tiny, None)  # round(0.1) = 0 points


@pytest.mark.parametrize("fraction, seed, message", [
    (0.6, 0, "test_fraction must be in [0, 0.5], got 0.6"),
    (-0.1, 0, "test_fraction must be in [0, 0.5]"),
    (float("nan"), 0, "test_fraction must be a finite number"),
    ("0.1", 0, "test_fraction must be a number"),
    (0.1, -1, "split_seed must be in"),
    (0.1, 1.5, "split_seed must be an integer"),
])
def test_holdout_refuses_a_bad_fraction_or_seed(loaded, fraction, seed, message):
    with pytest.raises((TypeError, ValueError), match=re.escape(message)):
        datasets.holdout(loaded["digits"], fraction, seed)
