"""Declared parameter constraints, in the style of scikit-learn's ``utils/_param_validation``.

Two tables use them:

- every sampler declares its *options* once, as ``options = {name: Option(default,
  constraint, doc)}`` (checked by :func:`resolve_options`);
- :data:`RUN_PARAMETERS` declares the parameters of a *run* (concentration, seed, initial
  clusters, iterations, time budget, workers, threads, the held-out split and the draws
  scored on it) once, with their defaults. Every layer reads its defaults from there, and
  each parameter is checked with :func:`check_parameter` at the one boundary where a run is
  specified: ``alpha`` and ``seed`` when a sampler is built, ``init_clusters`` when a chain
  starts, ``test_fraction`` and ``split_seed`` when a dataset is split
  (``datasets.holdout``), the others in the run driver.

A constraint is an :class:`Interval`, a :class:`OneOf`, ``None`` (the value None), or a list
of these (any of them will do).

Example
-------
>>> from numbers import Integral
>>> from dpmmbench.algorithms.constraints import Interval, check_parameter
>>> Interval(Integral, 1, None, closed="left").check("workers", 2)
2
>>> check_parameter("alpha", 0.5)
0.5
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real
from types import MappingProxyType
from typing import Any

_CLOSED = ("both", "left", "right", "neither")


@dataclass(frozen=True)
class Interval:
    """Numbers of ``type`` between ``left`` and ``right``, as scikit-learn's ``Interval``.

    Parameters
    ----------
    type : {numbers.Integral, numbers.Real} or a subclass (e.g. int, float)
        Integral: integers (an integral float such as ``3.0`` is accepted and returned as an
        int); Real: real numbers (returned as float). Booleans, NaN and infinities are never
        in an interval.
    left, right : float or None
        Bounds; None means unbounded on that side.
    closed : {"both", "left", "right", "neither"}
        Which of the bounds belong to the interval.
    """

    type: type
    left: float | None = None
    right: float | None = None
    closed: str = "both"

    def __post_init__(self):
        if not (isinstance(self.type, type) and issubclass(self.type, Real)):
            raise TypeError(f"Interval type must be numbers.Integral or numbers.Real, got {self.type!r}")
        if self.closed not in _CLOSED:
            raise ValueError(f"Interval closed must be one of {list(_CLOSED)}, got {self.closed!r}")

    def check(self, name: str, value: Any):
        """Return ``value`` (as int or float) if it is in the interval, else raise.

        Parameters
        ----------
        name : str
            What the value is, for the message (e.g. ``"alpha"``, ``"option 'beam'"``).
        value : object

        Raises
        ------
        TypeError
            Not a number, or not an integer where one is required.
        ValueError
            NaN, infinite or outside the interval.
        """
        integer = issubclass(self.type, Integral)
        if isinstance(value, bool) or not isinstance(value, Real):
            raise TypeError(f"{name} must be {'an integer' if integer else 'a number'}, got {value!r}")
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        if integer:
            if int(value) != value:
                raise TypeError(f"{name} must be an integer, got {value!r}")
            value = int(value)
        else:
            value = float(value)
        if value not in self:
            raise ValueError(f"{name} must be {self}, got {value!r}")
        return value

    def __contains__(self, value) -> bool:
        left_closed = self.closed in ("both", "left")
        right_closed = self.closed in ("both", "right")
        if self.left is not None and (value < self.left or (value == self.left and not left_closed)):
            return False
        if self.right is not None and (value > self.right or (value == self.right and not right_closed)):
            return False
        return True

    def __str__(self):
        left_closed = self.closed in ("both", "left")
        right_closed = self.closed in ("both", "right")
        if self.right is None:
            return f"{'>=' if left_closed else '>'} {self.left}" if self.left is not None else "a number"
        if self.left is None:
            return f"{'<=' if right_closed else '<'} {self.right}"
        return f"in {'[' if left_closed else '('}{self.left}, {self.right}{']' if right_closed else ')'}"


@dataclass(frozen=True)
class OneOf:
    """One of a fixed set of values."""

    values: tuple

    def check(self, name: str, value: Any):
        """Return ``value`` if it is one of :attr:`values`, else raise ValueError naming ``name``."""
        if value not in self.values:
            raise ValueError(f"{name} must be one of {list(self.values)}, got {value!r}")
        return value


@dataclass(frozen=True)
class Pair:
    """Two numbers, each in ``member``, e.g. a Gamma prior's ``(shape, rate)``; returned as a
    tuple."""

    member: Interval
    names: tuple = ("first", "second")

    def check(self, name: str, value: Any):
        """Return ``value`` as a tuple of two checked numbers, else raise naming ``name``."""
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__") or len(value) != 2:
            raise TypeError(f"{name} must be a pair ({', '.join(self.names)}), got {value!r}")
        return tuple(self.member.check(f"{name} {part}", v) for part, v in zip(self.names, value))

    def __str__(self):
        return f"a pair ({', '.join(self.names)}), each {self.member}"


@dataclass(frozen=True)
class Option:
    """A declared parameter: its default, its constraint and a one-line description.

    ``constraint`` is an :class:`Interval`, a :class:`OneOf`, or a list of these in which
    ``None`` stands for the value None (e.g. ``[Interval(Real, 0, None, closed="neither"),
    None]``: a positive number, or None).
    """

    default: Any
    constraint: Interval | OneOf | Pair | list
    doc: str = ""


class _Required:
    """The default of a parameter that has none: it must be given."""

    def __repr__(self):
        return "REQUIRED"


#: default of a run parameter that every run must give
REQUIRED = _Required()

#: The parameters of a run, each declared once with its default and its constraint. Every
#: default of these parameters (sampler and driver signatures, CLI flags, workflow config)
#: is read from here.
RUN_PARAMETERS = MappingProxyType({
    "alpha": Option(1.0, Interval(Real, 0, None, closed="neither"),
                    "DP concentration (the starting value when alpha_prior is given)"),
    # bounded so that the prior is neither flat nor a point mass at float64 precision
    "alpha_prior": Option(None, [Pair(Interval(Real, 1e-3, 1e3), ("shape", "rate")), None],
                          "Gamma(shape, rate) prior on alpha, learned every step (None: alpha fixed)"),
    # A seed is stored in the traces' int64 seed column.
    "seed": Option(0, Interval(Integral, 0, 2**63 - 1), "seed of the chain"),
    "init_clusters": Option(1, Interval(Integral, 1, None, closed="left"),
                            "initial clusters (at most the number of points)"),
    "iterations": Option(REQUIRED, Interval(Integral, 0, None, closed="left"), "sampler steps"),
    "time_budget": Option(None, [Interval(Real, 0, None, closed="neither"), None],
                          "seconds of sampler time after which a chain stops (None: no limit)"),
    "workers": Option(1, Interval(Integral, 1, None, closed="left"),
                      "Dask workers: an embedded cluster's size and a sharded sampler's shards"),
    "threads": Option(1, Interval(Integral, 1, None, closed="left"),
                      "threads per embedded worker, for Dask and numba/BLAS"),
    # at most half: the chain must still see most of the data
    "test_fraction": Option(0.1, Interval(Real, 0, 0.5),
                            "fraction of a dataset's points held out to score the predictive density"),
    "split_seed": Option(0, Interval(Integral, 0, 2**63 - 1), "seed of the held-out split"),
    "heldout_draws": Option(10, Interval(Integral, 1, None, closed="left"),
                            "last states of a chain whose predictive densities are averaged"),
})
#: the defaults of :data:`RUN_PARAMETERS`, by name
RUN_DEFAULTS = MappingProxyType({name: option.default for name, option in RUN_PARAMETERS.items()})


def check_value(name: str, value: Any, constraint):
    """Return ``value`` checked against ``constraint`` (see :class:`Option`), else raise.

    Parameters
    ----------
    name : str
        What the value is, for the message.
    value : object
    constraint : Interval, OneOf or list
        A list is satisfied by any of its members (``None`` in it admits the value None).

    Raises
    ------
    TypeError, ValueError
        From the first constraint of the list; the message names ``name``.
    """
    constraints = constraint if isinstance(constraint, list) else [constraint]
    if value is None and None in constraints:
        return None
    errors = []
    for member in constraints:
        if member is None:
            continue
        try:
            return member.check(name, value)
        except (TypeError, ValueError) as exc:
            errors.append(exc)
    raise errors[0]


def check_parameter(name: str, value: Any):
    """Return the run parameter ``name`` checked against :data:`RUN_PARAMETERS`, else raise.

    Parameters
    ----------
    name : str
        A key of :data:`RUN_PARAMETERS`.
    value : object

    Raises
    ------
    TypeError, ValueError
        The message names the parameter and the constraint, e.g. ``alpha must be > 0,
        got -1.0``.
    """
    return check_value(name, value, RUN_PARAMETERS[name].constraint)


def resolve_options(owner: str, declared: dict[str, Option], given: dict[str, Any]) -> dict[str, Any]:
    """Check ``given`` against ``declared``; return every option with defaults filled in.

    Parameters
    ----------
    owner : str
        Name of the sampler, for the message about unknown options.
    declared : dict of str to Option
    given : dict of str to object

    Raises
    ------
    TypeError
        Unknown option names (the message lists the known ones), or a value of the wrong type.
    ValueError
        A value outside its constraint.
    """
    unknown = sorted(set(given) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise TypeError(f"unknown option(s) {unknown} for {owner!r}; its options are: {known}")
    out = {}
    for name, opt in declared.items():
        out[name] = check_value(f"option {name!r}", given[name], opt.constraint) if name in given else opt.default
    return out
