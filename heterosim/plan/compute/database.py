"""The operation database: measured op times per GPU, stored in SQLite.

Why SQLite (Python's ``sqlite3``): one self-describing file per profile that needs no extra
dependency, can be appended to by later profiler runs, inspected with the ``sqlite3`` shell, and
carries its own provenance tables. A database holds thousands of rows, not millions, and the
compute model reads each one once into memory, so a columnar format would buy nothing.

Tables:

- ``measurements``: gpu, op_kind, dtype, pass (fwd | bwd | fwd+bwd), shape s0..s3 and e0..e1
  (meaning per op kind as in :data:`heterosim.workload.trace.OP_KINDS`), flops, bytes_moved,
  time_ns (median), source (``profiler`` or ``publication``), citation, run_id.
- ``runs``: one row per profiler run: device and GPU label, driver, torch and CUDA versions,
  repeats, L2 flush, time of the run, a note (e.g. "CPU timings are not GPU timings") and the
  timing ``method`` (``sustained``: back to back at the power-limited clock, the default;
  ``burst``: one call at a time with idle gaps; empty for databases written before the column).
- ``layers``: whole transformer layers timed by :mod:`heterosim.plan.compute.layer_profiler`:
  the layer's dimensions (arch, hidden, heads, kv_heads, ffn, experts, top_k), its shard (tp,
  sequence parallel), the micro-batch and sequence, dtype, mode (eager | compile), forward and
  backward time (ns) and the run it came from.
- ``meta``: schema version.

``pass: fwd+bwd`` rows (published kernel tables that time both passes together) are used to
calibrate efficiency curves only, never as the time of one op. The shipped database is built in
memory from ``data/published_kernels.yaml`` (reviewable text, each row cited by its case id).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from heterosim.catalog.gpus import canonical_gpu_name
from heterosim.errors import UserError
from heterosim.plan.compute.efficiency import attention_forward_flops, attention_impls, published_kernels
from heterosim.plan.compute.efficiency import attention_impl as gpu_attention_impl

SCHEMA_VERSION = "2"
RUN_COLUMNS = ("created", "device", "gpu", "driver", "torch", "cuda", "repeats", "l2_flush", "note", "method")
PASSES = ("fwd", "bwd", "fwd+bwd")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY, created TEXT, device TEXT, gpu TEXT, driver TEXT,
    torch TEXT, cuda TEXT, repeats INTEGER, l2_flush INTEGER, note TEXT, method TEXT);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY, gpu TEXT NOT NULL, op_kind TEXT NOT NULL, dtype TEXT NOT NULL,
    pass TEXT NOT NULL, s0 INTEGER NOT NULL, s1 INTEGER NOT NULL, s2 INTEGER NOT NULL,
    s3 INTEGER NOT NULL, e0 INTEGER NOT NULL, e1 INTEGER NOT NULL, flops INTEGER NOT NULL,
    bytes_moved INTEGER NOT NULL, time_ns REAL NOT NULL, source TEXT NOT NULL,
    citation TEXT NOT NULL DEFAULT '', run_id INTEGER REFERENCES runs(run_id));
CREATE INDEX IF NOT EXISTS measurements_key ON measurements (gpu, op_kind, dtype);
CREATE TABLE IF NOT EXISTS layers (
    id INTEGER PRIMARY KEY, gpu TEXT NOT NULL, arch TEXT NOT NULL, hidden INTEGER NOT NULL,
    heads INTEGER NOT NULL, kv_heads INTEGER NOT NULL, ffn INTEGER NOT NULL,
    experts INTEGER NOT NULL, top_k INTEGER NOT NULL, seq INTEGER NOT NULL,
    micro_batch INTEGER NOT NULL, tp INTEGER NOT NULL, sp INTEGER NOT NULL, dtype TEXT NOT NULL,
    mode TEXT NOT NULL, fwd_ns REAL NOT NULL, bwd_ns REAL NOT NULL, label TEXT NOT NULL DEFAULT '',
    run_id INTEGER REFERENCES runs(run_id));
"""


@dataclass(frozen=True)
class Measurement:
    """One measured op time. ``gpu`` is a catalogue name, or a device label (e.g. ``cpu``)."""

    gpu: str
    op_kind: str
    dtype: str
    pass_: str
    shape: tuple[int, int, int, int]
    shape_extra: tuple[int, int]
    flops: int
    bytes_moved: int
    time_ns: float
    source: str
    citation: str = ""


@dataclass(frozen=True)
class LayerMeasurement:
    """One whole transformer layer (one TP shard) timed forward and backward, back to back."""

    gpu: str
    arch: str
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    experts: int  # 0: dense
    top_k: int
    seq: int
    micro_batch: int
    tp: int
    sp: bool
    dtype: str
    mode: str  # eager | compile
    fwd_ns: float
    bwd_ns: float
    label: str = ""


_LAYER_COLUMNS = (
    "gpu",
    "arch",
    "hidden",
    "heads",
    "kv_heads",
    "ffn",
    "experts",
    "top_k",
    "seq",
    "micro_batch",
    "tp",
    "sp",
    "dtype",
    "mode",
    "fwd_ns",
    "bwd_ns",
    "label",
)


def _layer_row(row: tuple) -> LayerMeasurement:
    g, arch, hidden, heads, kv, ffn, experts, top_k, seq, mb, tp, sp, dtype, mode, fwd, bwd, label = row
    return LayerMeasurement(
        device_label(g),
        arch,
        hidden,
        heads,
        kv,
        ffn,
        experts,
        top_k,
        seq,
        mb,
        tp,
        bool(sp),
        dtype,
        mode,
        fwd,
        bwd,
        label,
    )


def _writable(path: Path) -> bool:
    import os

    return os.access(path, os.W_OK)


def device_label(name: str) -> str:
    """Catalogue name for a GPU, or the label itself (lower case) for other devices."""
    return canonical_gpu_name(name) or str(name).strip().lower()


class OpDatabase:
    """One SQLite database of measurements (a file, or in memory when ``path`` is None)."""

    def __init__(self, path: str | Path | None = None, *, create: bool = False) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is not None and not create and not self.path.is_file():
            raise UserError(f"{self.path}: no such operation database")
        try:
            self._conn = sqlite3.connect(str(self.path) if self.path else ":memory:")
            if create or self.path is None:
                self._conn.executescript(_SCHEMA)
                self._conn.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
                )
                self._conn.commit()
            else:
                self._conn.execute("SELECT gpu, op_kind, time_ns FROM measurements LIMIT 1")
            self._upgrade()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path}: not a HeteroSim operation database ({exc})") from None

    @property
    def name(self) -> str:
        return str(self.path) if self.path else "<shipped>"

    def close(self) -> None:
        self._conn.close()

    def _upgrade(self) -> None:
        """Bring a schema-1 database (no ``runs.method``, no ``layers``) to this schema in place."""
        has = {row[1] for row in self._conn.execute("PRAGMA table_info(runs)")}
        if has and "method" not in has:
            if self.path is not None and not _writable(self.path):
                return  # read-only: method reads as missing
            self._conn.execute("ALTER TABLE runs ADD COLUMN method TEXT")
        if self.path is None or _writable(self.path):
            self._conn.executescript(_SCHEMA)
            self._conn.commit()

    def add_run(self, **tags: object) -> int:
        """Record a profiler run and return its id (keys: the ``runs`` columns)."""
        columns = RUN_COLUMNS
        values = tuple(tags.get(c) for c in columns)
        cur = self._conn.execute(
            f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", values
        )
        self._conn.commit()
        assert cur.lastrowid is not None  # an INSERT always sets it
        return int(cur.lastrowid)

    def add(self, rows: Iterable[Measurement], run_id: int | None = None) -> int:
        """Append measurements; returns how many were written."""
        records = []
        for r in rows:
            if r.pass_ not in PASSES:
                raise ValueError(f"pass must be one of {PASSES}, got {r.pass_!r}")
            records.append(
                (
                    device_label(r.gpu),
                    r.op_kind,
                    r.dtype,
                    r.pass_,
                    *map(int, r.shape),
                    *map(int, r.shape_extra),
                    int(r.flops),
                    int(r.bytes_moved),
                    float(r.time_ns),
                    r.source,
                    r.citation,
                    run_id,
                )
            )
        self._conn.executemany(
            "INSERT INTO measurements (gpu, op_kind, dtype, pass, s0, s1, s2, s3, e0, e1, flops,"
            " bytes_moved, time_ns, source, citation, run_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            records,
        )
        self._conn.commit()
        return len(records)

    def measurements(self) -> list[Measurement]:
        cur = self._conn.execute(
            "SELECT gpu, op_kind, dtype, pass, s0, s1, s2, s3, e0, e1, flops, bytes_moved,"
            " time_ns, source, citation FROM measurements ORDER BY id"
        )
        return [
            Measurement(device_label(g), k, d, p, (a, b, c, e), (x, y), f, by, t, src, cit)
            for g, k, d, p, a, b, c, e, x, y, f, by, t, src, cit in cur
        ]

    def add_layers(self, rows: Iterable[LayerMeasurement], run_id: int | None = None) -> int:
        """Append whole-layer measurements; returns how many were written."""
        records = [
            (
                device_label(r.gpu),
                r.arch,
                r.hidden,
                r.heads,
                r.kv_heads,
                r.ffn,
                r.experts,
                r.top_k,
                r.seq,
                r.micro_batch,
                r.tp,
                int(r.sp),
                r.dtype,
                r.mode,
                float(r.fwd_ns),
                float(r.bwd_ns),
                r.label,
                run_id,
            )
            for r in rows
        ]
        self._conn.executemany(
            f"INSERT INTO layers ({', '.join(_LAYER_COLUMNS)}, run_id)"
            f" VALUES ({', '.join('?' * (len(_LAYER_COLUMNS) + 1))})",
            records,
        )
        self._conn.commit()
        return len(records)

    def layers(self) -> list[LayerMeasurement]:
        """Whole-layer measurements (none in a database without the ``layers`` table)."""
        try:
            cur = self._conn.execute(f"SELECT {', '.join(_LAYER_COLUMNS)} FROM layers ORDER BY id")
        except sqlite3.OperationalError:
            return []
        return [_layer_row(row) for row in cur]

    def runs(self) -> list[dict[str, object]]:
        cur = self._conn.execute("SELECT * FROM runs ORDER BY run_id")
        names = [c[0] for c in cur.description]
        return [dict(zip(names, row)) for row in cur]

    @classmethod
    def shipped(cls, attention_impl: str | None = None) -> OpDatabase:
        """The publication measurements shipped with HeteroSim, in an in-memory database
        (``attention_impl``: see :func:`shipped_measurements`)."""
        db = cls(None)
        db.add(shipped_measurements(attention_impl))
        return db


MEASURED_DIR = Path(__file__).parent / "data" / "measured"


def shipped_measured_databases() -> list[Path]:
    """Profiler databases shipped with HeteroSim (``data/measured/*.db``, each described in that
    folder's README.md): ops timed on real GPUs by ``heterosim profile`` (sustained)."""
    return sorted(MEASURED_DIR.glob("*.db"))


def shipped_measurements(attention_impl: str | None = None) -> list[Measurement]:
    """Rows of data/published_kernels.yaml as measurements (attention series only).

    Only the series of the attention kernel each GPU runs are kept: the GPU's ``attention_impl``
    (data/gpu_compute.yaml), or ``attention_impl`` for every GPU when given. Time of one row =
    FLOPs / published TFLOP/s with the source's FLOP formula (forward 4*b*s^2*H*d, halved when
    causal; backward 2.5x; ``fwd+bwd`` 3.5x forward).
    """
    known = attention_impls()
    if attention_impl is not None and attention_impl not in known:
        raise UserError(
            f"unknown attention implementation {attention_impl!r}; known: {', '.join(sorted(known))}"
        )
    rows: list[Measurement] = []
    for series in published_kernels()["attention"]:
        if series["impl"] != (attention_impl or gpu_attention_impl(series["gpu"])):
            continue
        causal = bool(series["causal"])
        heads, head_dim = int(series["heads"]), int(series["head_dim"])
        factor = {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}[series["pass"]]
        for seq, batch, tflops in zip(series["seq_len"], series["batch"], series["tflops"]):
            if tflops is None:
                continue
            fwd = attention_forward_flops(batch, seq, heads, head_dim, causal)
            flops = fwd * factor
            bytes_moved = 4 * batch * seq * heads * head_dim * 2  # q, k, v, o in 16 bit
            rows.append(
                Measurement(
                    gpu=series["gpu"],
                    op_kind="attention",
                    dtype=series["dtype"],
                    pass_=series["pass"],
                    shape=(batch, seq, heads, head_dim),
                    shape_extra=(heads, int(causal)),
                    flops=int(flops),
                    bytes_moved=bytes_moved,
                    time_ns=flops / (float(tflops) * 1e12) * 1e9,
                    source="publication",
                    citation=(
                        f"{series['case']}: {series['source']}"
                        if "source" in series
                        else f"validation case {series['case']}"
                    ),
                )
            )
    return rows
