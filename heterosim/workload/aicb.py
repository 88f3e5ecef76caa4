"""SimAI / AICB workload files -> a HeteroSim experiment mapping.

``read_aicb(path)`` parses the file strictly (the format of the ``example/*.txt`` files of
github.com/aliyun/SimAI): a header line (policy, then ``key: value`` fields), the number of layer
lines, and that many lines of 12 whitespace-separated fields. Anything else is a
:class:`UserError` naming the file and line.

``aicb_experiment(workload)`` turns what the file states into an experiment: parallel sizes from
the header, the model's shape from the communication sizes, the batch from ``ga``. The file
describes one rank's layer list with *its own* compute times; HeteroSim instead times every op
for the GPU that runs it (so one file can drive a heterogeneous cluster). How each value is found
(AICB's Megatron generator conventions; every assumption is listed in the returned notes and
written into the YAML as comments):

- ``tp`` = ``model_parallel_NPU_group``, ``ep``, ``pp``; ``dp = all_gpus / (tp * pp)``.
- layers = layers per pipeline stage x ``pp``. AICB writes the layers per stage into the header's
  ``vpp`` field; when the file lists transformer layers (``attention_column`` lines, one per layer
  per micro-batch pass, passes counted by ``embedding_layer`` lines) that count is used and must
  agree with ``vpp``.
- sequence parallelism: on when ``attention_row`` forward is a REDUCESCATTER (Megatron-SP), off
  when it is an ALLREDUCE (or when the file has no attention lines).
- activation bytes ``A = 2 * micro_batch * seq_len * hidden`` (bf16): from ``pp_comm`` (which
  AICB divides by tp under sequence parallelism), else from the first ``embedding_layer`` forward
  ALLREDUCE (same convention), else from an ``attention_row`` forward ALLREDUCE. ``hidden =
  A / (2 * micro_batch * seq_len)`` with ``seq_len`` (default 4096) and ``micro_batch`` (default
  1) given by the caller, because the file only fixes their product with ``hidden``.
- assumed, not in the file: head dimension 128 (64 when 128 does not fit ``tp``), ``ffn = 4 *
  hidden``, vocabulary 51200, GPT blocks, bf16; MoE (lines with ``_EP`` collectives or
  ``moelayer`` names) with ``top_k`` = ALLTOALL_EP bytes / activation bytes per TP rank and one
  expert per EP rank (at least ``top_k`` experts).
- batch: ``ga`` micro-batches per data-parallel replica, ``global_batch = micro_batch * ga * dp``.
- a ``grad_param_comm`` weight-gradient REDUCESCATTER means Megatron's distributed optimizer;
  ``checkpoints: k > 0`` means activation recompute (``full``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heterosim.config.fields import read_text_file
from heterosim.config.network_model import FLUID, PACKET
from heterosim.errors import UserError

POLICIES = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_TRANSFORMER")
OTHER_POLICIES = (
    "DATA",
    "HYBRID_DLRM",
    "HYBRID_DLRM_ENHANCED",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
    "HYBRID_CUSTOMIZED",
    "MICRO",
)
BASE_COLLECTIVES = ("NONE", "ALLREDUCE", "ALLGATHER", "REDUCESCATTER", "ALLTOALL", "ALLREDUCEALLTOALL")
COLLECTIVES = frozenset(
    [c for c in BASE_COLLECTIVES] + [f"{c}{s}" for c in BASE_COLLECTIVES[1:] for s in ("_EP", "_DP_EP")]
)
IGNORED_COLLECTIVES = frozenset({"BROADCAST"})  # older AICB files; SimAI's loop ignores it
HEADER_INTS = ("model_parallel_NPU_group", "ep", "pp", "vpp", "ga", "all_gpus", "pp_comm", "mode")
DEFAULT_SEQ_LEN = 4096
DEFAULT_MICRO_BATCH = 1
ASSUMED_VOCAB = 51200
FIELDS = 12


@dataclass(frozen=True)
class AicbLine:
    """One layer line (times in ns, sizes in bytes)."""

    line: int  # 1-based line number in the file
    name: str
    fwd_ns: int
    fwd_comm: str
    fwd_bytes: int
    ig_ns: int
    ig_comm: str
    ig_bytes: int
    wg_ns: int
    wg_comm: str
    wg_bytes: int
    update_ns: int


@dataclass(frozen=True)
class AicbWorkload:
    """A parsed AICB file."""

    path: Path
    policy: str
    tp: int
    ep: int
    pp: int
    vpp: int
    ga: int
    all_gpus: int
    pp_comm: int | None
    checkpoints: tuple[int, ...]
    lines: tuple[AicbLine, ...]
    ignored: tuple[str, ...] = field(default_factory=tuple)

    @property
    def dp(self) -> int:
        return self.all_gpus // (self.tp * self.pp)

    def named(self, name: str) -> list[AicbLine]:
        return [ln for ln in self.lines if ln.name == name]


def _int(text: str, where: str, what: str, minimum: int = 0, maximum: int = 1 << 50) -> int:
    """An integer field in ``[minimum, maximum]`` (default up to 2^50: a byte count or time far
    above any layer's, and safe to sum in int64)."""
    try:
        value = int(text) if len(text) <= 30 else None
    except ValueError:
        value = None
    if value is None:
        raise UserError(f"{where}: {what}: expected an integer, got {text[:40]!r}")
    if value < minimum:
        raise UserError(f"{where}: {what}: expected an integer >= {minimum}, got {value}")
    if value > maximum:
        raise UserError(f"{where}: {what}: expected an integer <= {maximum}, got {value}")
    return value


def _parse_header(text: str, where: str) -> tuple[str, dict[str, int], tuple[int, ...]]:
    tokens = text.split()
    if not tokens:
        raise UserError(
            f"{where}: empty header; expected e.g. 'HYBRID_TRANSFORMER_FWD_IN_BCKWD "
            "model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 8 ga: 1 all_gpus: 8 ...'"
        )
    policy = tokens[0]
    if policy in OTHER_POLICIES:
        raise UserError(
            f"{where}: parallelism policy {policy} is not supported: only "
            f"{' and '.join(POLICIES)} (transformer training) can be imported"
        )
    if policy not in POLICIES:
        raise UserError(
            f"{where}: unknown parallelism policy {policy!r}; expected one of "
            f"{', '.join(POLICIES + OTHER_POLICIES)}"
        )
    values: dict[str, int] = {}
    checkpoints: tuple[int, ...] = ()
    i = 1
    while i < len(tokens):
        key = tokens[i].rstrip(":")
        if key in ("checkpoints", "checkpoint_initiates"):
            if i + 1 >= len(tokens):
                raise UserError(f"{where}: {key}: missing its count")
            count = _int(tokens[i + 1], where, key)
            items = tokens[i + 2 : i + 2 + count]
            if len(items) != count:
                raise UserError(f"{where}: {key}: says {count} layers but lists {len(items)}")
            parsed = tuple(_int(t, where, key) for t in items)
            if key == "checkpoints":
                checkpoints = parsed
            i += 2 + count
            continue
        if key not in HEADER_INTS:
            raise UserError(
                f"{where}: unknown header field {tokens[i]!r}; known: "
                f"{', '.join(HEADER_INTS + ('checkpoints', 'checkpoint_initiates'))}"
            )
        if key in values:
            raise UserError(f"{where}: header field {key} given twice")
        if i + 1 >= len(tokens):
            raise UserError(f"{where}: header field {key}: missing its value")
        raw = tokens[i + 1]
        if key == "pp_comm" and raw.endswith(".0"):
            raw = raw[:-2]  # some AICB versions write a float (pp_comm /= tp)
        values[key] = _int(raw, where, key, minimum=0 if key in ("pp_comm", "mode") else 1)
        i += 2
    for key in ("model_parallel_NPU_group", "all_gpus"):
        if key not in values:
            raise UserError(f"{where}: header lacks {key}")
    if values.get("mode", 0) != 0:
        raise UserError(
            f"{where}: mode: {values['mode']} is an inference workload; HeteroSim "
            "imports training iterations only"
        )
    return policy, values, checkpoints


def _comm(text: str, where: str, column: str, ignored: list[str]) -> str:
    if text in IGNORED_COLLECTIVES:
        ignored.append(f"{where}: {column} {text} ignored (SimAI does not simulate it either)")
        return "NONE"
    if text not in COLLECTIVES:
        raise UserError(
            f"{where}: {column}: unknown collective {text!r}; expected NONE or one of "
            f"{', '.join(BASE_COLLECTIVES[1:])} (optionally with _EP or _DP_EP)"
        )
    return text


def _parse_line(text: str, number: int, path: Path, ignored: list[str]) -> AicbLine:
    where = f"{path}:{number}"
    parts = text.split()
    if len(parts) != FIELDS:
        raise UserError(
            f"{where}: expected {FIELDS} fields (name, -1, fwd time, fwd comm, size, "
            f"ig time, ig comm, size, wg time, wg comm, size, update time), "
            f"got {len(parts)}"
        )
    name = parts[0]
    _int(parts[1], where, "placeholder (field 2)", minimum=-1)
    return AicbLine(
        line=number,
        name=name,
        fwd_ns=_int(parts[2], where, "forward_compute_time"),
        fwd_comm=_comm(parts[3], where, "forward_comm", ignored),
        fwd_bytes=_int(parts[4], where, "forward_comm_size"),
        ig_ns=_int(parts[5], where, "backward_compute_time"),
        ig_comm=_comm(parts[6], where, "backward_comm", ignored),
        ig_bytes=_int(parts[7], where, "backward_comm_size"),
        wg_ns=_int(parts[8], where, "dp_compute_time"),
        wg_comm=_comm(parts[9], where, "dp_comm", ignored),
        wg_bytes=_int(parts[10], where, "dp_comm_size"),
        update_ns=_int(parts[11], where, "process_time"),
    )


def read_aicb(path: str | Path) -> AicbWorkload:
    """Parse a SimAI/AICB workload file (strictly; errors name the file and line)."""
    path = Path(path)
    text = read_text_file(path, "AICB workload (plain text)")  # no FIFO, binary or huge file
    raw_lines = text.splitlines()
    while raw_lines and not raw_lines[-1].strip():
        raw_lines.pop()
    if len(raw_lines) < 2:
        raise UserError(f"{path}: expected a header line and a line count, got {len(raw_lines)} line(s)")
    policy, header, checkpoints = _parse_header(raw_lines[0], f"{path}:1")
    count = _int(raw_lines[1].strip(), f"{path}:2", "number of layer lines")
    body = raw_lines[2:]
    if len(body) != count:
        raise UserError(f"{path}:2: says {count} layer lines but {len(body)} follow")
    ignored: list[str] = []
    lines = tuple(_parse_line(t, i + 3, path, ignored) for i, t in enumerate(body))
    tp, pp = header["model_parallel_NPU_group"], header.get("pp", 1)
    all_gpus = header["all_gpus"]
    if all_gpus % (tp * pp):
        raise UserError(
            f"{path}:1: all_gpus {all_gpus} is not divisible by model_parallel_NPU_group*pp = {tp}*{pp}"
        )
    return AicbWorkload(
        path=path,
        policy=policy,
        tp=tp,
        ep=header.get("ep", 1),
        pp=pp,
        vpp=header.get("vpp", 1),
        ga=header.get("ga", 1),
        all_gpus=all_gpus,
        pp_comm=header.get("pp_comm"),
        checkpoints=checkpoints,
        lines=lines,
        ignored=tuple(ignored),
    )


# -- experiment -----------------------------------------------------------------------------------


def _sequence_parallel(w: AicbWorkload) -> bool:
    rows = w.named("attention_row")
    return bool(rows) and rows[0].fwd_comm == "REDUCESCATTER"


def _layers_per_stage(w: AicbWorkload, notes: list[str]) -> int:
    attention = len(w.named("attention_column"))
    passes = len(w.named("embedding_layer"))
    if attention and passes:
        if attention % passes:
            raise UserError(
                f"{w.path}: {attention} attention_column lines do not split evenly "
                f"over {passes} embedding_layer passes"
            )
        per_pass = attention // passes
        if per_pass != w.vpp:
            raise UserError(
                f"{w.path}:1: vpp {w.vpp} (AICB: layers per stage) disagrees with "
                f"the {per_pass} attention_column lines per pass"
            )
        notes.append(
            f"layers: {per_pass} per stage ({attention} attention_column lines over "
            f"{passes} passes; header vpp {w.vpp}) x pp {w.pp}"
        )
        return per_pass
    notes.append(
        f"layers: header vpp {w.vpp} (AICB writes the layers per stage there) x pp "
        f"{w.pp}; the file lists no transformer layers"
    )
    return w.vpp


def _activation_bytes(w: AicbWorkload, sp: bool, notes: list[str]) -> int:
    """2 * micro_batch * seq_len * hidden (bf16 activations of one micro-batch)."""
    scale = w.tp if sp else 1
    if w.pp_comm:
        notes.append(
            f"activation bytes: pp_comm {w.pp_comm}" + (f" x tp {w.tp} (sequence parallel)" if sp else "")
        )
        return w.pp_comm * scale
    embedding = [ln for ln in w.named("embedding_layer") if ln.fwd_comm == "ALLREDUCE" and ln.fwd_bytes]
    if embedding:
        line = embedding[0]
        notes.append(
            f"activation bytes: embedding_layer forward ALLREDUCE {line.fwd_bytes} "
            f"(line {line.line})" + (f" x tp {w.tp}" if sp else "")
        )
        others = sorted({ln.fwd_bytes for ln in embedding} - {line.fwd_bytes})
        if others:
            notes.append(
                f"other embedding_layer ALLREDUCE sizes {others} (one model cannot have "
                "them all): the first line's size is used"
            )
        return line.fwd_bytes * scale
    for line in w.named("attention_row"):
        if line.fwd_comm == "ALLREDUCE" and line.fwd_bytes:
            notes.append(
                f"activation bytes: attention_row forward ALLREDUCE {line.fwd_bytes} (line {line.line})"
            )
            return line.fwd_bytes
    raise UserError(
        f"{w.path}: cannot infer the hidden size: no pp_comm, embedding_layer or "
        "attention_row ALLREDUCE size in the file"
    )


def _heads(hidden: int, tp: int, where: str) -> int:
    for head_dim in (128, 64):
        if hidden % head_dim == 0 and (hidden // head_dim) % tp == 0:
            return hidden // head_dim
    raise UserError(
        f"{where}: hidden {hidden} splits into neither 128- nor 64-wide heads divisible by tp {tp}"
    )


def _moe(w: AicbWorkload, act_rank_bytes: int, ffn: int, notes: list[str]) -> dict | None:
    ep_lines = [
        ln
        for ln in w.lines
        if "moe" in ln.name or any(c.endswith("_EP") for c in (ln.fwd_comm, ln.ig_comm, ln.wg_comm))
    ]
    if not ep_lines and w.ep == 1:
        return None
    top_k = 0
    for line in w.lines:
        if line.fwd_comm == "ALLTOALL_EP" and line.fwd_bytes and act_rank_bytes:
            ratio = line.fwd_bytes / act_rank_bytes
            if ratio >= 1 and math.isclose(ratio, round(ratio)):
                top_k = round(ratio)
                notes.append(
                    f"moe top_k {top_k}: ALLTOALL_EP {line.fwd_bytes} bytes (line "
                    f"{line.line}) / {act_rank_bytes} activation bytes per TP rank"
                )
            break
    if not top_k:
        top_k = 2
        notes.append("moe top_k 2: assumed (no ALLTOALL_EP size to read it from)")
    experts = w.ep * -(-top_k // w.ep)
    notes.append(
        f"moe experts {experts}: assumed, one per EP rank (ep {w.ep}), at least top_k; expert_ffn = ffn {ffn}"
    )
    return {"experts": experts, "top_k": top_k, "expert_ffn": ffn}


def _model(w: AicbWorkload, sp: bool, seq_len: int, micro_batch: int, notes: list[str]) -> dict[str, Any]:
    """The experiment's ``model``: hidden from the activation bytes, layers from the stages, the
    rest assumed (GPT blocks, 4 x hidden FFN, :data:`ASSUMED_VOCAB`), MoE from the expert lines."""
    where = str(w.path)
    per_stage = _layers_per_stage(w, notes)
    act = _activation_bytes(w, sp, notes)
    denom = 2 * micro_batch * seq_len
    if act % denom:
        raise UserError(
            f"{where}: activation bytes {act} are not a multiple of 2*micro_batch*"
            f"seq_len = {denom}: pass the --seq-len/--micro-batch the file was "
            "generated with"
        )
    hidden = act // denom
    notes.append(
        f"hidden {hidden} = activation bytes / (2 * micro_batch {micro_batch} * seq_len "
        f"{seq_len}) (seq_len and micro_batch are not in the file)"
    )
    heads = _heads(hidden, w.tp, where)
    ffn = 4 * hidden
    notes.append(
        f"assumed: heads {heads} (head dim {hidden // heads}), ffn {ffn} = 4*hidden, "
        f"vocab {ASSUMED_VOCAB}, GPT blocks, bf16"
    )
    model: dict[str, Any] = {
        "name": f"aicb-{w.path.stem}",
        "arch": "gpt",
        "hidden": hidden,
        "layers": per_stage * w.pp,
        "heads": heads,
        "kv_heads": heads,
        "ffn": ffn,
        "vocab": ASSUMED_VOCAB,
        "seq": seq_len,
    }
    moe = _moe(w, act // (w.tp if sp else 1), ffn, notes)
    if moe is not None:
        model["moe"] = moe
    return model


def _parallel(w: AicbWorkload, sp: bool, notes: list[str]) -> dict[str, Any]:
    """The experiment's ``parallel``: the file's sizes, 1F1B, and a distributed optimizer where
    the gradients are reduce-scattered."""
    distributed = any(ln.name == "grad_param_comm" and ln.wg_comm == "REDUCESCATTER" for ln in w.lines)
    if distributed:
        notes.append("distributed optimizer: grad_param_comm is a REDUCESCATTER")
    parallel: dict[str, Any] = {
        "tp": w.tp,
        "pp": w.pp,
        "dp": w.dp,
        "schedule": "1f1b",
        "sequence_parallel": sp,
    }
    if w.ep > 1:
        parallel["ep"] = w.ep
    if distributed:
        parallel["distributed_optimizer"] = True
    return parallel


def aicb_experiment(
    w: AicbWorkload,
    *,
    seq_len: int = DEFAULT_SEQ_LEN,
    micro_batch: int = DEFAULT_MICRO_BATCH,
    cluster: Any = None,
) -> tuple[dict[str, Any], list[str]]:
    """(experiment mapping, notes on how each value was found). ``cluster``: path or mapping."""
    notes: list[str] = []
    sp = _sequence_parallel(w)
    model = _model(w, sp, seq_len, micro_batch, notes)
    parallel = _parallel(w, sp, notes)
    notes.append(
        f"batch: ga {w.ga} micro-batches per replica x dp {w.dp} x micro_batch "
        f"{micro_batch}; schedule 1f1b (SimAI does not simulate the pipeline schedule)"
    )
    fwd = sum(ln.fwd_ns for ln in w.lines)
    bwd = sum(ln.ig_ns + ln.wg_ns for ln in w.lines)
    notes.append(
        f"the file's own compute times (forward {fwd / 1e6:.3f} ms, backward "
        f"{bwd / 1e6:.3f} ms per rank) are not used: HeteroSim times ops per GPU"
    )
    notes.extend(w.ignored)
    experiment: dict[str, Any] = {
        "name": f"aicb-{w.path.stem}",
        "model": model,
        "training": {
            "global_batch": micro_batch * w.ga * w.dp,
            "micro_batch": micro_batch,
            "seq_len": seq_len,
            "dtype": "bf16",
            "recompute": "full" if w.checkpoints else "none",
        },
        "parallel": parallel,
        "cluster": cluster if cluster is not None else default_cluster(w.all_gpus),
        "network": {"cc": "dcqcn", "mtu": "4KiB", "pfc": True},
        "simulation": {"fidelity": (PACKET if w.all_gpus <= 64 else FLUID).name, "seed": 1},
    }
    return experiment, notes


def default_cluster(gpus: int) -> dict[str, Any]:
    """A homogeneous H100 cluster of ``gpus`` GPUs, 8 per NVSwitch host, 400G NIC per GPU."""
    per_host = 8 if gpus % 8 == 0 else gpus
    return {
        "name": f"h100-{gpus}gpu",
        "host_types": {
            "h100": {
                "gpu": "H100-SXM",
                "gpus": per_host,
                "fabric": "nvswitch",
                "nics": per_host,
                "nic_speed": "400Gbps",
            }
        },
        "hosts": [{"type": "h100", "count": gpus // per_host}],
        "fabric": {"kind": "rail-optimized", "link_delay": "1us", "oversubscription": 1},
    }


__all__ = ["AicbLine", "AicbWorkload", "aicb_experiment", "default_cluster", "read_aicb"]
