"""The code cites the project's own documents, and every citation resolves.

Pure text checks, no imports of the package:

* no code file mentions the reference material the docs were written from (it lives outside
  the repository, so such a citation could never be followed);
* every ``docs/NAME.md §N`` in the code (also ``§N, §M`` and ``§N-§M``) names an existing
  file and a section number that is a heading of it, every ``docs/NAME.md Appendix X`` an
  appendix heading, and every ``docs/NAME.md "Heading"`` a heading with exactly that text.
  (A bare ``docs/NAME.md`` may name a generated file, e.g. ``docs/results.md``, and is not
  required to exist.)
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: the repository's code: these folders (recursively) and these root files
CODE_DIRS = ("algorithms", "datasets", "reports", "workflows", "benchmarks", "tests")
ROOT_FILES = ("Snakefile", "pyproject.toml", "__init__.py")
SUFFIXES = {".py", ".smk", ".yaml", ".yml", ".toml"}
SKIP_PARTS = {"__pycache__", ".snakemake", ".pytest_cache"}

#: names of the outside reference files (assembled so that this file does not contain them)
_OUTSIDE = "|".join((
    r"\bSPEC\b", "SPEC-algorithms", r"DESIGN\.md", r'DESIGN\s+"', "DATASETS" + r"\.md",
    "ENGINEERING-NOTES",
))
OUTSIDE = re.compile(_OUTSIDE)

_NUM = r"[0-9]+(?:\.[0-9]+)*[a-z]?"
#: a section list after the document: "§7", "§7, §9.4", "§5.3-§5.4", "§0.2 and §9.1"
_SECTIONS = rf"§\s?{_NUM}(?:\s*(?:,|and|&)\s*§\s?{_NUM}|\s*[-–]\s*§?\s?{_NUM})*"
CITATION = re.compile(
    rf"docs/(?P<doc>[A-Za-z0-9_-]+)\.md"
    rf"(?:\s+(?P<sections>{_SECTIONS})"
    r'|\s+(?P<appendix>Appendix\s+[A-Z])\b'
    r'|\s+"(?P<heading>[^"\n]+)")?'
)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
HEADING_NUMBER = re.compile(rf"^(?:(?P<appendix>Appendix\s+[A-Z])|(?P<number>{_NUM}))\.?(?:\s|$)")


def code_files():
    files = [ROOT / name for name in ROOT_FILES if (ROOT / name).is_file()]
    for folder in CODE_DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            if not path.is_file() or SKIP_PARTS.intersection(path.parts):
                continue
            if path.suffix in SUFFIXES or path.name == "Snakefile":
                files.append(path)
    return [f for f in files if f.resolve() != Path(__file__).resolve()]


def headings(doc: Path):
    """(section numbers and appendix names, heading texts) of a markdown file."""
    texts = HEADING.findall(doc.read_text(encoding="utf-8"))
    numbers = set()
    for text in texts:
        m = HEADING_NUMBER.match(text)
        if m:
            numbers.add(re.sub(r"\s+", " ", m["appendix"]) if m["appendix"] else m["number"])
    return numbers, set(texts)


def citations():
    """Every ``docs/*.md`` citation in the code: (file, line, document, kind, value)."""
    found = []
    for path in code_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in CITATION.finditer(text):
            where = (path.relative_to(ROOT).as_posix(), text.count("\n", 0, m.start()) + 1)
            if m["sections"]:
                for number in re.findall(_NUM, m["sections"]):
                    found.append((*where, m["doc"], "section", number))
            elif m["appendix"]:
                found.append((*where, m["doc"], "section", re.sub(r"\s+", " ", m["appendix"])))
            elif m["heading"]:
                found.append((*where, m["doc"], "heading", m["heading"].strip()))
            else:
                found.append((*where, m["doc"], "document", None))
    return found


def test_code_cites_no_outside_reference_file():
    offenders = []
    for path in code_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT).as_posix()}:{number}: {line.strip()}")
    assert not offenders, "cite docs/*.md instead of the outside reference files:\n" + "\n".join(offenders)


def test_every_docs_citation_resolves():
    found = citations()
    assert found, "no docs/*.md citation found in the code: the pattern is broken"
    cache, broken = {}, []
    for path, line, doc, kind, value in found:
        if kind == "document":
            continue
        target = DOCS / f"{doc}.md"
        if not target.is_file():
            broken.append(f"{path}:{line}: docs/{doc}.md does not exist")
            continue
        numbers, texts = cache.setdefault(doc, headings(target))
        if kind == "section" and value not in numbers:
            broken.append(f"{path}:{line}: docs/{doc}.md has no heading numbered {value!r}")
        elif kind == "heading" and value not in texts:
            broken.append(f"{path}:{line}: docs/{doc}.md has no heading {value!r}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("text, expected", [
    ('see docs/algorithms.md §7, §9.4).', [("algorithms", "section", "7"), ("algorithms", "section", "9.4")]),
    ("docs/algorithms.md §5.3-§5.4, MH", [("algorithms", "section", "5.3"), ("algorithms", "section", "5.4")]),
    ("(docs/algorithms.md §8.3, 100 steps)", [("algorithms", "section", "8.3")]),
    ("docs/algorithms.md §0.4a).", [("algorithms", "section", "0.4a")]),
    ("as docs/algorithms.md Appendix A", [("algorithms", "section", "Appendix A")]),
    ('(docs/design.md "Execution model")', [("design", "heading", "Execution model")]),
    ("(docs/datasets.md).", [("datasets", "document", None)]),
])
def test_citation_pattern(text, expected, tmp_path, monkeypatch):
    """The parser reads lists, ranges, appendices, quoted headings and bare documents."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "x.py").write_text(f"# {text}\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    got = [(doc, kind, value) for _, _, doc, kind, value in citations()]
    assert got == expected
