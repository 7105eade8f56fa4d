"""``nki.isa`` MX instructions (NeuronCore-v4): quantize_mx on the Vector engine and nc_matmul_mx on the
Tensor engine. The numerics and layout rules are engines/mx.py's."""
from __future__ import annotations

from typing import Any, Optional

from ..engines import mx as _mx
from ..tensor import NKITensor
from .indirect import accepts_indirection as _indirection
from .indirect import check_matmul_mx as _check_matmul_mx

__all__ = ["nc_matmul_mx", "quantize_mx"]


def quantize_mx(dst: NKITensor, src: NKITensor, dst_scale: NKITensor, name: Optional[str] = None) -> None:
    """Quantize fp16/bf16 ``src`` [P, F] into fp8 x4 ``dst`` [P, F/4] with one E8M0 scale per 8 partitions x
    4 elements in ``dst_scale`` (on the first 4 partitions of each SBUF quadrant, from the tile's start)."""
    _mx.quantize_mx(dst, src, dst_scale)


@_indirection(("dst", "stationary", "moving", "stationary_scale", "moving_scale"), ("tensor",), "stationary", group=32,
              check=_check_matmul_mx)
def nc_matmul_mx(dst: NKITensor, stationary: NKITensor, moving: NKITensor, stationary_scale: NKITensor,
                 moving_scale: NKITensor, tile_position: Any = None, tile_size: Any = None,
                 accumulate: Optional[bool] = None, name: Optional[str] = None) -> None:
    """dst = dequantized(stationary).T @ dequantized(moving), contracting over the partitions and the four
    values of each x4 element; the first write to a PSUM location overwrites, later ones accumulate."""
    _mx.matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=tile_position,
                  tile_size=tile_size, accumulate=accumulate)
