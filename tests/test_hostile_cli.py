"""Hostile use of ``dpmmbench run``: every mistake ends in one line on stderr and the exit
code of its class (``dpmmbench --help``), before any work it can precede, with no output
left and the user's files in the output folder untouched; a trace's CSV and sidecar stay a
consistent pair whatever interrupts their write. (A valid run of the real command, the positive
control of the process watch, is tests/test_cli.py::test_cli_end_to_end_subprocess.)"""
from __future__ import annotations

import os
import signal
import string
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import refuse
from dpmmbench.reports.traces import read_trace, write_trace
from dpmmbench.workflows import cluster
from dpmmbench.workflows.cli import EXIT_CODES, main
from hostile_cli import own_files, plant_user_files, run_cli, user_files_intact

TINY = "synth-chang2013?n=20"
FAST = ["--iterations", "0", "--no-warmup"]
ERROR_CODES = set(EXIT_CODES.values()) - {EXIT_CODES["interrupted"]}


@dataclass(frozen=True)
class InProcess:
    """What ``main(args)`` did in this process (:func:`main_in_process`)."""

    returncode: int
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr.splitlines()


def main_in_process(args, monkeypatch, capsys, cwd, env=None) -> InProcess:
    """``dpmmbench ARGS`` as ``main(args)`` in this process, in ``cwd`` with ``env`` set, and
    with the start of a Dask cluster refused (a run that cannot succeed starts none): the fast
    loop's way through a table of mistakes. Each case also runs as the real command in a
    child process (:func:`~hostile_cli.run_cli`), a few in the fast loop, all with the slow
    tests."""
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(cluster, "dask_client", refuse("a Dask cluster was started for a run that cannot succeed"))
    capsys.readouterr()
    code = main([str(a) for a in args])
    return InProcess(code, capsys.readouterr().err)


def real_command(fast, cases):
    """Parameters of a test of the real command over ``cases``: those in ``fast`` in the fast
    loop, the others with the slow tests (their in-process twins are all in the fast loop)."""
    return [pytest.param(case, marks=() if case in fast else pytest.mark.slow) for case in cases]


def assert_one_line_error(res, code, needle=""):
    assert res.returncode == code, (res.returncode, res.stderr[-2000:])
    assert len(res.stderr_lines) == 1, res.stderr
    assert res.stderr.startswith("dpmmbench: error: ") and "Traceback" not in res.stderr
    assert needle in res.stderr, res.stderr


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    """A preprocessed tiny dataset, and broken copies of it."""
    from dpmmbench import datasets
    from dpmmbench.datasets.store import save

    folder = tmp_path_factory.mktemp("data")
    good = folder / "tiny.npz"
    save(datasets.load(TINY), good)
    data = good.read_bytes()
    (folder / "truncated.npz").write_bytes(data[: len(data) // 2])
    (folder / "header-only.npz").write_bytes(data[:30])
    (folder / "garbage.npz").write_bytes(b"not a dataset\n" * 10)
    (folder / "empty.npz").write_bytes(b"")
    return folder


#: a dataset read from files that the tests' empty data folder lacks (and that are never
#: downloaded: no sha256 is pinned for ap.tgz): opening it is a data error (the mistake
#: "missing-canonical-file" below), so a refusal of another class shows that the data were
#: never opened
UNOPENED = "ap"


def no_data(tmp_path) -> dict[str, str]:
    """The environment of a command whose data folder is empty (``tmp_path/no-data``)."""
    return {"DPMMBENCH_DATA": str(tmp_path / "no-data")}


def data_untouched(tmp_path) -> bool:
    """Whether the command left the data folder of :func:`no_data` empty (or absent)."""
    folder = tmp_path / "no-data"
    return not folder.exists() or not any(folder.iterdir())


# ---- each mistake, one line, its code, nothing left ---------------------------------------
MISTAKES = {
    # name: (arguments after `run --algorithm gibbs`, exit class, text the line must hold)
    "seed-too-large": (["--dataset", TINY, "--seed", str(2**63)], "usage", "seed"),
    "seed-huge": (["--dataset", TINY, "--seed", "9" * 40], "usage", "seed"),
    "seed-negative": (["--dataset", TINY, "--seed", "-1"], "usage", "seed"),
    "seed-not-a-number": (["--dataset", TINY, "--seed", "one"], "usage", "--seed"),
    "init-clusters-above-n": (["--dataset", TINY, "--seed", "0", "--init-clusters", "21"], "usage",
                              "N = 18 (the training"),
    "unknown-option": (["--dataset", TINY, "--seed", "0", "--option", "nope=1"], "usage", "nope"),
    "option-twice": (["--dataset", TINY, "--seed", "0", "--option", "scan=fixed", "--option", "scan=random"],
                     "usage", "twice"),
    "alpha-nan": (["--dataset", TINY, "--seed", "0", "--alpha", "nan"], "usage", "alpha"),
    "alpha-prior-nan": (["--dataset", TINY, "--seed", "0", "--alpha-prior", "nan", "1"], "usage", "alpha_prior shape"),
    "alpha-prior-one-value": (["--dataset", TINY, "--seed", "0", "--alpha-prior", "1"], "usage", "--alpha-prior"),
    "test-fraction-too-large": (["--dataset", TINY, "--seed", "0", "--test-fraction", "0.9"], "usage",
                                "test_fraction"),
    "init-clusters-above-training-points": (["--dataset", TINY, "--seed", "0", "--test-fraction", "0.5",
                                             "--init-clusters", "11"], "usage", "N = 10"),
    "unknown-flag": (["--dataset", TINY, "--seed", "0", "--colour"], "usage", "--colour"),
    "absurd-size": (["--dataset", "synth-chang2013?n=100000000000000", "--seed", "0"], "data", "n"),
    "bad-spec": (["--dataset", "synth-chang2013?n=20&n=30&x", "--seed", "0"], "data", "synth-chang2013"),
    "unknown-dataset": (["--dataset", "no-such-data", "--seed", "0"], "data", "no-such-data"),
    "missing-canonical-file": (["--dataset", UNOPENED, "--seed", "0"], "data", "ap.tgz"),
}


def mistake_args(name, folder):
    args, _, _ = MISTAKES[name]
    return ["run", "--algorithm", "gibbs", *FAST, *args, "--out", folder / "trace.csv"]


# An empty data folder in every case: the canonical files are missing (and none can be
# fetched: no sha256 is pinned for ap.tgz, so nothing is downloaded).
@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_a_mistake_is_one_line_and_its_code(tmp_path, monkeypatch, capsys, name):
    _, kind, needle = MISTAKES[name]
    folder = tmp_path / "results"
    planted = plant_user_files(folder)
    res = main_in_process(mistake_args(name, folder), monkeypatch, capsys, tmp_path, env=no_data(tmp_path))
    assert_one_line_error(res, EXIT_CODES[kind], needle)
    assert own_files(folder, planted) == [] and user_files_intact(folder, planted)
    assert data_untouched(tmp_path)


@pytest.mark.parametrize("name", real_command({"seed-too-large", "missing-canonical-file"}, sorted(MISTAKES)))
def test_a_mistake_of_the_real_command_is_one_line_and_its_code(tmp_path, name):
    _, kind, needle = MISTAKES[name]
    folder = tmp_path / "results"
    planted = plant_user_files(folder)
    res = run_cli(mistake_args(name, folder), cwd=tmp_path, env=no_data(tmp_path))
    assert_one_line_error(res, EXIT_CODES[kind], needle)
    assert res.spawned == 0, "a process (a Dask cluster) was started for a run that cannot succeed"
    assert own_files(folder, planted) == [] and user_files_intact(folder, planted)
    assert data_untouched(tmp_path)


BAD_DATA_FILES = ["truncated", "header-only", "garbage", "empty", "missing", "other-dataset"]


def bad_data_args(name, data_files, folder):
    """The run arguments of a bad data file case, and the file."""
    dataset, path = TINY, data_files / f"{name}.npz"
    if name == "other-dataset":
        dataset, path = "synth-chang2013?n=21", data_files / "tiny.npz"
    return ["run", "--algorithm", "gibbs", *FAST, "--dataset", dataset, "--data-file", path, "--seed", "0",
            "--out", folder / "trace.csv"], path


@pytest.mark.parametrize("name", BAD_DATA_FILES)
def test_a_bad_data_file_is_a_data_error(tmp_path, monkeypatch, capsys, data_files, name):
    folder = tmp_path / "results"
    planted = plant_user_files(folder)
    args, path = bad_data_args(name, data_files, folder)
    assert_one_line_error(main_in_process(args, monkeypatch, capsys, tmp_path), EXIT_CODES["data"], path.name)
    assert own_files(folder, planted) == [] and user_files_intact(folder, planted)


@pytest.mark.parametrize("name", real_command({"truncated"}, BAD_DATA_FILES))
def test_a_bad_data_file_is_a_data_error_of_the_real_command(tmp_path, data_files, name):
    folder = tmp_path / "results"
    planted = plant_user_files(folder)
    args, path = bad_data_args(name, data_files, folder)
    res = run_cli(args, cwd=tmp_path)
    assert_one_line_error(res, EXIT_CODES["data"], path.name)
    assert res.spawned == 0
    assert own_files(folder, planted) == [] and user_files_intact(folder, planted)


def unwritable_outs(tmp_path):
    (tmp_path / "a-file").write_text("the user's")
    (tmp_path / "folder.csv").mkdir()
    outs = {"parent-is-a-file": tmp_path / "a-file" / "trace.csv", "out-is-a-folder": tmp_path / "folder.csv",
            "deep-under-a-file": tmp_path / "a-file" / "x" / "y" / "trace.csv", "procfs": Path("/proc/trace.csv")}
    if os.geteuid() != 0:  # root writes into read-only folders
        (tmp_path / "read-only").mkdir(mode=0o555)
        outs["read-only"] = tmp_path / "read-only" / "trace.csv"
    return outs


def test_an_unwritable_out_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    """Before any work: the data never opened (an output error, not the data error that
    opening them is), no cluster started, nothing written."""
    for name, out in unwritable_outs(tmp_path).items():
        before = sorted(p.name for p in tmp_path.rglob("*"))
        res = main_in_process(["run", "--algorithm", "gibbs", "--dataset", UNOPENED, "--seed", "0", "--iterations",
                               "5", "--out", out], monkeypatch, capsys, tmp_path, env=no_data(tmp_path))
        assert_one_line_error(res, EXIT_CODES["output"], "--out")
        assert sorted(p.name for p in tmp_path.rglob("*")) == before, name
        assert (tmp_path / "a-file").read_text() == "the user's"
    assert data_untouched(tmp_path)


@pytest.mark.parametrize("name", real_command({"parent-is-a-file"}, ["parent-is-a-file", "out-is-a-folder",
                                                                     "deep-under-a-file", "procfs"]
                                                + (["read-only"] if os.geteuid() != 0 else [])))
def test_an_unwritable_out_of_the_real_command_is_refused_before_any_work(tmp_path, name):
    outs = unwritable_outs(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    res = run_cli(["run", "--algorithm", "gibbs", "--dataset", UNOPENED, "--seed", "0", "--iterations", "5",
                   "--out", outs[name]], cwd=tmp_path, env=no_data(tmp_path))
    assert_one_line_error(res, EXIT_CODES["output"], "--out")
    assert res.spawned == 0
    assert sorted(p.name for p in tmp_path.rglob("*")) == before and data_untouched(tmp_path)
    assert (tmp_path / "a-file").read_text() == "the user's"


def test_an_out_of_range_seed_is_refused_before_any_work(tmp_path):
    folder = tmp_path / "results"
    planted = plant_user_files(folder)
    # the seed fails first: a usage error, not the data error that opening the data is
    res = run_cli(["run", "--algorithm", "gibbs", "--dataset", UNOPENED, "--seed", str(2**64), "--iterations", "5",
                   "--out", folder / "trace.csv"], cwd=tmp_path, env=no_data(tmp_path))
    assert_one_line_error(res, EXIT_CODES["usage"], "seed must be in [0, 9223372036854775807]")
    assert res.spawned == 0
    assert own_files(folder, planted) == [] and user_files_intact(folder, planted) and data_untouched(tmp_path)


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_a_cluster_error(tmp_path):
    """A serial chain's worker killed (SIGKILL) while the chain runs; Dask is told not to
    retry the task, so the run fails: one line, the cluster's code, the user's files kept.
    Each worker process is killed once it has lived a few seconds (one killed before the
    chain reached it is replaced by the Nanny, and the next one is killed in turn)."""
    folder = tmp_path / "results"
    planted = plant_user_files(folder)
    killed = []

    def kill_workers(process, seconds):
        for child in process.children(recursive=True):
            try:
                line = " ".join(child.cmdline())
                if ("spawn_main" in line and "resource_tracker import" not in line and child.pid not in killed
                        and child.create_time() < time.time() - 5):
                    child.send_signal(signal.SIGKILL)
                    killed.append(child.pid)
            except psutil.NoSuchProcess:
                pass

    res = run_cli(["run", "--algorithm", "gibbs", "--no-warmup", "--dataset", TINY, "--seed", "0",
                   "--iterations", "1000000000", "--out", folder / "trace.csv"], cwd=tmp_path,
                  env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}, during=kill_workers, timeout=150)
    assert killed, "no worker process was found to kill"
    assert_one_line_error(res, EXIT_CODES["cluster"], "Dask")
    assert user_files_intact(folder, planted)
    # The chain's rows died with its worker: nothing to keep, nothing written.
    assert own_files(folder, planted) == []


# ---- random argument lists ---------------------------------------------------------------
def _number_text():
    return st.one_of(st.integers(-3, 3).map(str), st.integers().map(str), st.floats(allow_nan=True).map(str),
                     st.sampled_from(["", "1e3", "0x10", "inf", "-inf", "nan", "1_000", " 2", "two"]))


_SPECS = st.one_of(
    st.just(TINY),
    st.builds(lambda n, extra: f"synth-chang2013?n={n}{extra}", _number_text(),
              st.sampled_from(["", "&seed=1", "&seed=-1", "&n_clusters=0", "&bogus=1", "&", "&&n=20"])),
    st.text(string.printable, max_size=30),
)
_OPTIONS = st.lists(st.one_of(
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(["scan", "truncation", "bogus", "", " "]),
              st.one_of(_number_text(), st.sampled_from(["fixed", "random", ""]))),
    st.text(string.printable, max_size=12)), max_size=1)


def _at_most(limit):
    """Hostile text for an integer flag, but no integer above ``limit``: a valid huge
    iteration or worker count is a long run, not a mistake."""
    def small(text):
        try:
            return int(text) <= limit
        except ValueError:
            return True
    return _number_text().filter(small)


#: valid values of each flag (drawn most of the time, so that some runs are valid)
_VALID = {"--alpha": ["1", "0.5", "1e-3"], "--workers": ["1", "2"], "--threads": ["1", "2"],
          "--time-budget": ["10", "0.5"], "--init-clusters": ["1", "3", "18"], "--test-fraction": ["0", "0.1", "0.5"],
          "--split-seed": ["0", "7"], "--heldout-draws": ["1", "10"]}


@st.composite
def run_arguments(draw):
    def value(valid, hostile):
        return draw(st.one_of(valid, valid, valid, hostile))

    args = ["run", "--algorithm", value(st.sampled_from(["gibbs", "fsd"]), st.sampled_from(["nope", "", "GIBBS"])),
            "--dataset", value(st.just(TINY), _SPECS), "--no-warmup"]
    args += ["--seed", value(st.integers(0, 2**63 - 1).map(str),
                             st.one_of(st.integers(-2**70, 2**70).map(str), _number_text()))]
    args += ["--iterations", value(st.sampled_from(["0", "1"]), _at_most(1000))]
    for flag, valid in _VALID.items():
        if draw(st.booleans()):
            hostile = _at_most(2) if flag in ("--workers", "--threads") else _number_text()
            args += [flag, value(st.sampled_from(valid), hostile)]
    if draw(st.booleans()):
        args += ["--alpha-prior", *(value(st.sampled_from(["1", "0.5", "1e3"]), _number_text()) for _ in range(2))]
    for option in draw(_OPTIONS):
        args += ["--option", option]
    return args


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=run_arguments())
def test_random_run_arguments_end_in_a_run_or_one_line(args):
    if any("\x00" in a for a in args):  # an argument cannot hold NUL: not a command line
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folder = tmp / "results"
        planted = plant_user_files(folder)
        res = run_cli([*args, "--out", folder / "trace.csv"], cwd=tmp, timeout=180)
        assert "Traceback" not in res.stderr, (args, res.stderr[-3000:])
        if res.returncode == 0:
            assert own_files(folder, planted) == ["trace.csv", "trace.csv.meta.json"], args
            read_trace(folder / "trace.csv")
        else:
            assert res.returncode in ERROR_CODES, (args, res.returncode, res.stderr[-3000:])
            assert len(res.stderr_lines) == 1 and res.stderr.startswith("dpmmbench: error: "), (args, res.stderr)
            assert own_files(folder, planted) == [], args
        assert user_files_intact(folder, planted), args


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(args=st.lists(st.one_of(st.sampled_from(["run", "--seed", "--out", "--dataset", "--algorithm", "--option",
                                                "--iterations", "--help", "-h", "list", "--traceback"]),
                               st.text(string.printable, max_size=10)), max_size=8))
def test_random_argument_lists_are_refused_in_one_line(args):
    """Arbitrary words after `dpmmbench` (without --out, so never a run): help, or one line."""
    args = [a for a in args if "\x00" not in a and a not in ("list", "--traceback")]
    if "--out" in args or any(a.startswith("--o") for a in args):
        return
    with tempfile.TemporaryDirectory() as tmp:
        res = run_cli(args, cwd=tmp, timeout=60)
        if res.returncode == 0:
            assert "-h" in args or "--help" in args, (args, res.stdout)
        else:
            assert res.returncode == EXIT_CODES["usage"], (args, res.stderr)
            assert len(res.stderr_lines) == 1 and "Traceback" not in res.stderr, (args, res.stderr)
        assert res.spawned == 0
        assert not os.listdir(tmp)


# ---- a trace pair, interrupted anywhere ------------------------------------------------------
@pytest.mark.parametrize("fail_at", [1, 2, 3])
@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, OSError])
def test_an_interrupted_pair_write_leaves_a_consistent_pair(tmp_path, monkeypatch, fail_at, interrupt):
    """os.replace fails at its first, second or third call (the sidecar's, the CSV's, the old
    sidecar's restoration): the old pair or the new one, readable; no temporary left."""
    import pandas as pd

    old = pd.DataFrame({"algorithm": ["gibbs"], "dataset": ["d"], "iteration": [0], "log_joint": [-1.0]})
    new = pd.DataFrame({"algorithm": ["gibbs"] * 3, "dataset": ["d"] * 3, "iteration": [0, 1, 2],
                        "log_joint": [-1.0, -2.0, -3.0]})
    path = write_trace(old, tmp_path / "trace.csv", {"run": "old"})
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == fail_at:
            raise interrupt("interrupted")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    try:
        write_trace(new, path, {"run": "new"})
    except (KeyboardInterrupt, OSError):
        pass
    monkeypatch.undo()
    trace, meta = read_trace(path)
    assert (meta, len(trace)) in (({"run": "old"}, 1), ({"run": "new"}, 3)), (meta, len(trace))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.csv", "trace.csv.meta.json"]
