"""DTensor sharding strategies for the neuron device's attention operator.

On neuron, ``scaled_dot_product_attention`` is one operator,
``_scaled_dot_product_fused_attention_overrideable`` (as on TorchNeuron, whose
torch_neuronx/distributed/tensor/register_sharding.py registers strategies for it). PyTorch has
strategies for the flash, efficient and cuDNN kernels only, so without these a DTensor attention
on neuron raises "does not have a sharding strategy registered".

Attention is independent per batch element and per head, so each mesh dimension may shard the
batch (dim 0) or the heads (dim 1) of query, key, value, the output and logsumexp alike, or
replicate all. Our kernel returns the softmax weights and dropout noise it keeps for the backward
in cum_seq_q / cum_seq_k (shape [B, H, L, S]), so they shard the same way. An attention bias that
broadcasts over the sharded dimension stays replicated, and its gradient is then a partial sum.
"""
from __future__ import annotations

from typing import Any

import torch

aten = torch.ops.aten

_registered = False

# The sharded dimension of each non-replicated strategy: batch, then heads.
_SHARDED_DIMS = (0, 1)


def _shape(strategy: Any) -> tuple[int, ...]:
    return tuple(strategy.shape)


def _bias_placements(bias: Any, q_ndim: int, dim: int) -> tuple[Any, Any]:
    """(bias placement, bias-gradient placement) when query is sharded on `dim`."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    shape = _shape(bias)
    bias_dim = dim - (q_ndim - len(shape))
    if bias_dim < 0 or shape[bias_dim] == 1:
        # Broadcast over the sharded dimension: each rank sums its gradient over its own part.
        return Replicate(), Partial()
    return Shard(bias_dim), Shard(bias_dim)


def _is_tensor(arg: Any) -> bool:
    from torch.distributed.tensor._op_schema import OpStrategy

    return isinstance(arg, OpStrategy)


def _forward_strategy(op_schema: Any) -> Any:
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor._ops.utils import expand_to_full_mesh_op_strategy

    mesh = op_schema.get_mesh_from_args()
    args = op_schema.args_schema
    q_ndim = len(_shape(args[0]))
    has_bias = len(args) > 3 and _is_tensor(args[3])
    # Outputs: output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset,
    # debug_attn_mask (never returned); then the tensor inputs: query, key, value[, attn_bias].
    strategies = []
    r = Replicate()
    row = [r, r, r, r, None, None, r, r, None, r, r, r]
    if has_bias:
        row.append(r)
    strategies.append(row)
    for dim in _SHARDED_DIMS:
        s = Shard(dim)
        row = [s, s, s, s, None, None, r, r, None, s, s, s]
        if has_bias:
            row.append(_bias_placements(args[3], q_ndim, dim)[0])
        strategies.append(row)
    return expand_to_full_mesh_op_strategy(mesh, op_schema, strategies, input_index=9)


def _backward_strategy(op_schema: Any) -> Any:
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor._ops.utils import expand_to_full_mesh_op_strategy

    mesh = op_schema.get_mesh_from_args(validate=False)
    args = op_schema.args_schema
    q_ndim = len(_shape(args[1]))
    # Schema positions of the tensor inputs after query/key/value: attn_bias 4, out 6, logsumexp 7,
    # cum_seq_q 8, cum_seq_k 9, philox_seed 14, philox_offset 15. Undefined ones are not DTensors.
    has_bias = _is_tensor(args[4])
    kept = [_is_tensor(args[8]), _is_tensor(args[9])]
    seeds = [_is_tensor(args[14]), _is_tensor(args[15])]
    r = Replicate()

    def row(q: Any, bias: tuple[Any, Any]) -> list[Any]:
        # Outputs: grad_query, grad_key, grad_value, grad_attn_bias; then grad_out, query, key, value,
        # attn_bias, out, logsumexp, cum_seq_q, cum_seq_k, philox_seed, philox_offset.
        return ([q, q, q, bias[1] if has_bias else None, q, q, q, q, bias[0] if has_bias else None, q, q]
                + [q if k else None for k in kept] + [r if s else None for s in seeds])

    strategies = [row(r, (r, r))]
    for dim in _SHARDED_DIMS:
        bias = _bias_placements(args[4], q_ndim, dim) if has_bias else (None, None)
        strategies.append(row(Shard(dim), bias))
    return expand_to_full_mesh_op_strategy(mesh, op_schema, strategies, input_index=4)


def register() -> None:
    """Register the strategies with DTensor, once (at the first "neuron" process group)."""
    global _registered
    if _registered:
        return
    from torch.distributed.tensor._op_schema import RuntimeSchemaInfo
    from torch.distributed.tensor._ops.utils import register_op_strategy

    register_op_strategy(aten._scaled_dot_product_fused_attention_overrideable.default,
                         schema_info=RuntimeSchemaInfo(4, static_kwargkey=["scale"]))(_forward_strategy)
    register_op_strategy(aten._scaled_dot_product_fused_attention_overrideable_backward.default,
                         schema_info=RuntimeSchemaInfo(5, static_kwargkey=["scale"]))(_backward_strategy)
    _registered = True
