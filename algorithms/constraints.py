"""Declared option constraints (scikit-learn style): each sampler lists its options once."""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Interval:
    """A number of ``kind`` (int or float) in [low, high] (None = unbounded)."""

    kind: type
    low: float | None = None
    high: float | None = None
    low_open: bool = False

    def check(self, name: str, value: Any):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"option {name!r} must be a number, got {value!r}")
        if self.kind is int:
            if value != value or value in (float("inf"), float("-inf")) or int(value) != value:
                raise TypeError(f"option {name!r} must be an integer, got {value!r}")
            value = int(value)
        else:
            value = float(value)
        if value != value:
            raise ValueError(f"option {name!r} must not be NaN")
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            op = ">" if self.low_open else ">="
            raise ValueError(f"option {name!r} must be {op} {self.low}, got {value!r}")
        if self.high is not None and value > self.high:
            raise ValueError(f"option {name!r} must be <= {self.high}, got {value!r}")
        return value


@dataclass(frozen=True)
class OneOf:
    """One of a fixed set of values."""

    values: tuple

    def check(self, name: str, value: Any):
        if value not in self.values:
            raise ValueError(f"option {name!r} must be one of {list(self.values)}, got {value!r}")
        return value


@dataclass(frozen=True)
class Option:
    """A declared option: its default and its constraint."""

    default: Any
    constraint: Interval | OneOf
    doc: str = ""


def resolve_options(owner: str, declared: dict[str, Option], given: dict[str, Any]) -> dict[str, Any]:
    """Check ``given`` against ``declared``; return every option with defaults filled in."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise TypeError(f"unknown option(s) {unknown} for {owner!r}; its options are: {known}")
    out = {}
    for name, opt in declared.items():
        out[name] = opt.constraint.check(name, given[name]) if name in given else opt.default
    return out
