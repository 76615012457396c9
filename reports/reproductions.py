"""The papers' figures and tables beside this suite's runs: ``docs/reproductions.md``.

A reproduction is a paper's config (``workflows/config/<paper>.yaml``) run to the end. Its
small tables are kept in the repository under ``docs/reproductions/<paper>/`` (never the
traces): ``summary.csv`` and ``runs.csv`` (as the workflow writes them); ``curves.csv``, every chain's
trace thinned to :data:`CURVE_POINTS` rows (enough to draw it in the paper's axes);
``communication.csv`` and ``scaling.csv`` (bytes and messages per iteration; speed-up
measured and, past two workers, modelled); ``claims.json`` (the headline claims as the report
decides them); ``record.json`` (the wall time, runs, commit, CPU and versions); and any extra table a paper's entries read (Daumé's heuristic study). Each paper's
entries (:mod:`reports.papers`) turn these tables into one :class:`Entry` per figure or table
of the paper: what it reports, what this suite measured, a verdict and its reason, with a
figure in the paper's axes. The HTML report of a reproduction opens with the same entries,
computed from its traces.

Usage::

    # after `snakemake --cores 2 --configfile workflows/config/chang2013.yaml -d runs/chang2013`
    python -m dpmmbench.reports.reproductions collect chang2013 --results runs/chang2013/results \\
        --wall-s 1180 --out docs/reproductions/chang2013
    python -m dpmmbench.reports.reproductions render      # docs/reproductions.md and its figures

``render`` reads only the committed tables, and the same tables give the same file
(``tests/test_reproductions.py`` regenerates it and compares).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import costmodel
from .chains import TARGET_TOLERANCE
from .claims import flips, sensitivity_text
from .entries import Tables
from .papers import PAPERS, check_claims
from .runs import communication_table, read_runs
from .scaling_doc import load_records
from .summary import runs_table, summary_table
from .traces import atomic_write

#: rows kept of each chain's trace (geometric in the iteration: early steps move most)
CURVE_POINTS = 40
#: worker counts kept of the cost model's predictions (Wang & Lin went to 30, Chang & Fisher to 16 cores)
MODELLED_WORKERS = (1, 2, 4, 8, 16, 30, 32, 64)
#: the columns of ``curves.csv``
CURVE_COLUMNS = ["dataset", "name", "label", "algorithm", "workers", "seed", "iteration", "time_s",
                 "log_joint", "vi", "n_clusters"]
#: where the record lives, relative to the repository root
ROOT_DIR = Path("docs") / "reproductions"
#: the many-core scaling records, beside the reproductions (``python -m benchmarks.scaling``)
SCALING_DIR = Path("docs") / "scaling"
DOC = Path("docs") / "reproductions.md"


# ---- from a finished workflow to the small tables ------------------------------------------
def thin(frame: pd.DataFrame, points: int = CURVE_POINTS) -> pd.DataFrame:
    """Keep about ``points`` rows of each run (column ``run``): the first, the last and
    rows spaced geometrically in between."""
    keep = []
    for _, rows in frame.groupby("run", sort=False):
        n = len(rows)
        picks = np.unique(np.round(np.geomspace(1, n, min(points, n))).astype(int) - 1)
        keep.append(rows.iloc[np.union1d(picks, [0, n - 1])])
    return pd.concat(keep, ignore_index=True)


def tables_from_runs(frame: pd.DataFrame, runs: pd.DataFrame, record: dict, extra=None, claims=None,
                     tolerance: float = TARGET_TOLERANCE) -> Tables:
    """Build a reproduction's tables from the traces read by :func:`reports.runs.read_runs`.

    Parameters
    ----------
    frame, runs : pandas.DataFrame
        Every trace row and one row per run.
    record : dict
        ``record.json``'s content (see :func:`collect`).
    extra : dict, optional
        Extra tables by name.
    claims : list of reports.claims.Claim, optional
        :func:`reports.papers.check_claims` of these runs, when the caller has them (the
        report does); else they are checked here.
    tolerance : float
        Relative tolerance of the summary's time to target (default 0.1 %).
    """
    meta = runs.set_index("run")[["dataset", "name", "label", "algorithm", "workers", "seed"]]
    curves = thin(frame[["run", "iteration", "time_s", "log_joint", "vi", "n_clusters"]].join(meta, on="run"))
    communication = [sub_table.assign(dataset=dataset).reset_index()
                     for dataset, ds_runs in runs.groupby("dataset", sort=False)
                     if not (sub_table := communication_table(ds_runs)).empty]
    claims = check_claims(frame, runs) if claims is None else claims
    return Tables(summary=summary_table(frame, runs, tolerance), runs=runs_table(runs),
                  curves=curves[CURVE_COLUMNS],
                  communication=pd.concat(communication, ignore_index=True) if communication else pd.DataFrame(),
                  scaling=_scaling(frame, runs), claims=[_claim_record(c) for c in claims],
                  record=record, extra=dict(extra or {}))


def _scaling(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Measured and modelled speed-up w.r.t. ``gibbs`` per data set with sharded runs."""
    out = []
    for dataset, ds_runs in runs.groupby("dataset", sort=False):
        found = costmodel.scaling(frame[frame["run"].isin(ds_runs["run"])], ds_runs)
        if not found.models:
            continue
        cols = ["name", "workers", "iteration_s", "speedup"]
        modelled = found.predictions[found.predictions["workers"].isin(MODELLED_WORKERS)]
        out.append(found.measured[cols].assign(dataset=dataset, source="measured"))
        out.append(modelled[cols].assign(dataset=dataset, source="modelled"))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def _claim_record(claim) -> dict:
    draws = claim.draws.to_dict(orient="records") if claim.draws is not None else []
    return {"paper": claim.paper, "claim": claim.claim, "verdict": claim.verdict, "summary": claim.summary,
            "criterion": claim.criterion, "draws": draws}


def collect(paper: str, results, out, wall_s: float, extra=()) -> Path:
    """Write a finished reproduction's small tables to ``out``.

    Parameters
    ----------
    paper : str
        A key of :data:`reports.papers.PAPERS`.
    results : str or os.PathLike
        The workflow's ``results`` folder (``traces/``, and ``jobs/`` for the job wall times).
    out : str or os.PathLike
        The paper's record folder, e.g. ``docs/reproductions/chang2013``.
    wall_s : float
        The workflow's wall time in seconds, measured around ``snakemake``.
    extra : iterable of path
        Extra CSV tables to keep beside the others (copied).

    Returns
    -------
    pathlib.Path
        ``out``.
    """
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; known: {sorted(PAPERS)}")
    if not (isinstance(wall_s, (int, float)) and math.isfinite(wall_s) and wall_s > 0):
        raise ValueError(f"wall_s must be a positive number of seconds, got {wall_s!r}")
    results, out = Path(results), Path(out)
    paths = sorted((results / "traces").rglob("*.parquet"))
    if not paths:
        raise ValueError(f"no traces under {results / 'traces'}: run the paper's workflow first")
    frame, runs = read_runs(paths)
    metas = list(runs["meta"])  # where and with what the runs ran, from their own metadata
    record = {"paper": paper, "config": f"workflows/config/{paper}.yaml", "wall_s": round(float(wall_s), 1),
              "runs": len(runs), "failed": int((runs["status"] == "failed").sum()),
              "git_commit": sorted(set(runs["git_commit"]) - {""}), "cpu_model": metas[0].get("cpu_model", ""),
              "cores": metas[0].get("cores_available", ""), "versions": metas[0].get("versions", {}),
              "started_utc": min(str(m.get("started_utc", "")) for m in metas),
              "finished_utc": max(str(m.get("finished_utc", "")) for m in metas),
              **settings(runs)}
    extra = {Path(p).stem: pd.read_csv(p) for p in extra}
    tables = tables_from_runs(frame, runs, record, extra=extra)
    out.mkdir(parents=True, exist_ok=True)
    # the curves are for figures: 7 digits keep 0.1 nat of a log joint of 10^6
    for name, table, digits in (("summary", tables.summary, "%.10g"), ("runs", tables.runs, "%.10g"),
                                ("curves", tables.curves, "%.7g"), ("communication", tables.communication, "%.10g"),
                                ("scaling", tables.scaling, "%.10g"), *((k, v, "%.10g") for k, v in tables.extra.items())):
        _write_text(out / f"{name}.csv", table.to_csv(index=False, float_format=digits, lineterminator="\n"))
    for name, content in (("claims", tables.claims), ("record", record)):
        _write_text(out / f"{name}.json", json.dumps(content, indent=1, sort_keys=True, default=_jsonable) + "\n")
    return out


def settings(runs: pd.DataFrame) -> dict:
    """What a record's runs assumed, from their metadata: ``priors`` (data set -> the family
    with its hyper-parameters, as the run printed it) and ``options`` (run name -> the options
    its config gave, for the runs given any)."""
    priors, options = {}, {}
    for dataset, name, meta in zip(runs["dataset"], runs["name"], runs["meta"]):
        meta = meta or {}
        if meta.get("family"):
            priors.setdefault(str(dataset), str(meta["family"]))
        if meta.get("options_given"):
            options.setdefault(str(name), dict(meta["options_given"]))
    return {"priors": dict(sorted(priors.items())), "options": dict(sorted(options.items()))}


def _settings_line(tables) -> str:
    """The paper section's line on priors, concentrations and options (a record collected
    before they were kept says so)."""
    rec, runs = tables.record, tables.runs
    if "priors" not in rec:
        return ("Priors and hyper-parameters: not in this record (collected before records kept them; the "
                "config's next run has them).")
    priors = "; ".join(f"`{d}`: {family}" for d, family in rec["priors"].items()) or "none recorded"
    has_prior = runs["learned_alpha"].astype(bool) if "learned_alpha" in runs else pd.Series(False, index=runs.index)
    alphas = ", ".join(f"{a:g}" for a in sorted(pd.unique(runs.loc[~has_prior, "alpha"].astype(float)))) or "learned only"
    learned = " (and learned, where a run has an alpha prior)" if has_prior.any() else ""
    options = "; ".join(f"{name}: " + ", ".join(f"{k}={v}" for k, v in sorted(opts.items()))
                        for name, opts in rec["options"].items())
    niw = (" (a Normal-inverse-Wishart's mean and scale come from the data, docs/datasets.md)"
           if "NormalInverseWishart" in priors else "")
    return (f"Priors and hyper-parameters: {priors}{niw}; concentration α {alphas}{learned}"
            + (f"; options given: {options}" if options else "; every algorithm at its default options") + ".")


def _write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def _jsonable(value):
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    return str(value)


def load(folder, scaling=None) -> Tables:
    """Read a paper's record folder (written by :func:`collect`; an older one's tables come in
    today's names, see :class:`reports.entries.Tables`).

    Parameters
    ----------
    folder : str or os.PathLike
        The paper's record folder.
    scaling : str or os.PathLike, optional
        The many-core scaling records (default: ``scaling`` beside the records' root, as
        ``docs/scaling`` is beside ``docs/reproductions``).
    """
    folder = Path(folder)
    scaling = Path(scaling) if scaling is not None else folder.parent.parent / "scaling"
    checks = folder / "checks.json"
    known = {"summary", "runs", "curves", "communication", "scaling"}

    def csv(stem):
        path = folder / f"{stem}.csv"
        return pd.read_csv(path) if path.is_file() and path.stat().st_size > 1 else pd.DataFrame()

    return Tables(summary=csv("summary"), runs=csv("runs"), curves=csv("curves"),
                  communication=csv("communication"), scaling=csv("scaling"),
                  claims=json.loads((folder / "claims.json").read_text()),
                  record=json.loads((folder / "record.json").read_text()),
                  extra={p.stem: csv(p.stem) for p in sorted(folder.glob("*.csv")) if p.stem not in known},
                  scaling_records=load_records(scaling) if scaling.is_dir() else [],
                  checks=json.loads(checks.read_text()) if checks.is_file() else {})


# ---- from the small tables to docs/reproductions.md ----------------------------------------
def render(root=ROOT_DIR, out=DOC) -> str:
    """Write ``out`` and its figures (``<root>/<paper>/fig-*.png``) from the records in ``root``.

    Returns
    -------
    str
        The markdown written.
    """
    root, out = Path(root), Path(out)
    where = os.path.relpath(root, out.parent).replace(os.sep, "/")  # as the links below: the same from any checkout
    lines = ["# The papers, figure by figure", "",
             "Generated by `python -m dpmmbench.reports.reproductions render` from the tables in",
             f"[`{where}/`]({where}/) (each paper's config run to the end on an idle 2-core machine; never edited",
             "by hand). Each entry quotes what the paper reports, gives what this suite measured under the stated",
             "differences, and a verdict: *reproduced*, *not reproduced*, or *not comparable here*. Each paper's",
             "HTML report (`results/report/index.html` of its run) opens with the same entries.", ""]
    verdicts = []
    sections = []
    for key, paper in PAPERS.items():
        folder = root / key
        if not (folder / "record.json").is_file():
            missing = os.path.relpath(folder, out.parent).replace(os.sep, "/")
            sections += [f"## {paper.TITLE}", "", f"Not run yet: `{paper.CONFIG}` has no record in `{missing}/`.", ""]
            continue
        tables = load(folder, root.parent / "scaling")
        entries = paper.entries(tables)
        verdicts += [(paper.SHORT, e.item, e.verdict, _flip_cell(e)) for e in entries]
        sections += _paper_section(key, paper, tables, entries, folder, out.parent)
    if verdicts:
        lines += ["| paper | figure or table | verdict | flips with its threshold halved or doubled |",
                  "|---|---|---|---|"]
        lines += [f"| {p} | {item} | {v} | {f} |" for p, item, v, f in verdicts]
        lines.append("")
    text = "\n".join(lines + sections).rstrip() + "\n"
    _write_text(out, text)
    return text


def _paper_section(key, paper, tables, entries, folder: Path, doc_dir: Path) -> list:
    for old in folder.glob("fig-*.png"):  # an earlier render's, perhaps of more entries
        old.unlink()
    rec = tables.record
    minutes = rec["wall_s"] / 60
    lines = [f"## {paper.TITLE}", "",
             f"`snakemake --cores 2 --configfile {rec['config']}`: {rec['runs']} runs "
             f"({rec['failed']} failed; seeds {_seeds(tables.runs)}) in **{minutes:.1f} min** of wall time on {rec['cores']} cores "
             f"({rec['cpu_model']}), commit {', '.join(c[:7] for c in rec['git_commit']) or 'unknown'}, "
             f"{rec['finished_utc'][:10]}.",
             "", f"What differs from the paper: {paper.DIFFERENCES}", "", _settings_line(tables), ""]
    # each entry comes from the one record: the command that reruns it, its measured time, its
    # seeds, commit and machine
    rerun = (f"`snakemake --cores 2 --configfile {rec['config']}` (the whole config: {minutes:.1f} min measured; "
             f"chain seeds {_seeds(tables.runs)}; commit {', '.join(c[:7] for c in rec['git_commit']) or 'unknown'} "
             f"on {rec['cores']} cores, {rec['cpu_model']}).")
    for i, entry in enumerate(entries, 1):
        lines += [f"### {entry.item}", "", f"- **Paper:** {entry.paper}", f"- **Measured:** {entry.measured}",
                  f"- **Verdict: {entry.verdict}.** {entry.reason}"]
        if entry.criterion is not None:
            lines += [f"- **Margin:** {entry.criterion.margin}",
                      f"- **Thresholds halved or doubled:** {sensitivity_text(entry.criterion)}"]
        if entry.regime:
            lines.append(f"- **Regime:** {entry.regime}")
        lines += [f"- **Rerun:** {entry.rerun or rerun}", ""]
        if entry.table is not None and not entry.table.empty:
            lines += [_markdown_table(entry.table), ""]
        if entry.figure is not None:
            name = f"fig-{i:02d}.png"
            atomic_write(folder / name, lambda f, png=entry.figure: f.write(png))
            link = os.path.relpath(folder / name, doc_dir).replace(os.sep, "/")
            lines += [f"![{entry.item}]({link})", "",
                      f"*{entry.caption}*", ""]
    if paper.NOT_ADDRESSED:
        lines += ["### What the suite cannot address", ""]
        lines += [f"- **{item}:** {why}" for item, why in paper.NOT_ADDRESSED]
        lines.append("")
    return lines


def _flip_cell(entry) -> str:
    """The summary table's cell: whether halving or doubling a threshold flips the verdict."""
    if entry.criterion is None:
        return "no criterion"
    if not entry.criterion.thresholds:
        return "no threshold (an ordering)"
    return "**flips**" if flips(entry.criterion) else "stays"


def _seeds(runs: pd.DataFrame) -> str:
    """The chain seeds of a record, e.g. ``0-9`` or ``0, 1``."""
    seeds = sorted(int(s) for s in runs["seed"].unique())
    return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)) else \
        ", ".join(map(str, seeds))


def _markdown_table(table: pd.DataFrame) -> str:
    head = "| " + " | ".join(str(c) for c in table.columns) + " |"
    rule = "|" + "---|" * len(table.columns)
    body = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def _cell(value) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return str(value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpmmbench.reports.reproductions", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    col = sub.add_parser("collect", help="keep a finished reproduction's small tables")
    col.add_argument("paper")
    col.add_argument("--results", required=True, help="the workflow's results folder")
    col.add_argument("--wall-s", type=float, required=True, help="the workflow's wall time (s)")
    col.add_argument("--out", help="the record folder (default docs/reproductions/PAPER)")
    col.add_argument("--extra", action="append", default=[], help="an extra CSV table to keep")
    ren = sub.add_parser("render", help="write docs/reproductions.md from the records")
    ren.add_argument("--root", default=str(ROOT_DIR))
    ren.add_argument("--out", default=str(DOC))
    args = parser.parse_args(argv)
    try:
        if args.command == "collect":
            print(collect(args.paper, args.results, args.out or ROOT_DIR / args.paper, args.wall_s, args.extra))
        else:
            render(args.root, args.out)
            print(args.out)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
