"""How the HTML report writes numbers: every value reaches the page as text made here.

A value that was not measured (None, NaN, or infinite where no "not reached" applies) reads
as :data:`MISSING`. The templates only place text; they never format a number.
"""
from __future__ import annotations

import json
import math

import numpy as np

#: what a value that was not measured reads as
MISSING = "–"


def _missing(x) -> bool:
    return x is None or not np.isfinite(x)


def num(x, digits: int) -> str:
    """``x`` to ``digits`` significant digits (``1.23e+04`` form for large or tiny values)."""
    return MISSING if _missing(x) else f"{x:.{digits}g}"


def whole(x) -> str:
    """``x`` rounded to a whole number, with thousands separators."""
    return MISSING if _missing(x) else f"{x:,.0f}"


def nats(x) -> str:
    """A log joint in nats: one decimal, thousands separators."""
    return MISSING if _missing(x) else f"{x:,.1f}"


def secs(x) -> str:
    """Seconds to 3 significant digits."""
    return MISSING if _missing(x) else f"{x:.3g} s"


def ms(x) -> str:
    """Seconds shown in milliseconds, 3 significant digits."""
    return MISSING if _missing(x) else f"{x * 1e3:.3g} ms"


def size(x) -> str:
    """A byte count in B, kB, MB or GB (powers of 1000)."""
    if _missing(x):
        return MISSING
    for unit, factor in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= factor:
            return f"{x / factor:.3g} {unit}"
    return f"{x:.0f} B"


def count(x) -> str:
    """A per-step statistic of unknown kind: a whole number with separators when it is one,
    else 3 significant digits."""
    if _missing(x):
        return MISSING
    return whole(x) if float(x).is_integer() else num(x, 3)


def cell(value) -> str:
    """A value of a table that a module hands over as a data frame (claims, priors): floats
    to 3 significant digits below 100 and one decimal from there; everything else as ``str``."""
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return MISSING
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def distinct(values, total: int, shown: int = 4) -> str:
    """The values' distinct forms; when they differ, each with its count, most common first
    (at most ``shown`` of them: per-run values such as ports must not flood the table).

    Parameters
    ----------
    values : iterable
        One value per run (None reads "not recorded"; non-strings are shown as JSON).
    total : int
        The number of runs, stated with each count.
    shown : int
        How many distinct values are listed before the rest is counted.

    Examples
    --------
    >>> from dpmmbench.reports._format import distinct
    >>> distinct(["a", "a"], 2)
    'a'
    >>> distinct(["a", "b", "a", None], 4)
    'a (2 of 4); b (1 of 4); not recorded (1 of 4)'
    """
    counts = {}
    for v in values:
        key = "not recorded" if v is None else v if isinstance(v, str) else json.dumps(v)
        counts[key] = counts.get(key, 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    common = sorted(counts.items(), key=lambda kv: -kv[1])
    text = "; ".join(f"{k} ({n} of {total})" for k, n in common[:shown])
    if len(common) > shown:
        text += f"; and {len(common) - shown} other values"
    return text
