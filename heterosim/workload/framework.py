"""What the training framework adds to a pipeline step: p2p payloads and their TP re-gathers.

``framework.name`` selects the pipeline engine whose point-to-point path the trace follows:

- ``megatron`` (Megatron-LM's 1F1B schedule): a stage sends its output activation, ``b*s*h``
  values of the activation dtype per TP rank (``b*s*h/tp`` with sequence parallelism), and
  receives the gradient of the same size.
- ``deepspeed`` (DeepSpeed's ``PipelineEngine`` running Megatron's ``GPT2ModelPipe``, as in
  DeepSpeedExamples ``Megatron-LM-v1.1.5-3D_parallelism``; DeepSpeed 0.3.x,
  ``deepspeed/runtime/pipe/engine.py``):

  * the stage output is the tuple (hidden states, attention mask); ``_exec_send_activations``
    casts the boolean mask to half ("NCCL does not like to send torch.BoolTensor") and sends it
    with every micro-batch: ``s*s`` fp16 values (Megatron's ``get_ltor_masks_and_position_ids``
    builds a ``[1, 1, s, s]`` mask unless attention masks are reset per document);
  * with TP > 1, ``is_pipe_partitioned = is_model_parallel``: ``_exec_forward_pass`` wraps the
    output in a ``PartitionedTensor`` and each TP rank sends only its ``1/tp`` slice (plus a
    small meta tensor); the receiver rebuilds the full tensor with ``PartitionedTensor.full()``,
    an all-gather over the TP group, before its forward; ``is_grad_partitioned`` is False, so
    ``_exec_recv_grads`` first re-gathers the sender's own output (a second all-gather over TP)
    and then receives the full gradient, which every TP rank sends whole
    (``_exec_send_grads``);
  * ``p2p.send``/``p2p.recv`` are blocking ``dist.broadcast`` calls in a two-rank group
    (``deepspeed/runtime/pipe/p2p.py``), a rendezvous of sender and receiver; one call per
    tensor, so an activation send is three calls (meta, slice, mask) with TP > 1 and two
    (hidden, mask) without, a gradient send one (``forward_calls``/``backward_calls``, which
    ``framework.collective_overhead`` charges). The rank waits for each transfer: the engine's
    timers (``wall_clock_breakdown``, on in DeepSpeedExamples' ``ds_config.json``) call
    ``torch.cuda.synchronize()`` around every instruction (``deepspeed/utils/timer.py``);
  * the first and last stage load every micro-batch (``LoadMicroBatch``); Megatron's
    ``get_batch_pipe`` broadcasts it over the TP group (:func:`load_micro_batch_ops`);
  * instructions follow ``runtime/pipe/schedule.py`` ``TrainSchedule``: a forward step runs
    RecvActivation, then SendGrad of the previous backward, then ForwardPass; a backward step
    SendActivation of the previous forward, then RecvGrad, then BackwardPass. So a result is
    sent at the start of the rank's next step, not when its pass ends
    (heterosim/workload/walk_deepspeed.py; Megatron's sends do not block the rank).

The gradient all-reduce after the last backward (``ReduceTiedGrads``, ``ReduceGrads``) is
``parallel.grad_sync: after_backward``; the host time per kernel and repeated layer forwards are
``framework.host_op_overhead`` and ``framework.layer_forward_passes`` (plan and op lists); a cost
per communication call, ``framework.collective_overhead``, rides on a marker op
(:func:`collective_call_op`) chained before every TP collective and every pipeline p2p call
(as many as the engine makes), which the plan layer times. The once-per-iteration gradient
all-reduces carry no marker.
The meta tensors (a few int64 values) are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from heterosim.catalog.gpus import DTYPE_BYTES
from heterosim.config.experiment import ExperimentConfig
from heterosim.workload.ops_base import OpSpec, activation_dtype
from heterosim.workload.trace import BROADCAST, COMM_COLL_NODE

MASK_DTYPE = "fp16"  # DeepSpeed casts the boolean attention mask with .half() before sending
COLLECTIVE_CALL_LABEL = "host.tp_collective_call"


def collective_call_op(dtype: str) -> OpSpec:
    """The marker op chained before each TP collective when ``framework.collective_overhead`` is
    set: an empty elementwise kernel whose time the plan layer sets to that overhead."""
    return OpSpec(COLLECTIVE_CALL_LABEL, "elementwise", "fwd", dtype, (0, 0, 0, 0))


@dataclass(frozen=True)
class PipelinePayload:
    """Bytes of one micro-batch's p2p messages per TP rank, and the TP all-gathers around them."""

    forward_bytes: int  # activation send/recv, per TP rank
    backward_bytes: int  # gradient send/recv, per TP rank
    gather_bytes: int  # all-gather (nccl-tests size: the gathered total) after a recv; 0: none
    forward_calls: int = 1  # communication calls per activation send (and per recv)
    backward_calls: int = 1  # per gradient send (and per recv)


MEGATRON_MAX_DATA_DIM = 4  # megatron/mpu/data.py _MAX_DATA_DIM: sizes sent per key
TOKEN_BYTES = 8  # the batch is int64 tokens (get_batch_pipe: datatype = torch.int64)


def load_micro_batch_ops(exp: ExperimentConfig) -> list[OpSpec]:
    """DeepSpeed's LoadMicroBatch on the first and last stage runs Megatron's ``get_batch_pipe``,
    whose ``mpu.broadcast_data`` broadcasts from TP rank 0 the key sizes and then the flattened
    ``b x (s + 1)`` int64 tokens over the TP group (nothing to do at tp 1)."""
    t = exp.training
    return [
        OpSpec(
            "load_batch.broadcast_sizes",
            "comm",
            "fwd",
            "fp32",
            (0, 0, 0, 0),
            node_type=COMM_COLL_NODE,
            comm_type=BROADCAST,
            comm_bytes=MEGATRON_MAX_DATA_DIM * TOKEN_BYTES,
            comm_group="tp",
        ),
        OpSpec(
            "load_batch.broadcast_tokens",
            "comm",
            "fwd",
            "fp32",
            (0, 0, 0, 0),
            node_type=COMM_COLL_NODE,
            comm_type=BROADCAST,
            comm_bytes=t.micro_batch * (t.seq_len + 1) * TOKEN_BYTES,
            comm_group="tp",
        ),
    ]


def activation_bytes(exp: ExperimentConfig) -> int:
    """``b*s*h`` values of the activation dtype (per sequence shard with sequence parallelism)."""
    t, p = exp.training, exp.parallel
    tokens = t.micro_batch * t.seq_len
    if p.sequence_parallel:
        tokens = -(-tokens // p.tp)
    return tokens * exp.model.hidden * DTYPE_BYTES[activation_dtype(t.dtype)]


def attention_mask_bytes(exp: ExperimentConfig) -> int:
    """The ``[1, 1, s, s]`` causal mask sent as fp16 with every DeepSpeed GPT2ModelPipe step."""
    s = exp.training.seq_len
    return s * s * DTYPE_BYTES[MASK_DTYPE]


def pipeline_payload(exp: ExperimentConfig) -> PipelinePayload:
    """The p2p payload of ``exp``'s framework (module docstring)."""
    full = activation_bytes(exp)
    if exp.framework.name != "deepspeed":
        return PipelinePayload(full, full, 0)
    tp = exp.parallel.tp
    partitioned = tp > 1 and not exp.parallel.sequence_parallel
    part = -(-full // tp) if partitioned else full
    # one broadcast per tensor: (meta, part, mask) partitioned, (hidden, mask) otherwise; the
    # gradient of the hidden state only
    return PipelinePayload(
        part + attention_mask_bytes(exp),
        full,
        full if partitioned else 0,
        forward_calls=3 if partitioned else 2,
        backward_calls=1,
    )


__all__ = [
    "COLLECTIVE_CALL_LABEL",
    "PipelinePayload",
    "activation_bytes",
    "attention_mask_bytes",
    "collective_call_op",
    "load_micro_batch_ops",
    "pipeline_payload",
]
