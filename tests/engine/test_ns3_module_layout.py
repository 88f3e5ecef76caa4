"""ns3_modules/ is laid out as ns-3 modules: each CMakeLists.txt lists exactly the sources the
Python build compiles (model/ and helper/ into the library, test/ into the test library)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from heterosim.engine.native import LIBRARY_PARTS, TEST_PARTS, modules_dir

MODULES = sorted(p for p in modules_dir().iterdir() if p.is_dir())


def listed(cmake: str, key: str) -> list[str]:
    match = re.search(rf"{key}\n((?:    \S+\n)*)", cmake)
    return match.group(1).split() if match else []


def on_disk(module: Path, parts: tuple[str, ...], ext: str) -> list[str]:
    return [f"{part}/{p.name}" for part in parts for p in sorted((module / part).glob(f"*.{ext}"))]


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_cmakelists_lists_every_source_header_and_test(module):
    cmake = (module / "CMakeLists.txt").read_text()
    assert f"LIBNAME {module.name}\n" in cmake
    assert listed(cmake, "SOURCE_FILES") == on_disk(module, LIBRARY_PARTS, "cc")
    assert listed(cmake, "HEADER_FILES") == on_disk(module, LIBRARY_PARTS, "h")
    assert listed(cmake, "TEST_SOURCES") == on_disk(module, TEST_PARTS, "cc")
    assert on_disk(module, TEST_PARTS, "cc"), "every module has ns-3 TestSuites"


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_examples_are_built_by_cmake_too(module):
    examples = sorted((module / "examples").glob("*.cc"))
    if not examples:
        return
    cmake = (module / "examples" / "CMakeLists.txt").read_text()
    assert [f"{p.name}" for p in examples] == re.findall(r"SOURCE_FILES (\S+)", cmake)


def test_no_benchmark_or_example_code_in_the_library():
    for module in MODULES:
        for part in LIBRARY_PARTS:
            assert not list((module / part).glob("*benchmark*")), module / part
            assert not any("int\nmain(" in p.read_text() for p in (module / part).glob("*.cc"))
