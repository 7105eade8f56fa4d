"""``nki.isa`` of the new dialect: the Vector, GpSimd and Scalar engine instructions beyond the tutorials'
(selections with the accumulation registers, top-8 replacement, partition shuffles, gathers, nonzero
positions, segment bounds, running reductions, activate2, dropout and the random number generators).

Each takes the signature of AWS's NKI ISA reference (Neuron 2.32): ``dst`` first, every keyword honoured or
refused by name (no catch-all), ``name=`` (the instruction's label in AWS's profiles) accepted and unused.
The numerics are the engines' (nki/engines/); the checks here are the instruction's documented rules.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .. import dtypes as _dtypes
from .. import engines as _eng
from .._isa_common import engine_name as _engine_name
from .._isa_common import reduce_cmd as _reduce_cmd
from ..engines import rng as _rng
from ..errors import NKIUnsupportedError, fail
from ..tensor import NKITensor
from .indirect import accepts_indirection as _indirection

__all__ = [
    "activate2", "dropout", "local_gather", "nc_match_replace8", "nc_n_gather", "nc_stream_shuffle",
    "nonzero_with_count", "rand2", "rand_get_state", "rand_set_state", "range_select", "rng", "select_reduce",
    "sequence_bounds", "set_rng_seed", "tensor_copy_predicated", "tensor_scalar_cumulative",
    "tensor_scalar_reduce", "topk",
]

# range_select's on_false_value: "Due to hardware constraints, this must be FP32_MIN" (AWS's reference).
FP32_MIN = float(np.finfo(np.float32).min)


def _tile(x: Any, api: str, arg: str) -> NKITensor:
    if not isinstance(x, NKITensor):
        raise TypeError(f"operand '{arg}' of 'nki.isa.{api}' must be an NKI tensor, got {type(x).__name__}")
    return x


def nc_stream_shuffle(dst: NKITensor, src: NKITensor, shuffle_mask: Sequence[Any], name: Optional[str] = None
                      ) -> None:
    """Within each quadrant of 32 partitions, dst partition i takes src partition shuffle_mask[i] (255:
    unchanged); in place (dst is src) is allowed."""
    _eng.stream_shuffle(_tile(src, "nc_stream_shuffle", "src"), _tile(dst, "nc_stream_shuffle", "dst"),
                        shuffle_mask)


def nc_match_replace8(dst: NKITensor, data: NKITensor, vals: NKITensor, imm: float,
                      dst_idx: Optional[NKITensor] = None, name: Optional[str] = None) -> None:
    """dst = data with the first occurrence of each of the 8 ``vals`` of a partition replaced by ``imm``
    (vals matched last to first); their positions go to ``dst_idx``."""
    _eng.match_replace8(data, vals, imm, dst_idx=dst_idx, dst=_tile(dst, "nc_match_replace8", "dst"))


def range_select(dst: NKITensor, on_true_tile: NKITensor, comp_op0: Any, comp_op1: Any, bound0: NKITensor,
                 bound1: NKITensor, reduce_cmd: Any = _reduce_cmd.reset_reduce,
                 reduce_res: Optional[NKITensor] = None, reduce_op: Any = None, range_start: int = 0,
                 on_false_value: Any = ..., name: Optional[str] = None) -> None:
    """on_true_tile where comp_op0(i + range_start, bound0) and comp_op1(i + range_start, bound1) for the free
    index i, fp32's lowest elsewhere; the row max is folded into the Vector engine's registers (reduce_op is
    nl.maximum, the only one). NeuronCore-v3+."""
    api = "range_select"
    fill = FP32_MIN if on_false_value is Ellipsis else on_false_value
    if isinstance(fill, NKITensor) or float(np.float32(fill)) != FP32_MIN:
        fail("err_invalid_argument", f"'{api}': on_false_value must be FP32_MIN ({str(np.float32(FP32_MIN))}), a "
                                     f"hardware constraint, got {on_false_value!r}")
    for arg, b in (("bound0", bound0), ("bound1", bound1)):
        if isinstance(b, NKITensor) and b.dtype != np.float32:
            fail("err_unsupported_dtype", f"'{api}': {arg} must be float32, got {b.dtype}")
    if not isinstance(range_start, (int, np.integer)):
        raise TypeError(f"'{api}': range_start must be a compile-time integer, got {range_start!r}")
    _eng.range_select(on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd,
                      reduce_res=reduce_res, reduce_op=reduce_op, range_start=range_start, on_false_value=fill,
                      dst=_tile(dst, api, "dst"))


def select_reduce(dst: NKITensor, predicate: NKITensor, on_true: NKITensor, on_false: Any,
                  reduce_res: Optional[NKITensor] = None, reduce_cmd: Any = _reduce_cmd.idle, reduce_op: Any = None,
                  reverse_pred: bool = False, name: Optional[str] = None) -> None:
    """dst = where(predicate, on_true, on_false) (on_false a scalar or (P, 1)); the row max is folded into
    the Vector engine's registers as reduce_cmd says (reduce_op is nl.maximum, the only one)."""
    _eng.select_reduce(predicate, on_true, on_false, dst=_tile(dst, "select_reduce", "dst"), reduce_res=reduce_res,
                       reduce_cmd=reduce_cmd, reduce_op=reduce_op, reverse_pred=reverse_pred)


def local_gather(dst: NKITensor, src_buffer: NKITensor, index: NKITensor, num_elem_per_idx: int = 1,
                 num_valid_indices: Optional[int] = None, name: Optional[str] = None) -> None:
    """GpSimd gather inside each core's 16 partitions (uint16 indices, flattened partition-first)."""
    _eng.local_gather(src_buffer, index, num_elem_per_idx, num_valid_indices, dst=_tile(dst, "local_gather", "dst"))


def nc_n_gather(dst: NKITensor, data: NKITensor, indices: NKITensor, name: Optional[str] = None) -> None:
    """dst[p, j] = data[p, ...flattened][indices[p, j]] on the GpSimd engine (uint32 indices, SBUF only)."""
    _eng.n_gather(data, indices, dst=_tile(dst, "nc_n_gather", "dst"))


def nonzero_with_count(dst: NKITensor, src: NKITensor, index_offset: int = 0, padding_val: int = -1,
                       name: Optional[str] = None) -> None:
    """Per GpSimd core (partitions 0, 16, ..., 112): the nonzero positions of src + index_offset, padding_val,
    and the count last. NeuronCore-v3+."""
    _eng.nonzero_with_count(src, index_offset=index_offset, padding_val=padding_val,
                            dst=_tile(dst, "nonzero_with_count", "dst"))


def topk(val_dst: NKITensor, idx_dst: NKITensor, src: NKITensor, n: int, name: Optional[str] = None) -> None:
    """The K largest of each 16-partition group's snake of ``n`` bf16 elements (snake position s at
    partition s % 16, column s // 16), in ascending order, with their snake positions (uint32), written in
    the same snake layout into val_dst / idx_dst (K = their free size) on the GpSimd engine. The layout is
    the one AWS's NKI Library gpsimd_topk kernel reads back ("one top-k per group of 16 partitions", the
    output "snake positions [0, k)" at partition pos % 16, column pos // 16)."""
    api = "topk"
    _eng.topk(_tile(src, api, "src"), n, val_dst=_tile(val_dst, api, "val_dst"),
              idx_dst=_tile(idx_dst, api, "idx_dst"))


def sequence_bounds(dst: NKITensor, segment_ids: NKITensor, name: Optional[str] = None) -> None:
    """[start, end) of each element's segment of a (1, n) tile of ids into (1, 2, n); id 0 is padding
    ([n, -1]). float32 or int32."""
    _eng.sequence_bounds(segment_ids, dst=_tile(dst, "sequence_bounds", "dst"))


@_indirection(("dst", "src"), ("vector",), "src")
def tensor_scalar_cumulative(dst: NKITensor, src: NKITensor, op0: Any, op1: Any, imm0: Any, imm1: Any = None,
                             reduce_cmd: Any = _reduce_cmd.reset_reduce, name: Optional[str] = None) -> None:
    """dst[i] = reg = op1(src[i] op0 imm0, reg) along each partition, reg started by reduce_cmd (reset_reduce:
    op1's identity; load_reduce: imm1; reduce: the Vector engine's registers)."""
    _eng.tensor_scalar_cumulative(src, op0, op1, imm0, imm1, reduce_cmd=reduce_cmd,
                                  dst=_tile(dst, "tensor_scalar_cumulative", "dst"))


@_indirection(("dst", "data"), ("vector",), "data")
def tensor_scalar_reduce(dst: NKITensor, data: NKITensor, op0: Any, operand0: Any, reduce_op: Any,
                         reduce_res: Optional[NKITensor] = None, reverse0: bool = False,
                         reduce_cmd: Any = _reduce_cmd.reset_reduce, reduce_init: Any = None,
                         reduce_res_negate: bool = False, name: Optional[str] = None) -> None:
    """dst = data op0 operand0, its free-axis reduction folded into the Vector engine's registers
    (reduce_cmd) and read into reduce_res (negated with reduce_res_negate)."""
    if reverse0:
        # AWS's reference: "reverse0 (not supported yet)".
        fail("err_invalid_argument", "'tensor_scalar_reduce': reverse0=True is not supported by the ISA yet")
    _eng.tensor_scalar_reduce(data, op0, operand0, reduce_op, reduce_res, reduce_cmd=reduce_cmd,
                              reduce_init=reduce_init, reduce_res_negate=reduce_res_negate,
                              dst=_tile(dst, "tensor_scalar_reduce", "dst"))


@_indirection(("dst", "predicate"), ("vector",), "predicate")
def tensor_copy_predicated(dst: NKITensor, src: Any, predicate: NKITensor, reverse_pred: bool = False,
                           name: Optional[str] = None) -> None:
    """dst = src (a tile of dst's dtype, or a number) where predicate (uint8/16/32) is nonzero; the rest of
    dst is unchanged."""
    api = "tensor_copy_predicated"
    _tile(dst, api, "dst")
    if isinstance(src, NKITensor) and src.dtype != dst.dtype:
        fail("err_unsupported_dtype", f"'{api}': src and dst must share a dtype, got {src.dtype} and {dst.dtype}")
    _eng.tensor_copy_predicated(src, dst, predicate, reverse_pred=reverse_pred)


@_indirection(("dst", "data"), ("scalar",), "data")
def activate2(dst: NKITensor, op: Any, data: NKITensor, imm0: Any, imm1: Any, op0: Any, op1: Any,
              relu_param: Any = 0.0, reverse0: bool = False, reverse1: bool = False, reduce_op: Any = None,
              reduce_res: Optional[NKITensor] = None, reduce_cmd: Any = _reduce_cmd.idle,
              name: Optional[str] = None) -> None:
    """dst = op((data op0 imm0) op1 imm1) on the Scalar engine, with its registers' reduction. NeuronCore-v4+."""
    _eng.activate2(op, data, imm0, imm1, op0, op1, relu_param=relu_param, reverse0=reverse0, reverse1=reverse1,
                   reduce_op=reduce_op, reduce_res=reduce_res, reduce_cmd=reduce_cmd,
                   dst=_tile(dst, "activate2", "dst"))


def dropout(dst: NKITensor, data: NKITensor, prob: Any, name: Optional[str] = None) -> None:
    """dst = data with each element zeroed with probability prob (a scalar or (P, 1)); dst has data's dtype."""
    api = "dropout"
    _tile(dst, api, "dst")
    _tile(data, api, "data")
    if dst.dtype != data.dtype:
        fail("err_unsupported_dtype", f"'{api}': dst must have data's dtype ({data.dtype}), got {dst.dtype}")
    if isinstance(prob, NKITensor):
        if not _dtypes.is_float(prob.dtype):
            fail("err_unsupported_dtype", f"'{api}': prob must be a float tile, got {prob.dtype}")
        if not _dtypes.is_float(data.dtype) and prob.dtype != np.float32:
            fail("err_unsupported_dtype", f"'{api}': with integer data, prob must be float32, got {prob.dtype}")
    _eng.dropout(data, prob, dst=dst)


def rng(dst: NKITensor, engine: Any = None, name: Optional[str] = None) -> None:
    """32 random bits per element of dst (an integer tile), the least significant ones kept."""
    _rng.rng(_tile(dst, "rng", "dst"), _engine_name(engine, "vector"))


def rand2(dst: NKITensor, min: Any, max: Any, name: Optional[str] = None) -> None:  # noqa: A002 (AWS's names)
    """Uniform numbers in [min, max] from the Vector engine's generators. NeuronCore-v4+."""
    _rng.rand2(_tile(dst, "rand2", "dst"), min, max)


def set_rng_seed(src_seeds: NKITensor, name: Optional[str] = None) -> None:
    """Seed the Vector engine's generators from a [1, 1] 32-bit tile."""
    _rng.set_rng_seed(_tile(src_seeds, "set_rng_seed", "src_seeds"))


def rand_set_state(src_seeds: NKITensor, engine: Any = None, name: Optional[str] = None) -> None:
    """Load each lane's XORWOW state (6 uint32 words on GpSimd, 24 on Vector). NeuronCore-v3+."""
    _rng.rand_set_state(_tile(src_seeds, "rand_set_state", "src_seeds"), _engine_name(engine, "gpsimd"))


def rand_get_state(dst: NKITensor, engine: Any = None, name: Optional[str] = None) -> None:
    """Store each lane's XORWOW state into dst (uint32). NeuronCore-v3+."""
    _rng.rand_get_state(_tile(dst, "rand_get_state", "dst"), _engine_name(engine, "gpsimd"))

