"""The report's figures (reports/figures.py): the quality-against-time figure labels its log
time axis legibly whatever the range of the methods' times."""
from __future__ import annotations

import pandas as pd
import pytest

from dpmmbench.reports import figures


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
