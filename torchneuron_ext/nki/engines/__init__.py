"""The NeuronCore's engines: the instruction primitives both dialects' ``nki.language`` and ``nki.isa`` call.

One module per hardware engine, matching cost_model.ENGINES, on shared operand handling:

- operands.py: operand checks, reading operands, writing results (every instruction uses them).
- elementwise.py: the op tables, elementwise operations, copies, assignment and ``+=`` into tiles.
- dma.py: the DMA engine (load, store, dma_copy, atomic read-modify-write, DMA transposes).
- tensor_engine.py: matmul into PSUM and the PE-array transpose.
- scalar.py: the Scalar (activation) engine.
- vector.py: the Vector engine's arithmetic, reductions, statistics, scans, running reductions, exponentials
  and dropout.
- accumulator.py: the Vector and Scalar engines' accumulation registers (``reduce_cmd``).
- rng.py: the engines' XORWOW random number generators (rng, rand2, seeds and states).
- vector_select.py: the Vector engine's selections, top-8 instructions and partition shuffles.
- gpsimd.py: cross-partition instructions, gathers, iota and affine patterns, segment bounds, nonzero positions,
  the 16-partition top-k.
- mx.py: MX microscaling (NeuronCore-v4): QuantizeMX and the MX matmul, used as ``engines.mx``.
- operators.py: NKITensor's operators, installed on it here.

These are primitives: what a dialect allows (keywords, memories, result placement) is decided in that
dialect's isa.py or language module before it calls them.
"""
from __future__ import annotations

from ..tensor import NKITensor

from . import operators
from .dma import atomic_rmw, dma_copy, dma_transpose, load, store
from .elementwise import (BINARY, INT_BINARY, INT_UNARY, UNARY, accumulate, assign, broadcast_to, copy, elementwise,
                          expand_dims, op_name, tensor_copy_predicated, where)
from .gpsimd import (GPSIMD_PARTITIONS_PER_CORE, affine_pattern_values, affine_select, iota_expr, iota_pattern,
                     local_gather, n_gather, nonzero_with_count, partition_reduce, sequence_bounds, topk)
from .operands import check_tile, dtype_of, new_tile, result_dtype, shape_of, store_into, value_of
from .scalar import activate2, activation
from .tensor_engine import matmul, matmul_hints, transpose
from .vector import (bn_aggr, bn_stats, dropout, exponential, loop_reduce, memset, random_seed, reduce,
                     scalar_tensor_tensor, tensor_scalar, tensor_scalar_cumulative, tensor_scalar_reduce, tensor_tensor,
                     tensor_tensor_scan)
from .vector_select import find_index8, match_replace8, max8, range_select, select_reduce, stream_shuffle

operators.install(NKITensor)

__all__ = [
    "BINARY", "INT_BINARY", "INT_UNARY", "UNARY", "GPSIMD_PARTITIONS_PER_CORE", "accumulate", "activation",
    "affine_pattern_values", "affine_select", "assign", "atomic_rmw", "bn_aggr", "bn_stats", "broadcast_to",
    "check_tile", "copy", "dma_copy", "dma_transpose", "dropout", "dtype_of", "elementwise", "expand_dims",
    "find_index8", "iota_expr", "iota_pattern", "load", "local_gather", "loop_reduce", "match_replace8", "matmul",
    "matmul_hints", "max8", "memset", "new_tile", "op_name", "partition_reduce", "random_seed", "range_select",
    "reduce", "result_dtype", "scalar_tensor_tensor", "select_reduce", "sequence_bounds", "shape_of", "store",
    "store_into", "stream_shuffle", "tensor_copy_predicated", "tensor_scalar", "tensor_scalar_reduce",
    "tensor_tensor", "tensor_tensor_scan", "transpose", "value_of", "where",
    "activate2", "exponential", "n_gather", "nonzero_with_count", "tensor_scalar_cumulative",
    "topk",
]
