"""Builds the C++ models in ``ns3_modules/`` against the ns3 wheel and loads them through cppyy.

This is the only module that touches cppyy. The build is cached under
``$HETEROSIM_CACHE_DIR`` (default ``~/.cache/heterosim``), keyed by a hash of every source and
header, the ns-3 version, the compiler version and the flags, so a second run loads in seconds.
Objects are compiled in parallel and each is cached on its own, so editing one file rebuilds one
object.

``HETEROSIM_BUILD_MODE=debug`` builds with ``-O0 -g -D_GLIBCXX_ASSERTIONS`` instead of ``-O2``;
both modes compile with ``-Wall -Wextra -Werror=return-type``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import site
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from heterosim.errors import UserError

NS3_VERSION = "3.44"
NS3_LIBRARIES = ("core", "network", "point-to-point", "internet", "traffic-control", "stats")
LIBRARY_NAME = "libheterosim-ns3.so"
# ns-3's event queue for every run. The binary heap on a vector keeps events in one block, where
# the default MapScheduler allocates a tree node per event: the same events in the same order,
# faster (benchmarks/README.md, "Event queue and per-frame events").
EVENT_SCHEDULER = "ns3::PriorityQueueScheduler"
COMMON_FLAGS = (
    "-std=c++20", "-fPIC", "-Wall", "-Wextra", "-Wno-unused-parameter",
    "-Werror=return-type", "-DNS3_LOG_ENABLE", "-DNS3_ASSERT_ENABLE",
)
MODE_FLAGS = {
    "release": ("-O2",),
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
    """The ``ns3_modules/`` folder: beside the package in a checkout, or installed with it."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent.parent / "ns3_modules", here.parent / "ns3_modules"):
        if candidate.is_dir():
            return candidate
    raise UserError("ns3_modules/ not found beside the heterosim package")


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


def _sources(root: Path) -> tuple[list[Path], list[Path]]:
    sources, headers = [], []
    for module in sorted(p for p in root.iterdir() if p.is_dir()):
        for part in ("model", "helper"):
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


def build(force: bool = False, verbose: bool = False) -> BuildPaths:
    """Compile ``ns3_modules`` into one shared library (cached); return where it is."""
    root = modules_dir()
    prefix = ns3_prefix()
    compiler = os.environ.get("CXX", "g++")
    mode = build_mode()
    flags = [*COMMON_FLAGS, *MODE_FLAGS[mode]]
    sources, headers = _sources(root)
    if not sources:
        raise UserError(f"{root}: no C++ sources found")
    header_hash = _digest(*[h.name.encode() + h.read_bytes() for h in headers])
    toolchain = _digest(_compiler_version(compiler), NS3_VERSION, str(prefix), *flags)
    key = _digest(header_hash, toolchain, *[s.read_bytes() for s in sources])
    build_root = cache_root() / "build" / f"{mode}-{key}"
    paths = BuildPaths(
        root=build_root, include=build_root / "include", objects=cache_root() / "objects",
        library=build_root / LIBRARY_NAME,
    )
    if paths.library.exists() and not force:
        return paths

    started = time.monotonic()
    # on stderr whatever it is (terminal, file, pipe): a first run is otherwise silent for minutes
    print(f"heterosim: compiling the C++ network models ({len(sources)} sources, {mode} build) into "
          f"{build_root}; this happens once per source change and takes a minute or two ...",
          file=sys.stderr, flush=True)
    include_ns3 = paths.include / "ns3"
    if paths.include.exists():
        shutil.rmtree(paths.include)
    include_ns3.mkdir(parents=True)
    for header in headers:
        shutil.copy2(header, include_ns3 / header.name)
    paths.objects.mkdir(parents=True, exist_ok=True)
    include_flags = [f"-I{paths.include}", f"-I{prefix / 'include'}"]

    def compile_one(source: Path) -> Path:
        obj = paths.objects / f"{source.stem}-{_digest(source.read_bytes(), header_hash, toolchain)}.o"
        if obj.exists() and not force:
            return obj
        tmp = obj.with_suffix(f".{os.getpid()}.tmp")
        cmd = [compiler, *flags, *include_flags, "-c", str(source), "-o", str(tmp)]
        if verbose:
            print(" ".join(cmd), file=sys.stderr)
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise BuildError(f"compiling {source.relative_to(root.parent)} failed:\n{result.stderr}")
        if result.stderr and verbose:
            print(result.stderr, file=sys.stderr)
        tmp.replace(obj)
        return obj

    workers = max(1, min(len(sources), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        objects = list(pool.map(compile_one, sources))
    lib_dir = prefix / "lib64"
    libs = [f"-lns{NS3_VERSION}-{name}" for name in NS3_LIBRARIES]
    tmp_lib = paths.library.with_suffix(f".{os.getpid()}.tmp")
    cmd = [
        compiler, "-shared", *flags, *map(str, objects), f"-L{lib_dir}", *libs,
        f"-Wl,-rpath,{lib_dir}", "-o", str(tmp_lib),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        tmp_lib.unlink(missing_ok=True)
        raise BuildError(f"linking {LIBRARY_NAME} failed:\n{result.stderr}")
    tmp_lib.replace(paths.library)
    global _build_seconds
    seconds = time.monotonic() - started
    _build_seconds += seconds
    print(f"heterosim: built {paths.library.name} ({len(sources)} sources, {mode} build) in {seconds:.1f} s",
          file=sys.stderr, flush=True)
    return paths


_build_seconds = 0.0


def build_seconds() -> float:
    """Wall time this process has spent compiling ns3_modules (0 when the cache had the library)."""
    return _build_seconds


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


@cache
def _use_event_scheduler(cppyy: Any) -> None:
    """Make :data:`EVENT_SCHEDULER` the queue of every simulator created from now on."""
    cppyy.include("ns3/global-value.h")
    cppyy.include("ns3/string.h")
    ns3 = cppyy.gbl.ns3
    ns3.GlobalValue.Bind("SchedulerType", ns3.StringValue(EVENT_SCHEDULER))


def ns3_namespace() -> Any:
    """The loaded ``ns3`` C++ namespace (builds and loads on first use)."""
    return load().ns3
