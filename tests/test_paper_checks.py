"""The papers' own small measurements (reports/papers/<paper>/checks.py) and their entries: the
merge-acceptance bound against brute force on a few points, each measurement at a small size,
verdicts that follow the numbers, and the command that keeps them with their commit."""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.special import logsumexp

from dpmmbench.algorithms.families.normal_known import NormalKnownCovariance
from dpmmbench.algorithms.subcluster import _split_log_ratio
from dpmmbench.reports.entries import NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED
from dpmmbench.reports.papers.chang2013 import checks as chang
from dpmmbench.reports.papers.daume2007 import checks as daume
from dpmmbench.workflows.scripts import paper_checks

#: the provenance a checks.json record carries (the command writes it; entries read it)
PROVENANCE = {"wall_s": 1.0, "cpu_s": 1.0, "git_commit": "0123456789abcdef", "git_dirty": False, "cores": 2,
              "cpu_model": "test CPU", "finished_utc": "2026-11-27T00:00:00+00:00"}


def _exact_log_z(family, x, alpha):
    """log of the sum of the sub-labelling weights over all 2^n sub-labellings (brute force)."""
    left = np.array(list(itertools.product([False, True], repeat=x.shape[0])))
    return float(logsumexp(chang._sub_log_weights(family, x, left, alpha)))


@pytest.mark.parametrize("components", [1, 2])
def test_merge_bound_holds_against_brute_force(components):
    """On 12 points the normaliser is enumerable: the Jensen bound is below it (so the acceptance
    bound is above the exact acceptance), the importance-sampling estimate is close, and the
    target term is the sampler's own split ratio, negated."""
    family = NormalKnownCovariance(sigma=1.0, mu0=0.0, sigma0=3.0)
    rng = np.random.default_rng(components)
    x = np.concatenate([rng.normal(m, 1.0, size=12 // components) for m in rng.normal(0, 3.0, components)])
    in_a = x < np.median(x) if components == 1 else np.arange(12) < 6
    terms = chang.merge_log_terms(family, x, in_a, 1.0, 16000, rng)
    log_z = _exact_log_z(family, x, 1.0)
    assert terms["log_z_bound"] <= log_z
    assert abs(terms["log_z_is"] - log_z) < 0.05
    exact_log_h = terms["log_target"] + math.log(2.0) + terms["log_w"] - log_z
    assert terms["log_h_bound"] >= exact_log_h
    stats = family.stats(x[:, None], (~in_a).astype(np.int64), 2)
    la, lb = family.log_marginal_stats(stats)
    lab = family.log_marginal_stats(family.sum_pairs(stats))[0]
    n_a, n_b = (int(v) for v in stats.n)
    assert terms["log_target"] == pytest.approx(-_split_log_ratio(1.0, n_a, n_b, la, lb, lab), abs=1e-8)


def test_merge_measurement_and_entry_follow_the_bound():
    res = chang.measure_merge_acceptance(trials=3, n=32)
    assert set(res["cases"]) == set(chang.CASES)
    assert all(c["max_log10_acceptance_bound"] <= 0 for c in res["cases"].values())
    entry = chang.merge_entry({"merge_acceptance": {**PROVENANCE, "result": res}})
    worst = max(c["max_log10_acceptance_bound"] for c in res["cases"].values())
    assert entry.verdict == (REPRODUCED if worst <= -16 else NOT_REPRODUCED)
    assert "0123456" in entry.rerun and "--only merge_acceptance" in entry.rerun
    low = {case: {**c, "max_log10_acceptance_bound": -20.0} for case, c in res["cases"].items()}
    assert chang.merge_entry({"merge_acceptance": {**PROVENANCE, "result": {**res, "cases": low}}}).verdict == REPRODUCED
    high = {case: {**c, "max_log10_acceptance_bound": -10.0} for case, c in res["cases"].items()}
    assert chang.merge_entry({"merge_acceptance": {**PROVENANCE, "result": {**res, "cases": high}}}).verdict \
        == NOT_REPRODUCED
    assert chang.merge_entry({}).verdict == NOT_COMPARABLE


def test_sharding_measurement_and_entry():
    res = chang.measure_sharding("synth-chang2013?n=2000", iterations=4, seeds=(0,))
    assert set(res["curves"]) == {"in-process", "sharded"}
    assert all(len(v) == 5 for runs in res["curves"].values() for v in runs.values())
    entry = chang.sharding_entry({"sharding": {**PROVENANCE, "result": res}})
    assert entry.verdict in (REPRODUCED, NOT_REPRODUCED) and entry.figure
    # the sharded chain at the plateau from iteration 1, the in-process one only at the end: sharding "aided"
    fast = {**res, "curves": {"in-process": {"0": [-200.0, -150.0, -120.0, -100.0]},
                              "sharded": {"0": [-200.0, -100.0, -100.0, -100.0]}}}
    assert chang.sharding_entry({"sharding": {**PROVENANCE, "result": fast}}).verdict == NOT_REPRODUCED
    same = {**res, "curves": {"in-process": {"0": [-200.0, -150.0, -100.0]}, "sharded": {"0": [-200.0, -150.0, -100.0]}}}
    assert chang.sharding_entry({"sharding": {**PROVENANCE, "result": same}}).verdict == REPRODUCED


def test_daume_measurements_and_entries():
    corpus = "synth-multinomial?n=60&vocab=30&n_clusters=3&doc_length=20"
    orders = daume.measure_orders((corpus,), orders=3)
    (scores,) = orders["corpora"].values()
    assert len(scores["random"]) == 3 and all(math.isfinite(s) for s in scores["random"])
    entry = daume.orders_entry({"orders": {**PROVENANCE, "result": orders}})
    best = scores["increasing"] > max(scores["decreasing"], float(np.median(scores["random"])))
    assert entry.verdict == (REPRODUCED if best else NOT_REPRODUCED)
    init = daume.measure_initialisation(corpus, sweeps=2, seeds=(0, 1))
    assert set(init["finals"]) == set(daume.INIT_STARTS)
    assert daume.initialisation_entry({"initialisation": {**PROVENANCE, "result": init}}).verdict in (
        REPRODUCED, NOT_REPRODUCED)
    apart = {**init, "finals": {"a": {"0": [-100.0, 3], "1": [-101.0, 3]}, "b": {"0": [-150.0, 3], "1": [-151.0, 3]}}}
    assert daume.initialisation_entry({"initialisation": {**PROVENANCE, "result": apart}}).verdict == REPRODUCED
    mixed = {**init, "finals": {"a": {"0": [-100.0, 3], "1": [-150.0, 3]}, "b": {"0": [-101.0, 3], "1": [-151.0, 3]}}}
    assert daume.initialisation_entry({"initialisation": {**PROVENANCE, "result": mixed}}).verdict == NOT_REPRODUCED


def test_the_artificial_study_is_a_measurement_its_entries_read():
    """Daumé's artificial-data figures from a small run of the study: every heuristic, the
    admissible one only where N^2 x beam fits its budget; the entries read it from checks.json."""
    import pandas as pd

    from dpmmbench.reports import reproductions
    from dpmmbench.reports.papers import daume2007 as paper

    result = daume.measure_artificial(sizes=(12, 20), beams=(1, 10), admissible_budget=2_000)
    rows = pd.DataFrame(result["rows"])
    assert set(rows["heuristic"]) == set(daume.HEURISTICS)
    admissible = rows[rows["heuristic"] == "admissible"]
    assert set(zip(admissible["n"], admissible["beam"])) == {(12, 1), (12, 10), (20, 1)}  # 4,000 > 2,000
    assert np.isfinite(rows["gap_to_truth"]).all() and (rows["states_popped"] >= rows["n"]).all()
    assert (rows["states_pushed"] >= rows["states_popped"]).all() and (rows["cpu_s"] >= 0).all()
    # the committed record, with this study in its checks instead of its own
    tables = reproductions.load(Path(__file__).resolve().parents[1] / "docs" / "reproductions" / "daume2007")
    tables.checks = {"artificial": {**PROVENANCE, "result": result}}
    entries = {e.item: e for e in paper.entries(tables)}
    enqueued = entries["Artificial data: # of enqueued points"]
    assert enqueued.verdict != NOT_COMPARABLE and "--only artificial" in enqueued.rerun
    assert "--only artificial" in entries["Artificial data: likelihood ratio and speed (seconds)"].rerun
    # with no beam >= 10 that both heuristics ran, the comparison is named as impossible
    small = [r for r in result["rows"] if not (r["heuristic"] == "admissible" and r["beam"] == 10)]
    tables.checks = {"artificial": {**PROVENANCE, "result": {**result, "rows": small}}}
    entries = {e.item: e for e in paper.entries(tables)}
    assert entries["Artificial data: # of enqueued points"].verdict == NOT_COMPARABLE


def test_the_command_keeps_each_measurement_with_its_commit(tmp_path, monkeypatch):
    monkeypatch.setitem(chang.MEASUREMENTS, "merge_acceptance",
                        lambda: chang.measure_merge_acceptance(trials=2, n=16))
    (tmp_path / "checks.json").write_text(json.dumps({"sharding": {"kept": True}}))
    path = paper_checks.run("chang2013", ["merge_acceptance"], tmp_path)
    record = json.loads(path.read_text())
    assert record["sharding"] == {"kept": True}  # another measurement's record is left as it was
    kept = record["merge_acceptance"]
    assert kept["result"]["trials"] == 2 and kept["cpu_s"] >= 0 and "git_commit" in kept and kept["cores"] >= 1
    with pytest.raises(ValueError, match="unknown measurement"):
        paper_checks.run("chang2013", ["nothing"], tmp_path)
    with pytest.raises(ValueError, match="unknown paper"):
        paper_checks.run("nobody", [], tmp_path)
    assert paper_checks.main(["wang2017"]) == 2  # no measurements of its own


def test_a_measurement_that_ends_keeps_what_another_run_kept_meanwhile(tmp_path, monkeypatch):
    """Two runs of the command on one paper: the second to end keeps the first one's record."""
    path = tmp_path / "checks.json"

    def slow_measurement():
        # while this one measures, another run of the command keeps its own measurement
        monkeypatch.setitem(chang.MEASUREMENTS, "sharding", lambda: {"other": 1})
        paper_checks.run("chang2013", ["sharding"], tmp_path)
        return {"mine": 2}

    monkeypatch.setitem(chang.MEASUREMENTS, "merge_acceptance", slow_measurement)
    paper_checks.run("chang2013", ["merge_acceptance"], tmp_path)
    record = json.loads(path.read_text())
    assert record["sharding"]["result"] == {"other": 1} and record["merge_acceptance"]["result"] == {"mine": 2}
