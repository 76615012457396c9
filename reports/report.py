"""The HTML comparison report: one self-contained file built from trace files.

::

    from dpmmbench.reports.report import build_report
    build_report(sorted(Path("results/traces").rglob("*.parquet")), "results/report/index.html")

Everything shown is computed from the traces and their run metadata (nothing is typed in):
first, for a paper's reproduction config, that paper's figures and tables beside this run
(:mod:`reports.reproductions`); then the answer in one screen (:mod:`reports.answer`: per dataset the best methods at the
equal budget, which converged, quality against time, and what the run can and cannot tell);
then the papers' headline claims checked against this run (:mod:`reports.claims`); per
dataset a leaderboard, the convergence figures (log joint, VI to the truth, clusters, against
iteration and sampler time), time per iteration and the speed-up table relative to ``gibbs``;
then the cost model's predicted scaling to 1…64 workers (:mod:`reports.costmodel`) and the
per-worker load of samplers that report it; then the peers' settings, the communication
table, each algorithm's own per-step columns and the environment. Figures are PNG embedded
as base64 and the style sheet is inline, so the file opens offline and can be mailed as is.
The same inputs give the same bytes.

How it is made: this module gathers the data; :mod:`reports._dataset` (a dataset's section)
and :mod:`reports._sections` (the others) turn it into each section's data, tables of cells
(:mod:`reports._cells`) whose values :mod:`reports._format` wrote as text; the Jinja2 template
``templates/report.html.j2`` holds the page's whole structure and escapes every value it places.
"""
from __future__ import annotations

from pathlib import Path

import jinja2

from . import _dataset
from . import _sections as sections
from . import answer, chains, costmodel, figures
from ._dataset import REFERENCE, speedup_table
from .papers import check_claims
from .runs import communication_table, label_order, read_runs, step_times

__all__ = ["build_report", "speedup_table", "communication_table", "REFERENCE", "ASV_HTML", "TEMPLATES"]

#: where asv publishes its HTML, relative to the repository root (asv.conf.json "html_dir")
ASV_HTML = Path(".asv") / "html" / "index.html"
#: the page's templates (package data: installed with the module)
TEMPLATES = Path(__file__).resolve().parent / "templates"


def build_report(trace_paths, out_path, config=None, *, asv_html=None,
                 network: costmodel.Network = costmodel.GIGABIT, priors=None,
                 target_tolerance: float = chains.TARGET_TOLERANCE) -> Path:
    """Write the comparison report for ``trace_paths`` to ``out_path`` (atomically).

    Parameters
    ----------
    trace_paths : iterable of str or os.PathLike
        Trace files (see :func:`reports.runs.read_runs`).
    out_path : str or os.PathLike
        The HTML file to write; missing folders are created.
    config : dict, optional
        The workflow configuration, shown in the environment section; when it names the paper
        it ``reproduces`` (a key of :data:`reports.papers.PAPERS`), the page opens with that
        paper's figures and tables beside this run (:mod:`reports.reproductions`).
    asv_html : str or os.PathLike, optional
        asv's published ``index.html``, linked when it exists (default: :data:`ASV_HTML`
        under the repository root).
    network : reports.costmodel.Network
        The network the cost model predicts scaling on (default 1 Gbit/s, 0.2 ms per
        message); stated in the report.
    priors : str or os.PathLike, optional
        The prior-sensitivity table (``results/priors.csv``, :mod:`reports.priors`), shown
        in its own section when given.
    target_tolerance : float
        The leaderboard's time to target: the first time a chain's log joint is within this
        fraction of the best any method reached on the dataset (default 0.1 %).

    Returns
    -------
    pathlib.Path
        ``out_path``.

    Raises
    ------
    FileNotFoundError, ValueError
        See :func:`reports.runs.read_runs`; also an ``out_path`` that does not end in .html.
    TypeError
        ``config`` is not a dict.
    """
    from .traces import atomic_write

    out_path = Path(out_path)
    if out_path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"report path must end in .html, got {str(out_path)!r}")
    if config is not None and not isinstance(config, dict):
        raise TypeError(f"config must be a mapping, got {type(config).__name__}")
    chains.check_tolerance(target_tolerance)
    frame, runs = read_runs(trace_paths)
    stats = chains.chain_statistics(frame, runs, ["dataset", "label"], tolerance=target_tolerance)
    order = label_order(runs)
    styles = figures.palette(order)
    names = list(dict.fromkeys(runs["dataset"]))
    asv_html = Path(asv_html) if asv_html is not None else Path(__file__).resolve().parents[1] / ASV_HTML

    datasets = []
    for i, name in enumerate(names):
        here = frame[frame["dataset"] == name]
        datasets.append(_dataset.dataset(i, name, here, runs[runs["dataset"] == name], step_times(here), order,
                                         styles, network, stats[stats["dataset"] == name], target_tolerance))
    screen = answer.first_screen(runs, stats, order)
    paper = (config or {}).get("reproduces")
    claims = check_claims(frame, runs)
    page = render(
        header=sections.header(runs, names, order), reference=REFERENCE,
        reproduction=sections.reproduction(paper, frame, runs, claims, target_tolerance) if paper else None,
        answer=sections.answer(screen, order, styles),
        claims=sections.claims(claims), datasets=datasets,
        priors=sections.priors(priors) if priors is not None else None, peers=sections.peers(runs),
        communication=sections.communication(runs, names), steps=sections.per_step(frame, runs, order),
        environment=sections.environment(runs, config, out_path, asv_html))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out_path, lambda f: f.write(page.encode("utf-8")))
    return out_path


def render(**data) -> str:
    """The page: ``templates/report.html.j2`` rendered with ``data`` (see :func:`build_report`
    for what it holds), every value escaped unless the template's own markup places it.

    Raises
    ------
    jinja2.UndefinedError
        The template names a value that ``data`` lacks (never rendered as empty).
    """
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             autoescape=jinja2.select_autoescape(["html", "j2"], default_for_string=True),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.get_template("report.html.j2").render(**data)
