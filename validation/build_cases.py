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
}
SP = {"parallel.sequence_parallel": (True, "Megatron-Core performance configs enable SP with TP")}
MBRIDGE = {
    "training.attention": FLASH,
    "training.recompute": ("none", "Megatron-Bridge H100 performance recipes do not recompute"),
    "parallel.distributed_optimizer": (True, "fsdp column 0 = DDP with distributed optimizer (note)"),
    "parallel.zero": (0, "sharding is the distributed optimizer (above)"),
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
README2020 = {**README2020, **MEGATRON_V1_DDP}
SC21 = {**SC21, **MEGATRON_V1_DDP}

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
    for key in ("p2p_sync", "p2p_scatter_gather", "tp_comm_overlap"):
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
