"""The HTML comparison report: built from real traces of tiny runs, checked for its sections,
its numbers (recomputed here from the traces), self-containment, determinism, and rendered
in a real headless Chromium (no console errors, every figure decodes and has a size)."""
from __future__ import annotations

import base64
import fcntl
import html
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.algorithms.backends import SerialBackend
from dpmmbench.algorithms.base import column_members
from dpmmbench.reports import chains as chain_stats
from dpmmbench.reports import claims, costmodel, figures
from dpmmbench.reports.report import build_report
from dpmmbench.reports.runs import read_runs
from dpmmbench.reports.traces import read_trace, write_trace
from dpmmbench.workflows import driver
from dpmmbench.workflows.cli import main
from dpmmbench.workflows.provenance import environment

ROOT = Path(__file__).resolve().parents[1]
DATA = "synth-chang2013?n=200"
ALGORITHMS = ("gibbs", "subc", "search")
SEEDS = (0, 1)
ITERATIONS = 4
#: per dataset, convergence panels and time per iteration; speed-up against workers once; the
#: scaling model once (the labelled dataset has sharded runs, the unlabelled one none); the
#: learned alpha once (the labelled dataset only has runs that learn it); quality against time
#: once (the unlabelled runs hold nothing out and have no truth: no quality to plot); and the
#: first screen's quality against time, one panel per dataset
FIGURES = 2 * 2 + 1 + 1 + 1 + 1 + 1
#: the name of the runs that learn alpha
LEARNED = "gibbs-learned-alpha"
#: the peer among them (in the default install)
PEER = "sklearn-bgm"
#: the report's sections, in order
SECTIONS = ["answer", "claims", "dataset-0", "dataset-1", "peers", "communication", "steps", "environment"]
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1280,900")


# ---- inputs: real traces of tiny runs ----------------------------------------------------
@pytest.fixture(scope="module")
def scheduler():
    """One in-process Dask cluster for every run of this module (the driver runs each chain as
    a Dask task; an embedded cluster per run would cost seconds each)."""
    import distributed

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def traces(tmp_path_factory, scheduler):
    """Trace files of real runs: 3 algorithms x 2 seeds on labelled synthetic data, and gibbs
    learning alpha, gibbs on the same points without their labels, gibbs on 2 workers, and
    (when registered) the sharded slice sampler on 2 workers, which reports the bytes its
    shards exchange."""
    out = tmp_path_factory.mktemp("traces")
    paths = []
    for algorithm in ALGORITHMS:
        for seed in SEEDS:
            trace, meta = driver.run(driver.RunSpec(algorithm, DATA, ITERATIONS, seed=seed, scheduler=scheduler))
            paths.append(write_trace(trace, out / "chang" / algorithm / f"seed{seed}.parquet", meta))
    for seed in SEEDS:
        trace, meta = driver.run(driver.RunSpec("gibbs", DATA, ITERATIONS, seed=seed, scheduler=scheduler,
                                                alpha_prior=(1.0, 1.0), name=LEARNED))
        paths.append(write_trace(trace, out / "chang" / LEARNED / f"seed{seed}.parquet", meta))
    for seed in SEEDS:  # a peer beside them, with its own settings
        trace, meta = driver.run(driver.RunSpec(PEER, DATA, ITERATIONS, seed=seed, scheduler=scheduler,
                                                options={"n_components": 7}))
        paths.append(write_trace(trace, out / "chang" / PEER / f"seed{seed}.parquet", meta))

    data = datasets.load(DATA)
    for seed in SEEDS:  # no ground truth: the report must leave VI out
        sampler = algorithms.make("gibbs", family=data.family, seed=seed)
        trace = driver.run_chain(sampler, data.X, ITERATIONS, dataset="unlabelled-blobs")
        meta = {"algorithm": "gibbs", "options": sampler.params, **environment()}
        paths.append(write_trace(trace, out / "unlabelled" / "gibbs" / f"seed{seed}.csv", meta))

    # the serial gibbs chain of seed 0 again, on a 2-worker cluster: speed-up against workers
    trace, meta = driver.run(driver.RunSpec("gibbs", DATA, ITERATIONS, seed=0, workers=2, scheduler=scheduler))
    paths.append(write_trace(trace, out / "chang" / "gibbs-2w" / "seed0.parquet", meta))

    if "slice-mr" in algorithms.available():
        trace, meta = driver.run(driver.RunSpec("slice-mr", DATA, ITERATIONS, seed=0, workers=2, scheduler=scheduler))
        paths.append(write_trace(trace, out / "chang" / "slice-mr" / "seed0.parquet", meta))
    return paths


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text())


@pytest.fixture(scope="module")
def report(traces, config, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "results" / "report" / "index.html"
    start = time.perf_counter()
    build_report(traces, out, config=config)
    return out, time.perf_counter() - start


class Page(HTMLParser):
    """Tags with their attributes, section ids, and the text of each section."""

    def __init__(self, text):
        super().__init__()
        self.tags, self.sections, self._section = [], {}, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "section":
            self._section = attrs.get("id")
            self.sections[self._section] = ""

    def handle_data(self, data):
        if self._section is not None:
            self.sections[self._section] += data


def png_size(data: bytes):
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


# ---- the file ------------------------------------------------------------------------------
@pytest.mark.slow
def test_sections_figures_and_speed(report, traces):
    out, seconds = report
    page = Page(out.read_text(encoding="utf-8"))
    assert list(page.sections) == SECTIONS
    assert DATA in page.sections["dataset-0"] and "Ground truth available" in page.sections["dataset-0"]
    assert "unlabelled-blobs" in page.sections["dataset-1"] and "No ground truth" in page.sections["dataset-1"]
    # subc and slice-mr ran on shards: a scaling model, labelled as one, with its network stated
    assert "Scaling (model)" in page.sections["dataset-0"] and "This is a model" in page.sections["dataset-0"]
    assert f"network of {costmodel.GIGABIT.describe()}" in page.sections["dataset-0"]
    assert "No sharded algorithm ran on this dataset" in page.sections["dataset-1"]
    for paper in ("Chang & Fisher 2013", "Daumé 2007", "Wang & Lin 2017"):
        assert paper in page.sections["claims"]

    images = [attrs for tag, attrs in page.tags if tag == "img"]
    assert len(images) == FIGURES
    for attrs in images:
        assert attrs["src"].startswith("data:image/png;base64,") and attrs["alt"]
        width, height = png_size(base64.b64decode(attrs["src"].split(",", 1)[1]))
        assert width > 300 and height > 100
    assert seconds < 30, f"report took {seconds:.1f} s for {len(traces)} traces"


@pytest.mark.slow
def test_no_external_resources(report):
    text = report[0].read_text(encoding="utf-8")
    page = Page(text)
    for tag, attrs in page.tags:
        assert tag not in ("link", "script", "iframe", "object", "embed"), tag
        if "src" in attrs:
            assert attrs["src"].startswith("data:"), attrs["src"][:80]
        if "href" in attrs:  # in-page anchors, or the relative link to the asv results
            assert not attrs["href"].lower().startswith(("http:", "https:", "//", "file:")), attrs["href"]
    assert "@import" not in text and "url(" not in text
    assert "http://" not in text and "https://" not in text


@pytest.mark.slow
def test_numbers_come_from_the_traces(report, traces):
    text = report[0].read_text(encoding="utf-8")
    chains = {str(p): read_trace(p)[0] for p in traces}
    gibbs = [t for t in chains.values()
             if t["algorithm"].iloc[0] == "gibbs" and t["dataset"].iloc[0] == DATA and t["workers"].iloc[0] == 1]
    assert len(gibbs) == len(SEEDS)
    target = min(t["log_joint"].max() for t in gibbs)  # the level every gibbs chain reached
    assert f"log joint &ge; {target:,.1f} nats" in text

    # the overview's held-out log predictive and final alpha: medians over the seeds
    for name in ("gibbs", LEARNED):
        paths = [p for p in traces if p.parent.name == name and p.parent.parent.name == "chang"]
        heldout = np.median([read_trace(p)[1]["heldout_lpd"] for p in paths])
        alpha = np.median([chains[str(p)]["alpha"].iloc[-1] for p in paths])
        row = f"{heldout:.4g}</td><td class='n'>{alpha:.3g}" + (" (learned)" if name == LEARNED else "")
        assert row in text, name
    assert f"Learned concentration on {DATA}" in text

    # each algorithm's own per-step columns: the search's pushed states, summed over its steps
    pushed = [t.loc[t["iteration"] > 0, "states_pushed"].sum() for t in chains.values()
              if t["algorithm"].iloc[0] == "search"]
    assert f"Σ {np.median(pushed):,.0f}" in Page(text).sections["steps"]

    talking = [t for t in chains.values() if t["bytes_sent"].iloc[1:].sum() > 0]
    communication = Page(text).sections["communication"]
    if talking:
        assert "Wang & Lin 2017, Table 1" in communication and "slice-mr (2 workers)" in communication
    else:
        assert "No run sent any bytes" in communication


@pytest.mark.slow
def test_leaderboard_is_computed_from_the_chains(report, traces):
    """Each dataset opens with its leaderboard: R-hat and ESS as arviz-stats gives them on the
    chains' second halves, the time-to-target level from the best fixed-alpha chain, the
    methods that disagree marked, and the quality-against-time figure where quality was measured."""
    from arviz_stats.base import array_stats

    text = report[0].read_text(encoding="utf-8")
    page = Page(text)
    for section in ("dataset-0", "dataset-1"):
        assert "Which method?" in page.sections[section] and "Leaderboard: medians over chains" in page.sections[section]
    chains = {str(p): read_trace(p) for p in traces}
    gibbs = [t for t, meta in chains.values() if t["dataset"].iloc[0] == DATA and t["algorithm"].iloc[0] == "gibbs"
             and t["workers"].iloc[0] == 1]
    # ITERATIONS steps: the draws are the last max(ITERATIONS / 2, 4) of them
    draws = np.array([t.sort_values("iteration")["log_joint"].to_numpy()[-max(ITERATIONS // 2, 4):] for t in gibbs])
    rhat = float(array_stats.rhat(draws, chain_axis=0, draw_axis=1))
    board = text.split("<section id='dataset-0'>", 1)[1].split("</table>", 1)[0]  # its first table
    row = board.split("<td>gibbs</td>", 1)[1].split("</tr>", 1)[0]
    assert row.startswith(f"<td class='n'>{len(gibbs)}</td><td class='n'>{rhat:.4g} / ")
    assert ("not converged" in row) == (rhat > chain_stats.RHAT_THRESHOLD)
    # an optimiser (search) and variational inference (the peer) have no R-hat or ESS: n/a with
    # the reason, never "not converged"
    for label, kind in (("search", "optimiser"), (f"{PEER}[n_components=7]", "variational")):
        row = board.split(f"<td>{label}", 1)[1].split("</tr>", 1)[0]
        reason = chain_stats.NOT_A_SAMPLER[kind].removeprefix("n/a: ")
        assert f"<td>n/a <span class='why'>{html.escape(reason, quote=False)}</span></td><td>n/a</td><td>n/a</td>" \
            in row, row
        assert "not converged" not in row
    fixed = [t for t, meta in chains.values() if t["dataset"].iloc[0] == DATA and meta.get("alpha_prior") is None]
    best = max(t["log_joint"].max() for t in fixed)
    assert f"at or above {best - 1e-3 * abs(best):,.1f} nats, within 0.1 % of the best" in page.sections["dataset-0"]
    assert f"Quality against time on {DATA}" in text  # held-out points and labels: both panels
    assert "Quality against time on unlabelled-blobs" not in text  # nothing held out, no truth: no figure


@pytest.mark.slow
def test_the_page_opens_ranking_only_settled_methods(report, traces):
    """The first screen ranks only methods whose chains settled: the report's chains stop after
    ITERATIONS steps, too few to tell, so the labelled dataset's row names no best method and
    no settled one, each method's section says "too slow at this budget" (or n/a), and the
    runs that learn alpha take no part in the row."""
    from dpmmbench.reports.diagnosis import MIN_ITERATIONS

    assert ITERATIONS < MIN_ITERATIONS
    text = report[0].read_text(encoding="utf-8")
    first = text.split("<section id='answer'>", 1)[1].split("</section>", 1)[0]
    assert text.index("<section id='answer'>") < text.index("<section id='claims'>")
    row = first.split(f"<td>{DATA}", 1)[1].split("</tr>", 1)[0]
    cells = row.split("</td>")  # data set, budget, best log joint, best held-out, settled, leaders
    assert "no method settled" in cells[2] and "no method settled" in cells[3] and "none" in cells[4]
    assert LEARNED not in row and "runs that learn α" in first.split("What this run can and cannot tell you", 1)[1]
    section = text.split("<section id='dataset-0'>", 1)[1].split("</section>", 1)[0]
    diagnosis = section.split("<summary>Chain diagnosis of every method</summary>", 1)[1].split("</details>", 1)[0]
    frame, runs = read_runs(traces)
    here = runs[runs["dataset"] == DATA]
    for label, kind in zip(here["label"], here["kind"]):
        line = diagnosis.split(f"<tr><td>{html.escape(label, quote=False)}</td>", 1)[1].split("</tr>", 1)[0]
        said = "n/a" if kind in ("optimiser", "variational") else "too slow at this budget ("
        assert said in line, (label, line)


@pytest.mark.slow
def test_peers_settings_are_shown_and_linked(report, traces):
    """A peer's own settings, as its runs recorded them, are in the report, and its leaderboard
    row says it is a peer and links there: a default is never read as a tuned comparison."""
    text = report[0].read_text(encoding="utf-8")
    peers = Page(text).sections["peers"]
    recorded = [meta["peer_settings"] for t, meta in map(read_trace, traces) if meta.get("external")]
    assert len(recorded) == len(SEEDS)
    label = f"{PEER}[n_components=7]"  # a non-default option is part of the name
    assert f"{label} ({len(SEEDS)} runs)" in peers
    for key, value in recorded[0].items():
        assert key in peers
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            assert str(value) in peers, key  # the page's text, its escapes undone
    assert recorded[0]["n_components"] == 7 and "scikit-learn" in recorded[0]["library"]
    board = text.split("<section id='dataset-0'>", 1)[1].split("</table>", 1)[0]
    assert f"<td>{label} <a class='peer' href='#peers'>(peer)</a></td>" in board
    assert "<td>gibbs</td>" in board  # our own samplers are not marked


@pytest.mark.slow
def test_claims_are_measured_or_say_what_is_missing(traces):
    frame, runs = read_runs(traces)
    chang, daume, wang = claims.check_claims(frame, runs)

    # Chang & Fisher: subc and gibbs ran on their synthetic data, fsd and gibbs-supercluster did
    # not; 200 points and a few iterations are far below the claim's scale: measured, not decided
    assert chang.verdict == claims.UNDECIDED
    assert "fsd" in chang.summary and "gibbs-supercluster" in chang.summary and "not in this grid" in chang.summary
    assert f"{len(datasets.load(DATA).X):,} points (needs {claims.CHANG_SCOPE.points:,})" in chang.summary
    plateau = runs.loc[runs["dataset"] == DATA, "final_log_joint"].max()
    assert f"plateau {plateau:,.1f} nats" in chang.summary

    # Daumé: the search against each gibbs label at the search's finishing time, recomputed here
    search = runs[(runs["algorithm"] == "search") & (runs["dataset"] == DATA)]
    at = search["search_s"].median()
    for label in ("gibbs", "gibbs (2 workers)"):
        values = []
        for run in runs.loc[(runs["label"] == label) & (runs["dataset"] == DATA), "run"]:
            chain = frame[frame["run"] == run].sort_values("iteration")
            done = chain[chain["time_s"] <= at]
            values.append((done if len(done) else chain.iloc[:1])["log_joint"].iloc[-1])
        rows = daume.table[daume.table["algorithm"] == label]  # a row per chain (seed)
        assert sorted(rows["log joint at that time"]) == pytest.approx(sorted(values))
    # 200 points: below the claim's scale, every comparison is measured but none decides
    assert daume.verdict == claims.UNDECIDED and f"(needs {claims.DAUME_SCOPE.points:,})" in daume.summary

    # Wang & Lin: no consolidation sampler communicated, and the summary says why
    assert wang.verdict == claims.UNCHECKED
    assert "cons-prog" in wang.summary and "auxvar" in wang.summary


@pytest.mark.slow
def test_same_inputs_same_bytes_and_the_cli(report, traces, tmp_path, capsys):
    out = tmp_path / "results" / "report" / "index.html"  # as deep as the fixture's: same relative links
    args = ["report", *map(str, traces), "--out", str(out), "--config", str(ROOT / "workflows/config/smoke.yaml")]
    assert main(args) == 0
    assert "report on" in capsys.readouterr().out
    assert out.read_bytes() == report[0].read_bytes()
    assert "chang2013-tiny" in Page(out.read_text(encoding="utf-8")).sections["environment"]
    assert [p.name for p in out.parent.iterdir()] == ["index.html"]  # no temporary file left


@pytest.mark.slow
def test_asv_results_are_linked_when_present(traces, tmp_path):
    asv = tmp_path / "repo" / ".asv" / "html" / "index.html"
    out = tmp_path / "repo" / "results" / "report" / "index.html"
    build_report(traces[:2], out, asv_html=asv)
    assert "asv results</a>" not in out.read_text(encoding="utf-8")
    asv.parent.mkdir(parents=True)
    asv.write_text("<html></html>")
    build_report(traces[:2], out, asv_html=asv)
    links = [attrs["href"] for tag, attrs in Page(out.read_text(encoding="utf-8")).tags
             if tag == "a" and not attrs["href"].startswith("#")]
    assert links == ["../../.asv/html/index.html"] and (out.parent / links[0]).resolve() == asv.resolve()


@pytest.fixture(scope="module")
def scaling_traces(tmp_path_factory):
    """Traces for the scaling section (serial backend, fast): gibbs, auxvar at 1 and 2
    workers (per-worker loads), cons-prog at 2 workers only, and slice-mr written as before
    the backends reported compute time (no compute_s)."""
    out = tmp_path_factory.mktemp("scaling")
    data = datasets.load(DATA)
    paths = []
    for name, workers in (("gibbs", 1), ("auxvar", 1), ("auxvar", 2), ("cons-prog", 2), ("slice-mr", 2)):
        backend = None if name == "gibbs" else SerialBackend(workers)
        sampler = algorithms.make(name, family=data.family, seed=0, **({"backend": backend} if backend else {}))
        trace = driver.run_chain(sampler, data.X, 2 * ITERATIONS, truth=data.labels,
                                 dataset=data.name, workers=workers)
        if name == "slice-mr":
            trace = trace.drop(columns=["compute_s", "compute_max_s", "workers_lost"])
        meta = {"algorithm": name, "options": sampler.params, "backend": backend.describe() if backend else "serial"}
        paths.append(write_trace(trace, out / f"{name}-{workers}.parquet", meta))
    return paths


@pytest.fixture(scope="module")
def scaling_report(scaling_traces, tmp_path_factory):
    """The report of :func:`scaling_traces`."""
    return build_report(scaling_traces, tmp_path_factory.mktemp("scaling-report") / "scaling.html")


def test_scaling_section_models_what_it_can_and_says_what_is_missing(scaling_traces, scaling_report, tmp_path):
    out = tmp_path / "scaling.html"
    page = Page(scaling_report.read_text(encoding="utf-8"))
    section = page.sections["dataset-0"]
    assert "Scaling (model)" in section and "This is a model" in section
    alts = [attrs["alt"] for tag, attrs in page.tags if tag == "img"]
    assert f"Modelled scaling on {DATA}" in alts and f"Per-worker load of auxvar on {DATA}" in alts
    # the stale slice-mr trace and the single worker count of cons-prog are named, not fatal
    assert "No model for slice-mr" in section and "compute_s" in section
    assert "cons-prog: measured at 2 worker(s) only" in section
    frame, runs = read_runs(scaling_traces)
    model = costmodel.scaling(frame, runs).models["auxvar"]
    assert f"{model.imbalance:.3g}" in section

    seen = open_in_chromium(scaling_report, tmp_path, width=READING_WIDTH)
    assert not seen["errors"], seen["errors"]
    assert not overflow(seen["layout"]), overflow(seen["layout"])
    assert len(seen["page"]["images"]) == len(alts)
    for image in seen["page"]["images"]:
        assert image["decoded"] and min(image["natural"]) > 0 and min(image["box"]) > 0, image

    # the network is an argument, and the page states the one it modelled
    build_report(scaling_traces, out, network=costmodel.Network(bandwidth=10e9 / 8, latency=1e-3))
    assert "network of 10 Gbit/s, 1 ms" in Page(out.read_text(encoding="utf-8")).sections["dataset-0"]


def test_each_algorithm_shows_the_per_step_columns_it_declares(scaling_traces, scaling_report):
    """The per-step section is built from each algorithm's declared columns
    (``info_columns``) alone: a table per algorithm that declares some, its meanings as header
    tooltips and legend, an indexed family (``load_{j}``) as one column ranging over its
    indices, a column a trace lacks left out; the algorithms that declare none are named."""
    text = scaling_report.read_text(encoding="utf-8")
    steps = text.split("<section id='steps'>", 1)[1].split("</section>", 1)[0]
    page = Page(steps)
    frame, runs = read_runs(scaling_traces)
    titles = [attrs["title"] for tag, attrs in page.tags if tag == "th" and "title" in attrs]
    silent = steps.split("Declaring no per-step columns", 1)
    for name in dict.fromkeys(runs["algorithm"]):
        declared = algorithms.get(name).info_columns
        trace = frame[frame["run"].isin(runs.loc[runs["algorithm"] == name, "run"])]
        held = [col for col in trace.columns if trace[col].notna().any()]
        shown = [c for c in declared if column_members(c, held)]
        if not shown:  # nothing declared, or nothing its traces hold: named as such
            assert len(silent) == 2 and name in silent[1].split("</p>", 1)[0], name
            continue
        table = steps.split(f"<h3><code>{name}</code></h3>", 1)[1].split("</dl>", 1)[0]
        for column in shown:
            assert declared[column] in html.unescape(table), column  # the legend
            assert declared[column] in titles, column  # the header's tooltip
        assert not [c for c in declared if c not in shown and f"<dt><code>{c}" in table]
    # auxvar on 2 workers: load_0 and load_1 as one column, their last values' range over j
    chain = frame[(frame["algorithm"] == "auxvar") & (frame["workers"] == 2)].sort_values("iteration")
    last = chain[["load_0", "load_1"]].iloc[-1]
    totals = chain.loc[chain["iteration"] > 0, ["load_0", "load_1"]].sum()
    spread = (f"{last.min():,.0f}–{last.max():,.0f}" if last.min() != last.max() else f"{last.min():,.0f}")
    total = (f"{totals.min():,.0f}–{totals.max():,.0f}" if totals.min() != totals.max() else f"{totals.min():,.0f}")
    auxvar = steps.split("<h3><code>auxvar</code></h3>", 1)[1].split("</table>", 1)[0]
    row = auxvar.split("<td>auxvar (2 workers)</td>", 1)[1].split("</tr>", 1)[0]
    assert f"<td class='n'>{spread}<span class='total'>Σ {total}</span></td>" in row
    assert "load_<wbr>{j}" in auxvar and "load_<wbr>0" not in auxvar
    # slice-mr's trace predates compute_s: its table has no such column, auxvar's has
    slice_mr = steps.split("<h3><code>slice-mr</code></h3>", 1)[1].split("</table>", 1)[0]
    assert "compute_<wbr>s" in auxvar and "compute_<wbr>s" not in slice_mr


# ---- the first screen ----------------------------------------------------------------------
#: steps of the first screen's chains on DATA: enough for gibbs and subc to settle there
SCREEN_ITERATIONS = 150
#: the equal budget of the first screen's traces, and a variant's own budget
EQUAL = {"time_budget": 30.0, "iterations_requested": SCREEN_ITERATIONS}
OWN = {"time_budget": 60.0, "iterations_requested": 12}
#: a data set on which gibbs is still climbing after CLIMBING_BUDGET's sweeps (chain seed 1
#: climbs 290 nats over its last half): it cannot be ranked
CLIMBING = "synth-chang2013?n=20000&seed=5"
CLIMBING_BUDGET = {"time_budget": 30.0, "iterations_requested": 30}


@pytest.fixture(scope="module")
def screen_traces(tmp_path_factory):
    """Real chains with the metadata of workflow runs (budget, dataset): gibbs, subc and search
    at the equal budget on the labelled set, a subc variant with its own budget of 12
    iterations, gibbs learning alpha, and gibbs alone on a larger set where it is still climbing."""
    out = tmp_path_factory.mktemp("screen")
    paths = []

    def chain(dataset, name, seed, budget, variant=None, **options):
        data = datasets.load(dataset)
        sampler = algorithms.make(name, family=data.family, seed=seed, **options)
        trace = driver.run_chain(sampler, data.X, budget["iterations_requested"], truth=data.labels,
                                 dataset=dataset, warmup=False, name=variant)
        meta = {"algorithm": name, "options": sampler.params, "dataset_meta": data.meta, **budget,
                "alpha_prior": options.get("alpha_prior")}
        paths.append(write_trace(trace, out / f"{len(paths)}.parquet", meta))

    for seed in SEEDS:
        for name in ALGORITHMS:
            chain(DATA, name, seed, EQUAL)
        chain(DATA, "subc", seed, OWN, variant="subc-12it")
        chain(DATA, "gibbs", seed, EQUAL, variant=LEARNED, alpha_prior=(1.0, 1.0))
        chain(CLIMBING, "gibbs", seed, CLIMBING_BUDGET)
    return paths


@pytest.fixture(scope="module")
def screen(screen_traces):
    """The first screen of :func:`screen_traces`, with the run table and chain statistics."""
    from dpmmbench.reports import answer
    from dpmmbench.reports.runs import label_order

    frame, runs = read_runs(screen_traces)
    stats = chain_stats.chain_statistics(frame, runs, ["dataset", "label"])
    return answer.first_screen(runs, stats, label_order(runs)), runs, stats


def _chain_states(screen_traces, dataset, name):
    """Each chain's own diagnosis of ``name`` on ``dataset``, straight from its trace file."""
    from dpmmbench.reports.diagnosis import chain_state

    found = []
    for path in screen_traces:
        trace, meta = read_trace(path)
        if (trace["dataset"].iloc[0], trace["algorithm"].iloc[0]) == (dataset, name):
            steps = trace[trace["iteration"] > 0]
            found.append(chain_state(steps["log_joint"].to_numpy(), steps["time_s"].to_numpy()))
    return found


def test_first_screen_best_is_the_best_settled_method_at_the_equal_budget(screen, screen_traces):
    """The best log joint is the highest median over chains of the final log joint among the
    settled methods at the equal budget, its margin the gap to the next settled one; the
    `settled` list holds exactly the methods whose chains settled, best first; the variant with
    its own budget and the runs that learn alpha are left out, and say why."""
    from dpmmbench.algorithms.runner import StopRule

    found, _, _ = screen
    finals = {}
    for path in screen_traces:
        trace, meta = read_trace(path)
        key = (trace["dataset"].iloc[0], trace["algorithm"].iloc[0])
        finals.setdefault(key, []).append(trace.sort_values("iteration")["log_joint"].iloc[-1])
    here = {name: np.median(v) for (dataset, name), v in finals.items() if dataset == DATA}
    a = found.datasets[0]
    assert a.dataset == DATA and a.budget == StopRule(iterations=SCREEN_ITERATIONS, seconds=30.0)
    assert a.chains == (len(SEEDS), len(SEEDS))
    assert a.points == 200 and a.dims == 2
    settled = [name for name in ("gibbs", "subc")
               if all(c.state == "settled" for c in _chain_states(screen_traces, DATA, name))]
    assert settled == ["gibbs", "subc"]  # 150 sweeps on 200 points: both settle (what the ranking needs)
    ranked = sorted(settled, key=lambda name: -here[name])
    assert a.settled == tuple(ranked)  # search, an optimiser, is n/a: never ranked
    best = a.best["final_log_joint"]
    assert (best.label, best.runner_up) == (ranked[0], ranked[1])
    assert best.value == pytest.approx(here[ranked[0]])
    assert best.margin == pytest.approx(here[ranked[0]] - here[ranked[1]])
    assert {m.label: m.outcome for m in a.methods}["search"] == "n/a"
    assert set(a.stats["label"]) == set(ALGORITHMS)
    assert dict(a.left_out) == {"subc-12it": "60 s or 12 iterations", LEARNED: "learns α"}
    assert "heldout_lpd" not in a.best  # nothing held out: no best to name


def test_first_screen_ranks_no_method_that_is_still_climbing(screen, screen_traces):
    """Where the only method's chains are still climbing (one of its two chains trends up over
    its last half), nothing is ranked: the row says no method settled, in the data and on the
    page, and the method's diagnosis says it is still climbing."""
    from dpmmbench.reports import _sections

    found, runs, stats = screen
    states = _chain_states(screen_traces, CLIMBING, "gibbs")
    assert [c.state for c in states].count("climbing") >= 1 and max(c.slope for c in states) > 0
    climbing = next(a for a in found.datasets if a.dataset == CLIMBING)
    assert climbing.best == {} and climbing.settled == ()
    gibbs, = climbing.methods
    assert gibbs.outcome == "climbing" and gibbs.text.startswith("still climbing (+") and not gibbs.settled
    order = list(dict.fromkeys(runs["label"]))
    page = _sections.answer(found, order, figures.palette(order))
    header = [h.parts[0] for h in page["table"].header]
    assert header == ["data set", "budget per chain", "best log joint", "best held-out log predictive", "settled",
                      "leaders' chains"]
    cells = dict(zip(header, page["table"].rows[1]))
    assert cells["data set"].parts[0] == CLIMBING
    assert [p.text for p in cells["best log joint"].parts] == ["no method settled"]
    assert [p.text for p in cells["settled"].parts] == ["none"]
    assert page["figure"] is not None


def test_first_screen_paragraph_counts_the_outcomes_in_few_words(screen):
    """search is an optimiser: n/a, never ranked; the paragraph counts each outcome over the
    method x data set pairs at the equal budget, says what the outcomes mean and where the
    detail is, in at most about 150 words."""
    found, _, _ = screen
    outcomes = [m.outcome for d in found.datasets for m in d.methods]
    text = found.paragraph
    assert f"Of {len(outcomes)} method × data set pairs at the equal budget: " in text
    from dpmmbench.reports.answer import COUNTED

    for key, words in COUNTED:
        if outcomes.count(key):
            assert f"{outcomes.count(key)} {words}" in text
    assert outcomes.count("n/a") == 1 and outcomes.count("climbing") == 1
    assert len(text.split()) <= 150, len(text.split())
    assert "variants with their own budget" in text and "runs that learn α" in text


def test_values_are_escaped_by_default(tmp_path):
    """Markup in the data (a dataset's name, the configuration) reaches the page as text."""
    data = datasets.load("synth-chang2013?n=40")
    name = "<img src=x onerror=alert(1)> & 'co' \"quoted\""
    sampler = algorithms.make("gibbs", family=data.family, seed=0)
    trace = driver.run_chain(sampler, data.X, 2, truth=data.labels, dataset=name)
    path = write_trace(trace, tmp_path / "t.csv", {"algorithm": "gibbs", "options": sampler.params})
    out = build_report([path], tmp_path / "r.html", config={"note": "</pre><script>alert(2)</script>"})
    page = Page(out.read_text(encoding="utf-8"))
    assert not [attrs for tag, attrs in page.tags if tag == "script" or attrs.get("src") == "x"]
    assert f"Dataset {name}" in page.sections["dataset-0"]
    assert "</pre><script>alert(2)</script>" in page.sections["environment"]


#: sampler-time ranges of a dataset's methods that an axis must label legibly: within a tenth of
#: a decade (matplotlib labelled every minor tick there, overlapping), within a decade, over many
PARETO_TIMES = {"one method": [0.35], "a tenth of a decade": [0.0101, 0.0104, 0.0108],
                "a decade": [0.21, 0.26, 0.33, 0.41, 0.55, 0.62], "ten decades": [2e-7, 3e-5, 0.5, 12, 900]}


@pytest.mark.parametrize("times", PARETO_TIMES.values(), ids=PARETO_TIMES.keys())
def test_pareto_time_ticks_are_labelled_apart(times):
    """The quality-against-time figure labels its log time axis with at least two readable
    ticks whose labels do not overlap, whatever the range of the methods' times."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    rows = [{"label": f"m{i}", "time_s": t, "time_s_lo": 0.9 * t, "time_s_hi": 1.1 * t, "heldout_lpd": -7 + i / 10,
             "heldout_lpd_lo": -7.1 + i / 10, "heldout_lpd_hi": -6.9 + i / 10, "final_nmi": 0.5, "final_nmi_lo": 0.4,
             "final_nmi_hi": 0.6} for i, t in enumerate(times)]
    stats = pd.DataFrame(rows)
    order = list(stats["label"])
    fig = figures.pareto_plot(stats, order, figures.palette(order))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in fig.axes:
        if not ax.get_xlabel().startswith("sampler time"):
            continue  # the legend's own axes, if any
        lo, hi = sorted(ax.get_xlim())
        labels = [tick.label1 for tick in (*ax.xaxis.get_major_ticks(), *ax.xaxis.get_minor_ticks())
                  if lo * (1 - 1e-9) <= tick.get_loc() <= hi * (1 + 1e-9) and tick.label1.get_visible()
                  and tick.label1.get_text()]
        boxes = sorted((label.get_window_extent(renderer) for label in labels), key=lambda b: b.x0)
        assert len(boxes) >= 2, [label.get_text() for label in labels]
        for left, right in zip(boxes, boxes[1:]):
            assert left.x1 < right.x0, [label.get_text() for label in labels]


def test_wang_claim_compares_traffic_across_workers_only(scaling_traces):
    """auxvar on one worker moves no cluster (its bytes go to its one shard): the claim about
    traffic between workers compares the 2-worker runs only."""
    frame, runs = read_runs(scaling_traces)
    wang = claims.wang2017(runs)
    assert set(wang.table["algorithm"]) == {"auxvar (2 workers)", "cons-prog (2 workers)"}
    bytes_of = runs[runs["workers"] == 2].set_index("algorithm")["bytes"]
    assert f"moves {bytes_of['auxvar'] / bytes_of['cons-prog']:.3g}x the bytes" in wang.summary
    # traces that do not record their data size (200 points here) are not at the claim's scale:
    # the ratio is measured, the claim not decided
    assert wang.verdict == claims.UNDECIDED and f"(needs {claims.WANG_SCOPE.points:,})" in wang.summary


@pytest.mark.slow
def test_bad_inputs_are_named(traces, tmp_path, capsys):
    out = tmp_path / "r.html"
    missing = tmp_path / "nope.parquet"
    with pytest.raises(FileNotFoundError, match="nope.parquet"):
        build_report([traces[0], missing], out)
    with pytest.raises(ValueError, match="no trace files"):
        build_report([], out)
    with pytest.raises(ValueError, match="same run"):
        build_report([traces[0], traces[0]], out)
    with pytest.raises(ValueError, match=r"\.html"):
        build_report(traces[:1], tmp_path / "r.pdf")
    assert main(["report", str(traces[0]), "--out", str(out), "--config-json", "[1, 2]"]) == 2
    assert "mapping" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


# ---- the real browser ----------------------------------------------------------------------
class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (stdlib only).

    ``--remote-debugging-pipe`` makes Chromium read commands on fd 3 and write replies and
    events on fd 4, as NUL-terminated JSON, so no WebSocket client or driver binary is needed.
    """

    def __init__(self, executable, profile: Path, log: Path, timeout=60.0):
        commands_r, self._commands = os.pipe()
        self._replies, replies_w = os.pipe()
        # Copies numbered >= 10, so that moving them to 3 and 4 cannot clobber one another; a
        # tiny Python trampoline does the move (dash's redirections take single-digit fds only).
        child_r, child_w = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (commands_r, replies_w))
        trampoline = "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); " \
                     "os.execv(sys.argv[3], sys.argv[3:])"
        with open(log, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", trampoline, str(child_r), str(child_w), executable,
                                          *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
                                          "about:blank"],
                                         pass_fds=(child_r, child_w), stdin=subprocess.DEVNULL,
                                         stdout=err, stderr=err)
        for fd in (commands_r, replies_w, child_r, child_w):
            os.close(fd)
        self.deadline = time.monotonic() + timeout
        self.events, self._replies_by_id, self._buffer, self._id = [], {}, b"", 0

    def send(self, method, params=None, session=None):
        """Send a command and return its result (raises on a protocol error)."""
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while self._id not in self._replies_by_id:
            self._pump()
        reply = self._replies_by_id.pop(self._id)
        if "error" in reply:
            raise RuntimeError(f"DevTools error for {method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method):
        """Wait until an event named ``method`` has arrived; return it."""
        while True:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self._pump()

    def _pump(self):
        left = self.deadline - time.monotonic()
        if left <= 0 or not select.select([self._replies], [], [], left)[0]:
            raise TimeoutError("Chromium did not answer in time")
        chunk = os.read(self._replies, 1 << 16)
        if not chunk:
            raise RuntimeError("Chromium closed the DevTools pipe")
        self._buffer += chunk
        *messages, self._buffer = self._buffer.split(b"\0")
        for raw in messages:
            message = json.loads(raw)
            if "id" in message:
                self._replies_by_id[message["id"]] = message
            else:
                self.events.append(message)

    def close(self):
        try:
            os.write(self._commands, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self._commands)
            os.close(self._replies)


# Resolves to what every figure looks like once decoded: size in pixels and on the page.
FIGURES_JS = """
Promise.all([...document.images].map(img => img.decode().then(() => true, () => false))).then(decoded => ({
  images: [...document.images].map((img, i) => {
    const box = img.getBoundingClientRect();
    return {decoded: decoded[i], complete: img.complete, natural: [img.naturalWidth, img.naturalHeight],
            box: [box.width, box.height], alt: img.alt};
  }),
  svgs: [...document.querySelectorAll("svg")].map(svg => {
    const box = svg.getBoundingClientRect();
    return {box: [box.width, box.height]};
  }),
  sections: [...document.querySelectorAll("section")].map(s => s.id),
  opening: [...document.body.children].slice(0, 4).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "")),
  answerTop: document.getElementById("answer") ? document.getElementById("answer").getBoundingClientRect().top : null,
  // the first screen's table and figure: what a reader sees before scrolling
  answerTableBottom: document.querySelector("#answer table") ? document.querySelector("#answer table").getBoundingClientRect().bottom : null,
  answerFigureTop: document.querySelector("#answer figure img") ? document.querySelector("#answer figure img").getBoundingClientRect().top : null,
  answerOrder: [...(document.getElementById("answer") || document.body).children].map(e => e.tagName.toLowerCase()),
  details: [...document.querySelectorAll("section[id^=dataset] details")].map(d => [d.open, d.querySelector("summary").textContent]),
  title: document.title,
}))
"""


# What overflows sideways: the document, and every table against the box it sits in.
LAYOUT_JS = """
(() => {
  const root = document.documentElement;
  return {
    viewport: root.clientWidth,
    scrollWidth: root.scrollWidth,
    tables: [...document.querySelectorAll("table")].map(t => {
      const box = t.getBoundingClientRect(), holder = t.parentElement;
      return {section: t.closest("section") ? t.closest("section").id : "",
              head: [...t.querySelectorAll("th")].slice(0, 3).map(th => th.textContent).join(" | "),
              width: box.width, right: box.right, container: holder.getBoundingClientRect().width,
              scrolls: holder.scrollWidth > holder.clientWidth};
    }),
    images: [...document.images].map(img => ({alt: img.alt, right: img.getBoundingClientRect().right})),
  };
})()
"""
#: the window a reader on a laptop or a desktop has (issue: the leaderboard ran off its edge)
READING_WIDTH = 1400
#: the height of that window: what a reader sees before scrolling
SCREEN_HEIGHT = 900
#: pixels of the first screen's figure that must show above the fold (its start, not a sliver)
FIGURE_SHOWN = 60


def open_in_chromium(path: Path, tmp_path: Path, width: int | None = None) -> dict:
    """Load ``path`` in headless Chromium; return what :data:`FIGURES_JS` saw, the console and
    page errors, and every URL the page requested; with ``width``, the page is laid out in a
    viewport that many CSS pixels wide and ``layout`` holds what :data:`LAYOUT_JS` measured."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("Chromium is not installed: install the Debian package 'chromium' "
                    "(apt-get install chromium) to run the report's browser check")
    log = tmp_path / "chromium.log"
    browser = Chromium(executable, tmp_path / "profile", log)
    layout = None
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            browser.send(f"{domain}.enable", session=session)
        if width is not None:
            browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": SCREEN_HEIGHT,
                                                                "deviceScaleFactor": 1, "mobile": False},
                         session=session)
        browser.send("Page.navigate", {"url": path.as_uri()}, session=session)
        browser.wait_event("Page.loadEventFired")
        result = browser.send("Runtime.evaluate", {"expression": FIGURES_JS, "awaitPromise": True,
                                                   "returnByValue": True}, session=session)
        if width is not None:
            measured = browser.send("Runtime.evaluate", {"expression": LAYOUT_JS, "returnByValue": True},
                                    session=session)
            assert "exceptionDetails" not in measured, measured
            layout = measured["result"]["value"]
    except (TimeoutError, RuntimeError) as exc:
        raise AssertionError(f"{exc}; Chromium log:\n{log.read_text(errors='replace')[-3000:]}") from None
    finally:
        browser.close()
    assert "exceptionDetails" not in result, result

    def is_error(event):
        method, params = event.get("method"), event.get("params", {})
        return (method == "Runtime.exceptionThrown"
                or (method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"))
                or (method == "Log.entryAdded" and params["entry"].get("level") == "error"))

    return {"page": result["result"]["value"], "errors": [e for e in browser.events if is_error(e)],
            "requests": [e["params"]["request"]["url"] for e in browser.events
                         if e.get("method") == "Network.requestWillBeSent"],
            "layout": layout}


def overflow(layout: dict) -> list:
    """What runs off sideways in a :data:`LAYOUT_JS` measurement: the document wider than the
    viewport, a table wider than its box or past the viewport's right edge, a figure past it."""
    found = []
    if layout["scrollWidth"] > layout["viewport"]:
        found.append(f"the page is {layout['scrollWidth']} px wide in a {layout['viewport']} px viewport")
    for t in layout["tables"]:
        if t["width"] > t["container"] + 0.5 or t["scrolls"] or t["right"] > layout["viewport"] + 0.5:
            found.append(f"table [{t['head']}] in #{t['section']}: {t['width']:.0f} px in a "
                         f"{t['container']:.0f} px box (right edge {t['right']:.0f})")
    found += [f"figure {i['alt']!r} ends at {i['right']:.0f} px" for i in layout["images"]
              if i["right"] > layout["viewport"] + 0.5]
    return found


@pytest.mark.slow
def test_report_renders_in_headless_chromium(report, tmp_path):
    """The page loads cleanly, every figure decodes, and at a reading width of 1,400 pixels
    nothing runs off sideways: the leaderboard's last columns used to be cut there."""
    seen = open_in_chromium(report[0], tmp_path, width=READING_WIDTH)
    assert not overflow(seen["layout"]), overflow(seen["layout"])
    page = seen["page"]
    assert page["title"] == "dpmmbench comparison report"
    assert page["sections"] == SECTIONS
    # the answer is the first thing after the lead paragraph and the contents, on the first screen
    assert page["opening"] == ["h1", "p", "nav", "section#answer"], page["opening"]
    assert page["answerTop"] < SCREEN_HEIGHT, page["answerTop"]
    # issue 33: at 1,400 x 900 the first screen's whole table and the start of its figure show
    # before any scrolling; the prose comes after them
    assert page["answerTableBottom"] <= SCREEN_HEIGHT, page["answerTableBottom"]
    assert page["answerTableBottom"] < page["answerFigureTop"] <= SCREEN_HEIGHT - FIGURE_SHOWN, page["answerFigureTop"]
    assert page["answerOrder"][:3] == ["h2", "div", "figure"] or page["answerOrder"][:3] == ["h2", "table", "figure"], \
        page["answerOrder"]
    # each data set's diagnosis of every method waits, folded, in its own section
    assert page["details"] and all(not opened and summary == "Chain diagnosis of every method"
                                   for opened, summary in page["details"]), page["details"]
    assert len(page["images"]) == FIGURES
    for image in page["images"]:
        assert image["decoded"] and image["complete"], image["alt"]
        assert min(image["natural"]) > 0 and min(image["box"]) > 0, image
    for svg in page["svgs"]:
        assert min(svg["box"]) > 0, svg
    assert not seen["errors"], seen["errors"]
    assert seen["requests"] and all(url.startswith(("file:", "data:")) for url in seen["requests"]), seen["requests"]


def test_browser_check_sees_a_broken_page(tmp_path):
    """The same check on a page with a corrupt figure, a script error, an external style sheet
    and a table too wide for its box: each is caught, so the check above is not vacuous."""
    page = tmp_path / "broken.html"
    wide = "".join(f"<td>{'9' * 40}</td>" for _ in range(40))
    page.write_text("<!DOCTYPE html><html><head><title>x</title>"
                    "<link rel='stylesheet' href='http://127.0.0.1:9/style.css'></head><body>"
                    "<img alt='corrupt' src='data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=='>"
                    f"<div style='overflow-x:auto'><table><tr>{wide}</tr></table></div>"
                    "<script>console.error('figure failed'); undefinedFunction();</script></body></html>")
    seen = open_in_chromium(page, tmp_path, width=READING_WIDTH)
    found = overflow(seen["layout"])
    assert len(found) == 1 and found[0].startswith("table [] in #: "), found
    image, = seen["page"]["images"]
    assert not image["decoded"] and image["natural"] == [0, 0]
    methods = {e["method"] for e in seen["errors"]}
    assert {"Runtime.consoleAPICalled", "Runtime.exceptionThrown"} <= methods
    assert any(url.startswith("http:") for url in seen["requests"])
