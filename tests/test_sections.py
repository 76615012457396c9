"""The report's sections computed from traces of sharded runs (reports/_sections.py): the
scaling section models what it can and says what is missing, each algorithm's per-step
columns are shown as it declares them; and the claim about traffic between workers on the
same traces (reports/claims.py)."""
from __future__ import annotations

import html

import pytest
from pages import READING_WIDTH, Page, open_in_chromium, overflow

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.algorithms.backends import SerialBackend
from dpmmbench.algorithms.base import column_members
from dpmmbench.reports import claims, costmodel
from dpmmbench.reports.papers.wang2017 import claim as wang_claim
from dpmmbench.reports.report import build_report
from dpmmbench.reports.runs import read_runs
from dpmmbench.reports.traces import write_trace
from dpmmbench.workflows import driver

DATA = "synth-chang2013?n=200"
ITERATIONS = 4


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


def test_wang_claim_compares_traffic_across_workers_only(scaling_traces):
    """auxvar on one worker moves no cluster (its bytes go to its one shard): the claim about
    traffic between workers compares the 2-worker runs only."""
    frame, runs = read_runs(scaling_traces)
    wang = wang_claim.check(runs)
    assert set(wang.table["run"]) == {"auxvar (2 workers)", "cons-prog (2 workers)"}
    bytes_of = runs[runs["workers"] == 2].set_index("algorithm")["bytes"]
    assert f"moves {bytes_of['auxvar'] / bytes_of['cons-prog']:.3g}x the bytes" in wang.summary
    # traces that do not record their data size (200 points here) are not at the claim's scale:
    # the ratio is measured, the claim not decided
    assert wang.verdict == claims.UNDECIDED and f"(needs {wang_claim.WANG_SCOPE.points:,})" in wang.summary
