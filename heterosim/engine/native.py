"""Builds the C++ models in ``ns3_modules/`` against the ns3 wheel and loads them through cppyy.

Each folder of ``ns3_modules/`` is an ns-3 module (``model/``, ``helper/``, ``test/``,
``examples/``, ``CMakeLists.txt``). The library holds ``model/`` and ``helper/`` only; the ns-3
TestSuites of ``test/`` compile into a separate test library (:func:`build_tests`) that
:func:`run_ns3_test_suite` runs with ns-3's TestRunner. The CMakeLists.txt files serve an ns-3 source
tree (the modules dropped into ``contrib/``); this module is the build used by HeteroSim.

This is the only module that touches cppyy. The build is cached under
``$HETEROSIM_CACHE_DIR`` (default ``~/.cache/heterosim``), keyed by a hash of every source and
header, the ns-3 version, the compiler version and the flags, so a second run loads in seconds.
Objects are compiled in parallel and each is cached on its own, so editing one file rebuilds one
object.

``HETEROSIM_BUILD_MODE=debug`` builds with ``-O0 -g -D_GLIBCXX_ASSERTIONS`` instead of ``-O3
-fno-semantic-interposition``;
both modes compile with ``-Wall -Wextra -Werror=return-type``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import site
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from heterosim.config.defaults import shipped
from heterosim.errors import UserError

NS3_VERSION = "3.44"
NS3_LIBRARIES = ("core", "network", "point-to-point", "internet", "traffic-control", "stats", "applications")
LIBRARY_NAME = "libheterosim-ns3.so"
TEST_LIBRARY_NAME = "libheterosim-ns3-test.so"
LIBRARY_PARTS = ("model", "helper")  # compiled into the library
TEST_PARTS = ("test",)  # compiled into the test library
# ns-3's event queue for every run: the project's bucketed queue (frame events in a ring of small
# buckets, timers due later in a binary heap). Every ns-3 queue pops by (time, insertion order), so
# the events and their order are the same as with ns-3's MapScheduler or binary heaps, only faster
# (benchmarks/README.md, "Bucketed event queue" and "Event queue and per-frame events").
EVENT_SCHEDULER = "ns3::ShiftableScheduler"
COMMON_FLAGS = (
    "-std=c++20",
    "-fPIC",
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Werror=return-type",
    "-DNS3_LOG_ENABLE",
    "-DNS3_ASSERT_ENABLE",
)
# -fno-semantic-interposition: calls between the library's own functions bind inside it (they
# can be inlined), where -fPIC alone sends each through the PLT.
MODE_FLAGS = {
    "release": ("-O3", "-fno-semantic-interposition"),
    "debug": ("-O0", "-g", "-D_GLIBCXX_ASSERTIONS"),
}


class BuildError(UserError):
    """The C++ modules did not compile; the message holds the compiler's own output."""


@dataclass(frozen=True)
class BuildPaths:
    """Where one build lives."""

    root: Path
    include: Path
    objects: Path
    library: Path


def modules_dir() -> Path:
    """The ``ns3_modules/`` folder: beside the package in a checkout, or installed inside it."""
    try:
        return shipped("ns3_modules")
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None


def ns3_prefix() -> Path:
    """The ns3 wheel's install folder (headers in include/, libraries in lib64/)."""
    for base in [*site.getsitepackages(), site.getusersitepackages(), *sys.path]:
        candidate = Path(base) / "ns3"
        if (candidate / "include" / "ns3" / "core-module.h").exists():
            return candidate
    raise UserError("the ns3 wheel is not installed: pip install ns3==3.44.post0")


def build_mode() -> str:
    mode = os.environ.get("HETEROSIM_BUILD_MODE", "release")
    if mode not in MODE_FLAGS:
        raise UserError(f"HETEROSIM_BUILD_MODE={mode!r}: expected release or debug")
    return mode


def _sources(root: Path, parts: tuple[str, ...] = LIBRARY_PARTS) -> tuple[list[Path], list[Path]]:
    """Sources and headers of ``parts`` (``model``, ``helper``, ``test``) of every module."""
    sources, headers = [], []
    for module in sorted(p for p in root.iterdir() if p.is_dir()):
        for part in parts:
            folder = module / part
            if folder.is_dir():
                sources += sorted(folder.glob("*.cc"))
                headers += sorted(folder.glob("*.h"))
    return sources, headers


@cache
def _compiler_version(compiler: str) -> str:
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise UserError(f"C++ compiler {compiler!r} not usable: {exc}") from None
    return out.stdout.splitlines()[0]


def _digest(*parts: bytes | str) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(part.encode() if isinstance(part, str) else part)
        hasher.update(b"\0")
    return hasher.hexdigest()[:16]


def cache_root() -> Path:
    return Path(os.environ.get("HETEROSIM_CACHE_DIR", Path.home() / ".cache" / "heterosim"))


@dataclass(frozen=True)
class _Settings:
    """What every compile and link of this process shares: sources root, ns-3 wheel, compiler,
    flags, and the digests that key the caches (headers, toolchain)."""

    root: Path
    prefix: Path
    compiler: str
    mode: str
    flags: list[str]
    headers: list[Path]
    header_hash: str
    toolchain: str

    def tools(self, paths: BuildPaths, force: bool = False, verbose: bool = False) -> _Toolchain:
        include_flags = [f"-I{paths.include}", f"-I{self.prefix / 'include'}"]
        return _Toolchain(
            self.compiler,
            self.flags,
            include_flags,
            self.header_hash,
            self.toolchain,
            paths.objects,
            self.root,
            force,
            verbose,
        )

    def ns3_link_flags(self) -> list[str]:
        lib_dir = self.prefix / "lib64"
        libs = [f"-lns{NS3_VERSION}-{name}" for name in NS3_LIBRARIES]
        return [f"-L{lib_dir}", *libs, f"-Wl,-rpath,{lib_dir}"]


def _settings() -> _Settings:
    root = modules_dir()
    prefix = ns3_prefix()
    compiler = os.environ.get("CXX", "g++")
    mode = build_mode()
    flags = [*COMMON_FLAGS, *MODE_FLAGS[mode]]
    _, headers = _sources(root)
    header_hash = _digest(*[h.name.encode() + h.read_bytes() for h in headers])
    toolchain = _digest(_compiler_version(compiler), NS3_VERSION, str(prefix), *flags)
    return _Settings(root, prefix, compiler, mode, flags, headers, header_hash, toolchain)


def build(force: bool = False, verbose: bool = False) -> BuildPaths:
    """Compile ``ns3_modules`` into one shared library (cached); return where it is."""
    settings = _settings()
    root, mode, headers = settings.root, settings.mode, settings.headers
    sources, _ = _sources(root)
    if not sources:
        raise UserError(f"{root}: no C++ sources found")
    key = _digest(settings.header_hash, settings.toolchain, *[s.read_bytes() for s in sources])
    build_root = cache_root() / "build" / f"{mode}-{key}"
    paths = BuildPaths(
        root=build_root,
        include=build_root / "include",
        objects=cache_root() / "objects",
        library=build_root / LIBRARY_NAME,
    )
    if paths.library.exists() and not force:
        return paths
    with _exclusive(build_root.with_name(build_root.name + ".lock")):
        if paths.library.exists() and not force:
            return paths  # built by another process while this one waited
        started = time.monotonic()
        # on stderr whatever it is (terminal, file, pipe): a first run is otherwise silent for minutes
        print(
            f"heterosim: compiling the C++ network models ({len(sources)} sources, {mode} build) into "
            f"{build_root}; this happens once per source change and takes a minute or two ...",
            file=sys.stderr,
            flush=True,
        )
        include_ns3 = paths.include / "ns3"
        if paths.include.exists():
            shutil.rmtree(paths.include)
        include_ns3.mkdir(parents=True)
        for header in headers:
            shutil.copy2(header, include_ns3 / header.name)
        tools = settings.tools(paths, force, verbose)
        tools.link(tools.compile_all(sources), paths.library, settings.ns3_link_flags())
        global _build_seconds
        seconds = time.monotonic() - started
        _build_seconds += seconds
        print(
            f"heterosim: built {paths.library.name} ({len(sources)} sources, {mode} build) "
            f"in {seconds:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        return paths


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (created if missing): processes that build the
    same library at once (two runs started together after a source change) take turns."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"heterosim: waiting for another process that is building {lock_path.stem} ...",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_build_seconds = 0.0


def build_seconds() -> float:
    """Wall time this process has spent compiling ns3_modules (0 when the cache had the library)."""
    return _build_seconds


def build_tests(force: bool = False, verbose: bool = False) -> Path:
    """Compile the modules' ns-3 TestSuites (``*/test/*.cc``) into a test library linked
    against the library of :func:`build` (cached the same way); return its path."""
    paths = build(force=force, verbose=verbose)
    settings = _settings()
    root = settings.root
    sources, headers = _sources(root, TEST_PARTS)
    if not sources:
        raise UserError(f"{root}: no ns-3 TestSuites (*/test/*.cc) found")
    # test/*.h: helpers the suites of a module share (included by relative path); they key the
    # test library and its objects like the sources
    key = _digest(paths.root.name, *[s.name.encode() + s.read_bytes() for s in [*sources, *headers]])
    library = paths.root / f"test-{key}" / TEST_LIBRARY_NAME
    if library.exists() and not force:
        return library
    with _exclusive(library.parent.with_name(library.parent.name + ".lock")):
        if library.exists() and not force:
            return library  # built by another process while this one waited
        library.parent.mkdir(parents=True, exist_ok=True)
        tools = settings.tools(paths, force, verbose)
        if headers:
            test_headers = [h.name.encode() + h.read_bytes() for h in headers]
            tools = replace(tools, header_hash=_digest(tools.header_hash, *test_headers))
        link_flags = [str(paths.library), f"-Wl,-rpath,{paths.root}", *settings.ns3_link_flags()]
        tools.link(tools.compile_all(sources), library, link_flags)
        return library


def build_example(source: Path) -> Path:
    """Compile and link one program of ``ns3_modules/*/examples/`` against the library (cached
    by content); return the executable."""
    paths = build()
    key = _digest(paths.root.name, source.read_bytes())
    executable = paths.root / "examples" / f"{source.stem}-{key}"
    if executable.exists():
        return executable
    executable.parent.mkdir(parents=True, exist_ok=True)
    settings = _settings()
    tools = settings.tools(paths)
    link_flags = [str(paths.library), f"-Wl,-rpath,{paths.root}", *settings.ns3_link_flags()]
    tools.link([tools.compile_one(source)], executable, link_flags, shared=False)
    return executable


@dataclass(frozen=True)
class _Toolchain:
    """Compiles sources into cached objects and links them (one build's settings)."""

    compiler: str
    flags: list[str]
    include_flags: list[str]
    header_hash: str
    toolchain: str
    objects: Path
    root: Path
    force: bool
    verbose: bool

    def compile_one(self, source: Path) -> Path:
        digest = _digest(source.read_bytes(), self.header_hash, self.toolchain)
        obj = self.objects / f"{source.stem}-{digest}.o"
        if obj.exists() and not self.force:
            return obj
        tmp = obj.with_suffix(f".{os.getpid()}.tmp")
        cmd = [self.compiler, *self.flags, *self.include_flags, "-c", str(source), "-o", str(tmp)]
        if self.verbose:
            print(" ".join(cmd), file=sys.stderr)
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise BuildError(f"compiling {source.relative_to(self.root.parent)} failed:\n{result.stderr}")
        if result.stderr and self.verbose:
            print(result.stderr, file=sys.stderr)
        tmp.replace(obj)
        return obj

    def compile_all(self, sources: list[Path]) -> list[Path]:
        self.objects.mkdir(parents=True, exist_ok=True)
        workers = max(1, min(len(sources), os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(self.compile_one, sources))

    def link(self, objects: list[Path], library: Path, link_flags: list[str], shared: bool = True) -> None:
        tmp_lib = library.with_suffix(f".{os.getpid()}.tmp")
        cmd = [
            self.compiler,
            *(["-shared"] if shared else []),
            *self.flags,
            *map(str, objects),
            *link_flags,
            "-o",
            str(tmp_lib),
        ]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            tmp_lib.unlink(missing_ok=True)
            raise BuildError(f"linking {library.name} failed:\n{result.stderr}")
        tmp_lib.replace(library)


@cache
def load() -> Any:
    """Build if needed, load the library and its headers; return cppyy's global namespace."""
    paths = build()
    prefix = ns3_prefix()
    import cppyy  # noqa: PLC0415 - imported here so that nothing pays for it until needed

    cppyy.add_include_path(str(prefix / "include"))
    cppyy.add_include_path(str(paths.include))
    for name in NS3_LIBRARIES:
        cppyy.load_library(str(prefix / "lib64" / f"libns{NS3_VERSION}-{name}.so"))
    cppyy.load_library(str(paths.library))
    for header in sorted((paths.include / "ns3").glob("*.h")):
        cppyy.include(f"ns3/{header.name}")
    _use_event_scheduler(cppyy)
    return cppyy.gbl


def null_pointer() -> Any:
    """C++'s null pointer, for a pointer argument that a call may leave out (after :func:`load`)."""
    import cppyy  # noqa: PLC0415

    return cppyy.nullptr


@cache
def _use_event_scheduler(cppyy: Any) -> None:
    """Make :data:`EVENT_SCHEDULER` the queue of every simulator created from now on."""
    cppyy.include("ns3/global-value.h")
    cppyy.include("ns3/string.h")
    ns3 = cppyy.gbl.ns3
    ns3.GlobalValue.Bind("SchedulerType", ns3.StringValue(EVENT_SCHEDULER))


@cache
def load_tests() -> Any:
    """:func:`load`, then the test library (its TestSuites register with ns-3's TestRunner)."""
    gbl = load()
    import cppyy  # noqa: PLC0415

    cppyy.load_library(str(build_tests()))
    cppyy.include("ns3/test.h")
    cppyy.cppdef("""
    namespace heterosim_tests {
    int RunSuite(const std::string& name, const std::string& tempDir)
    {
        std::vector<std::string> args{"test-runner", "--suite=" + name, "--verbose",
                                      "--tempdir=" + tempDir};
        std::vector<char*> argv;
        for (auto& a : args) { argv.push_back(a.data()); }
        int argc = static_cast<int>(argv.size());
        argv.push_back(nullptr);  // the runner reads arguments up to a null pointer
        return ns3::TestRunner::Run(argc, argv.data());
    }
    }
    """)
    return gbl


def ns3_test_suite_names() -> list[str]:
    """Names of the TestSuites in ``ns3_modules/*/test/`` (from their sources)."""
    import re  # noqa: PLC0415

    names = []
    for source in _sources(modules_dir(), TEST_PARTS)[0]:
        names += re.findall(r'TestSuite\("([^"]+)"', source.read_text())
    return sorted(names)


def run_ns3_test_suite(name: str, temp_dir: str | Path) -> int:
    """Run one ns-3 TestSuite with ns-3's TestRunner; 0 when it passed. The runner writes its
    report on standard output (the process's file descriptor 1)."""
    gbl = load_tests()
    return int(gbl.heterosim_tests.RunSuite(name, str(temp_dir)))
