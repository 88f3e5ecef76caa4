"""The attribute list of each ns-3 module's ``doc/<module>.rst`` is in step with its code: every
``.AddAttribute("Name", ...)`` of a TypeId in ``model/`` and ``helper/`` is documented in the entry
of that TypeId as ``Name`` followed by its default in parentheses, and every name so documented is
an attribute of that TypeId."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

MODULES = Path(__file__).resolve().parents[1] / "ns3_modules"
CODE_PARTS = ("model", "helper")
# ``TypeId("ns3::Name")`` starts a TypeId's definition (LookupByName(...) does not match)
TYPE_ID = re.compile(r'\bTypeId\(\s*"ns3::(\w+)"\s*\)')
ADD_ATTRIBUTE = re.compile(r'\.AddAttribute\(\s*"(\w+)"')
# an entry of the Attributes section starts a line (or a bullet) with the class, then ":" or the
# end of the line: "``ns3::Dcqcn``: ...", "* ``QbbChannel``: ...", "``ns3::PacketNetwork``" (not
# an attribute whose default in parentheses opens the next line)
ENTRY = re.compile(r"^(?:\* )?``(?:ns3::)?([A-Z]\w*)``(?::|$)(?!\s*\()", re.M)
# an attribute is documented as ``Name`` (default)
DOCUMENTED = re.compile(r"``([A-Z]\w*)``\s*\(")
SECTION = re.compile(r"^Attributes\n=+\n(.*?)(?=^[^\n]+\n[=*]{3,}\n|\Z)", re.M | re.S)


def code_attributes(module: Path) -> dict[str, list[str]]:
    """TypeId name -> the attribute names its definition adds, in order."""
    found: dict[str, list[str]] = {}
    for part in CODE_PARTS:
        for source in sorted((module / part).glob("*.cc")):
            text = source.read_text()
            starts = list(TYPE_ID.finditer(text))
            for start, after in zip(starts, [*starts[1:], None]):
                end = after.start() if after else len(text)
                found.setdefault(start.group(1), []).extend(ADD_ATTRIBUTE.findall(text, start.end(), end))
    return found


def doc_attributes(rst: str) -> dict[str, list[str]]:
    """Class name -> the attribute names its entry in the Attributes section documents."""
    section = SECTION.search(rst)
    assert section, "no 'Attributes' section"
    text = section.group(1)
    entries = list(ENTRY.finditer(text))
    found: dict[str, list[str]] = {}
    for entry, after in zip(entries, [*entries[1:], None]):
        end = after.start() if after else len(text)
        found.setdefault(entry.group(1), []).extend(DOCUMENTED.findall(text, entry.end(), end))
    return found


def mismatches(code: dict[str, list[str]], doc: dict[str, list[str]]) -> list[str]:
    """What the doc leaves out of the code's attributes and what it names that the code lacks."""
    problems = [
        f"ns3::{cls}::{name} is not documented"
        for cls, names in code.items()
        for name in names
        if name not in doc.get(cls, [])
    ]
    for cls, names in doc.items():
        if cls not in code:
            problems.append(f"ns3::{cls}: documented, but no TypeId of this module defines it")
            continue
        problems += [
            f"ns3::{cls}::{name} is documented but not an attribute"
            for name in names
            if name not in code[cls]
        ]
    return problems


def modules() -> list[str]:
    return sorted(p.name for p in MODULES.iterdir() if (p / "doc").is_dir())


@pytest.mark.parametrize("module", modules())
def test_doc_lists_exactly_the_attributes_of_the_code(module):
    root = MODULES / module
    code = code_attributes(root)
    assert sum(map(len, code.values())) > 0, f"{module}: no attributes found in the code"
    doc = doc_attributes((root / "doc" / f"{module}.rst").read_text())
    assert mismatches(code, doc) == []


def test_every_module_has_its_doc():
    assert modules() == sorted(p.name for p in MODULES.iterdir() if p.is_dir())
    assert len(modules()) >= 5


def test_every_attribute_of_the_code_is_found():
    """The parser sees every .AddAttribute( of a module (none outside a TypeId definition)."""
    for module in modules():
        sources = [s for part in CODE_PARTS for s in (MODULES / module / part).glob("*.cc")]
        calls = sum(s.read_text().count(".AddAttribute(") for s in sources)
        assert sum(map(len, code_attributes(MODULES / module).values())) == calls, module


SAMPLE_CC = """
TypeId Foo::GetTypeId() { static TypeId tid = TypeId("ns3::Foo")
    .AddAttribute("Rate", "help", DoubleValue(1), ...)
    .AddAttribute(
        "Delay", "help", TimeValue(Seconds(1)), ...);
    TypeId::LookupByName("ns3::Other"); return tid; }
TypeId Bar::GetTypeId() { static TypeId tid = TypeId("ns3::Bar").AddAttribute("Size", "h", ...); }
"""

SAMPLE_RST = """Attributes
==========

``ns3::Foo``

* ``Rate`` (1): a rate, see ``Other``.
* ``Delay``
  (1 s): a delay.

* ``Bar``: ``Size`` (4), and ``Extra`` (2).

Traces
======

* ``Foo``: ``Sent`` (bytes).
"""


def test_the_check_reports_a_missing_and_an_unknown_attribute(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "foo.cc").write_text(SAMPLE_CC)
    code = code_attributes(tmp_path)
    assert code == {"Foo": ["Rate", "Delay"], "Bar": ["Size"]}
    doc = doc_attributes(SAMPLE_RST)
    assert doc == {"Foo": ["Rate", "Delay"], "Bar": ["Size", "Extra"]}
    assert mismatches(code, doc) == ["ns3::Bar::Extra is documented but not an attribute"]
    code["Foo"].append("Seed")
    code.pop("Bar")
    assert mismatches(code, doc) == [
        "ns3::Foo::Seed is not documented",
        "ns3::Bar: documented, but no TypeId of this module defines it",
    ]
