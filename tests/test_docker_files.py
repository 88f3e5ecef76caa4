"""Static checks of docker/: the Dockerfile, compose.yaml and docker/README.md (no Docker engine here).

The Dockerfile must parse into known instructions, COPY only paths that exist in the build context
(the repository root), install with the README's quick-start command and build the C++ modules;
compose.yaml must be a Ray head plus two workers running a real sweep; every ``heterosim`` command
shown in these files must be accepted by the real argument parser and name files that exist.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from heterosim.cli import build_parser
from heterosim.sweep.grid import load_sweep

REPO = Path(__file__).resolve().parent.parent
DOCKER = REPO / "docker"
INSTALL = "python3 -m pip install -e '.[test]'"
INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
                "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


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


def test_dockerfile_parses_into_known_instructions(instructions) -> None:
    assert instructions[0] == ("FROM", "python:3.11-slim")
    unknown = [k for k, _ in instructions if k not in INSTRUCTIONS]
    assert not unknown
    assert sum(k == "FROM" for k, _ in instructions) == 1


def test_dockerfile_copies_existing_paths(instructions) -> None:
    copies = [args.split() for k, args in instructions if k == "COPY"]
    assert copies
    sources = [src for parts in copies for src in parts[:-1] if not src.startswith("--")]
    for src in sources:
        assert (REPO / src).exists(), f"COPY {src}: not in the build context (repository root)"
    # what `pip install -e .` and `heterosim build` need is in the image
    for needed in ("pyproject.toml", "README.md", "heterosim", "ns3_modules", "topologies", "workloads"):
        assert needed in sources
    workdir = [i for i, (k, _) in enumerate(instructions) if k == "WORKDIR"]
    first_copy = next(i for i, (k, _) in enumerate(instructions) if k == "COPY")
    assert workdir and workdir[0] < first_copy


def test_dockerfile_installs_like_the_readme_and_builds_the_modules(instructions) -> None:
    runs = [args for k, args in instructions if k == "RUN"]
    apt = next(r for r in runs if "apt-get install" in r)
    assert re.search(r"\bg\+\+", apt) and "apt-get update" in apt
    install = [i for i, r in enumerate(runs) if r == INSTALL]
    assert install, f"no RUN {INSTALL}"
    build = [i for i, r in enumerate(runs) if r.startswith("heterosim build")]
    assert build and build[0] > install[0]
    ray = next(r for r in runs if ".[ray]" in r)
    assert "WITH_RAY" in ray
    assert ("ARG", "WITH_RAY=0") in instructions
    env = " ".join(args for k, args in instructions if k == "ENV")
    assert "HETEROSIM_CACHE_DIR=" in env  # the compiled library lives at a fixed place


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
    for value in [getattr(args, "experiment", None), getattr(args, "sweep", None),
                  *(getattr(args, "experiments", None) or [])]:
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
    assert "docker build -f docker/Dockerfile" in readme and "-v \"$PWD/results:/results\"" in readme
    for path in re.findall(r"\b(?:workloads|topologies)/[\w./-]+\.yaml", readme):
        assert (REPO / path).is_file(), path
