"""A seeded generator of malformed and extreme inputs for every command and file format.

Each :class:`Case` is a command line plus the files it reads, written into a fresh folder. The
bases are small valid inputs (the tiny 16-GPU experiment, a two-host cluster, a one-flow netbench
scenario, a two-variant sweep, a validation case, four Chakra traces with their comm groups, an
AICB workload); every case breaks one thing in one of them: a number replaced by an infinite,
NaN, negative, enormous or wrongly typed value, a document made an alias bomb or nested thousands
deep, a file replaced by a FIFO, a folder, binary data or nothing, a command-line option given a
value it cannot take, an output folder that cannot or must not be written.

``strict`` cases are bad input by construction and must fail with exit status 2; the others
(a key deleted, a byte flipped in a protobuf) may also be valid, and must then run cleanly.
"""

from __future__ import annotations

import copy
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "tests" / "workload" / "data" / "chakra_interop" / "all_reduce_4npus_1MB"
AICB = REPO / "tests" / "data" / "aicb_interop" / "microAllReduce.txt"


@dataclass
class Case:
    """One command line and the files it needs (paths relative to the case folder)."""

    name: str
    argv: list[str]
    files: dict[str, str | bytes] = field(default_factory=dict)
    fifos: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    strict: bool = True  # bad by construction: must exit 2
    out: str | None = "out"  # an output path that must not appear when the command fails
    keep: dict[str, str] = field(default_factory=dict)  # user files that must survive unchanged
    timeout_s: float = 90.0


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def base_documents() -> dict[str, Any]:
    """The valid inputs every case starts from (as Python data)."""
    experiment = _load(REPO / "tests" / "data" / "tiny_experiment.yaml")
    experiment["cluster"] = "cluster.yaml"
    experiment["simulation"] = {"fidelity": "flow", "seed": 1}
    cluster = _load(REPO / "topologies" / "mixed_16gpu.yaml")
    scenario = _load(REPO / "workloads" / "netbench" / "single_flow.yaml")
    scenario["cluster"] = str(REPO / "topologies" / "two_leaf_8hosts.yaml")
    scenario["simulation"] = {"stop": "20ms", "sample_interval": "20us", "seed": 1, "fidelity": "flow"}
    sweep = {
        "name": "fuzz",
        "experiment": "experiment.yaml",
        "fidelity": "flow",
        "grid": {"simulation.seed": [1, 2]},
    }
    cases = {"cases": [_load(REPO / "validation" / "cases.yaml")["cases"][0]]}
    return {
        "experiment.yaml": experiment,
        "cluster.yaml": cluster,
        "scenario.yaml": scenario,
        "sweep.yaml": sweep,
        "cases.yaml": cases,
    }


def _base_files(docs: dict[str, Any]) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {name: _yaml(doc) for name, doc in docs.items()}
    files["cluster4.yaml"] = (REPO / "tests" / "data" / "byo" / "cluster_4gpu.yaml").read_text()
    for path in sorted(TRACES.glob("*.et")):
        files[f"traces/{path.name}"] = path.read_bytes()
    files["workload.txt"] = AICB.read_text()
    return files


COMMANDS: dict[str, list[str]] = {
    "experiment.yaml": ["run", "experiment.yaml", "--out", "out", "--no-plots", "--quiet"],
    "cluster.yaml": ["run", "experiment.yaml", "--out", "out", "--no-plots", "--quiet"],
    "scenario.yaml": ["netbench", "scenario.yaml", "--out", "out"],
    "sweep.yaml": ["sweep", "sweep.yaml", "--out", "out", "--no-plots", "--quiet", "--workers", "1"],
    "cases.yaml": ["validate", "cases.yaml", "--max-gpus", "1", "--out", "out"],
}
ALT_COMMANDS: dict[str, list[list[str]]] = {
    "experiment.yaml": [
        ["workload", "experiment.yaml", "--out", "out", "--summary-only"],
        [
            "compare",
            "experiment.yaml",
            "--variant",
            "a:simulation.seed=1",
            "--variant",
            "b:simulation.seed=2",
            "--out",
            "out",
            "--no-plots",
        ],
    ],
    "cluster.yaml": [
        ["collective", "--cluster", "cluster.yaml", "--size", "1MiB", "--ranks", "0-3", "--out", "out"]
    ],
}


def _overridden_keys(argv: list[str]) -> set[str]:
    """Dotted keys a command line sets itself (``--variant NAME:KEY=VALUE``, ``--set KEY=VALUE``)."""
    keys = set()
    for flag, value in zip(argv, argv[1:]):
        if flag in ("--variant", "--set"):
            setting = value.split(":", 1)[1] if flag == "--variant" else value
            keys.add(setting.split("=", 1)[0])
    return keys


# Values no numeric key accepts: infinite, NaN, too large for any range, negative, wrong type.
BAD_NUMBERS: list[Any] = [
    float("inf"),
    float("-inf"),
    float("nan"),
    "1e400",
    2**70,
    -1,
    -(2**63),
    "abc",
    [1, 2],
    {"k": 1},
    True,
    "",
    "1e999GiB",
    "-5us",
    "inf",
    "NaN",
    1e300,
    "0x10",
    "12 34",
]
ALIAS_BOMB = """\
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
"""


def _is_number_leaf(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, str):
        head = value.strip()[:1]
        return head.isdigit() and any(c.isalpha() for c in value) and len(value) < 16
    return False


def _leaves(node: Any, path: tuple = ()) -> list[tuple]:
    """Paths to every leaf (mapping keys and list indices)."""
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_leaves(value, (*path, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.extend(_leaves(value, (*path, i)))
    else:
        out.append(path)
    return out


def _mappings(node: Any, path: tuple = ()) -> list[tuple]:
    out = [path] if isinstance(node, dict) else []
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_mappings(value, (*path, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.extend(_mappings(value, (*path, i)))
    return out


def _get(node: Any, path: tuple) -> Any:
    for part in path:
        node = node[part]
    return node


def _set(node: Any, path: tuple, value: Any) -> None:
    _get(node, path[:-1])[path[-1]] = value


def _yaml_value(value: Any) -> str:
    """A value as YAML text, with YAML's own spelling of inf and NaN."""
    if isinstance(value, float) and value != value:
        return ".nan"
    if value == float("inf"):
        return ".inf"
    if value == float("-inf"):
        return "-.inf"
    return json.dumps(value)


def _dump_with(doc: Any, path: tuple, value: Any) -> str:
    """``doc`` with the leaf at ``path`` replaced by ``value``, as YAML text (inf/NaN kept)."""
    marker = "__FUZZ_VALUE__"
    copy_doc = copy.deepcopy(doc)
    _set(copy_doc, path, marker)
    return _yaml(copy_doc).replace(f"{marker}", _yaml_value(value), 1)


def _deep(levels: int) -> str:
    return "a: " + "[" * levels + "]" * levels + "\n"


class Generator:
    """Cases drawn from a seeded stream; the same seed gives the same cases."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.docs = base_documents()
        self.files = _base_files(self.docs)
        self.counter = 0

    def _case(
        self,
        kind: str,
        argv: list[str],
        changed: dict[str, str | bytes] | None = None,
        files_removed: str | None = None,
        **kwargs: Any,
    ) -> Case:
        self.counter += 1
        files = dict(self.files)
        files.update(changed or {})
        files.pop(files_removed, None)
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{self.counter:04d}-{kind}")[:100]
        return Case(name=name, argv=list(argv), files=files, **kwargs)

    def _command(self, target: str) -> list[str]:
        options = [COMMANDS[target], *ALT_COMMANDS.get(target, [])]
        weights = [4] + [1] * (len(options) - 1)
        return list(self.rng.choices(options, weights)[0])

    # --- families -------------------------------------------------------------------------

    def bad_number(self) -> Case:
        target = self.rng.choice([t for t in self.docs if t != "sweep.yaml"])
        doc = self.docs[target]
        argv = self._command(target)
        overridden = _overridden_keys(argv)  # a --variant / --set value replaces the file's
        leaves = [
            p
            for p in _leaves(doc)
            if _is_number_leaf(_get(doc, p)) and ".".join(map(str, p)) not in overridden
        ]
        path = self.rng.choice(leaves)
        value = self.rng.choice(BAD_NUMBERS)
        # in a validation case only the experiment and the measured values are read as numbers
        strict = target != "cases.yaml" or path[2:3] in (("experiment",), ("measured",))
        return self._case(
            f"number-{target}-{'.'.join(map(str, path))}",
            argv,
            {target: _dump_with(doc, path, value)},
            strict=strict,
        )

    def document(self) -> Case:
        target = self.rng.choice(list(self.docs))
        kind = self.rng.choice(
            [
                "bomb",
                "deep",
                "binary",
                "empty",
                "list",
                "fifo",
                "folder",
                "latin1",
                "tabs",
                "bomb-value",
                "huge-int",
            ]
        )
        argv = self._command(target)
        if kind == "fifo":
            return self._case(f"doc-fifo-{target}", argv, fifos=(target,), timeout_s=30, files_removed=target)
        if kind == "folder":
            return self._case(f"doc-folder-{target}", argv, folders=(target,), files_removed=target)
        text: str | bytes = {
            "bomb": ALIAS_BOMB,
            "deep": _deep(self.rng.choice([100, 1000, 5000, 50_000])),
            "binary": bytes(self.rng.randrange(256) for _ in range(self.rng.choice([1, 64, 4096]))),
            "empty": "",
            "list": "- 1\n- 2\n",
            "latin1": "name: caf\xe9\n".encode("latin-1"),
            "tabs": "name:\tx\n\tmodel: y\n",
            "bomb-value": _yaml(self.docs[target]) + "zz: " + ALIAS_BOMB.replace("\n", "\n  ")[:-2],
            "huge-int": _yaml(self.docs[target]).replace("seed: 1", "seed: " + "9" * 5000, 1)
            if "seed: 1" in _yaml(self.docs[target])
            else "x: " + "9" * 5000 + "\n",
        }[kind]
        return self._case(f"doc-{kind}-{target}", argv, {target: text})

    def unknown_key(self) -> Case:
        target = self.rng.choice(["experiment.yaml", "cluster.yaml", "scenario.yaml", "sweep.yaml"])
        doc = copy.deepcopy(self.docs[target])
        path = self.rng.choice(_mappings(doc))
        _get(doc, path)["zz_unknown_key"] = 1
        return self._case(
            f"unknown-{target}-{'.'.join(map(str, path))}", self._command(target), {target: _yaml(doc)}
        )

    def structure(self) -> Case:
        target = self.rng.choice(list(self.docs))
        doc = copy.deepcopy(self.docs[target])
        paths = [p for p in _leaves(doc) + _mappings(doc) if p]
        path = self.rng.choice(paths)
        action = self.rng.choice(["delete", "scalar", "list", "null"])
        if action == "delete":
            parent = _get(doc, path[:-1])
            if isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent.pop(path[-1])
        else:
            _set(doc, path, {"scalar": "x", "list": [], "null": None}[action])
        return self._case(
            f"structure-{action}-{target}-{'.'.join(map(str, path))}",
            self._command(target),
            {target: _yaml(doc)},
            strict=False,
        )

    def set_value(self) -> Case:
        doc = self.docs["experiment.yaml"]
        leaves = [
            p for p in _leaves(doc) if _is_number_leaf(_get(doc, p)) and all(isinstance(x, str) for x in p)
        ]
        path = self.rng.choice(leaves)
        value = self.rng.choice(
            [
                ".inf",
                ".nan",
                "1e400",
                "-1",
                str(2**70),
                "abc",
                "[1]",
                "{a: 1}",
                "1e999GiB",
                "&a [*a]",
                "[" * 3000,
            ]
        )
        argv = [*COMMANDS["experiment.yaml"], "--set", f"{'.'.join(path)}={value}"]
        return self._case(f"set-{'.'.join(path)}", argv)

    def set_malformed(self) -> Case:
        item = self.rng.choice(
            [
                "novalue",
                "=1",
                "model.hidden.x=1",
                "a..b=1",
                "network=3",
                "simulation.seed=1e400",
                "training.global_batch=1000000000000",
                "model.layers=1000000",
                "network.channels=100000",
                "network.attributes={EcnKmn: 1}",
                "network.attributes={EcnKmin: abc}",
                "network.attributes={Dcqcn::RateAi: 1e-30bps}",
                "cluster.host_types.h100.nic_speed=1e-30bps",
                "simulation.sample_interval=1ns",
                "network.dp_bucket=0",
                "parallel.dp_bucket=0",
                "parallel.tp_backward_overlap=sometimes",
                "parallel.tp_backward_overlap=[1]",
                "simulation.seed=4294967296",
                "model=" + ALIAS_BOMB.replace("\n", " "),
            ]
        )
        argv = [*COMMANDS["experiment.yaml"], "--set", item]
        return self._case("set-malformed", argv)

    def option(self) -> Case:
        base, flag, values = self.rng.choice(OPTION_TABLE)
        value = self.rng.choice(values)
        argv = [*base]
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
        return self._case(f"option-{argv[0]}-{flag}", argv)

    def flag_shape(self) -> Case:
        argv = self.rng.choice(
            [
                ["run", "--bogus"],
                ["run", "experiment.yaml", "--fidelity"],
                ["collective"],
                ["netbench"],
                ["run", "experiment.yaml", "--fidelity", "quantum"],
                ["sweep", "sweep.yaml", "--workers", "two"],
                ["nosuchcommand"],
                ["trace", "show"],
                ["import", "csv", "workload.txt"],
                ["validate", "cases.yaml", "--ci", "x"],
                ["collective", "--cluster", "cluster.yaml", "--channels", "1.5"],
                ["run", "experiment.yaml", "--out"],
                ["workload"],
            ]
        )
        return self._case("flags", argv)

    def output(self) -> Case:
        command = self.rng.choice(
            [
                ["run", "experiment.yaml", "--no-plots", "--quiet", "--out"],
                ["workload", "experiment.yaml", "--summary-only", "--out"],
                ["collective", "--cluster", "cluster.yaml", "--size", "1MiB", "--ranks", "0-3", "--out"],
                ["netbench", "scenario.yaml", "--out"],
                ["sweep", "sweep.yaml", "--no-plots", "--quiet", "--workers", "1", "--out"],
                ["validate", "cases.yaml", "--max-gpus", "1", "--out"],
                ["import", "aicb", "workload.txt", "--out"],
                ["profile", "--experiment", "experiment.yaml", "--out"],
            ]
        )
        where = self.rng.choice(
            [
                ".",
                "users",
                "/proc/hsfuzz-out",
                "/sys/hsfuzz-out",
                "notes.txt/sub",
                "x" * 300,
                "/dev/full/x",
                "",
                "users/../users",
            ]
        )
        files = {"notes.txt": "mine\n", "users/thesis.tex": "\\chapter{x}\n"}
        keep = {"notes.txt": "mine\n", "users/thesis.tex": "\\chapter{x}\n"}
        if command[0] in ("validate", "import") and where in ("users", "users/../users", "."):
            where = "users"
        return self._case(f"out-{command[0]}-{where[:20]}", [*command, where], files, out=None, keep=keep)

    def traces(self) -> Case:
        names = sorted(k for k in self.files if k.startswith("traces/"))
        target = self.rng.choice(names)
        data = bytearray(self.files[target])
        action = self.rng.choice(
            [
                "truncate",
                "flip",
                "zeros",
                "empty",
                "group-binary",
                "group-types",
                "group-huge",
                "missing-rank",
                "gap-rank",
                "text",
            ]
        )
        changed: dict[str, str | bytes] = {}
        strict = action in ("zeros", "group-binary", "group-types", "group-huge", "gap-rank", "text")
        if action == "truncate":
            changed[target] = bytes(data[: self.rng.randrange(1, len(data))])
        elif action == "flip":
            for _ in range(self.rng.choice([1, 4, 16])):
                i = self.rng.randrange(len(data))
                data[i] ^= 1 << self.rng.randrange(8)
            changed[target] = bytes(data)
        elif action == "zeros":
            changed[target] = b"\xff" * len(data)
        elif action == "empty":
            changed[target] = b""
        elif action == "group-binary":
            changed["traces/comm_group.json"] = bytes(range(256))
        elif action == "group-types":
            changed["traces/comm_group.json"] = json.dumps({"1": "0,1", "x": [0, 1.5]})
        elif action == "group-huge":
            changed["traces/comm_group.json"] = json.dumps({"1": [0, 1, 2, 3, 10**20]})
        elif action == "gap-rank":
            changed["traces/all_reduce.9.et"] = bytes(data)
        elif action == "text":
            changed[target] = "not a protobuf at all\n" * 10
        case = self._case(
            f"trace-{action}",
            [
                *self.rng.choice(
                    [
                        [
                            "run",
                            "--traces",
                            "traces",
                            "--cluster",
                            "cluster4.yaml",
                            "--fidelity",
                            "flow",
                            "--no-plots",
                            "--quiet",
                            "--out",
                            "out",
                        ],
                        ["trace", "show", target],
                    ]
                )
            ],
            changed,
            strict=strict,
        )
        if action == "missing-rank":
            del case.files[target]
            case.strict = True
        if case.argv[0] == "trace":
            case.out = None
            if action in ("group-binary", "group-types", "group-huge", "gap-rank", "missing-rank"):
                case.strict = False  # `trace show` reads one file only
        return case

    def aicb(self) -> Case:
        lines = self.files["workload.txt"].splitlines()
        action = self.rng.choice(["field", "truncate", "binary", "empty", "count"])
        strict = action in ("binary", "empty", "count")
        if action == "field":
            row = self.rng.randrange(2, len(lines))
            fields = lines[row].split()
            i = self.rng.randrange(1, len(fields))
            fields[i] = self.rng.choice(["nan", "-1", "1e400", "abc", str(2**70), "inf"])
            lines[row] = " ".join(fields)
            text: str | bytes = "\n".join(lines) + "\n"
        elif action == "truncate":
            text = "\n".join(lines[: self.rng.randrange(0, len(lines))]) + "\n"
        elif action == "binary":
            text = bytes(range(256)) * 4
        elif action == "empty":
            text = ""
        else:
            lines[1] = self.rng.choice(["-5", "1000000000", "x", "1e400"])
            text = "\n".join(lines) + "\n"
        argv = self.rng.choice(
            [
                ["import", "aicb", "workload.txt", "--out", "imported.yaml"],
                ["import", "aicb", "workload.txt", "--seq-len", "-1"],
            ]
        )
        return self._case(
            f"aicb-{action}", argv, {"workload.txt": text}, strict=strict or "-1" in argv, out="imported.yaml"
        )

    def scenario_extreme(self) -> Case:
        doc = copy.deepcopy(self.docs["scenario.yaml"])
        change = self.rng.choice(
            [
                ("pattern", {"kind": "incast", "senders": "0-10000000", "receiver": 4, "size": "1MiB"}),
                ("pattern", {"kind": "one-to-one", "senders": [0], "receiver": 4, "size": "8e18B"}),
                ("pattern", {"kind": "one-to-one", "senders": [0], "receiver": 4, "size": "1000PB"}),
                ("pattern", {"kind": "one-to-one", "senders": [0], "receiver": 0, "size": "1MiB"}),
                ("simulation", {"stop": "1e30s", "fidelity": "flow"}),
                ("simulation", {"stop": "20ms", "sample_interval": "1ns", "fidelity": "flow"}),
                ("simulation", {"stop": "20ms", "seed": 2**70, "fidelity": "flow"}),
                ("network", {"buffer": "1e400B"}),
                ("network", {"mtu": ".inf"}),
                ("network", {"attributes": {"EcnKmin": "1e400"}}),
                ("network", {"attributes": {"Dcqcn::AlphaUpdateInterval": "soon"}}),
                ("flows", [{"src": 0, "dst": 4, "size": "1MiB", "start": "-1us"}]),
                ("compare_cc", ["dcqcn", "warp"]),
            ]
        )
        doc[change[0]] = change[1]
        if change[0] == "flows":
            doc.pop("pattern", None)
        return self._case(f"scenario-{change[0]}", COMMANDS["scenario.yaml"], {"scenario.yaml": _yaml(doc)})

    def sweep_extreme(self) -> Case:
        doc = copy.deepcopy(self.docs["sweep.yaml"])
        change = self.rng.choice(
            [
                ("name", "../../../x"),
                ("name", "/tmp/hsfuzz-abs"),
                ("name", ""),
                ("name", ["x"]),
                (
                    "grid",
                    {
                        "simulation.seed": list(range(200)),
                        "network.cc": ["dcqcn", "hpcc"],
                        "network.mtu": ["1KiB", "2KiB", "4KiB"],
                        "network.ecmp": [True, False],
                        "training.micro_batch": [1, 2, 4, 8, 16, 32, 64],
                    },
                ),
                ("grid", {"simulation.seed": []}),
                ("grid", {"bogus.key": [1]}),
                ("grid", {"simulation.seed": [1, 1]}),
                ("workers", 0),
                ("max_variants", -1),
                ("experiment", "/nonexistent.yaml"),
                ("fidelity", "quantum"),
            ]
        )
        doc[change[0]] = change[1]
        return self._case(f"sweep-{change[0]}", COMMANDS["sweep.yaml"], {"sweep.yaml": _yaml(doc)})

    def faults_jobs(self) -> Case:
        doc = copy.deepcopy(self.docs["experiment.yaml"])
        change = self.rng.choice(
            [
                ("faults", [{"at": ".inf", "gpu": 0, "slowdown": 1.3}]),
                ("faults", [{"at": "5ms", "link": "no-such-link", "down": "2ms"}]),
                ("faults", [{"at": "0ms", "gpu": 0, "slowdown": float("inf")}]),
                ("faults", [{"at": "0ms", "gpu": 0, "slowdown": 0}]),
                ("faults", [{"at": "0ms", "gpu": 99999, "slowdown": 2}]),
                ("faults", [{"at": "-1ms", "gpu": 0, "slowdown": 2}]),
                ("faults", [{"at": "0ms", "gpu": 0, "slowdown": float("nan")}]),
                ("faults", "everything"),
                ("jobs", [{"experiment": "experiment.yaml", "gpus": "0-100000000"}]),
                ("jobs", [{"experiment": "experiment.yaml", "gpus": "0-15", "start": "1e400s"}]),
                (
                    "jobs",
                    [
                        {"experiment": "experiment.yaml", "gpus": "0-15"},
                        {"experiment": "experiment.yaml", "gpus": "0-15"},
                    ],
                ),
                ("jobs", []),
                ("jobs", "x"),
            ]
        )
        doc[change[0]] = change[1]
        if change[0] == "jobs":
            for key in ("model", "training", "parallel"):
                doc.pop(key, None)
        return self._case(f"{change[0]}", COMMANDS["experiment.yaml"], {"experiment.yaml": _yaml(doc)})

    FAMILIES = (
        ("bad_number", 30),
        ("document", 12),
        ("unknown_key", 6),
        ("structure", 8),
        ("set_value", 8),
        ("set_malformed", 6),
        ("option", 14),
        ("flag_shape", 3),
        ("output", 8),
        ("traces", 6),
        ("aicb", 4),
        ("scenario_extreme", 5),
        ("sweep_extreme", 4),
        ("faults_jobs", 4),
        ("new_surfaces", 12),
    )

    def new_surfaces(self) -> Case:
        from surfaces import surface_case

        return surface_case(self)

    def cases(self, count: int) -> list[Case]:
        names = [n for n, _ in self.FAMILIES]
        weights = [w for _, w in self.FAMILIES]
        out = []
        for _ in range(count):
            out.append(getattr(self, self.rng.choices(names, weights)[0])())
        return out


_COLLECTIVE = ["collective", "--cluster", "cluster.yaml", "--size", "1MiB", "--ranks", "0-3", "--out", "out"]
OPTION_TABLE: list[tuple[list[str], str, list[str]]] = [
    (
        _COLLECTIVE,
        "--size",
        ["-1KiB", "1e30B", "0", "inf", "1e400GiB", "abc", "1..1e18", "1PiB..2PiB", "2TiB", "8..4", "1e-3B"],
    ),
    (_COLLECTIVE, "--ranks", ["-1,0", "0-100000000", "0,0", "5-2", "x", "0", "0-99", ",", "0--3"]),
    (_COLLECTIVE, "--channels", ["-1", "100000", "65"]),
    (_COLLECTIVE, "--root", ["-1", "99"]),
    (_COLLECTIVE, "--seed", ["-1", "4294967296", str(2**70)]),
    (_COLLECTIVE, "--op", ["allsum", "", "ALLREDUCE!"]),
    (COMMANDS["experiment.yaml"], "--until", ["1e400s", "-1ms", "0ms", "abc", "1e30s", "5", "nanms"]),
    (COMMANDS["experiment.yaml"], "--max-memory", ["abc", "1KiB", "-1GiB", "1MiB"]),
    (COMMANDS["experiment.yaml"], "--db", ["missing.db", "experiment.yaml", "traces"]),
    (COMMANDS["experiment.yaml"], "--fidelity", ["Packet", "fluid"]),
    (COMMANDS["sweep.yaml"], "--workers", ["0", "-3", "1e3"]),
    (COMMANDS["cases.yaml"], "--max-gpus", ["0", "-1"]),
    (COMMANDS["cases.yaml"], "--only", ["no-such-case"]),
    (
        ["workload", "experiment.yaml", "--out", "out", "--summary-only"],
        "--ranks",
        ["-1,0", "99", "0-100000000", "x"],
    ),
    (["workload", "experiment.yaml", "--out", "out", "--summary-only"], "--prefix", ["a/b", "../x"]),
    (["trace", "show", "traces/all_reduce.0.et"], "--limit", ["x", "1e3"]),
    (COMMANDS["scenario.yaml"], "--compare-cc", ["warp", "dcqcn,dcqcn", ""]),
    (["import", "aicb", "workload.txt"], "--micro-batch", ["0", "-4", str(2**70)]),
]
