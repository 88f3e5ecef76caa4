"""The import graph of heterosim/: no module imports a later layer (the order docs/architecture.md
states), and no import circle (imports under ``if TYPE_CHECKING:`` do not run and are skipped)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "heterosim"
BASE = ("__init__", "errors", "units", "notes", "interrupts")


def layer_order() -> list[set[str]]:
    """The layers, first to last, from the ``Layer order:`` line of docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    (line,) = re.findall(r"^Layer order: (.+)$", text, flags=re.M)
    layers = []
    for part in line.split(" < "):
        names = set(re.findall(r"`([a-z_]+)`", part.split("(")[0]))
        layers.append(set(BASE) if part.startswith("base") else names)
    return layers


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The heterosim modules ``path`` imports when it runs (a package's submodule when named)."""
    tree = ast.parse(path.read_text())
    skipped = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for block in node.body
        for sub in ast.walk(block)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("heterosim"):
            subs = {f"{node.module}.{a.name}" for a in node.names} & modules
            found |= subs if len(subs) == len(node.names) else subs | {node.module}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("heterosim")}
    return found & modules


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {m: runtime_imports(p, modules) - {m} for m, p in paths.items()}


def layer_of(module: str, layers: list[set[str]]) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    for index, names in enumerate(layers):
        if top in names:
            return index
    raise AssertionError(f"{module}: package {top!r} is in no layer of docs/architecture.md")


def test_every_package_has_a_layer_and_no_import_runs_back_up():
    layers = layer_order()
    assert len(layers) >= 10
    upward = [
        f"{m} imports {t}"
        for m, targets in import_graph().items()
        for t in targets
        if layer_of(t, layers) > layer_of(m, layers)
    ]
    assert upward == []


def test_there_is_no_import_circle():
    graph = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert circles == []


def test_the_checker_sees_an_upward_import_and_a_circle(tmp_path):
    """The two checks are not vacuous: a config module importing the engine, and two modules
    importing each other, are found."""
    layers = layer_order()
    assert layer_of("heterosim.engine.packet", layers) > layer_of("heterosim.config.experiment", layers)
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from heterosim.x import b\n")
    b.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from heterosim.x import a\n")
    modules = {"heterosim.x.a", "heterosim.x.b"}
    assert runtime_imports(a, modules) == {"heterosim.x.b"}
    assert runtime_imports(b, modules) == set()  # a type-only import is no circle


def test_attention_kernel_names_are_the_ones_the_kernel_tables_hold():
    from heterosim.config.choices import ATTENTION_KERNELS
    from heterosim.plan.compute.efficiency import attention_impls

    assert set(ATTENTION_KERNELS) == attention_impls()


# The one module that turns a fidelity name into a network model; every other module asks the
# model (heterosim.config.network_model.NetworkModel) what its network can do.
FIDELITY_FACTORY = PACKAGE / "config" / "network_model.py"
# Other settings whose values share the words "packet" and "flow" (simulation.intra_host and
# PacketNetwork::HostFlows, simulation.queue_pairs): comparing them is no fidelity comparison.
NOT_FIDELITY = ("intra_host", "host_flows", "queue_pairs")


def fidelity_comparisons(source: str) -> list[str]:
    """Each comparison with a fidelity name (``== "packet"``, ``!= "flow"``, ``in (...)``) and
    each dict keyed by every fidelity name, as ``line: code``."""
    from heterosim.config.choices import FIDELITIES

    def names(node: ast.AST) -> set[str]:
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return {i.value for i in items if isinstance(i, ast.Constant) and i.value in FIDELITIES}

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = [o for o in operands if names(o)]
            others = " ".join(ast.unparse(o) for o in operands if o not in named)
            if named and not any(word in others for word in NOT_FIDELITY):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict):
            keys = set().union(*(names(k) for k in node.keys if k is not None))
            if keys == set(FIDELITIES):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_but_the_factory_compares_fidelity_names():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != FIDELITY_FACTORY
        for line in fidelity_comparisons(path.read_text())
    ]
    assert found == [], "ask heterosim.config.network_model.network_model(fidelity) instead"


def test_the_fidelity_check_sees_each_way_of_comparing():
    source = (
        'a = sim.fidelity == "packet"\n'
        'b = args.fidelity != "flow"\n'
        'c = fidelity in ("packet", "flow")\n'
        'd = "flow" == mode\n'
        'e = {"packet": run_packet, "flow": run_fluid}[fidelity]\n'
        'f = sim.intra_host != "packet"\n'  # another setting's value: allowed
        'g = rates["flow"]\n'  # a column name: allowed
        'h = {"flow": 1, "bytes": 2}\n'  # a table, not keyed by every fidelity: allowed
    )
    assert [line.split(":")[0] for line in fidelity_comparisons(source)] == ["1", "2", "3", "4", "5"]
