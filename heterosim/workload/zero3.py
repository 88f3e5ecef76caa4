"""ZeRO-3 as DeepSpeed 0.3.x runs it (``parallel.zero3_impl: deepspeed-0.3``).

What the generator does for every ZeRO-3 implementation (heterosim/workload/generator.py): per
block (embedding, layer, head) an all-gather of the block's parameters before its forward and
again before its backward, issued ``zero3_prefetch`` blocks ahead on the communication stream,
and a reduce-scatter of its gradients after its backward. That is how FSDP and DeepSpeed >= 0.5
behave (``zero3_impl: overlap``, the default). DeepSpeed 0.3.13-0.4.0 (the releases of 2021,
the ones behind the SC'21 ZeRO-3 comparison) differ in three ways, read from the source
(``deepspeed/runtime/zero/stage3.py`` and ``partition_parameters.py`` at tag v0.3.13):

1. **Which tensors are gathered, and how often.** Parameters with fewer elements than
   ``stage3_param_persistence_threshold`` (default 100,000; ``persistent_parameters``) stay
   whole on every rank and are never gathered (biases and norm weights of these models). Each
   remaining tensor is gathered by its own ``torch.distributed.all_gather`` call
   (``_allgather_param``, one call per parameter). After a module's forward it is released unless
   its next use is nearer than ``stage3_max_reuse_distance`` elements (default 1e9,
   ``_keep_for_later`` / ``_distance_in_numel``: the elements of the modules run in between).
   With full activation recomputation the backward of a layer first re-runs its forward (one
   gather per tensor) and then its backward; between a tensor's recompute use and its backward
   use run the recompute and the backward of every later tensor of the layer, so tensor i is
   gathered again when 2 x (elements of the tensors after it) >= the reuse distance
   (:func:`regathered_in_backward`). Without recomputation every tensor is gathered again for
   the backward (approximation: the few tensors at the forward/backward turn that DeepSpeed keeps
   are gathered too).
2. **The fetch is on the critical path.** ``fetch_sub_module`` waits for the gather
   (``_synchronize_communication``: ``comm_stream.synchronize()`` and ``torch.cuda.synchronize()``)
   and every ``_allgather_param`` starts with ``torch.cuda.synchronize()`` and a zero-filled
   buffer (``torch.zeros``); the all-gather writes into a list of ``n`` partition views, which
   PyTorch 1.8's ``ProcessGroupNCCL::allgather`` gathers into a flat buffer and copies out one
   partition at a time (``n`` copy kernels per call); ``reduce_scatter`` with an input list
   likewise copies ``n`` partitions into a flat buffer first. DeepSpeed's own account of it (PR
   #1188, "ZeRO3, improved parameter all-gather operation", 2021-06-25): "the async version is not
   async at all, because each all_gather calls torch.cuda.synchronize()", and "_allgather_params
   has explicit memcpy after the all-gather op".
3. **The fetch path's rate.** DeepSpeed issue #1174 ("ZeRO3 is slow, even with nvlink for
   all-gather", DeepSpeed 0.3.16, PyTorch 1.8, one 8 x A100 NVSwitch node): a 5.1B-parameter
   BERT (hidden 2560, 64 layers, ffn 10240) took 480 ms per forward with ZeRO-3 against 60 ms with
   ZeRO-2, i.e. 420 ms to fetch the ~10.2 GB of fp16 weights (386 gathered tensors). NCCL itself
   needs ~50 ms of that (10.2 GB x 7/8 at the 230 GB/s ring bus bandwidth measured on this GPU and
   fabric, validation row nccl-a100x8-nvswitch-allreduce-ring, plus per-call latency) and the
   per-call partition copies 386 x 8 x 4 us = 12 ms, which leaves 358 ms: **28.5 GB/s of gathered
   parameter bytes** (:data:`DS03_FETCH_GBPS`). That is a measurement of this implementation
   on A100, external to the validation set; it is the model's one calibration constant and is
   reported as such. It is applied as a blocking op on the rank's compute stream
   (``op_kind: framework``, provenance "framework") before each block's compute, so the error
   budget shows it apart from kernel time.

The per-call copies are charged as ``n`` kernel launches of :data:`LAUNCH_NS` each (the compute
model's modelled per-kernel launch gap, 4 us; the copies themselves are tiny at large ``n``):
per gather call and per reduce-scatter call (every parameter tensor, the persistent ones too, is
reduce-scattered by its own call in ``_reduce_scatter_gradients``).

Approximations (documented): the network all-gather of a block stays one collective of the block's
gathered bytes (the fetch op carries the per-tensor call costs); with recomputation the two
backward fetches of a block are one collective of their summed bytes; MoE layers are treated as
one tensor per expert group; ``stage3_prefetch_bucket_size`` (5e7 elements: the next tensor)
and ``stage3_max_live_parameters`` (1e9) are represented by the block-level prefetch of one block
(``zero3_prefetch``); the rate of point 3 is taken as independent of GPU generation and fabric
(one measurement, on A100).
"""

from __future__ import annotations

from dataclasses import dataclass

from heterosim.catalog.models import ModelConfig
from heterosim.config.experiment import ZERO3_IMPLS, ParallelConfig
from heterosim.workload.ops_ends import kv_heads_per_rank

__all__ = ["ZERO3_IMPLS", "BlockFetch", "block_fetches", "layer_tensors", "regathered_in_backward"]
# DeepSpeed v0.3.13 stage3.py FP16_DeepSpeedZeroOptimizer_Stage3.__init__ defaults
DS_PERSISTENCE_THRESHOLD = 100_000
DS_MAX_REUSE_DISTANCE = 1_000_000_000
# Issue #1174 (see the module docstring): 10.2e9 B / (0.420 - 0.050 - 0.012) s
DS03_FETCH_GBPS = 10.2 / (0.420 - 0.050 - 0.012)
LAUNCH_NS = 4000  # the compute model's modelled per-kernel launch gap (gpu_compute.yaml)
CALIBRATION = (
    "deepspeed-issue-1174-zero3-fetch-a100: 28.5 GB/s of gathered parameter bytes, "
    "DeepSpeed 0.3.16 on 8 x A100 NVSwitch"
)


def layer_tensors(model: ModelConfig, parallel: ParallelConfig, layer: int) -> list[int]:
    """Elements of each parameter tensor of a dense ``layer`` on one TP rank, in forward order:
    norm, fused QKV weight (+bias), out_proj weight (+bias), norm, fc1 weight (+bias), fc2 weight
    (+bias). MoE layers: one tensor of all the layer's parameters (approximation)."""
    from heterosim.workload.ops_ends import layer_params_on_rank

    if model.is_moe_layer(layer):
        return [layer_params_on_rank(model, parallel, layer)]
    tp, h = parallel.tp, model.hidden
    q = h // tp
    kv = kv_heads_per_rank(model, tp) * model.head_dim
    ffn_r = -(-model.ffn // tp)
    norm = [h, h] if model.has_bias else [h]
    bias = model.has_bias
    out: list[int] = [*norm, h * (q + 2 * kv)]
    out += [q + 2 * kv] if bias else []
    out += [q * h] + ([h] if bias else [])
    out += norm
    out += [h * ffn_r * (2 if model.gated_mlp else 1)] + ([ffn_r] if bias and not model.gated_mlp else [])
    out += [ffn_r * h] + ([h] if bias and not model.gated_mlp else [])
    return out


def regathered_in_backward(
    gathered: list[int], recompute: bool, max_reuse_distance: int = DS_MAX_REUSE_DISTANCE
) -> list[int]:
    """Gathered tensors (elements, forward order) fetched again for the backward after the
    recompute forward has used them: those whose reuse distance, 2 x the elements of the
    gathered tensors after them, is at least ``max_reuse_distance``. Without recomputation:
    all of them."""
    if not recompute:
        return list(gathered)
    out = []
    for i, numel in enumerate(gathered):
        if 2 * sum(gathered[i + 1 :]) >= max_reuse_distance:
            out.append(numel)
    return out


@dataclass(frozen=True)
class BlockFetch:
    """What DeepSpeed 0.3.x fetches for one block in one pass of one micro-batch."""

    gather_calls: int
    gather_elements: int
    reduce_scatter_calls: int = 0

    def fetch_ns(self, element_bytes: int, ranks: int) -> int:
        """Blocking time on the rank: gathered bytes at the fetch path's rate plus ``ranks``
        partition copies per call."""
        rate = DS03_FETCH_GBPS * 1e9
        return int(
            round(self.gather_elements * element_bytes / rate * 1e9 + self.gather_calls * ranks * LAUNCH_NS)
        )

    def scatter_ns(self, ranks: int) -> int:
        return int(self.reduce_scatter_calls * ranks * LAUNCH_NS)


def block_fetches(
    tensors: list[int],
    recompute: bool,
    threshold: int = DS_PERSISTENCE_THRESHOLD,
    max_reuse_distance: int = DS_MAX_REUSE_DISTANCE,
) -> tuple[BlockFetch, BlockFetch]:
    """(forward, backward) fetch of a block whose parameter tensors are ``tensors``."""
    gathered = [t for t in tensors if t >= threshold]
    forward = BlockFetch(len(gathered), sum(gathered))
    again = regathered_in_backward(gathered, recompute, max_reuse_distance)
    if recompute:
        calls, elements = len(gathered) + len(again), sum(gathered) + sum(again)
    else:
        calls, elements = len(again), sum(again)
    backward = BlockFetch(calls, elements, reduce_scatter_calls=len(tensors))
    return forward, backward
