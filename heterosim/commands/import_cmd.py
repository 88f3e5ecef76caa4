"""``heterosim import aicb|sailor|amp|metis|flashflex FILE``: another tool's workload or plan as an
experiment.

aicb: a SimAI/AICB workload file; the experiment YAML states the file's parallel sizes, the
model shape read from its communication sizes and the batch. sailor: a Sailor plan JSON; amp: an
AMP ``partition.json`` (with ``--rank-map rank_map.json``); metis: a line of Metis's ranked
results (``--plan-rank``); flashflex: FlashFlex's hetero config JSON; all become an explicit
heterogeneous plan (``parallel.stages``) on ``--cluster`` for ``--model``. Comments at the top say
which values came from the file and which were assumed. Run it with ``heterosim run EXPERIMENT.yaml``.
"""

from __future__ import annotations

import argparse

EXAMPLES = """\
examples:
  heterosim import aicb SimAI/example/microAllReduce.txt --out workloads/micro_allreduce.yaml
  heterosim import aicb workload.txt --cluster topologies/h2_128gpu.yaml --out exp.yaml
  heterosim import aicb workload.txt --seq-len 2048 --micro-batch 2   # YAML on stdout
  heterosim import sailor plan_config.json --model gpt3-6.7b --cluster mit.yaml --out exp.yaml
  heterosim import sailor plan.json --model gpt3-350m --cluster c.yaml --gpu-map RTX-2080=RTX-2080-Ti
  heterosim import amp partition.json --rank-map rank_map.json --tp 2 --model gpt3-1.3b \
      --cluster amp.yaml --global-batch 32 --micro-batch 2 --out amp_plan.yaml
  heterosim import metis hetero_cost_model.txt --plan-rank 1 --model gpt3-1.3b --cluster c.yaml \
      --global-batch 128
  heterosim import flashflex all_hetero_configs.json --model llama-7b --cluster c.yaml --global-batch 8
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import",
        help="convert another tool's workload (SimAI/AICB) into an experiment",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "format",
        choices=("aicb", "sailor", "amp", "metis", "flashflex"),
        help="input format: aicb (SimAI workload), sailor (plan JSON), amp (partition.json), "
        "metis (its printed results), flashflex (hetero config JSON)",
    )
    parser.add_argument("file", help="the workload or plan file")
    parser.add_argument(
        "--cluster",
        metavar="CLUSTER.yaml",
        help="cluster file (its GPU count must equal all_gpus; default: an "
        "inline homogeneous H100 cluster of all_gpus GPUs)",
    )
    parser.add_argument(
        "--out", metavar="EXPERIMENT.yaml", help="experiment file to write (default: print it)"
    )
    parser.add_argument(
        "--seq-len", type=int, default=None, help="sequence length the file was generated with (default 4096)"
    )
    parser.add_argument(
        "--micro-batch",
        type=int,
        default=None,
        help="micro-batch size the file was generated with (default 1; sailor: the plan's mbs)",
    )
    parser.add_argument("--model", help="sailor/amp: model zoo name the plan was made for")
    parser.add_argument(
        "--training-config",
        metavar="training_config.json",
        help="sailor: Sailor's training config (model shape, sequence length, "
        "global batch) instead of --model",
    )
    parser.add_argument(
        "--global-batch",
        type=int,
        default=None,
        help="sailor/amp: global batch in sequences (sailor: default the plan's gbs)",
    )
    parser.add_argument(
        "--dtype",
        default=None,
        choices=("fp16", "bf16", "fp32"),
        help="sailor/amp: training dtype (default: sailor fp32, as Sailor's launch scripts pass "
        "neither --fp16 nor --bf16; amp fp16, as AMP trains)",
    )
    parser.add_argument(
        "--gpu-map",
        action="append",
        default=[],
        metavar="PLAN_NAME=GPU",
        help="sailor: map a GPU type name of the plan to a catalogue or cluster name (repeatable; "
        "Sailor's RTX-2080, 11 GiB, becomes RTX-2080-Ti where the cluster has it and no RTX-2080)",
    )
    parser.add_argument(
        "--rank-map",
        metavar="rank_map.json",
        help="amp: AMP's rank map (node -> ranks); default rank r on GPU r",
    )
    parser.add_argument("--tp", type=int, default=None, help="amp: the plan's model-parallel degree")
    parser.add_argument(
        "--plan-rank",
        type=int,
        default=1,
        help="metis: which ranked plan of the results (default 1, the cheapest)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from heterosim.importers.aicb import import_aicb
    from heterosim.importers.experiment_file import PlanImport, import_plan, write_experiment
    from heterosim.report.staging import check_output_file, write_file_atomically

    out = check_output_file(args.out) if args.out else None  # before anything is read
    if args.format in ("sailor", "amp", "metis", "flashflex"):
        options = PlanImport(
            model=args.model,
            training_config=args.training_config,
            cluster=args.cluster,
            seq_len=args.seq_len,
            micro_batch=args.micro_batch,
            global_batch=args.global_batch,
            dtype=args.dtype,
            gpu_map=list(args.gpu_map),
            rank_map=args.rank_map,
            tp=args.tp,
            plan_rank=args.plan_rank,
        )
        imported = import_plan(args.format, args.file, options, out)
    else:
        imported = import_aicb(args.file, args.cluster, out, args.seq_len, args.micro_batch)
    if out is None:
        write_experiment(imported.text, None)
    else:
        write_file_atomically(out, imported.text)
        print(imported.summary)
    return 0
