"""Static checks of docker/: the Dockerfile, compose.yaml, build-and-smoke.sh and docker/README.md
(no container engine in CI; docker/build-and-smoke.sh builds and runs the image where buildah is).

The Dockerfile must parse into known instructions, have a builder stage that installs the
dependencies (pyproject.toml only, so source edits do not recompile CPyCppyy) and a runtime stage
that copies them, COPY only paths that exist in the build context (the repository root), install the
package like the README's quick start, build the C++ modules, accept a pip index and CA bundle, and
declare no VOLUME (it would shadow a bind mount at /results); compose.yaml must be a Ray head plus
two workers running a real sweep; every ``heterosim`` command shown in these files must be accepted
by the real argument parser and name files that exist.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from heterosim.cli import build_parser
from heterosim.sweep.grid import load_sweep

REPO = Path(__file__).resolve().parent.parent
DOCKER = REPO / "docker"
INSTALL = "python3 -m pip install -e '.[test]'"
INSTRUCTIONS = {
    "FROM",
    "RUN",
    "CMD",
    "LABEL",
    "EXPOSE",
    "ENV",
    "ADD",
    "COPY",
    "ENTRYPOINT",
    "VOLUME",
    "USER",
    "WORKDIR",
    "ARG",
    "ONBUILD",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
}


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs: comments dropped, backslash continuations joined."""
    out, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append((keyword.upper(), " ".join(args.split())))
    assert not pending, "Dockerfile ends inside a continued line"
    return out


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    return dockerfile_instructions((DOCKER / "Dockerfile").read_text())


def stage(instructions: list[tuple[str, str]], name: str) -> list[tuple[str, str]]:
    """The instructions of the stage ``FROM ... AS name``."""
    starts = [i for i, (k, _) in enumerate(instructions) if k == "FROM"] + [len(instructions)]
    for a, b in zip(starts, starts[1:]):
        if instructions[a][1].endswith(f" AS {name}"):
            return instructions[a:b]
    raise AssertionError(f"no stage {name}")


def test_dockerfile_parses_into_known_instructions(instructions) -> None:
    assert instructions[0] == ("ARG", "BASE_IMAGE=debian:bookworm-slim")
    unknown = [k for k, _ in instructions if k not in INSTRUCTIONS]
    assert not unknown
    froms = [args for k, args in instructions if k == "FROM"]
    assert froms == ["${BASE_IMAGE} AS builder", "${BASE_IMAGE} AS runtime"]
    assert "VOLUME" not in {k for k, _ in instructions}  # a volume hides a bind mount under it


def test_builder_stage_depends_only_on_pyproject(instructions) -> None:
    builder = stage(instructions, "builder")
    copies = [args for k, args in builder if k == "COPY"]
    assert copies == ["pyproject.toml /tmp/pyproject.toml"]
    runs = " ".join(args for k, args in builder if k == "RUN")
    assert "python3-dev" in runs and re.search(r"\bg\+\+", runs)
    assert "pip install -r /tmp/requirements.txt" in runs and "WITH_RAY" in runs
    for arg in ("WITH_RAY=0", "PIP_INDEX_URL=https://pypi.org/simple", 'CA_BUNDLE=""'):
        assert ("ARG", arg) in builder
    assert "update-ca-certificates" in runs and "$CA_BUNDLE" in runs
    runtime = stage(instructions, "runtime")
    assert ("COPY", "--from=builder /opt/venv /opt/venv") in runtime
    env = " ".join(args for k, args in runtime if k == "ENV")
    assert "PATH=/opt/venv/bin:$PATH" in env and "PIP_INDEX_URL=${PIP_INDEX_URL}" in env


def build_context() -> list[str]:
    """The top-level paths .dockerignore lets into the build context (it ignores ``*`` and then
    re-includes names with ``!``)."""
    lines = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    assert lines[0] == "*", "the context is a whitelist: ignore everything, then name what goes in"
    return [line[1:] for line in lines if line.startswith("!")]


def test_dockerfile_copies_existing_paths(instructions) -> None:
    copies = [args.split() for k, args in instructions if k == "COPY" and not args.startswith("--from=")]
    assert copies
    sources = [src for parts in copies for src in parts[:-1] if not src.startswith("--")]
    if "." in sources:  # the whole context: what .dockerignore lets in
        sources = [s for s in sources if s != "."] + build_context()
    for src in sources:
        assert (REPO / src).exists(), f"COPY {src}: not in the build context (repository root)"
    # what `pip install -e .` and `heterosim build` need is in the image
    for needed in ("pyproject.toml", "README.md", "heterosim", "ns3_modules", "topologies", "workloads"):
        assert needed in sources
    runtime = stage(instructions, "runtime")
    workdir = [i for i, (k, _) in enumerate(runtime) if k == "WORKDIR"]
    first_copy = next(i for i, (k, a) in enumerate(runtime) if k == "COPY" and not a.startswith("--from="))
    assert workdir and workdir[0] < first_copy


def test_dockerfile_installs_like_the_readme_and_builds_the_modules(instructions) -> None:
    runs = [args for k, args in stage(instructions, "runtime") if k == "RUN"]
    apt = next(r for r in runs if "apt-get install" in r)
    assert re.search(r"\bg\+\+", apt) and "apt-get update" in apt
    # the quick start's command (the dependencies and build backend are already in the venv),
    # then the C++ build, in the same RUN or a later one
    steps = [(i, step.strip()) for i, r in enumerate(runs) for step in r.split("&&")]
    install = [
        (i, n)
        for n, (i, s) in enumerate(steps)
        if s.startswith("python3 -m pip install") and s.endswith("-e '.[test]'")
    ]
    assert install, f"no RUN like {INSTALL}"
    build = [n for n, (_, s) in enumerate(steps) if s.startswith("heterosim build")]
    assert build and build[0] > install[0][1]
    env = " ".join(args for k, args in instructions if k == "ENV")
    assert "HETEROSIM_CACHE_DIR=" in env  # the compiled library lives at a fixed place


def test_smoke_script_builds_runs_and_checks_results_on_the_host() -> None:
    script = DOCKER / "build-and-smoke.sh"
    assert os.access(script, os.X_OK)
    text = script.read_text()
    assert "mmdebstrap" in text and "buildah" in text and "from scratch" in text
    assert re.search(r"bud --isolation .*-f docker/Dockerfile", text.replace("\\\n", " "))
    assert re.search(r'run --isolation "\$ISOLATION" -v "\$RESULTS:/results"', text)
    assert "results.json" in text
    bash = shutil.which("bash")
    if bash:
        assert subprocess.run([bash, "-n", str(script)]).returncode == 0


def test_readme_quick_start_uses_the_same_install_command() -> None:
    readme = REPO / "README.md"
    if not readme.exists():
        pytest.skip("README.md not written yet")
    commands = re.findall(r"python3? -m pip install [^\n&`]*", readme.read_text())
    assert commands, "README.md shows no pip install command"
    assert commands[0].strip() == INSTALL


def _heterosim_commands(text: str) -> list[list[str]]:
    text = text.replace("\\\n", " ")
    commands = []
    for match in re.finditer(r"(?<![\w/-])heterosim (?:run|sweep|compare|build)[^\n;&\"`]*", text):
        words = shlex.split(match.group(0))
        commands.append([w for w in words if w])
    return commands


def _check_command(words: list[str]) -> None:
    args = build_parser().parse_args(words[1:])
    for value in [
        getattr(args, "experiment", None),
        getattr(args, "sweep", None),
        *(getattr(args, "experiments", None) or []),
    ]:
        if value and not value.startswith(("/my/", "$")):
            assert (REPO / value).is_file(), f"{' '.join(words)}: {value} not in the repository"


def test_compose_is_a_ray_head_and_two_workers_running_a_sweep() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"ray-head", "ray-worker"}
    for service in services.values():
        build = service["build"]
        assert (DOCKER / build["context"]).resolve() == REPO
        assert (REPO / build["dockerfile"]).resolve() == (DOCKER / "Dockerfile").resolve()
        assert build["args"]["WITH_RAY"] == "1"
    head = " ".join(services["ray-head"]["command"])
    assert "ray start --head --port=6379" in head
    sweep = re.search(r"heterosim sweep \$\{SWEEP:-([^}]+)\} (.*?);", head)
    assert sweep, head
    options = sweep.group(2).split()
    assert options[:4] == ["--executor", "ray", "--address", "auto"] and "--resume" in options
    spec = load_sweep(REPO / sweep.group(1))
    assert spec.variants()
    build_parser().parse_args(["sweep", sweep.group(1), *options])
    worker = services["ray-worker"]
    assert "ray start --address=ray-head:6379" in " ".join(worker["command"])
    assert "--block" in " ".join(worker["command"])
    assert worker["deploy"]["replicas"] == 2
    assert worker["depends_on"]["ray-head"]["condition"] == "service_healthy"
    assert "ray" in services["ray-head"]["healthcheck"]["test"]


def test_commands_in_docker_docs_parse_and_name_existing_files() -> None:
    texts = [(DOCKER / "README.md").read_text(), (DOCKER / "Dockerfile").read_text()]
    commands = [c for text in texts for c in _heterosim_commands(text)]
    assert len(commands) >= 4
    for words in commands:
        _check_command(words)
    readme = (DOCKER / "README.md").read_text()
    assert "docker build -f docker/Dockerfile" in readme and '-v "$PWD/results:/results"' in readme
    for path in re.findall(r"\b(?:workloads|topologies)/[\w./-]+\.yaml", readme):
        assert (REPO / path).is_file(), path
