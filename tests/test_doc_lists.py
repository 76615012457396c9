"""The algorithm lists written in the README and in docs/design.md are the registry's.

Both list the algorithms by hand (a table is easier to read than generated text); these tests
hold them to ``algorithms/_registry.py``: every registry name appears, with its right exact
flag and module, and nothing else does. Optional peers count whether or not their library is
installed (their adapter modules import the library only when a chain starts). The README's
layout names every page of ``docs/``.
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from dpmmbench.algorithms import _registry

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"`([a-z0-9-]+)`")


def _entries() -> dict[str, str]:
    """Registry name -> ``"module:Class"`` of every algorithm and peer, installed or not."""
    return {**_registry._REGISTRY, **{name: entry[0] for name, entry in _registry._OPTIONAL.items()}}


def _class(entry: str):
    module, cls = entry.split(":")
    return getattr(importlib.import_module(module), cls)


def _module_path(entry: str) -> str:
    """``dpmmbench.algorithms.gibbs:CollapsedGibbs`` -> ``algorithms/gibbs.py``."""
    return entry.split(":")[0].removeprefix("dpmmbench.").replace(".", "/") + ".py"


def readme_table(text: str) -> dict[str, tuple[str, str]]:
    """Registry name -> (exact cell, module cell) of the table under the README's
    ``## Algorithms`` heading."""
    section = text.split("\n## Algorithms\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not line.startswith("|") or set(cells[0]) <= set("-: ") or cells[0] == "registry name":
            continue
        name = NAME.fullmatch(cells[0])
        assert name, f"README table row without a `name`: {line}"
        assert name[1] not in rows, f"README table lists {name[1]} twice"
        rows[name[1]] = (cells[2], cells[3].strip("`"))
    return rows


def design_registry_names(text: str) -> list[str]:
    """The names listed in docs/design.md's "Registry." bullet, between "on first use:" and
    "Options select"."""
    bullet = text.split("- **Registry.**", 1)[1].split("\n- **", 1)[0]
    listed = bullet.split("on first use:", 1)[1].split("Options select", 1)[0]
    return NAME.findall(listed)


def readme_problems(text: str) -> list[str]:
    """What is wrong with the README's table: names missing or not registered, a wrong exact
    flag, a wrong module."""
    rows, entries = readme_table(text), _entries()
    problems = [f"{name}: registered, not in the README table" for name in sorted(set(entries) - set(rows))]
    problems += [f"{name}: in the README table, not registered" for name in sorted(set(rows) - set(entries))]
    for name in sorted(set(rows) & set(entries)):
        (exact_cell, module), entry = rows[name], entries[name]
        cls = _class(entry)
        if exact_cell.split()[:1] != ["yes" if cls.exact else "no"]:
            problems.append(f"{name}: exact is {cls.exact}, the table says {exact_cell!r}")
        if getattr(cls, "external", False) and exact_cell != "no (peer)":
            problems.append(f"{name}: a peer, the table says {exact_cell!r}")
        if module != _module_path(entry):
            problems.append(f"{name}: module {_module_path(entry)}, the table says {module}")
    return problems


def design_problems(text: str) -> list[str]:
    """What is wrong with docs/design.md's registry list."""
    names, entries = design_registry_names(text), _entries()
    problems = [f"{name}: listed twice" for name in sorted({n for n in names if names.count(n) > 1})]
    problems += [f"{name}: registered, not in design.md's list" for name in sorted(set(entries) - set(names))]
    problems += [f"{name}: in design.md's list, not registered" for name in sorted(set(names) - set(entries))]
    return problems


def test_readme_table_is_the_registry():
    problems = readme_problems((ROOT / "README.md").read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)
    for entry in _entries().values():
        assert (ROOT / _module_path(entry)).is_file(), entry


def test_readme_layout_names_every_document():
    """The ``docs/`` line of the README's "Where things are" names each page of docs/, and no other."""
    (line,) = [row for row in (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if row.startswith("docs/ ")]
    assert set(re.findall(r"[a-z0-9-]+\.md", line)) == {p.name for p in (ROOT / "docs").glob("*.md")}


def test_design_registry_list_is_the_registry():
    problems = design_problems((ROOT / "docs" / "design.md").read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("old, new, problem", [
    ("| `gibbs` | collapsed Gibbs (Neal 2000, Alg. 3) | yes |", "| `gibbs` | collapsed Gibbs (Neal 2000, Alg. 3) | no |",
     "gibbs: exact is True, the table says 'no'"),
    ("| no (measured) | `algorithms/subcluster.py` |\n| `subc-supc-approx`",
     "| yes | `algorithms/subcluster.py` |\n| `subc-supc-approx`", "subc-supc: exact is False"),
    ("| no (peer) | `algorithms/peers/bmcc_gibbs.py` |", "| no | `algorithms/peers/bmcc_gibbs.py` |",
     "bmcc: a peer, the table says 'no'"),
    ("`algorithms/sams.py` |", "`algorithms/splitmerge.py` |", "gibbs-sams: module algorithms/sams.py"),
    ("| `dpgmm` |", "| `dpgmm-typo` |", "dpgmm: registered, not in the README table"),
])
def test_readme_check_catches_a_wrong_row(old, new, problem):
    """Negative control: a wrong exact flag, module or name in the table is named."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.count(old) == 1, f"the control's edit no longer applies to the README: {old!r}"
    assert any(p.startswith(problem) for p in readme_problems(text.replace(old, new))), problem


@pytest.mark.parametrize("old, new, problem", [
    ("`cons-hung`,", "", "cons-hung: registered, not in design.md's list"),
    ("`bmcc`, `dpgmm`", "`bmcc`, `dpgmm`, `gibbs-fast`", "gibbs-fast: in design.md's list, not registered"),
])
def test_design_check_catches_a_wrong_list(old, new, problem):
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    assert text.count(old) == 1, f"the control's edit no longer applies to design.md: {old!r}"
    assert problem in design_problems(text.replace(old, new))
