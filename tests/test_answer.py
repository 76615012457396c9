"""The report's first screen (reports/answer.py): at the equal budget, the best settled
method and its margin, no ranking of a method still climbing, a paragraph that counts the
outcomes, from real chains with the metadata of workflow runs."""
from __future__ import annotations

import numpy as np
import pytest

from dpmmbench import algorithms
from dpmmbench import datasets
from dpmmbench.reports import chains as chain_stats
from dpmmbench.reports import figures
from dpmmbench.reports.runs import read_runs
from dpmmbench.reports.traces import read_trace, write_trace
from dpmmbench.workflows import driver

DATA = "synth-chang2013?n=200"
ALGORITHMS = ("gibbs", "subc", "search")
SEEDS = (0, 1)
#: the name of the runs that learn alpha
LEARNED = "gibbs-learned-alpha"


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
        if (trace["dataset"].iloc[0], trace["name"].iloc[0]) == (dataset, name):
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
        key = (trace["dataset"].iloc[0], trace["name"].iloc[0])
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
