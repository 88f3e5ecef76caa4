"""Build validation/cases.yaml from the published measurements in ../shared/validation/.

Usage: ``python validation/build_cases.py [CASES_PUBLIC.yaml] [--out validation/cases.yaml]``.

Every selected case keeps its id, source, flags, note and published fields (``published:``); the
simulator experiment it becomes is written beside it (``experiment:``), and every value that the
source does not state (an ``NS`` flag) or that the simulator needs but the source leaves open is
listed in ``assumed:`` with the reason. The choices are the tables below; nothing here is fitted
to a measured number. nccl-tests bus-bandwidth cases come from the network reference (§5.1).
"""

from __future__ import annotations

import argparse
import copy
import functools
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
DEFAULT_PUBLIC = HERE.parent.parent / "shared" / "validation" / "cases_public.yaml"

# Published GPU strings -> catalogue names (heterosim/catalog/gpus.yaml).
GPU = {
    "A100-80GB-SXM": "A100-80GB-SXM",
    "A100-SXM": "A100-40GB-SXM",
    "V100-SXM": "V100-SXM2-32GB",
    "H100-80GB-SXM": "H100-SXM",
}
GPU_WHY = {
    "A100-SXM": "A100 memory not stated; a 2020 DGX-A100 implies 40 GB (note, SEC)",
    "V100-SXM": "V100 memory not stated; compute and NVLink are the same for 16/32 GB",
}

# Cases included, with the values assumed for what the source leaves open. Keys are dotted
# experiment keys; each value is (value, reason).
SELENE = "Selene: 8 x 200 Gb/s HDR per DGX-A100, fat-tree (source §5)"
UNFUSED = (
    "unfused",
    "published before FlashAttention (2022): Megatron-LM core attention ran as "
    "batched QK^T/PV GEMMs with the fused scale-mask-softmax kernel and stored s x s scores",
)
FLASH = ("flash", "Megatron-Core with Transformer Engine runs fused (flash/cuDNN) attention")
README2020 = {
    "training.attention": UNFUSED,
    "training.dtype": ("fp16", "Megatron v1 code base trains in fp16 mixed precision (note)"),
    "training.recompute": (
        "full",
        "Megatron v1 examples use --checkpoint-activations; the 1B A100 "
        "row's 149.8 TFLOP/s equals the SC'21 hardware-FLOP count with recompute",
    ),
    "training.micro_batch": (
        "per-replica batch",
        "Megatron v1 has no gradient accumulation: the batch of one model replica is one micro-batch",
    ),
}
README2020_NET = {
    "network": (
        "8 x 200 Gb/s per host, fat-tree",
        "DGX-A100 standard complement (docs/network_models.md §6.3); not stated by the source",
    )
}
SC21 = {
    "training.attention": UNFUSED,
    "training.dtype": ("fp16", "mixed 16-bit precision; fp16 and bf16 have the same A100 peak"),
    "training.micro_batch": (1, "not stated; the paper's Fig. 16 suggests 1-2"),
    "parallel.sequence_parallel": (False, "SC'21 predates sequence parallelism"),
    "parallel.zero": (0, "no optimizer sharding in SC'21 Megatron-LM"),
}
SC21_PP = {
    "parallel.vpp": (
        "smallest",
        "interleaved 1F1B is stated, the interleave factor is not: the smallest one Megatron-LM "
        "can run, i.e. the smallest v >= 2 dividing layers/pp (arguments.py: "
        "virtual_pipeline_model_parallel_size = (num_layers // pp) // "
        "num_layers_per_virtual_pipeline_stage; transformer.py splits each stage's layers "
        "evenly over its model chunks)",
    ),
    "parallel.p2p_sync": (
        "blocking",
        "Megatron-LM v2 (2021) megatron/p2p_communication.py _communicate: batch_isend_irecv, "
        "req.wait() on every request, then torch.cuda.synchronize() 'to protect against race "
        "condition when using batch_isend_irecv()', unconditionally; the interleaved schedule "
        "issues combined send/receive calls (megatron/schedules.py "
        "forward_backward_pipelining_with_interleaving)",
    ),
    "parallel.p2p_scatter_gather": (
        True,
        "the scatter/gather optimisation of SC'21 §4.1 is stated for the pipeline runs (note); "
        "--scatter-gather-tensors-in-pipeline is on by default in Megatron-LM v2",
    ),
}
SC21_T2 = {
    "training.attention": UNFUSED,
    "training.dtype": ("fp16", "not restated for Table 2; mixed 16-bit as in Table 1"),
    "training.recompute": ("full", "Eq. (3), used for the published TFLOP/s, assumes full recompute"),
}
TE_TP_BACKWARD = {
    "parallel.tp_backward_overlap": (
        True,
        "Transformer Engine 1.x LayerNormLinear backward: the sequence-parallel input all-gather "
        "beside the dgrad GEMM ('Overlap input AG with dgrad') and the dgrad reduce-scatter beside "
        "the wgrad GEMM ('Overlap dgrad-RS/AR with wgrad'), async_op=True",
    )
}
NEMO = {
    "training.attention": FLASH,
    "training.recompute": ("none", "NeMo 24.07 H100 performance configs do not recompute"),
    "training.grad_reduce_dtype": (
        "bf16",
        "NVIDIA's NeMo Framework Launcher H100 examples set +training.model.optim.grad_sync_dtype=bf16 "
        "for the distributed Adam (examples/training/gpt/h100/20b_fp8_1node.sh, "
        "examples/training/llama/h100/llama2_13b_fp8.sh, llama2_70b_bf16.sh): gradients "
        "reduced and kept in bf16",
    ),
    "parallel.distributed_optimizer": (True, "NeMo/Megatron-Core default (distributed Adam)"),
    "parallel.zero": (0, "sharding is the distributed optimizer (above)"),
    **TE_TP_BACKWARD,
}
SP = {"parallel.sequence_parallel": (True, "Megatron-Core performance configs enable SP with TP")}
MBRIDGE = {
    "training.attention": FLASH,
    "training.recompute": ("none", "Megatron-Bridge H100 performance recipes do not recompute"),
    "parallel.distributed_optimizer": (True, "fsdp column 0 = DDP with distributed optimizer (note)"),
    "parallel.zero": (0, "sharding is the distributed optimizer (above)"),
    **TE_TP_BACKWARD,
}
FP8_2509 = {
    "training.dtype": (
        "fp8",
        "precision column not given for 25.09; 725 model TFLOP/s per "
        "GPU is above what BF16 reaches on H100 (note)",
    )
}
VOCAB = {
    "gpt3": (50304, "NeMo GPT-3 configs pad the GPT-2 vocabulary to 50304 (model_source)"),
    "llama2": (32000, "Llama 2 tokenizer (model card)"),
    "nemotron": (256000, "Nemotron tokenizer (model card)"),
}
H100_NET = {"network": ("8 x 400 Gb/s per host, rail-optimized", "DGX-H100 SuperPOD (SEC)")}

# Megatron-LM v1 (2019-2021: the README-2020 runs and SC'21) defaults to --DDP-impl local, whose
# DistributedDataParallel all-reduces every gradient in one call after the backward pass
# (`model.allreduce_params(...)` in training.py's backward step), not overlapped with it.
MEGATRON_V1_DDP = {
    "parallel.grad_sync": (
        "after_backward",
        "Megatron-LM v1 default --DDP-impl local: training.py calls "
        "model.allreduce_params() after the backward pass, so the gradient all-reduce is not "
        "overlapped with it (arguments.py: --DDP-impl default 'local')",
    )
}
# Megatron-LM before 2021-08-30 (commit cf7efd4, "allreduce overlap with wgrad gemm"; the SC'21
# artifact commit de7dc40 of 2021-08-10 predates it) reduced the input gradient of a
# column-parallel linear in _CopyToModelParallelRegion's backward, synchronously, after the linear's
# whole backward: no TP collective beside a GEMM.
MEGATRON_V1_TP = {
    "parallel.tp_backward_overlap": (
        False,
        "Megatron-LM before commit cf7efd4 (2021-08-30, 'allreduce overlap with wgrad gemm'; the "
        "SC'21 artifact commit de7dc40 of 2021-08-10 predates it): the column-parallel input "
        "gradient is all-reduced in _CopyToModelParallelRegion.backward, after the linear's "
        "dgrad and wgrad, not beside them",
    )
}
README2020 = {**README2020, **MEGATRON_V1_DDP, **MEGATRON_V1_TP}
SC21 = {**SC21, **MEGATRON_V1_DDP, **MEGATRON_V1_TP}

# Megatron-LM's SC'21 artifact (examples/sc21/run_table_1.sh and CONFIG.sh, commit de7dc40 "scripts
# for sc21", August 2021, run in nvcr.io/nvidia/pytorch:20.12-py3) states per Table 1 row what the
# paper leaves open: the micro-batch (MBS), the data-parallel implementation (--DDP-impl torch or
# local) and --num-layers-per-virtual-pipeline-stage (None: no interleaving); all rows --fp16
# --loss-scale 8192 --checkpoint-activations.
SC21_ARTIFACT = "Megatron-LM examples/sc21/run_table_1.sh (commit de7dc40, 'scripts for sc21', Aug 2021)"
SC21_T1_ARTIFACT: dict[str, tuple[int, str, int | None]] = {
    "1p7b": (16, "torch", None),
    "3p6b": (16, "torch", None),
    "7p5b": (16, "torch", None),
    "18p4b": (8, "torch", None),
    "39p1b": (4, "local", None),
    "76p1b": (2, "local", 5),
    "145p6b": (2, "local", 5),
    "310p1b": (1, "local", 3),
    "529p6b": (1, "local", 1),
    "1008p0b": (1, "local", None),
}
SC21_PIPELINED = ("39p1b", "76p1b", "145p6b", "310p1b", "529p6b", "1008p0b")
TORCH_DDP_BUCKET = "25MiB"  # torch.nn.parallel.DistributedDataParallel bucket_cap_mb default (25)


def sc21_t1_artifact(name: str) -> dict[str, tuple[Any, str]]:
    """The assumptions of a Table 1 row that the SC'21 artifact script settles."""
    mbs, ddp, layers_per_chunk = SC21_T1_ARTIFACT[name]
    out: dict[str, tuple[Any, str]] = {
        "training.micro_batch": (mbs, f"{SC21_ARTIFACT}: MBS={mbs}"),
        "training.dtype": ("fp16", f"{SC21_ARTIFACT}, CONFIG.sh: --fp16 --loss-scale 8192"),
    }
    if ddp == "torch":
        out["parallel.grad_sync"] = (
            "overlap",
            f"{SC21_ARTIFACT}: DDP=torch, i.e. torch.nn.parallel.DistributedDataParallel, whose "
            "bucketed gradient all-reduce runs as the backward pass fills each bucket",
        )
        out["parallel.dp_bucket"] = (
            TORCH_DDP_BUCKET,
            "torch.nn.parallel.DistributedDataParallel default bucket_cap_mb = 25",
        )
    else:
        out["parallel.grad_sync"] = (
            "after_backward",
            f"{SC21_ARTIFACT}: DDP=local, Megatron-LM's own DistributedDataParallel, which "
            "all-reduces the gradients after the backward pass (training.py: "
            "model.allreduce_params())",
        )
    if name in SC21_PIPELINED:
        if layers_per_chunk is None:
            out["parallel.vpp"] = (1, f"{SC21_ARTIFACT}: no --num-layers-per-virtual-pipeline-stage")
        else:
            out["parallel.vpp"] = (
                f"layers/{layers_per_chunk}",
                f"{SC21_ARTIFACT}: --num-layers-per-virtual-pipeline-stage {layers_per_chunk}",
            )
    return out


SELECTED: dict[str, dict[str, tuple[Any, str]]] = {}
for name in ("1b", "2b", "4b", "8b"):
    SELECTED[f"megatron-readme2020-dgxa100-{name}"] = dict(README2020)
    SELECTED[f"megatron-readme2020-dgx2-v100-{name}"] = dict(README2020)
    SELECTED[f"megatron-readme2020-dgxa100-dp128-{name}"] = {**README2020, **README2020_NET}
for name in ("1p7b", "3p6b", "7p5b", "18p4b"):
    SELECTED[f"megatron-sc21-t1-{name}"] = {**SC21, **sc21_t1_artifact(name)}
for name in SC21_PIPELINED:
    SELECTED[f"megatron-sc21-t1-{name}"] = {**SC21, **SC21_PP, **sc21_t1_artifact(name)}
for name in ("175b-384", "175b-768", "175b-1536", "530b-560", "530b-1120", "530b-2240"):
    SELECTED[f"megatron-sc21-t2-ptdp-{name}"] = {
        **SC21_T2,
        **SC21_PP,
        "parallel.sequence_parallel": SC21["parallel.sequence_parallel"],
        "parallel.zero": SC21["parallel.zero"],
        **MEGATRON_V1_DDP,
        **MEGATRON_V1_TP,
    }
DS_ZERO3_2021 = {
    "parallel.zero3_impl": (
        "deepspeed-0.3",
        "SC'21 (arXiv v1 April 2021) ran DeepSpeed's ZeRO-3 of that time: ZeRO-3 shipped "
        "in DeepSpeed 0.3.13 (March 2021); the per-tensor blocking fetch lasted until 0.4.x "
        "(heterosim/workload/zero3.py)",
    )
}
for name in ("175b-384", "175b-768", "175b-1536", "530b-640", "530b-1120", "530b-2240"):
    SELECTED[f"megatron-sc21-t2-zero3-{name}"] = {**SC21_T2, **DS_ZERO3_2021}
for name, vocab in (
    ("gpt3-5b-64", "gpt3"),
    ("gpt3-20b-64", "gpt3"),
    ("gpt3-175b-128", "gpt3"),
    ("gpt3-175b-512", "gpt3"),
    ("llama2-7b-8", "llama2"),
    ("llama2-13b-16", "llama2"),
    ("llama2-70b-64", "llama2"),
    ("nemotron3-8b-64", "nemotron"),
    ("nemotron3-22b-64", "nemotron"),
    ("nemotron4-340b-128", "nemotron"),
):
    SELECTED[f"nemo2407-h100-fp8-{name}"] = {**NEMO, **SP, **H100_NET, "model.vocab": VOCAB[vocab]}
# Context parallelism (parallel.cp, heterosim/workload/cp.py): the runs state cp but not how the
# CP group exchanges K/V.
CP_P2P = {
    "parallel.cp_comm": (
        "p2p",
        "not stated; Megatron-LM's --cp-comm-type defaults to p2p (megatron/training/arguments.py), "
        "Transformer Engine's ring attention AttnFuncWithCPAndKVP2P",
    )
}
for name in ("llama3-8b-8", "llama3-70b-64"):
    SELECTED[f"nemo2407-h100-fp8-{name}"] = {**NEMO, **SP, **H100_NET, **CP_P2P}
for rel in ("2509", "2511", "2602"):
    SELECTED[f"mbridge-{rel}-h100-llama3.1-405b-1024"] = {
        **MBRIDGE,
        **SP,
        **H100_NET,
        **CP_P2P,
        **(FP8_2509 if rel == "2509" else {}),
    }
for rel in ("2509", "2511", "2602"):
    SELECTED[f"mbridge-{rel}-h100-llama3-70b-64"] = {
        **MBRIDGE,
        **SP,
        **H100_NET,
        **(FP8_2509 if rel == "2509" else {}),
    }
FSDP8 = {
    "parallel.zero": (
        3,
        "fsdp column 8 on dp 8: parameters, gradients and optimizer state "
        "sharded over all 8 GPUs (ZeRO-3 / FSDP FULL_SHARD)",
    ),
    "parallel.distributed_optimizer": (False, "sharding is FSDP (above)"),
}
SELECTED["mbridge-2509-h100-llama3-8b-8"] = {**MBRIDGE, **FP8_2509, **H100_NET, **FSDP8}
SELECTED["mbridge-2511-h100-llama3-8b-8"] = {**MBRIDGE, **H100_NET, **FSDP8}

# Tensor-parallel communication overlap (Transformer Engine userbuffers) where the launcher
# config of the measured run enables it (parallel.tp_comm_overlap, heterosim/workload/tp_overlap.py).
_LAUNCHER_2407 = "NVIDIA/NeMo-Framework-Launcher tag 24.07, launcher_scripts/conf/training/{}.yaml"
for name, conf in (
    ("llama2-70b-64", "llama/llama2_70b"),
    ("gpt3-20b-64", "gpt3/20b"),
    ("nemotron3-8b-64", "nemotron/nemotron_8b"),
    ("nemotron3-22b-64", "nemotron/nemotron_22b"),
):
    SELECTED[f"nemo2407-h100-fp8-{name}"]["parallel.tp_comm_overlap"] = (
        True,
        f"ub_tp_comm_overlap: true in {_LAUNCHER_2407.format(conf)}",
    )
_MBRIDGE_UB = (
    "Megatron-Bridge scripts/performance llama3_70b_h100_64gpus_bf16_config and "
    "llama3_70b_h100_64gpus_fp8_config set comm_overlap.tp_comm_overlap_cfg = "
    "userbuffers_{bf16,fp8}_h100_h8192_tp4_mbs1_seqlen8192 (TP 4 with sequence parallelism)"
)
for rel in ("2509", "2511", "2602"):
    SELECTED[f"mbridge-{rel}-h100-llama3-70b-64"]["parallel.tp_comm_overlap"] = (True, _MBRIDGE_UB)
# Mechanisms the measured runs used that the simulator leaves out, each with its source.
NOT_MODELLED: dict[str, list[dict[str, str]]] = {}

EXCLUDED = {
    "megatron-core-readme-h100-*": "TFLOP/s with an unstated FLOP convention and no iteration time",
    "fa2-e2e-*": "parallel configuration and batch not stated (relative checks only)",
    "amp-het-* (run_failed)": "the DeepSpeed run failed (OOM or hang): no time to compare; some of "
    "these plans also give a pipeline stage no transformer block",
}

CI_CASES = {
    "megatron-readme2020-dgxa100-1b",
    "megatron-readme2020-dgxa100-2b",
    "megatron-readme2020-dgx2-v100-1b",
    "amp-het-gpt2-t1p4d4-mbs4",
}


def group_of(case_id: str) -> str:
    for prefix in (
        "megatron-readme2020",
        "megatron-sc21-t1",
        "megatron-sc21-t2",
        "nemo2407",
        "mbridge",
        "amp-het",
    ):
        if case_id.startswith(prefix):
            return prefix
    raise ValueError(case_id)


def compare_of(case: dict[str, Any]) -> dict[str, str]:
    """The published quantity a case is compared on, in the source's own units."""
    conv = (case.get("extra") or {}).get("flop_convention")
    if conv == "sc21-eq3-hardware":
        return {"quantity": "tflops_per_gpu", "flop_convention": conv}
    if case["measured"].get("tokens_per_s_per_gpu") is not None:
        return {"quantity": "tokens_per_s_per_gpu"}
    return {"quantity": "iteration_time_s"}


def host_cluster(
    gpu: str, gpus: int, per_host: int, nics: int, nic_gbps: float, fabric: str
) -> dict[str, Any]:
    per_host = min(per_host, gpus)
    if gpus % per_host:
        raise ValueError(f"{gpus} GPUs do not fill hosts of {per_host}")
    return {
        "name": f"{gpus}x{gpu}",
        "host_types": {
            "h": {
                "gpu": gpu,
                "gpus": per_host,
                "fabric": "nvswitch",
                "nics": min(nics, per_host),
                "nic_speed": f"{nic_gbps:g}Gbps",
            }
        },
        "hosts": [{"type": "h", "count": gpus // per_host}],
        "fabric": {"kind": fabric, "link_delay": "1us", "oversubscription": 1},
    }


def smallest_interleave(layers: int, pp: int) -> int:
    """The smallest interleave factor v >= 2 Megatron-LM accepts: every model chunk holds the
    same whole number of layers, so v divides layers / pp (which must be whole)."""
    if layers % pp:
        raise ValueError(f"{layers} layers do not split evenly over {pp} pipeline stages")
    per_stage = layers // pp
    if per_stage < 2:
        raise ValueError(f"{per_stage} layer per pipeline stage leaves nothing to interleave")
    return next(v for v in range(2, per_stage + 1) if per_stage % v == 0)


def interleave_of(layers: int, pp: int, layers_per_chunk: int) -> int:
    """Megatron-LM's interleave factor from --num-layers-per-virtual-pipeline-stage
    (arguments.py: (num_layers // pp) // num_layers_per_virtual_pipeline_stage)."""
    per_stage, rest = divmod(layers, pp)
    if rest or per_stage % layers_per_chunk:
        raise ValueError(f"{layers} layers on {pp} stages do not split into chunks of {layers_per_chunk}")
    return per_stage // layers_per_chunk


def experiment_of(case: dict[str, Any], assumed: dict[str, tuple[Any, str]]) -> dict[str, Any]:
    m, t, p, c = case["model"], case["training"], case["parallel"], case["cluster"]

    def pick(key: str, value: Any) -> Any:
        if key in assumed:
            chosen = assumed[key][0]
            if chosen == "per-replica batch":
                return t["global_batch"] // p["dp"]
            return chosen
        return value

    if p.get("ep") not in (None, 1):
        raise ValueError(f"{case['id']}: ep not modelled")
    vocab = pick("model.vocab", m["vocab"])
    model = {
        "name": m["name"],
        "arch": "llama" if m["arch"] == "llama" else "gpt",
        "hidden": m["hidden"],
        "layers": m["layers"],
        "heads": m["heads"],
        "kv_heads": m["kv_heads"] or m["heads"],
        "ffn": m["ffn"],
        "vocab": vocab,
        "seq": t["seq_len"],
    }
    training = {
        "global_batch": t["global_batch"],
        "micro_batch": pick("training.micro_batch", t["micro_batch"]),
        "seq_len": t["seq_len"],
        "dtype": pick("training.dtype", t["dtype"]),
        "recompute": pick("training.recompute", t["recompute"]),
        "attention": pick("training.attention", t.get("attention")) or "flash",
    }
    if "training.grad_reduce_dtype" in assumed:
        training["grad_reduce_dtype"] = assumed["training.grad_reduce_dtype"][0]
    vpp = pick("parallel.vpp", p.get("vpp")) if p["pp"] > 1 else None
    if vpp == "smallest":
        vpp = smallest_interleave(m["layers"], p["pp"])
    elif isinstance(vpp, str) and vpp.startswith("layers/"):  # layers per virtual stage given
        vpp = interleave_of(m["layers"], p["pp"], int(vpp.removeprefix("layers/")))
    parallel = {
        "tp": p["tp"],
        "pp": p["pp"],
        "dp": p["dp"],
        "vpp": vpp or 1,
        "zero": pick("parallel.zero", p.get("zero")) or 0,
        "sequence_parallel": bool(pick("parallel.sequence_parallel", p.get("sp"))) and p["tp"] > 1,
        "distributed_optimizer": bool(assumed.get("parallel.distributed_optimizer", (False, ""))[0]),
        "partition": "uniform",
    }
    if p.get("cp") not in (None, 1):
        parallel["cp"] = p["cp"]
        parallel["cp_comm"] = assumed["parallel.cp_comm"][0]
    if "parallel.grad_sync" in assumed:
        parallel["grad_sync"] = assumed["parallel.grad_sync"][0]
    if "parallel.dp_bucket" in assumed:
        parallel["dp_bucket"] = assumed["parallel.dp_bucket"][0]
    for key in ("p2p_sync", "p2p_scatter_gather", "tp_comm_overlap", "tp_backward_overlap"):
        if f"parallel.{key}" in assumed:
            parallel[key] = assumed[f"parallel.{key}"][0]
    if "parallel.zero3_impl" in assumed:
        parallel["zero3_impl"] = assumed["parallel.zero3_impl"][0]
    if vpp and vpp > 1:
        parallel["schedule"] = "interleaved"
    gpu = GPU[c["gpu"]]
    nic = c.get("nic_gbps_per_gpu") or 200
    fabric = "rail-optimized" if gpu.startswith("H100") else "fat-tree"
    per_host = c.get("gpus_per_host") or 8
    cluster = host_cluster(gpu, c["gpus"], per_host, c.get("nics_per_host") or per_host, nic, fabric)
    for key, value in training.items():
        if value is None:
            raise ValueError(f"{case['id']}: training.{key} unknown and not assumed")
    return {
        "name": case["id"],
        "model": model,
        "training": training,
        "parallel": parallel,
        "cluster": cluster,
        "network": {"cc": "dcqcn"},
        "simulation": {"fidelity": "flow"},
    }


def e2e_case(case: dict[str, Any]) -> dict[str, Any]:
    assumed = dict(SELECTED[case["id"]])
    if case["cluster"]["gpu"] in GPU_WHY:
        assumed["cluster.gpu"] = (GPU[case["cluster"]["gpu"]], GPU_WHY[case["cluster"]["gpu"]])
    experiment = experiment_of(case, assumed)
    vpp_assumed = assumed.get("parallel.vpp")
    if vpp_assumed and isinstance(vpp_assumed[0], str):  # "smallest" or "layers/N": record the factor
        assumed["parallel.vpp"] = (experiment["parallel"]["vpp"], vpp_assumed[1])
    if assumed.get("training.micro_batch", ("",))[0] == "per-replica batch":
        assumed["training.micro_batch"] = (
            experiment["training"]["micro_batch"],
            assumed["training.micro_batch"][1],
        )
    if "network" not in assumed and case["cluster"]["gpus"] > 8:
        assumed["network"] = (
            (SELENE, "source")
            if case["cluster"].get("fabric")
            else ("8 x 200 Gb/s per host, fat-tree", "not stated")
        )
    out = {
        "id": case["id"],
        "group": group_of(case["id"]),
        "kind": case["kind"],
        "source": case["source"],
        "flags": list(case["flags"]),
        "ci": case["id"] in CI_CASES,
        "calibration": False,
        "compare": compare_of(case),
        "measured": {k: v for k, v in case["measured"].items() if v is not None},
        "assumed": {k: {"value": v, "why": why} for k, (v, why) in assumed.items()},
        "experiment": experiment,
        "published": {k: case[k] for k in ("model", "training", "parallel", "cluster")},
        "note": case.get("note", ""),
    }
    if case["id"] in NOT_MODELLED:
        out["not_modelled"] = NOT_MODELLED[case["id"]]
    if case.get("extra"):
        out["extra"] = case["extra"]
    return out


# Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (MLSys 2023):
# Selene (DGX-A100 80 GB, 8 x 200 Gb/s HDR), TP 8, s = 2048, V = 51200, no data parallelism
# except the 530B row of §6.3. Not in the shared file: the rows are transcribed here from the paper.
MLSYS23_SRC = (
    "Korthikanti, Casper, Lym, McAfee, Andersch, Shoeybi, Catanzaro, 'Reducing Activation "
    "Recomputation in Large Transformer Models', MLSys 2023, arXiv:2205.05198, "
    "https://arxiv.org/abs/2205.05198, "
)
# name: (hidden, layers, heads, pp, gpus, global batch, micro-batch, vpp); Table 3, vpp from §6
# ("the interleaving schedule with three interleaving stages (m = 3) for the 175B and 530B models").
MLSYS23_MODELS = {
    "22b": (6144, 48, 64, 1, 8, 4, 4, 1),
    "175b": (12288, 96, 96, 8, 64, 64, 1, 3),
    "530b": (20480, 105, 128, 35, 280, 280, 1, 3),
    "1t": (25600, 128, 160, 64, 512, 512, 1, 1),
}
# Table 5: iteration time (s) with full recomputation (no sequence parallelism) and with the
# paper's method (sequence parallelism + selective recomputation).
MLSYS23_E2E = {"22b": (1.42, 1.10), "175b": (18.13, 13.75), "530b": (49.05, 37.83), "1t": (94.42, 71.49)}
# Table 4: one layer of the 22B model, (recompute, sequence parallel, forward ms, backward ms).
MLSYS23_LAYER = {
    "baseline": ("none", False, 7.7, 11.9),
    "sp": ("none", True, 7.2, 11.8),
    "full-recompute": ("full", False, 7.7, 19.5),
    "selective": ("selective", False, 7.7, 13.2),
    "selective-sp": ("selective", True, 7.2, 13.1),
}
MLSYS23_ASSUMED = {
    "training.dtype": (
        "bf16",
        "'mixed precision' (§6), the 16-bit type not stated; fp16 and bf16 share the A100 peak",
    ),
    "training.attention": UNFUSED,
    "parallel.p2p_sync": (
        "blocking",
        "Megatron-LM of 2022 megatron/p2p_communication.py: batch_isend_irecv, req.wait(), "
        "torch.cuda.synchronize() on every pipeline call",
    ),
    "parallel.p2p_scatter_gather": (
        True,
        "--scatter-gather-tensors-in-pipeline defaults on; it does not apply under sequence "
        "parallelism, whose stage output is already split over the TP ranks",
    ),
    "parallel.distributed_optimizer": (False, "2022 Megatron-LM: no distributed optimizer in the paper"),
    "parallel.tp_backward_overlap": (
        True,
        "Megatron-LM of 2022 megatron/mpu/layers.py: ColumnParallelLinearWithAsyncAllreduce "
        "all-reduces the input gradient with async_op=True before the wgrad GEMM (on unless "
        "--no-async-tensor-model-parallel-allreduce); with sequence parallelism the input "
        "all-gather runs beside the dgrad and the reduce-scatter beside the wgrad",
    ),
    "network": (SELENE, "source §6"),
}


def _mlsys23_experiment(name: str, recompute: str, sp: bool, dp: int = 1) -> dict[str, Any]:
    h, layers, heads, pp, gpus, gb, mb, vpp = MLSYS23_MODELS[name]
    parallel: dict[str, Any] = {
        "tp": 8,
        "pp": pp,
        "dp": dp,
        "vpp": vpp,
        "zero": 0,
        "sequence_parallel": sp,
        "distributed_optimizer": False,
        "partition": "uniform",
        "tp_backward_overlap": True,
    }
    if pp > 1:
        parallel.update(p2p_sync="blocking", p2p_scatter_gather=True)
    if vpp > 1:
        parallel["schedule"] = "interleaved"
    if dp > 1:
        parallel["grad_sync"] = "after_backward"
    return {
        "name": f"mlsys23-{name}",
        "model": {
            "name": f"gpt-{name}",
            "arch": "gpt",
            "hidden": h,
            "layers": layers,
            "heads": heads,
            "kv_heads": heads,
            "ffn": 4 * h,
            "vocab": 51200,
            "seq": 2048,
        },
        "training": {
            "global_batch": gb * dp,
            "micro_batch": mb,
            "seq_len": 2048,
            "dtype": "bf16",
            "recompute": recompute,
            "attention": "unfused",
        },
        "parallel": parallel,
        "cluster": host_cluster("A100-80GB-SXM", gpus * dp, 8, 8, 200, "fat-tree"),
        "network": {"cc": "dcqcn"},
        "simulation": {"fidelity": "flow"},
    }


def _mlsys23_case(
    case_id: str, kind: str, quantity: str, measured: dict[str, float], experiment: dict[str, Any], where: str
) -> dict[str, Any]:
    assumed = dict(MLSYS23_ASSUMED)
    if experiment["parallel"]["pp"] == 1:  # no pipeline calls to describe
        del assumed["parallel.p2p_sync"], assumed["parallel.p2p_scatter_gather"]
    if experiment["parallel"]["dp"] > 1:
        assumed["parallel.grad_sync"] = (
            "after_backward",
            "§6.3: 'we do not use any overlapping of gradient all-reduces with back-propagation'",
        )
    return {
        "id": case_id,
        "group": "megatron-mlsys23",
        "kind": kind,
        "source": MLSYS23_SRC + where,
        "flags": [],
        "ci": False,
        "calibration": False,
        "compare": {"quantity": quantity},
        "measured": measured,
        "assumed": {k: {"value": v, "why": why} for k, (v, why) in assumed.items()},
        "experiment": experiment,
        "published": _mlsys23_published(experiment),
        "note": "transcribed from the paper (not in the shared file); configuration from Table 3",
    }


def _mlsys23_published(experiment: dict[str, Any]) -> dict[str, Any]:
    """The paper's configuration in the shared file's schema (null: not stated)."""
    m, t, p = experiment["model"], experiment["training"], experiment["parallel"]
    gpus = sum(h["count"] for h in experiment["cluster"]["hosts"]) * 8
    return {
        "model": {
            "name": m["name"],
            "hidden": m["hidden"],
            "layers": m["layers"],
            "heads": m["heads"],
            "kv_heads": None,
            "ffn": m["ffn"],
            "vocab": m["vocab"],
            "seq_len": m["seq"],
            "arch": "gpt",
        },
        "training": {
            "global_batch": t["global_batch"],
            "micro_batch": t["micro_batch"],
            "dtype": None,
            "recompute": t["recompute"],
            "seq_len": t["seq_len"],
        },
        "parallel": {
            "tp": p["tp"],
            "pp": p["pp"],
            "dp": p["dp"],
            "vpp": p["vpp"] if p["vpp"] > 1 else None,
            "sp": p["sequence_parallel"],
            "zero": None,
            "schedule": p.get("schedule"),
        },
        "cluster": {
            "gpu": "A100-80GB-SXM",
            "gpus": gpus,
            "gpus_per_host": 8,
            "intra_host": "NVSwitch",
            "nic_gbps_per_gpu": 200,
            "nics_per_host": 8,
            "fabric": "Selene, HDR InfiniBand",
        },
    }


def mlsys23_cases() -> list[dict[str, Any]]:
    """Korthikanti et al. (MLSys 2023): Table 4 per-layer times of the 22B model, Table 5
    iteration times of the four models, and the 530B model at 8-way data parallelism (§6.3)."""
    cases = []
    for row, (recompute, sp, fwd, bwd) in MLSYS23_LAYER.items():
        exp = _mlsys23_experiment("22b", recompute, sp)
        # the paper's 22B rows without both memory savers cannot hold 48 layers in 80 GB (§6.1:
        # 'none of these models will fit into memory'); a layer's time does not depend on that
        exp["simulation"]["memory_check"] = "warn"
        cases.append(
            _mlsys23_case(
                f"mlsys23-22b-layer-{row}",
                "layer_time",
                "layer_total_ms",
                {"layer_forward_ms": fwd, "layer_backward_ms": bwd, "layer_total_ms": round(fwd + bwd, 3)},
                exp,
                "Table 4",
            )
        )
    for name, (full, present) in MLSYS23_E2E.items():
        for label, recompute, sp, value in (
            ("full", "full", False, full),
            ("present", "selective", True, present),
        ):
            cases.append(
                _mlsys23_case(
                    f"mlsys23-{name}-{label}",
                    "iteration_time",
                    "iteration_time_s",
                    {"iteration_time_s": value},
                    _mlsys23_experiment(name, recompute, sp),
                    "Table 5",
                )
            )
    cases.append(
        _mlsys23_case(
            "mlsys23-530b-present-dp8",
            "iteration_time",
            "iteration_time_s",
            {"iteration_time_s": 39.15},
            _mlsys23_experiment("530b", "selective", True, dp=8),
            "§6.3 (2240 GPUs, batch per model instance kept)",
        )
    )
    return cases


# AMP heterogeneous cluster (Li et al., NeurIPS'22): 3 x p3.8xlarge + 1 x g4dn.12xlarge.
# AMP's 30 pipeline units are DeepSpeed's GPT2ModelPipe layer specs, in order (AMP
# megatron/model/gpt2_model.py; the same list is AMP's cost-model `_layer` in
# cost_het_cluster.py): 0 embedding (EmbeddingPipe, tied), 1 transpose, 2..25 transformer blocks
# 0..23, 26 transpose, 27 final LayerNorm, 28 logits (tied EmbeddingPipe), 29 fp16->fp32 cast.
# partition_boundaries are DeepSpeed's `parts` (read from partition.json by AMP's PipelineModule).
AMP_BLOCKS = range(2, 26)
AMP_HEAD_UNITS = (27, 28)
AMP_UNITS = 30


def amp_stage_layers(bounds: list[int]) -> list[int]:
    """Transformer blocks per pipeline stage for AMP's unit boundaries (see AMP_BLOCKS)."""
    if bounds[0] != 0 or bounds[-1] != AMP_UNITS or sorted(bounds) != bounds:
        raise ValueError(f"boundaries {bounds} are not a partition of {AMP_UNITS} units")
    layers = [
        len(range(max(lo, AMP_BLOCKS.start), min(hi, AMP_BLOCKS.stop))) for lo, hi in zip(bounds, bounds[1:])
    ]
    if any(n < 1 for n in layers):
        raise ValueError(f"boundaries {bounds} leave a stage without a transformer block")
    if bounds[-2] > AMP_HEAD_UNITS[0]:
        raise ValueError(f"boundaries {bounds} split the head from the last stage")
    return layers


def amp_vocab(tp: int) -> int:
    """GPT-2 BPE (50,257 tokens) padded as Megatron-LM v1.1.5 does: to a multiple of 128 x tp."""
    unit = 128 * tp
    return -(-50257 // unit) * unit


AMP_CLUSTER = {
    "name": "amp-3xp3.8xlarge-1xg4dn.12xlarge",
    "host_types": {
        "p3": {
            "gpu": "V100-SXM2-16GB",
            "gpus": 4,
            "fabric": "nvswitch",
            "nvlink_bw": "100GB/s",
            "nics": 1,
            "nic_speed": "10Gbps",
            "transport": "socket",
        },
        "g4": {
            "gpu": "T4-16GB-PCIe",
            "gpus": 4,
            "fabric": "pcie",
            "nics": 1,
            "nic_speed": "50Gbps",
            "transport": "socket",
        },
    },
    "hosts": [{"type": "p3", "count": 3}, {"type": "g4", "count": 1}],
    "fabric": {"kind": "fat-tree", "link_delay": "1us", "oversubscription": 1},
}
AMP_ASSUMED: dict[str, tuple[Any, str]] = {
    "cluster.hosts": (
        "hosts 0-2: p3 (4 x V100-SXM2-16GB), host 3: g4 (4 x T4-16GB-PCIe)",
        "heterogeneous list of the case (ranks 0-11 on the V100 hosts, 12-15 on the "
        "T4 host); DER from AMP's per-host bandwidths and README instance list",
    ),
    "cluster.host_types.p3.nvlink_bw": (
        "100GB/s per GPU and direction, modelled as a switch port",
        "p3.8xlarge's 4 V100s are taken to be one quad of the p3.16xlarge / DGX-1 hybrid "
        "cube-mesh (nvidia-smi topo: each pair joined by 1 or 2 NVLink2 links, 4 links per GPU "
        "inside the quad, 25 GB/s per link and direction); the point-to-point link pattern is not "
        "modelled; NCCL's Volta NVLink efficiency (0.8) applies. Not stated by the source",
    ),
    "cluster.host_types.g4": (
        "PCIe Gen3 x16 per T4, no NVLink, one PCIe switch",
        "T4 is a PCIe card without NVLink; g4dn PCIe tree not published",
    ),
    "cluster.host_types.transport": (
        "socket: NCCL's socket transport over TCP on every host",
        "p3.8xlarge has no RDMA-capable NIC (ENA only) and NCCL does not use the g4dn's EFA "
        "without the aws-ofi-nccl plugin, which AMP's setup does not install, so inter-host "
        "traffic goes through NCCL's socket transport over TCP",
    ),
    "network": (
        "one NIC per host: 10 Gb/s (p3.8xlarge), 50 Gb/s (g4dn.12xlarge); one switch",
        "AWS instance network rates, equal to AMP's cost-model inputs (het_cluster.py: "
        "10 and 50 Gb/s inter-node); real EC2 placement and topology not stated",
    ),
    "network.collective_algorithm": (
        "ring",
        "AMP's real trials run from DeepSpeedExamples/Megatron-LM-v1.1.5-3D_parallelism (README, "
        "Setting 2), whose .deepspeed_env holds NCCL_ALGO=^tree,collnet; DeepSpeed 0.3.13's "
        "launcher reads .deepspeed_env from ~ and the working directory (launcher/runner.py) and "
        "exports it on every host (multinode_runner.py, pdsh); NCCL 2.7.8 (PyTorch 1.7.1, AMP's "
        "README) reads a leading ^ as 'all but' (graph/tuning.cc parseList) and disables the "
        "excluded algorithms for all-reduce, the only collective with a choice: every all-reduce "
        "is a ring, so the two-host data-parallel all-reduces do not get the tree's halved "
        "inter-host traffic",
    ),
    "network.attributes": (
        "SocketTransport: 2 threads x 8 sockets per connection (packet fidelity only)",
        "NCCL 2.7.8 net_socket.cc ncclSocketGetNsockNthread: a NIC whose PCI vendor is 0x1d0f "
        "(AWS ENA, the p3.8xlarge and g4dn.12xlarge NIC) gets 2 helper threads of 8 sockets "
        "unless NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD are set (AMP sets neither); the "
        "flow model gives a connection one share whatever its socket count",
    ),
    "model.vocab": (
        "50304 (tp 1), 50432 (tp 2), 50688 (tp 4)",
        "training used the GPT-2 BPE files (50,257 tokens, note), padded by "
        "Megatron-LM v1.1.5 to a multiple of 128 x tp; 52,256 is AMP's cost-model value",
    ),
    "training.attention": UNFUSED,
    "training.grad_reduce_dtype": ("fp32", "ds_config.json fp32_allreduce: true (note)"),
    "parallel.schedule": (
        "1f1b",
        "DeepSpeed pipeline engine TrainSchedule: pp - stage - 1 "
        "warm-up forwards, then one forward one backward (1F1B), no interleaving",
    ),
    "parallel.grad_sync": (
        "after_backward",
        "DeepSpeed's pipeline engine runs ReduceTiedGrads and "
        "ReduceGrads after the last micro-batch's backward, not overlapped",
    ),
    "parallel.dp_bucket": (
        "2GB",
        "DeepSpeed all-reduces gradients in buffers of 500M elements "
        "(fp32: 2 GB), i.e. one bucket per stage for this model",
    ),
    "parallel.sequence_parallel": (False, "Megatron-LM v1.1.5 predates sequence parallelism"),
    "parallel.rank_order": ("tp-dp-pp", "DeepSpeed rank = tp + tp*dp_idx + tp*dp*pp_idx (case)"),
}


# AMP's own per-layer forward profile, the input of its cost model (DachengLi1/AMP
# src/known_cost/gpt2_{P3,G4}_{1,2,4}.npy, commit 62fc27dea3; written by
# DeepSpeed/deepspeed/runtime/pipe/module.py at iteration 35: time.time() around each pipeline
# unit's forward with torch.cuda.synchronize() after it, micro-batch 1, tp 1/2/4 on one
# p3.8xlarge (V100) and one g4dn.12xlarge (T4)). Mean over the 24 transformer-block units, ms.
# Each unit is ParallelTransformerLayerPipe, whose forward evaluates the layer twice
# (Megatron-LM-v1.1.5-3D_parallelism/megatron/model/transformer.py: ``print((super().forward(
# *args)).shape)`` before ``return super().forward(*args), attention_mask``), so one measurement
# covers two forward passes. A profile, not an iteration time: no validation case is used.
AMP_LAYER_FORWARD_MS = {
    ("V100-SXM2-16GB", 1): 3.9191,
    ("T4-16GB-PCIe", 1): 5.4699,
    ("V100-SXM2-16GB", 2): 5.2434,
    ("T4-16GB-PCIe", 2): 5.9624,
    ("V100-SXM2-16GB", 4): 4.5192,
    ("T4-16GB-PCIe", 4): 5.5768,
}
AMP_LAYER_FORWARD_PASSES = 2
AMP_PROFILE_FIRST_GPU = {"V100-SXM2-16GB": 0, "T4-16GB-PCIe": 4}  # in the profile cluster below


def _profile_experiment(tp: int) -> Any:
    """One p3 and one g4 host of the AMP cluster running the profiled layer (micro-batch 1)."""
    sys.path.insert(0, str(HERE.parent))
    from heterosim.config.experiment import parse_experiment

    return parse_experiment(
        {
            "name": "amp-layer-profile",
            "model": {
                "arch": "gpt",
                "hidden": 1024,
                "layers": 24,
                "heads": 16,
                "kv_heads": 16,
                "ffn": 4096,
                "vocab": amp_vocab(tp),
                "seq": 1024,
            },
            "training": {
                "global_batch": 8 // tp,
                "micro_batch": 1,
                "seq_len": 1024,
                "dtype": "fp16",
                "attention": "unfused",
            },
            "parallel": {"tp": tp, "pp": 1, "dp": 8 // tp},
            "cluster": {
                **copy.deepcopy(AMP_CLUSTER),
                "hosts": [{"type": "p3", "count": 1}, {"type": "g4", "count": 1}],
            },
            "simulation": {"fidelity": "flow"},
        },
        "amp-layer-profile",
    )


@functools.cache
def _layer_forward_parts(tp: int, gpu: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(GPU ns of each compute op, modelled transfer ns of each TP collective) of one layer
    forward pass on ``gpu`` at ``tp``; the collectives inside the profiled host (flow model)."""
    from heterosim.engine.executor import execute_plan
    from heterosim.engine.topology import build_topology
    from heterosim.plan.collectives import decompose_collective
    from heterosim.plan.compute.model import ComputeModel
    from heterosim.workload.ops import layer_forward_ops

    exp = _profile_experiment(tp)
    compute = ComputeModel()
    ops = layer_forward_ops(exp.model, exp.training, exp.parallel, 0)
    gpu_ns = tuple(
        compute.time_op(op.op_kind, op.dtype, op.shape, op.shape_extra, op.flops, op.bytes_moved, gpu)[0]
        for op in ops
        if not op.is_comm
    )
    first, coll_ns = AMP_PROFILE_FIRST_GPU[gpu], []
    topology = build_topology(exp.cluster)
    for op in ops:
        if op.is_comm:
            plan = decompose_collective(
                op.comm_type, op.comm_bytes, list(range(first, first + tp)), exp.cluster
            )
            engine = execute_plan(
                plan.to_execution_plan(exp.cluster.world_size), topology, exp.network, exp.simulation
            )  # flow fidelity (the experiment)
            coll_ns.append(int(engine.makespan_ns))
    return gpu_ns, tuple(coll_ns)


@functools.cache
def amp_framework_overheads() -> dict[str, dict[str, int]]:
    """Host time per kernel (tp 1 profile) and cost per TP collective call (mean over the tp 2
    and tp 4 profiles) on each AMP GPU, in us, derived with heterosim.plan.compute.host_overhead
    from AMP_LAYER_FORWARD_MS and the compute and flow models (no fitted constant)."""
    sys.path.insert(0, str(HERE.parent))  # this checkout's heterosim
    from heterosim.plan.compute.host_overhead import (
        collective_overhead_from_layer_forward,
        host_overhead_from_layer_forward,
    )

    host, coll = {}, {}
    for gpu in AMP_PROFILE_FIRST_GPU:
        gpu_ns, _ = _layer_forward_parts(1, gpu)
        host_ns = host_overhead_from_layer_forward(
            AMP_LAYER_FORWARD_MS[gpu, 1] * 1e6, AMP_LAYER_FORWARD_PASSES, gpu_ns
        )
        per_tp = []
        for tp in (2, 4):
            gpu_ns, coll_ns = _layer_forward_parts(tp, gpu)
            per_tp.append(
                collective_overhead_from_layer_forward(
                    AMP_LAYER_FORWARD_MS[gpu, tp] * 1e6, AMP_LAYER_FORWARD_PASSES, gpu_ns, host_ns, coll_ns
                )
            )
        host[gpu] = round(host_ns / 1e3)
        coll[gpu] = round(sum(per_tp) / len(per_tp) / 1e3)
    return {"host_op_overhead": host, "collective_overhead": coll}


def amp_framework() -> tuple[dict[str, Any], str]:
    over = amp_framework_overheads()
    framework = {
        "name": "deepspeed",
        "layer_forward_passes": AMP_LAYER_FORWARD_PASSES,
        **{key: {gpu: f"{us}us" for gpu, us in table.items()} for key, table in over.items()},
    }
    host = ", ".join(f"{g} {us} us" for g, us in over["host_op_overhead"].items())
    coll = ", ".join(f"{g} {us} us" for g, us in over["collective_overhead"].items())
    why = (
        "DeepSpeed 0.3.13 PipelineEngine with Megatron-LM v1.1.5 GPT2ModelPipe (AMP's fork, "
        "DeepSpeed/version.txt): activations sent with the fp16 attention mask, partitioned over "
        "TP and re-gathered (deepspeed/runtime/pipe/engine.py); every transformer layer's forward "
        "evaluated twice (transformer.py ParallelTransformerLayerPipe.forward). From AMP's "
        "synchronised per-layer forward profile (src/known_cost/gpt2_{P3,G4}_{1,2,4}.npy, two "
        f"passes per value): host time per kernel ({host}) = tp-1 profile per pass minus the "
        "compute model's GPU time of the 15 compute ops, per op; cost per TP collective call "
        f"({coll}) = tp-2 and tp-4 profile per pass minus GPU, host and modelled transfer time, "
        "per collective, averaged (validation/build_cases.py amp_framework_overheads)"
    )
    return framework, why


def amp_case(case: dict[str, Any]) -> dict[str, Any]:
    """One AMP heterogeneous-cluster run as a validation case (explicit DeepSpeed partition)."""
    t, p = case["training"], case["parallel"]
    tp, bounds = p["tp"], p["partition_boundaries"]
    layers = amp_stage_layers(bounds)
    assumed = dict(AMP_ASSUMED)
    framework, why = amp_framework()
    assumed["framework"] = (framework, why)
    blocks = ", ".join(f"stage {s}: {n}" for s, n in enumerate(layers))
    assumed["parallel.partition"] = (
        layers,
        (
            f"AMP units {bounds} -> transformer blocks per stage ({blocks}): units 0 embedding, "
            "1 transpose, 2-25 blocks 0-23, 26 transpose, 27 final LayerNorm, 28 tied logits head, "
            "29 fp32 cast (DeepSpeed GPT2ModelPipe specs; AMP cost_het_cluster.py `_layer`); the "
            "embedding is on stage 0 and the head on the last stage in every case"
        ),
    )
    m = case["model"]
    model = {
        "name": m["name"],
        "arch": "gpt",
        "hidden": m["hidden"],
        "layers": m["layers"],
        "heads": m["heads"],
        "kv_heads": m["kv_heads"],
        "ffn": m["ffn"],
        "vocab": amp_vocab(tp),
        "seq": t["seq_len"],
    }
    experiment = {
        "name": case["id"],
        "model": model,
        "training": {
            "global_batch": t["global_batch"],
            "micro_batch": t["micro_batch"],
            "seq_len": t["seq_len"],
            "dtype": t["dtype"],
            "recompute": t["recompute"],
            "attention": "unfused",
            "grad_reduce_dtype": "fp32",
        },
        "parallel": {
            "tp": tp,
            "pp": p["pp"],
            "dp": p["dp"],
            "vpp": 1,
            "schedule": "1f1b",
            "zero": p["zero"],
            "sequence_parallel": False,
            "partition": list(layers),
            "grad_sync": "after_backward",
            "dp_bucket": "2GB",
            "rank_order": "tp-dp-pp",
        },
        "cluster": copy.deepcopy(AMP_CLUSTER),
        "network": {
            "cc": "dcqcn",
            "collective_algorithm": "ring",
            "attributes": {"SocketTransport::SocketNthreads": 2, "SocketTransport::NsocksPerThread": 8},
        },
        "simulation": {"fidelity": "flow"},
        "framework": copy.deepcopy(framework),
    }
    return {
        "id": case["id"],
        "group": "amp-het",
        "kind": case["kind"],
        "source": case["source"],
        "flags": list(case["flags"]),
        "ci": case["id"] in CI_CASES,
        "calibration": False,
        "compare": {"quantity": "iteration_time_s"},
        "measured": {k: v for k, v in case["measured"].items() if v is not None},
        "assumed": {k: {"value": v, "why": why} for k, (v, why) in assumed.items()},
        "experiment": experiment,
        "published": {k: case[k] for k in ("model", "training", "parallel", "cluster")},
        "note": case.get("note", ""),
        "extra": case["extra"],
    }


def nccl_cluster(gpu: str, hosts: int, nics: int, nic_gbps: int) -> dict[str, Any]:
    return host_cluster(gpu, 8 * hosts, 8, nics, nic_gbps, "fat-tree")


NCCL_SRC = "docs/network_models.md §5.1, quoting "
NCCL_CASES: list[dict[str, Any]] = [
    {
        "id": "nccl-a100x8-nvswitch-allreduce-ring",
        "value": 230.0,
        "op": "allreduce",
        "size": "8GiB",
        "ranks": 8,
        "algorithm": "ring",
        "cluster": ("A100-80GB-SXM", 1, 8, 200),
        "source": "sjeaugey, NVIDIA/nccl-tests#149 ('240 GB/s effective, ... limit it to ~230')",
        "ci": True,
    },
    {
        "id": "nccl-a100x8-allreduce-4g-user",
        "value": 232.54,
        "op": "allreduce",
        "size": "4GiB",
        "ranks": 8,
        "algorithm": "auto",
        "cluster": ("A100-80GB-SXM", 1, 8, 200),
        "source": "user measurement, NVIDIA/nccl-tests#175",
        "ci": False,
    },
    {
        "id": "nccl-a800x8-allreduce-intra",
        "value": 160.0,
        "op": "allreduce",
        "size": "8GiB",
        "ranks": 8,
        "algorithm": "auto",
        "cluster": ("A800-80GB-SXM", 1, 8, 200),
        "source": "sjeaugey, NVIDIA/nccl#412",
        "ci": False,
    },
    {
        "id": "nccl-h100x8-ring-nvlink",
        "value": 370.0,
        "op": "allgather",
        "size": "8GiB",
        "ranks": 8,
        "algorithm": "ring",
        "cluster": ("H100-SXM", 1, 8, 400),
        "source": "sjeaugey, NVIDIA/nccl-tests#212 (~370 GB/s effective NVLink with NCCL_ALGO=RING)",
        "ci": True,
    },
    {
        "id": "nccl-h100x8-allreduce-nvls",
        "value": 480.0,
        "op": "allreduce",
        "size": "8GiB",
        "ranks": 8,
        "algorithm": "auto",
        "cluster": ("H100-SXM", 1, 8, 400),
        "source": "sjeaugey, NVIDIA/nccl-tests#212; AddyLaddy, NVIDIA/nccl-tests#290 (476 GB/s)",
        "ci": False,
    },
    {
        "id": "nccl-h200x8-allreduce-user",
        "value": 475.0,
        "op": "allreduce",
        "size": "8GiB",
        "ranks": 8,
        "algorithm": "auto",
        "cluster": ("H200-SXM", 1, 8, 400),
        "source": "user measurement, NVIDIA/nccl-tests#272 (NCCL 2.20.3)",
        "ci": False,
    },
    {
        "id": "nccl-dgxa100-8x200g-allreduce-ring",
        "value": 192.0,
        "op": "allreduce",
        "size": "8GiB",
        "ranks": 32,
        "algorithm": "ring",
        "cluster": ("A100-80GB-SXM", 4, 8, 200),
        "source": "AddyLaddy, NVIDIA/nccl#812 (DGX A100, 8 x 200 Gb/s HDR, multi-node ring)",
        "ci": False,
        "assumed": {"hosts": (4, "node count not stated; > 2 so NCCL keeps the ring")},
    },
    {
        "id": "nccl-per-nic-100g-ring",
        "value": 12.0,
        "op": "allreduce",
        "size": "2GiB",
        "ranks": 32,
        "algorithm": "ring",
        "cluster": ("A100-80GB-SXM", 4, 1, 100),
        "source": "sjeaugey, NVIDIA/nccl-tests#119 (12 GB/s per 100G NIC)",
        "ci": False,
        "assumed": {"hosts": (4, "rule of thumb: one NIC per host, 4 hosts, ring")},
    },
    {
        "id": "nccl-per-nic-200g-ring",
        "value": 24.0,
        "op": "allreduce",
        "size": "2GiB",
        "ranks": 32,
        "algorithm": "ring",
        "cluster": ("A800-80GB-SXM", 4, 1, 200),
        "source": "sjeaugey, NVIDIA/nccl-tests#119 and NVIDIA/nccl#412 (24 GB/s per 200G NIC)",
        "ci": False,
        "assumed": {"hosts": (4, "rule of thumb: one NIC per host, 4 hosts, ring")},
    },
    {
        "id": "nccl-h100x32-8x400g-allreduce-user",
        "value": 365.84,
        "op": "allreduce",
        "size": "8GiB",
        "ranks": 32,
        "algorithm": "auto",
        "cluster": ("H100-SXM", 4, 8, 400),
        "source": "user measurement, NVIDIA/nccl-tests#309 ('4 nodes on 32 GPU-NIC pairs ... max busbw "
        "365.84 GB/s'; HGX H100, one 400G ConnectX-7 per GPU); NVIDIA's expectation for the "
        "same hardware: ~48 GB/s per CX7 NIC, up to ~396 GB/s with the ring (AddyLaddy, "
        "NVIDIA/nccl-tests#319)",
        "ci": False,
        "assumed": {
            "fabric": (
                "RoCEv2 frames, rail-aligned fat-tree",
                "the issue does not state IB or Ethernet; RoCE framing "
                "(82 B per 4 KiB) is within 1.5 % of IB's",
            )
        },
    },
    {
        "id": "nccl-h100x32-8x400g-ib-allreduce-vp",
        "value": 330.93,
        "op": "allreduce",
        "size": "8GiB",
        "ranks": 32,
        "algorithm": "auto",
        "cluster": ("H100-SXM", 4, 8, 400),
        "source": "Voltage Park / AI @ Georgia Tech benchmark suite (github aigatech/vpbenchmarking, "
        "README: 4 nodes x 8 H100 SXM5, 3.2 Tbps InfiniBand, NCCL 2.24.3, multi-node "
        "AllReduce bus bandwidth 330.93 GB/s)",
        "ci": False,
        "flags": ["APPROX"],
        "assumed": {
            "fabric": (
                "RoCEv2 frames on a fat-tree",
                "InfiniBand NDR: IB framing (LRH, VCRC) is not modelled, hence APPROX",
            )
        },
    },
    {
        "id": "nccl-per-nic-400g-ndr-ring",
        "value": 47.0,
        "op": "allreduce",
        "size": "2GiB",
        "ranks": 32,
        "algorithm": "ring",
        "cluster": ("H100-SXM", 4, 1, 400),
        "source": "AddyLaddy, NVIDIA/nccl-tests#290 and #267 (46-48 GB/s per NDR NIC; midpoint)",
        "ci": False,
        "assumed": {"hosts": (4, "rule of thumb: one NIC per host, 4 hosts, ring")},
    },
]


def nccl_case(spec: dict[str, Any]) -> dict[str, Any]:
    gpu, hosts, nics, gbps = spec["cluster"]
    assumed = {k: {"value": v, "why": why} for k, (v, why) in spec.get("assumed", {}).items()}
    assumed["size"] = {"value": spec["size"], "why": "large-message plateau of the quoted value"}
    return {
        "id": spec["id"],
        "group": "nccl-tests",
        "kind": "collective_busbw",
        "source": NCCL_SRC + spec["source"],
        "flags": list(spec.get("flags", [])),
        "ci": spec["ci"],
        "calibration": False,
        "compare": {"quantity": "busbw_GBps"},
        "measured": {"busbw_GBps": spec["value"]},
        "assumed": assumed,
        "collective": {
            "op": spec["op"],
            "size": spec["size"],
            "ranks": spec["ranks"],
            "algorithm": spec["algorithm"],
        },
        "cluster": nccl_cluster(gpu, hosts, nics, gbps),
    }


# torchtitan (Liang et al., 'TorchTitan: One-stop PyTorch native solution for production ready LLM
# pre-training', ICLR 2025, arXiv:2410.06511): PyTorch-native training of Llama 3.1 (FSDP2, TP and
# async TP, CP, float8, torch.compile). The published quantity is torchtitan's logged TPS per GPU:
# tokens of the rank's local batch / (step time x tp x cp), i.e. global_batch x seq / (T x GPUs)
# with global_batch = local batch x FSDP degree. Rows transcribed from the torchtitan repository
# (github.com/pytorch/torchtitan at commit b5bcd76, August 2026, and docs at 9dec370); not in the
# shared file. Each source names the torch / torchao / torchtitan commits it ran.
TT_REPO = "https://github.com/pytorch/torchtitan/blob/b5bcd76c66d0acb1a08b176d9639425bc55e0b2a/"
TT_SRC = {
    "2412": TT_REPO + "benchmarks/llama3_h100_202412_torchtitan.md ('done by the torchtitan team at "
    "the end of 2024'; torch 1963fc8, torchao eab345c, torchtitan 9dec370 of 2024-12-26), ",
    "2506": TT_REPO + "benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (PyTorch team, June "
    "2025; torch 38410cf9, torchao 6243040, torchtitan 820504e), ",
    "2408": "https://github.com/pytorch/torchtitan/blob/9dec370ad26b5f8e9a7333a0e36165018262644b/"
    "docs/performance.md (rows added by commits 9515a14 and 3faaa1a, August 2024), ",
    "trainy2506": TT_REPO + "benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md (Trainy on "
    "WhiteFiber, June 2025; torch 2.8.0a0+5228986c39, torchao 0afa4c1, torchtitan e7c0cae), ",
}
# Llama 3.1 (torchtitan 9dec370 torchtitan/models/llama/__init__.py llama3_configs: dim, n_layers,
# n_heads, n_kv_heads; ffn from ffn_dim_multiplier 1.3 / 1.3 / 1.2 and multiple_of 1024 / 4096 /
# 4096 in model.py FeedForward; vocabulary 128256, the Llama 3 tokenizer).
TT_MODELS = {
    "8b": (4096, 32, 32, 8, 14336),
    "70b": (8192, 80, 64, 8, 28672),
    "405b": (16384, 126, 128, 8, 53248),
}
# The torchtitan team's machines (source 'Hardware'): Grand Teton, 8 H100 per host on NVLink,
# 96 GB HBM2e at 2.4 TB/s, 500 W power limit, 400 Gb/s RDMA per GPU. Trainy: 8 H200 per host,
# 400 Gb/s (ConnectX-7) per GPU.
TT_GPU = {"H100-GT": "H100-SXM", "H200": "H200-SXM"}
# The Grand Teton H100 as the source states it, defined in each cluster under the catalogue name it
# shadows (so the H100's compute curves and sustained GEMM ceiling apply): 96 GB HBM2e at 2.4 TB/s
# ('Hardware': "Each H100 GPU is equipped with 96GB HBM2e with 2.4 TB/sec peak memory bandwidth");
# docs/performance.md of the 2408 rows names 'HBM2e based lower TDP SXM H100 (95GB)'. Peaks, NVLink
# and PCIe are the H100-SXM's (footnote 2: the peak is 'between SXM and NVL', exact value unknown).
TT_H100_MEMORY_GB = {"2412": 96, "2506": 96, "2408": 95}


def _tt_h100_gpu(src: str) -> dict[str, Any]:
    """The ``gpus:`` entry of the torchtitan team's H100 (shadows the catalogue H100-SXM)."""
    where = "docs/performance.md footnote 1" if src == "2408" else "source 'Hardware' section"
    return {
        "vendor": "nvidia",
        "generation": "hopper",
        "tflops": {"fp16": 989, "bf16": 989, "fp8": 1979, "tf32": 494.5, "fp32": 67},
        "memory_gb": TT_H100_MEMORY_GB[src],
        "memory_tbps": 2.4,
        "nvlink_gbps_per_dir": 450,
        "pcie_gen": 5,
        "power_limit_w": 500,
        "sources": {
            "power_limit_w": "source 'Hardware' section: 'We used the default 500W power limit, although "
            "tuning it up to 700W TDP can potentially provide further speedups' (the part's TDP is 700 W: "
            "the 700 W H100-SXM's measured clock-power curve applies, heterosim/catalog/gpus.yaml "
            "power_curves)",
            "memory_gb": f"{where}: {TT_H100_MEMORY_GB[src]} GB HBM2e",
            "memory_tbps": "source 'Hardware' section: 2.4 TB/sec peak memory bandwidth (HBM2e)",
            "tflops": "H100-SXM peaks (source footnote 2: the exact peak is not known)",
            "nvlink_gbps_per_dir": "H100-SXM (8 H100 per host fully NVLinked)",
            "pcie_gen": "H100-SXM",
        },
    }


TT_GPU_PUBLISHED = {
    "2412": "H100 96GB HBM2e (Grand Teton, 500 W power limit)",
    "2506": "H100 96GB HBM2e (Grand Teton, 500 W power limit)",
    "2408": "H100 95GB HBM2e, lower-TDP SXM (footnote 1)",
    "trainy2506": "H200",
}

# One row per published number: (id (its first part names the source in TT_SRC), where, model,
# gpus, fsdp, tp, cp, seq, local batch, activation checkpointing ("op": torchtitan's selective op
# AC), torch.compile (None: not stated), float8 recipe ("tw" tensorwise, "rw" rowwise), async TP,
# TPS/GPU, memory GiB (None: not given)).
_T1 = "Table 1 (1D FSDP, Llama 3.1 8B, 8 GPUs, local batch 2, global 16, selective AC)"
_T2 = "Table 2 (FSDP + CP + torch.compile + Float8, Llama 3.1 8B, 8 GPUs, local batch 1, full AC)"
_T3 = "Table 3 (1D FSDP, Llama 3.1 8B, 128 GPUs, local batch 2, global 256, selective AC)"
_T4 = (
    "Table 4 (FSDP 32 x TP 8 + torch.compile + Float8, Llama 3.1 70B, 256 GPUs, local batch 16, "
    "global 512, full AC)"
)
_A70 = "table 'Llama3 70b on 256 H100s with FSDP=32, TP=8, torch.compile, full AC, local batch size 16'"
_A8 = "table 'Llama3 8b on 64 H100s with FSDP=8, TP=8, torch.compile, per op SAC, local batch size 12'"
_D405 = "'Llama 3.1 performance numbers' (405B, 128 H100, FSDP 16 x TP 8, local batch 2, full AC)"
_TR = "'Results' (Llama 3.1 8B, 4 and 8 hosts of 8 H200, local batch 2, torch.compile, float8)"
# fmt: off
TT_ROWS: list[tuple[Any, ...]] = [
    ("2412-8b-8-fsdp", _T1, "8b", 8, 8, 1, 1, 8192, 2, "op", False, None, False, 5762, 82.4),
    ("2412-8b-8-fsdp-compile", _T1, "8b", 8, 8, 1, 1, 8192, 2, "op", True, None, False, 6667, 77.0),
    ("2412-8b-8-fsdp-compile-fp8", _T1, "8b", 8, 8, 1, 1, 8192, 2, "op", True, "tw", False, 8532, 76.8),
    ("2412-8b-8-fsdp8-cp1", _T2, "8b", 8, 8, 1, 1, 32768, 1, "full", True, "tw", False, 3890, 83.9),
    ("2412-8b-8-fsdp4-cp2", _T2, "8b", 8, 4, 1, 2, 65536, 1, "full", True, "tw", False, 2540, 84.2),
    ("2412-8b-8-fsdp2-cp4", _T2, "8b", 8, 2, 1, 4, 131072, 1, "full", True, "tw", False, 1071, 84.0),
    ("2412-8b-8-fsdp1-cp8", _T2, "8b", 8, 1, 1, 8, 262144, 1, "full", True, "tw", False, 548, 84.5),
    ("2412-8b-128-fsdp", _T3, "8b", 128, 128, 1, 1, 8192, 2, "op", False, None, False, 5605, 67.0),
    ("2412-8b-128-fsdp-compile", _T3, "8b", 128, 128, 1, 1, 8192, 2, "op", True, None, False, 6514, 62.0),
    ("2412-8b-128-fsdp-compile-fp8", _T3, "8b", 128, 128, 1, 1, 8192, 2, "op", True, "tw", False, 8380, 61.8),
    ("2412-70b-256-2d", _T4, "70b", 256, 32, 8, 1, 8192, 16, "full", True, "tw", False, 829, 71.9),
    ("2412-70b-256-2d-asynctp", _T4, "70b", 256, 32, 8, 1, 8192, 16, "full", True, "tw", True, 876, 67.6),
    ("2506-8b-64-bf16-tp", _A8, "8b", 64, 8, 8, 1, 8192, 12, "op", True, None, False, 4378, None),
    ("2506-8b-64-bf16-async", _A8, "8b", 64, 8, 8, 1, 8192, 12, "op", True, None, True, 4809.4, None),
    ("2506-8b-64-fp8tw-tp", _A8, "8b", 64, 8, 8, 1, 8192, 12, "op", True, "tw", False, 5078.1, None),
    ("2506-8b-64-fp8tw-async", _A8, "8b", 64, 8, 8, 1, 8192, 12, "op", True, "tw", True, 5570.1, None),
    ("2506-8b-64-fp8rw-tp", _A8, "8b", 64, 8, 8, 1, 8192, 12, "op", True, "rw", False, 3708.5, None),
    ("2506-8b-64-fp8rw-async", _A8, "8b", 64, 8, 8, 1, 8192, 12, "op", True, "rw", True, 3914.9, None),
    ("2506-70b-256-bf16-tp", _A70, "70b", 256, 32, 8, 1, 8192, 16, "full", True, None, False, 597.3, None),
    ("2506-70b-256-bf16-async", _A70, "70b", 256, 32, 8, 1, 8192, 16, "full", True, None, True, 652.4, None),
    ("2506-70b-256-fp8tw-tp", _A70, "70b", 256, 32, 8, 1, 8192, 16, "full", True, "tw", False, 809.8, None),
    ("2506-70b-256-fp8tw-async", _A70, "70b", 256, 32, 8, 1, 8192, 16, "full", True, "tw", True, 942.4, None),
    ("2506-70b-256-fp8rw-tp", _A70, "70b", 256, 32, 8, 1, 8192, 16, "full", True, "rw", False, 599.6, None),
    ("2506-70b-256-fp8rw-async", _A70, "70b", 256, 32, 8, 1, 8192, 16, "full", True, "rw", True, 624.8, None),
    ("2408-405b-128-bf16", _D405, "405b", 128, 16, 8, 1, 8192, 2, "full", None, None, False, 109, None),
    ("2408-405b-128-fp8", _D405, "405b", 128, 16, 8, 1, 8192, 2, "full", None, "tw", False, 177, None),
    ("2408-405b-128-fp8-asynctp", _D405, "405b", 128, 16, 8, 1, 8192, 2, "full", None, "tw", True, 185, None),
    ("trainy2506-8b-32-h200-fp8", _TR, "8b", 32, 32, 1, 1, 8192, 2, "op", True, "tw", False, 10938, 47.96),
    ("trainy2506-8b-64-h200-fp8", _TR, "8b", 64, 64, 1, 1, 8192, 2, "op", True, "tw", False, 10753, 46.97),
]
# fmt: on
EXCLUDED["torchtitan-2412 Tables 5-6"] = (
    "Llama 3.1 405B on 512 GPUs with FSDP 8 x TP 8 x PP 8 (and CP): ZeRO-3 sharding with pipeline "
    "parallelism is not modelled (parallel.zero 3 needs pp = 1)"
)
TT_READ_AT = {
    "2412": "read at step 90",
    "2506": "step not stated",
    "2408": "step not stated",
    "trainy2506": "read at step 100",
}

# What torchtitan sets that its tables leave implicit, with the source file (torchtitan 9dec370
# unless said otherwise).
TT_TITAN_9DEC = "https://github.com/pytorch/torchtitan/blob/9dec370ad26b5f8e9a7333a0e36165018262644b/"
TT_COMMON = {
    "training.attention": (
        "flash",
        "torchtitan's Llama calls F.scaled_dot_product_attention(is_causal=True) "
        "(torchtitan/models/llama/model.py)",
    ),
    "training.attention_kernel": (
        "flash-attention-2",
        "the SDPA backend is not stated; PyTorch's flash backend for bf16 on H100 is its "
        "FlashAttention-2 kernel (_scaled_dot_product_flash_attention, in the op-SAC save list)",
    ),
    "training.grad_reduce_dtype": (
        "fp32",
        "FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=float32): --training."
        "mixed_precision_param default bfloat16, --training.mixed_precision_reduce default float32 "
        "(torchtitan/config_manager.py)",
    ),
    "training.micro_batch": (
        "local batch",
        "torchtitan of these dates runs one forward/backward of the local batch per step (no "
        "gradient accumulation)",
    ),
    "parallel.zero": (
        3,
        "FSDP2: fully_shard on every TransformerBlock and on the model (apply_fsdp in "
        "parallelize_llama.py): parameters, gradients and optimizer state sharded over the FSDP "
        "mesh, all-gathered per block in forward and backward, gradients reduce-scattered",
    ),
    "parallel.zero3_impl": (
        "overlap",
        "FSDP2 prefetches the next block's all-gather on its own stream (implicit forward "
        "prefetch); reshard_after_forward=True for every block but the last",
    ),
    "network": (
        "8 x 400 Gb/s per host, fat-tree",
        "400 Gb/s per GPU stated; topology and congestion control not stated: a two-level Clos as "
        "in Meta's RoCE training clusters (Gangidi et al., SIGCOMM 2024), DCQCN as for the other "
        "cases",
    ),
}
TT_GPU_NOTE = {
    "H100-GT": (
        "H100-SXM",
        "the Grand Teton H100 as stated (96 GB HBM2e, 2.4 TB/s, 500 W power limit), defined in the "
        "cluster's gpus: under the catalogue name H100-SXM it shadows; its peaks (the source: 'between "
        "SXM and NVL, and we don't know its exact value'), NVLink and PCIe are the H100-SXM's; its "
        "compute curves and sustained GEMM ceiling are the H100-SXM's at 700 W, and compute-bound ops "
        "run at the clock the H100-SXM's measured clock-power curve gives at 500 W (power_limit_w)",
    ),
    "H200": ("H200-SXM", "H200 stated; SXM form factor assumed (8 per host on NVLink)"),
}
TT_AC = {
    "op": (
        "selective_op",
        "torchtitan's selective op AC (mode = 'selective', selective_ac_option = 'op': stated, or "
        "the llama3_8b.toml preset of the run's commit where the source does not say): "
        "_apply_ac_to_transformer_block with _custom_policy and _save_list ("
        + TT_TITAN_9DEC
        + "torchtitan/parallelisms/parallelize_llama.py; the same policy in "
        "torchtitan/models/llama3/parallelize_llama.py at e7c0cae and 820504e): the outputs of "
        "aten.mm, SDPA and reduce_scatter are saved except every second mm of a block (wk, wo, w3), "
        "which is recomputed with the norms, RoPE and SiLU x mul (heterosim/workload/op_sac.py); "
        "float8 rows: torchao's Float8Linear calls mm on float8 tensor subclasses, seen by the "
        "checkpoint's dispatch mode as aten.mm before the subclass lowers it to _scaled_mm (not in "
        "the save list), so its GEMMs are counted like bf16 ones (assumed)",
    ),
    "full": ("full", "stated (full activation checkpointing: ptd_checkpoint_wrapper on every block)"),
}
TT_NOT_MODELLED = {
    "gpu": {
        "what": "the Grand Teton H100's own clock-power curve: its 500 W limit is modelled with the 700 W "
        "H100-SXM's measured curve (HBM3; the HBM2e part's memory draws less, leaving its SMs more of "
        "the limit, so its clock may be higher)",
        "source": "source 'Hardware' section and footnote 2",
    },
    "rw": {
        "what": "float8 rowwise scaling (per-row scales and their kernels; the source notes the low "
        "vanilla-TP rowwise baseline, pytorch/torchtitan#1207): simulated as tensorwise fp8 GEMMs",
        "source": "source table note",
    },
    "tp-fp8": {
        "what": "float8 all-gather of the TP activations (torchao Float8ColwiseParallel casts before the "
        "all-gather): simulated in bf16",
        "source": "torchtitan/parallelisms/parallelize_llama.py apply_tp (float8 TP plan)",
    },
    "fsdp-fp8": {
        "what": "FSDP float8 all-gather of the weights (enable_fsdp_float8_all_gather, precomputed "
        "scales): simulated as bf16 parameter gathers",
        "source": "",
    },
    "eager": {
        "what": "torchtitan's eager Llama uses complex-number RoPE and an unfused RMSNorm; simulated "
        "with the eager kernel set (rotate-half RoPE, HF-style), kernel counts differ",
        "source": TT_TITAN_9DEC + "torchtitan/models/llama/model.py",
    },
    "cp": {
        "what": "PyTorch's context parallel attention (parallel.cp_impl: pytorch): every CP rank is "
        "charged the slowest rank's fp32 merges and accumulations (the others merge half the output "
        "on some steps), the SDPA calls over half chunks are timed as causal kernels of the same "
        "FLOPs, and the dK/dV rotation of step 0 may start before the K/V all-gather ends (one NCCL "
        "stream in PyTorch); the merges are charged as the source's eager kernels, though these runs "
        "compile every block: whether torch.compile captures the CP path is not established (compiled, "
        "a forward merge would be about one fused pass, 10 B per output element instead of 38)",
        "source": "torch/distributed/tensor/experimental/_attention.py _templated_ring_attention, "
        "_templated_ring_attention_backward",
    },
    "asynctp": {
        "what": "async TP's SymmetricMemory fused matmuls pull the shards with the copy engine, one "
        "peer at a time, and fused_matmul_reduce_scatter ends in a local sum: simulated as the NCCL "
        "collectives beside the fused GEMMs (parallel.tp_comm_overlap_method: torch_async_tp)",
        "source": "torch/distributed/_symmetric_memory/__init__.py _pipelined_all_gather_and_consume, "
        "_pipelined_produce_and_all2all",
    },
}


def _tt_src(name: str) -> str:
    return name.split("-")[0]


def _tt_cluster(name: str, gpus: int) -> dict[str, Any]:
    """8 GPUs per host on NVLink, one 400 Gb/s NIC per GPU; the H100 rows define the source's H100."""
    src = _tt_src(name)
    gpu = "H200" if src == "trainy2506" else "H100-GT"
    cluster = host_cluster(TT_GPU[gpu], gpus, 8, 8, 400, "fat-tree")
    if gpu == "H100-GT":
        cluster["gpus"] = {TT_GPU[gpu]: _tt_h100_gpu(src)}
    return cluster


def _tt_experiment(row: tuple[Any, ...]) -> dict[str, Any]:
    name, _, model, gpus, fsdp, tp, cp, seq, lb, ac, compile_, f8, async_tp, _, _ = row
    hidden, layers, heads, kv_heads, ffn = TT_MODELS[model]
    parallel: dict[str, Any] = {
        "tp": tp,
        "pp": 1,
        "dp": fsdp,
        "vpp": 1,
        "zero": 3,
        "zero3_impl": "overlap",
        "sequence_parallel": tp > 1,
        "distributed_optimizer": False,
        "partition": "uniform",
    }
    if cp > 1:
        parallel.update(cp=cp, cp_comm="all_gather", cp_impl="pytorch")
    if tp > 1:
        parallel["tp_backward_overlap"] = False  # DTensor (_tt_assumed)
    if async_tp:
        parallel.update(tp_comm_overlap=True, tp_comm_overlap_method="torch_async_tp")
    return {
        "name": f"torchtitan-{name}",
        "model": {
            "name": f"llama3.1-{model}",
            "arch": "llama",
            "hidden": hidden,
            "layers": layers,
            "heads": heads,
            "kv_heads": kv_heads,
            "ffn": ffn,
            "vocab": 128256,
            "seq": seq,
        },
        "training": {
            "global_batch": lb * fsdp,
            "micro_batch": lb,
            "seq_len": seq,
            "dtype": "fp8" if f8 else "bf16",
            "recompute": TT_AC[ac][0],
            "attention": "flash",
            "attention_kernel": "flash-attention-2",
            "grad_reduce_dtype": "fp32",
            "kernels": "eager" if compile_ is False else "fused",
        },
        "parallel": parallel,
        "cluster": _tt_cluster(name, gpus),
        "network": {"cc": "dcqcn"},
        "simulation": {"fidelity": "flow"},
    }


def _tt_assumed(row: tuple[Any, ...], experiment: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    name, _, _, gpus, fsdp, tp, cp, _, lb, ac, compile_, f8, _, _, _ = row
    src = _tt_src(name)
    gpu = "H200" if src == "trainy2506" else "H100-GT"
    assumed = {"cluster.gpu": TT_GPU_NOTE[gpu], **TT_COMMON, "training.recompute": TT_AC[ac]}
    assumed["training.micro_batch"] = (lb, TT_COMMON["training.micro_batch"][1])
    if src != "2412" or cp > 1:
        assumed["training.global_batch"] = (
            lb * fsdp,
            "local batch x FSDP degree (torchtitan: every FSDP rank loads its own local batch; "
            "TP and CP ranks share one)",
        )
    if compile_ is None:
        assumed["training.kernels"] = (
            "fused",
            "torch.compile not stated for these rows; the preset train_configs/llama3_405b.toml of "
            "the commit that added them (9515a14) sets compile = true",
        )
    else:
        assumed["training.kernels"] = (
            experiment["training"]["kernels"],
            "torch.compile of every TransformerBlock (apply_compile) fuses the elementwise work "
            "(RMSNorm, SiLU x mul, RoPE) with Inductor"
            if compile_
            else "no torch.compile: plain PyTorch kernels",
        )
    if tp > 1:
        assumed["parallel.tp_backward_overlap"] = (
            False,
            "PyTorch DTensor TP: the input gradient's reduction is the backward of the input "
            "redistribution, run when autograd reaches it, after the linear's backward node has "
            "computed dgrad and wgrad together",
        )
    if f8:
        assumed["training.dtype"] = (
            "fp8",
            "float8 (torchao Float8Linear, dynamic scaling) on the block nn.Linear layers, attention "
            "and the output layer in bf16: fp8 GEMMs, everything else bf16",
        )
    if not f8 and src != "2506":
        assumed["training.dtype"] = (
            "bf16",
            "no float8: FSDP2 mixed precision with bf16 parameters (--training.mixed_precision_param "
            "default bfloat16)",
        )
    if f8 and src in ("2412", "2506") and tp == 1:
        assumed["float8.enable_fsdp_float8_all_gather"] = (
            False,
            "not stated; off in the llama3_8b.toml preset (weights gathered in bf16)",
        )
    if tp > 1:
        assumed["parallel.sequence_parallel"] = (
            True,
            "torchtitan's TP plan shards the norms over the sequence (SequenceParallel in apply_tp)",
        )
    if experiment["parallel"].get("tp_comm_overlap"):
        assumed["parallel.tp_comm_overlap"] = (True, "async TP stated (enable_async_tp)")
        assumed["parallel.tp_comm_overlap_method"] = (
            "torch_async_tp",
            "torchtitan's enable_async_tp sets torch._inductor.config._micro_pipeline_tp; its pass "
            "(torch/_inductor/fx_passes/micro_pipeline_tp.py fuse_all_gather_matmul, "
            "fuse_matmul_reduce_scatter) fuses the all-gathers feeding QKV/fc1 and the out_proj/fc2 "
            "dgrad as left operand and the reduce-scatters of a single-user matmul (out_proj/fc2 "
            "forward); the backward input re-gather and the input-gradient reduce-scatters (sums of "
            "the wq/wk/wv or w1/w3 dgrads) stay unfused",
        )
    if cp > 1:
        assumed["parallel.cp_comm"] = (
            "all_gather",
            "torch.distributed.tensor.experimental context_parallel: _ContextParallelOptions."
            "rotate_method defaults to ALL_GATHER, enable_load_balance = True (head-tail chunks)",
        )
        assumed["parallel.cp_impl"] = (
            "pytorch",
            "torchtitan's create_context_parallel_ctx enters torch.distributed.tensor.experimental."
            "context_parallel (torchtitan/utils.py at 9dec370): PyTorch's ring attention with "
            "convert_to_f32 (fp32 merges, dK/dV rotated in fp32), on K/V that torchtitan's Llama "
            "repeats to the query's heads (repeat_kv) before SDPA",
        )
        assumed["parallel.zero"] = (
            3,
            TT_COMMON["parallel.zero"][1] + "; FSDP shards over the dp x cp mesh (dp_shard_cp)",
        )
    if gpus <= 8:
        del assumed["network"]
    elif src == "2408":
        assumed["network"] = (
            "8 x 400 Gb/s per host, fat-tree",
            "not stated in docs/performance.md; the torchtitan team's H100 machines of the later files "
            "(400 Gb/s RDMA per GPU), topology as for the other torchtitan cases",
        )
    return assumed


def _tt_not_modelled(row: tuple[Any, ...]) -> list[dict[str, str]]:
    _, _, _, _, _, tp, cp, _, _, _, compile_, f8, async_tp, _, _ = row
    src = _tt_src(row[0])
    out = []
    if src != "trainy2506":
        gpu_note = dict(TT_NOT_MODELLED["gpu"])
        if src == "2408":  # docs/performance.md states only 'HBM2e based lower TDP SXM H100 (95GB)'
            gpu_note["source"] = (
                "docs/performance.md footnote 1 (lower-TDP HBM2e H100, 95GB); 500 W and 2.4 TB/s from "
                "the 2412 file's hardware section"
            )
        out.append(gpu_note)
    if compile_ is False:
        out.append(TT_NOT_MODELLED["eager"])
    if f8 == "rw":
        out.append(TT_NOT_MODELLED["rw"])
    if f8 and tp > 1:
        out.append(TT_NOT_MODELLED["tp-fp8"])
    if f8 and src in ("2408", "trainy2506"):
        where = {"2408": "llama3_405b.toml at 9515a14", "trainy2506": "the source's command line"}[src]
        out.append({**TT_NOT_MODELLED["fsdp-fp8"], "source": where})
    if cp > 1:
        out.append(TT_NOT_MODELLED["cp"])
    if async_tp:
        out.append(TT_NOT_MODELLED["asynctp"])
    return [dict(x) for x in out]


def _tt_published(row: tuple[Any, ...]) -> dict[str, Any]:
    """The source's configuration in the shared file's schema; model dimensions are the model's
    (SEC), global batch and dp derived where the source gives local batch and FSDP degree (DER)."""
    _, _, model, gpus, fsdp, tp, cp, seq, lb, ac, compile_, f8, async_tp, _, _ = row
    src = _tt_src(row[0])
    hidden, layers, heads, kv_heads, ffn = TT_MODELS[model]
    return {
        "model": {
            "name": f"llama3.1-{model}",
            "hidden": hidden,
            "layers": layers,
            "heads": heads,
            "kv_heads": kv_heads,
            "ffn": ffn,
            "vocab": 128256,
            "seq_len": seq,
            "arch": "llama",
            "params_b": {"8b": 8, "70b": 70, "405b": 405}[model],
        },
        "training": {
            "global_batch": lb * fsdp,
            "micro_batch": lb,
            "dtype": "fp8" if f8 else ("bf16" if src == "2506" else None),
            "float8_recipe": {None: None, "tw": "tensorwise", "rw": "rowwise"}[f8],
            "recompute": TT_AC[ac][0],
            "ac_option": "op" if ac == "op" else None,
            "torch_compile": compile_,
            "seq_len": seq,
        },
        "parallel": {
            "tp": tp,
            "pp": 1,
            "dp": fsdp,
            "vpp": None,
            "cp": cp,
            "ep": 1,
            "sp": None,
            "zero": None,
            "fsdp": fsdp,
            "async_tp": async_tp,
            "schedule": None,
        },
        "cluster": {
            "gpu": TT_GPU_PUBLISHED[src],
            "gpus": gpus,
            "gpus_per_host": 8,
            "intra_host": "NVLink",
            "nic_gbps_per_gpu": 400,
            "nics_per_host": None,
            "fabric": None,
        },
    }


def torchtitan_cases() -> list[dict[str, Any]]:
    """torchtitan's published Llama 3.1 runs (TT_ROWS), as HeteroSim experiments."""
    cases = []
    for row in TT_ROWS:
        name, where, model, gpus, fsdp, _, _, seq, lb, _, _, f8, _, tps, mem = row
        src = _tt_src(name)
        experiment = _tt_experiment(row)
        assumed = _tt_assumed(row, experiment)
        measured: dict[str, float] = {
            "tokens_per_s_per_gpu": tps,
            "iteration_time_s": round(lb * fsdp * seq / (tps * gpus), 3),
        }
        if mem is not None:
            measured["memory_gib"] = mem
        flags = ["DER", "SEC", "NS", "DER:measured.iteration_time_s", "DER:parallel.dp"]
        if "training.global_batch" in assumed:
            flags.append("DER:training.global_batch")
        flags += [f"SEC:model.{k}" for k in ("hidden", "layers", "heads", "kv_heads", "ffn", "vocab")]
        if f8 == "rw":
            flags.append("APPROX")
        cases.append(
            {
                "id": f"torchtitan-{name}",
                "group": "torchtitan",
                "kind": "throughput",
                "source": "torchtitan (Liang et al., ICLR 2025, arXiv:2410.06511); numbers from "
                + TT_SRC[src]
                + where,
                "flags": flags,
                "ci": False,
                "calibration": False,
                "compare": {"quantity": "tokens_per_s_per_gpu"},
                "measured": measured,
                "assumed": {k: {"value": v, "why": why} for k, (v, why) in assumed.items()},
                "not_modelled": _tt_not_modelled(row),
                "experiment": experiment,
                "published": _tt_published(row),
                "note": "transcribed from the torchtitan repository (not in the shared file); TPS/GPU "
                f"as torchtitan logs it ({TT_READ_AT[src]}); iteration_time_s = "
                "global_batch x seq / (TPS x GPUs) (DER)"
                + ("; APPROX: float8 rowwise simulated as tensorwise" if f8 == "rw" else ""),
            }
        )
    return cases


HEADER = """\
# HeteroSim validation cases, generated by validation/build_cases.py from
# ../shared/validation/cases_public.yaml (published end-to-end measurements; ids, sources, flags and
# notes kept), Korthikanti et al. MLSys 2023 Tables 4-5 (transcribed in build_cases.py) and
# docs/network_models.md §5.1 (nccl-tests bus bandwidth).
# Per case: `experiment` is what the simulator runs; `assumed` lists every value the source does
# not state, with the reason; `published` is the source's configuration as given; `compare` names
# the published quantity and FLOP convention used; `ci: true` cases run in CI (heterosim validate
# --ci); `calibration: true` would mark a case used to fit a constant (none is).
# Excluded sources:
{excluded}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("public", nargs="?", default=str(DEFAULT_PUBLIC))
    parser.add_argument("--out", default=str(HERE / "cases.yaml"))
    args = parser.parse_args(argv)
    data = yaml.safe_load(Path(args.public).read_text())
    by_id = {c["id"]: c for c in data["cases"]}
    missing = sorted(set(SELECTED) - set(by_id))
    if missing:
        print(f"cases not in {args.public}: {', '.join(missing)}", file=sys.stderr)
        return 2
    cases = [e2e_case(by_id[i]) for i in by_id if i in SELECTED]
    cases += [
        amp_case(c)
        for c in data["cases"]
        if c["id"].startswith("amp-het-") and not (c.get("extra") or {}).get("run_failed")
    ]
    cases += mlsys23_cases()
    cases += torchtitan_cases()
    cases += [nccl_case(spec) for spec in NCCL_CASES]
    excluded = "\n".join(f"#   {k}: {v}" for k, v in EXCLUDED.items())
    text = HEADER.format(excluded=excluded) + yaml.safe_dump(
        {"cases": cases}, sort_keys=False, width=110, allow_unicode=True
    )
    Path(args.out).write_text(text)
    print(f"wrote {len(cases)} cases to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
