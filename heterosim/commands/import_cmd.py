"""``heterosim import aicb FILE``: turn a SimAI/AICB workload file into a HeteroSim experiment.

The experiment YAML states the file's parallel sizes, the model shape read from its
communication sizes and the batch; comments at the top say which values came from the file and
which were assumed. Run it with ``heterosim run EXPERIMENT.yaml``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import yaml

from heterosim.errors import UserError

EXAMPLES = """\
examples:
  heterosim import aicb SimAI/example/microAllReduce.txt --out workloads/micro_allreduce.yaml
  heterosim import aicb workload.txt --cluster topologies/h2_128gpu.yaml --out exp.yaml
  heterosim import aicb workload.txt --seq-len 2048 --micro-batch 2   # YAML on stdout
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import", help="convert another tool's workload (SimAI/AICB) into an experiment",
        description=__doc__, epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("format", choices=("aicb",), help="input format: aicb (SimAI workload)")
    parser.add_argument("file", help="the workload file")
    parser.add_argument("--cluster", metavar="CLUSTER.yaml",
                        help="cluster file (its GPU count must equal all_gpus; default: an "
                             "inline homogeneous H100 cluster of all_gpus GPUs)")
    parser.add_argument("--out", metavar="EXPERIMENT.yaml",
                        help="experiment file to write (default: print it)")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="sequence length the file was generated with (default 4096)")
    parser.add_argument("--micro-batch", type=int, default=None,
                        help="micro-batch size the file was generated with (default 1)")
    parser.set_defaults(func=run)


def _cluster_reference(path: Path, out: Path | None, gpus: int) -> str:
    from heterosim.config.cluster import load_cluster

    cluster = load_cluster(path)
    if cluster.world_size != gpus:
        raise UserError(f"--cluster {path}: has {cluster.world_size} GPUs but the workload's "
                        f"all_gpus is {gpus}")
    base = (out.parent if out else Path.cwd()).resolve()
    return os.path.relpath(path.resolve(), base)


def run(args: argparse.Namespace) -> int:
    from heterosim.config.experiment import parse_experiment
    from heterosim.report.staging import check_output_file, write_file_atomically
    from heterosim.workload.aicb import (
        DEFAULT_MICRO_BATCH,
        DEFAULT_SEQ_LEN,
        aicb_experiment,
        read_aicb,
    )

    seq_len = DEFAULT_SEQ_LEN if args.seq_len is None else args.seq_len
    micro_batch = DEFAULT_MICRO_BATCH if args.micro_batch is None else args.micro_batch
    if seq_len < 1 or micro_batch < 1:
        raise UserError("--seq-len and --micro-batch: expected positive integers")
    out = check_output_file(args.out) if args.out else None
    workload = read_aicb(args.file)
    cluster = (_cluster_reference(Path(args.cluster), out, workload.all_gpus)
               if args.cluster else None)
    experiment, notes = aicb_experiment(workload, seq_len=seq_len, micro_batch=micro_batch,
                                        cluster=cluster)
    # Validate before writing: the experiment must load as written.
    base = (out.parent if out else Path.cwd())
    parse_experiment(experiment, str(out or "<stdout>"), base_dir=base)
    header = [f"Imported from the SimAI/AICB workload {args.file} by `heterosim import aicb`.",
              f"{workload.policy}: tp {workload.tp}, ep {workload.ep}, pp {workload.pp}, "
              f"ga {workload.ga}, all_gpus {workload.all_gpus}, {len(workload.lines)} layer lines.",
              "How each value was found:", *(f"  - {n}" for n in notes)]
    text = "\n".join(f"# {line}" for line in header) + "\n"
    text += yaml.safe_dump(experiment, sort_keys=False, default_flow_style=None, width=100)
    if out is None:
        print(text, end="")
        return 0
    write_file_atomically(out, text)
    print(f"{out}: {experiment['name']}: {experiment['model']['layers']} layers, hidden "
          f"{experiment['model']['hidden']}, tp {workload.tp} pp {workload.pp} dp {workload.dp}"
          f"{f' ep {workload.ep}' if workload.ep > 1 else ''}, global batch "
          f"{experiment['training']['global_batch']}")
    return 0
