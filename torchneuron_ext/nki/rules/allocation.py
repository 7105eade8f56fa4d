"""Rules of tensor creation and of directly allocated kernels (AWS's error-code page).

- ``err_hbm_tensor_with_init_value_not_supported``: ``nl.zeros``/``ones``/``full`` in HBM; create it with
  ``nl.ndarray`` and store the values.
- ``err_tensor_creation_on_scratchpad_with_init_value_not_supported``: the same in SBUF or PSUM through an
  ``nki.compiler`` allocation (``ncc.sbuf.mod_alloc(...)``).
- ``err_leading_dimension_of_tensor_must_be_partition``: NKI 0.2 removed block dimensions, so an SBUF or
  PSUM tensor with ``nl.par_dim`` anywhere but first is refused there (the legacy dialect keeps them).
- In an allocated kernel (one that placed a tensor with an ``nki.compiler`` allocation), NKI 0.1's
  ``nisa.activation`` needs ``bias=`` (``err_bias_tensor_must_be_specified_in_allocation``) and transposes
  on the Tensor engine (``nisa.nc_transpose`` on its default engine, ``nl.matmul`` without
  ``transpose_x=True``) are refused (``err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel``):
  the kernel allocates its own identity matrix and calls ``nc_matmul``.

The indirect-access forms the DMA engines accept (NKI 0.1): a tile of indices may index ``nl.load`` /
``nl.store`` / ``nisa.dma_copy``, but not ``nl.load_transpose2d`` or ``nisa.dma_transpose``
(``err_indirect_indices_are_not_supported_with_nki_api``), and an on-chip tensor indexed by a tile is not
copied by assignment (``err_copy_dynamic_indirect_indices_not_natively_supported``: use
``nisa.tensor_copy_dynamic_src``), and ``nl.load``/``nl.store`` index indirectly only along the partition
(or block) dimension (``err_indirect_indices_free_dim``). NKI 0.2's ``dma_transpose`` has an indirect form
of its own.

An automatically allocated PSUM tile may span banks in NKI 0.2+ (runtime.Launch._check_tile_shape), but on
NeuronCore-v2/v3 one ``nc_matmul`` writes a single bank (AWS's architecture guide: "each nc_matmul can only
write to a single PSUM bank"), so its ``dst`` slice of such a tile may not cross a bank boundary
(``check_matmul_dst_bank``; the tile starts at a bank).
"""
from __future__ import annotations

from typing import Any, Optional

from ..data_address import data_address
from ..errors import fail
from ..indexing import TileIndex
from ..memory import Buffer

__all__ = ["check_creation", "check_allocated_activation", "check_allocated_transpose", "is_allocated",
           "check_no_indirect", "check_assignment_source", "check_indirect_axis", "check_matmul_dst_bank"]


def _filled(fill: Any) -> bool:
    return fill is not None and not isinstance(fill, str)


def check_creation(shape: tuple, par_axis: int, buffer: Any, fill: Any, dialect: Optional[str]) -> None:
    """Before a kernel creates a tensor (nl.ndarray, zeros, ones, full...)."""
    direct = not isinstance(buffer, Buffer)  # an nki.compiler DirectAllocation
    memory = buffer.memory if direct else buffer
    if _filled(fill) and memory.is_hbm:
        fail("err_hbm_tensor_with_init_value_not_supported",
             f"Creating HBM tensor with init value is not supported: create it with nl.ndarray(..., "
             f"buffer=nl.{memory.name}) and nl.store the value {fill!r}")
    if _filled(fill) and direct:
        fail("err_tensor_creation_on_scratchpad_with_init_value_not_supported",
             f"Creating SBUF/PSUM tensor with init value is not supported in allocated NKI kernels ({buffer}): "
             f"create it with nl.ndarray and set it with nisa.memset")
    if dialect != "legacy" and par_axis != 0 and memory.on_chip:
        fail("err_leading_dimension_of_tensor_must_be_partition",
             f"The leading dimension of SBUF/PSUM tensors must be the partition dimension: shape {shape} has "
             f"par_dim at position {par_axis}. Block dimensions were removed in NKI 0.2: keep the blocks in a "
             f"list of tiles, or make the partition dimension first")


def is_allocated(launch: Any) -> bool:
    """Whether the running kernel instance placed a tensor with an nki.compiler allocation."""
    return launch is not None and bool(launch._direct_sites)


def check_allocated_activation(launch: Any, bias: Any, api: str) -> None:
    if launch.dialect == "legacy" and bias is None and is_allocated(launch):
        fail("err_bias_tensor_must_be_specified_in_allocation",
             f"Bias tensor of an activation op must be specified in allocated NKI kernels: pass bias= to "
             f"'{api}' (a (P, 1) tile allocated like the others)")


def check_allocated_transpose(launch: Any, engine: str, api: str) -> None:
    """``nc_transpose`` on the Tensor engine, or ``nl.matmul``'s implicit transpose of x (api 'matmul')."""
    if launch.dialect != "legacy" or engine == "vector" or not is_allocated(launch):
        return
    hint = ("pass transpose_x=True with x already transposed" if api == "matmul"
            else "use engine=nisa.vector_engine (up to 32x32), or nc_matmul against an identity matrix you allocate")
    fail("err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel",
         f"Unsupported transpose case in allocated NKI kernels: '{api}' transposes on the Tensor engine; {hint}")


def _indirect(tensor: Any) -> bool:
    index = getattr(tensor, "index", None)
    return index is not None and any(isinstance(a, TileIndex) for a in index)


def check_no_indirect(launch: Any, tensor: Any, api: str) -> None:
    """``nl.load_transpose2d`` / ``nisa.dma_transpose`` of NKI 0.1 take no indirect indices."""
    if launch.dialect == "legacy" and _indirect(tensor):
        fail("err_indirect_indices_are_not_supported_with_nki_api",
             f"'{api}' does not support tensors with indirect indices (a tile used as an index); gather with "
             f"nl.load or nisa.dma_copy first, then transpose the tile")


def check_assignment_source(launch: Any, value: Any) -> None:
    """``t[...] = sbuf_tensor[idx_tile, ...]``: the indices are known only at run time."""
    if (launch.dialect == "legacy" and _indirect(value) and getattr(value, "buffer", None) is not None
            and value.buffer.on_chip):
        fail("err_copy_dynamic_indirect_indices_not_natively_supported",
             "Copying indirect memory references with dynamic indices (a tile used as an index of an on-chip "
             "tensor) is not natively supported: use nisa.tensor_copy_dynamic_src(...)")


def check_indirect_axis(launch: Any, tensor: Any, api: str) -> None:
    """NKI 0.1 ``nl.load``/``nl.store``: a tile of indices may only walk the partitions of the access."""
    if launch.dialect != "legacy" or not _indirect(tensor):
        return
    for axis, a in enumerate(tensor.index):
        if isinstance(a, TileIndex) and any(n != 1 for n in a.shape[1:]):
            fail("err_indirect_indices_free_dim",
                 f"Dynamic indexing for '{api}' only supports indirect indices on the partition or block "
                 f"dimension, but the index tile of axis {axis} varies along a free dimension (shape "
                 f"{tuple(a.shape)}); index with a (P, 1) column of indices, e.g. t[idx_tile[i_p, 0], i_f]")


def check_matmul_dst_bank(dst: Any, target: Any, api: str) -> None:
    """``nc_matmul(dst=...)`` into a slice of an automatically allocated multi-bank PSUM tile."""
    bank = target.psum_bank_bytes
    if target.gemm_moving_fmax * 4 > bank:  # NeuronCore-v4: one matmul writes up to all 8 banks
        return
    storage = dst.storage
    base = storage.array
    if (storage.live is None or storage.par_axis != 0 or getattr(dst, "_dyn", None) is not None
            or dst.index is not None):
        return  # directly allocated (placed within a bank), NKI 0.1 blocks (a bank each) or not a plain view
    row = base.strides[0] if base.ndim else 0
    if row <= bank:
        return  # the whole tile is within one bank
    arr = dst.arr
    offset = data_address(arr) - data_address(base)
    start = offset % row
    span = sum((n - 1) * abs(st) for n, st in zip(arr.shape[1:], arr.strides[1:])) + arr.itemsize
    if start // bank != (start + span - 1) // bank:
        fail("err_size_of_dimension_exceed_arch_limit",
             f"'{api}' writes bytes [{start}, {start + span}) of each partition of a PSUM tile {tuple(base.shape)}: "
             f"a matmul writes one PSUM bank of {bank} bytes, and this slice crosses from bank "
             f"{start // bank} into bank {(start + span - 1) // bank} of the tile; start its slices at multiples "
             f"of {bank // 4} fp32")
