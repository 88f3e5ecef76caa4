"""``heterosim profile``: time compute ops with PyTorch and write an operation database."""

from __future__ import annotations

import argparse

from heterosim.plan.compute import layer_profiler, profiler

EXAMPLES = """\
examples:
  heterosim profile --out h100.db                         # standard GEMM/attention/norm/elementwise sweep
  heterosim profile --out h100.db --experiment exp.yaml   # the distinct ops of one experiment
  heterosim profile --out cpu.db --device cpu --repeats 5 # plumbing check (CPU times are not GPU times)
  heterosim profile --out h100.db --layers standard       # whole layers, forward and backward, back to back
  heterosim profile --out h100.db --layers exp.yaml --layer-modes eager,compile
Ops are timed back to back at the power-limited clock by default (--method sustained); --method
burst times one call at a time with idle gaps (the GPU's boost clock: optimistic for training).
Use the result in a run: heterosim run exp.yaml --db h100.db (or ComputeModel(databases=["h100.db"])).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="time compute ops on the local GPU into an operation database",
        epilog=EXAMPLES,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", required=True, help="SQLite database to create or append to")
    parser.add_argument("--experiment", help="profile the distinct ops of this experiment file")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument(
        "--method",
        choices=profiler.METHODS,
        default="sustained",
        help="sustained: back-to-back windows after a warm-up (default); burst: one call at a time",
    )
    parser.add_argument(
        "--layers",
        metavar="standard|EXPERIMENT",
        help="also time whole layers: the standard set, or the layer of this experiment file",
    )
    parser.add_argument(
        "--layer-modes", default="eager", help="comma-separated: eager, compile (default eager)"
    )
    parser.add_argument("--repeats", type=int, default=20, help="timed runs (burst) or windows (sustained)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs per op first")
    parser.add_argument("--no-l2-flush", action="store_true", help="do not flush L2 between runs")
    parser.add_argument("--gpu", help="catalogue name to file the rows under (default: detected)")
    parser.add_argument(
        "--dtype",
        choices=("bf16", "fp16", "fp32"),
        help="dtype of the standard sweep (default bf16 on GPU, fp32 on CPU)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from heterosim.report.staging import check_output_file

    check_output_file(args.out)  # before any op is timed
    modes = [m.strip() for m in args.layer_modes.split(",") if m.strip()]
    if args.layers:
        layer_profiler.check_modes(modes)  # before anything is timed or written
    layers = layer_profiler.layer_specs(args.layers) if args.layers else None
    device = profiler.resolve_device(profiler.import_torch(), args.device)
    ops = profiler.experiment_ops(args.experiment) if args.experiment else None
    if ops is None and args.layers:  # the layers' own ops, so each layer's gap can be measured
        layers = layer_profiler.device_layers(device, layers)
        ops = layer_profiler.distinct_layer_ops(layers)
    profiler.profile(
        args.out,
        ops,
        device=device,
        repeats=args.repeats,
        warmup=args.warmup,
        l2_flush=not args.no_l2_flush,
        gpu=args.gpu,
        dtype=args.dtype,
        method=args.method,
    )
    if args.layers:
        layer_profiler.profile_layers(
            args.out, layers, modes=modes, device=device, repeats=min(args.repeats, 5), gpu=args.gpu
        )
    return 0
