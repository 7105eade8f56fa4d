"""The DMA instructions of ``nki.isa`` (NKI 0.2+, Neuron 2.28 to 2.33): ``dma_copy``, ``dma_transpose`` and
``dma_compute``, with every keyword of AWS's reference honoured or refused by name.

The keywords that choose how a DMA is issued (``dge_mode``, ``engine``, ``priority``, ``unique_indices``)
move the same data whichever value they take, so they are validated against AWS's rules (which modes exist on
which NeuronCore, which engines may trigger hardware DGE) and otherwise change nothing. Each instruction
returns an ``NkiInstruction`` handle, as AWS's do.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ..engines import dma as _dma
from ..engines.elementwise import op_name as _op_name
from .. import runtime as _rt
from .._isa_common import NkiInstruction, check_dge_mode, dge_mode, engine
from .._isa_common import oob_mode as _oob_mode
from ..errors import fail
from ..memory import psum
from ..tensor import NKITensor

__all__ = ["dma_copy", "dma_transpose", "dma_compute"]


def _check_oob_mode(api: str, mode: Any) -> None:
    if mode is not None and not isinstance(mode, _oob_mode):
        raise ValueError(f"'{api}': oob_mode must be nisa.oob_mode.error or nisa.oob_mode.skip, got {mode!r}")


def _check_priority(api: str, priority: Any) -> None:
    """DMA quality-of-service priority: 0 (highest) to 3, a NeuronCore-v4 feature."""
    if priority is None:
        return
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 3:
        raise ValueError(f"'{api}': priority must be an integer from 0 (highest) to 3, got {priority!r}")
    target = _rt.current().target
    if target.generation < 4:
        fail("err_unsupported_dma_priority", f"'{api}' priority= needs NeuronCore-v4 (trn3); the target is "
                                             f"{target.name} (NeuronCore-v{target.generation})")


def _check_memory(api: str, name: str, t: Any) -> None:
    if not isinstance(t, NKITensor):
        raise TypeError(f"'{api}' operand '{name}' must be an NKI tensor, got {type(t).__name__}")
    # NKI 0.2+ DMAs read and write HBM and SBUF only; the legacy dialect's toolchain accepts a PSUM source.
    if t.buffer is psum:
        fail("err_unsupported_memory", f"Expected operand '{name}' of '{api}' to be in 'hbm' or 'sbuf', but got a "
                                       f"tile in 'psum' instead; copy PSUM to SBUF with nisa.tensor_copy")


def dma_copy(dst: NKITensor, src: NKITensor, dst_rmw_op: Any = None, priority: Optional[int] = None,
             oob_mode: Any = None, dge_mode: Any = None, unique_indices: bool = True, engine: Any = None,
             name: Optional[str] = None) -> NkiInstruction:
    """``dst = src`` by DMA (converted through fp32 when the dtypes differ); either side may be indexed by a
    tile (gather/scatter), whose out-of-bounds positions ``oob_mode=skip`` leaves untransferred.
    ``dst_rmw_op=nl.add`` (Neuron 2.28) makes it ``dst = dst + src`` in fp32; ``unique_indices`` (2.28) only
    promises the scatter indices do not repeat. ``engine`` picks the sequencer that triggers hardware DGE."""
    api = "dma_copy"
    _check_memory(api, "dst", dst)
    _check_memory(api, "src", src)
    dge_mode = check_dge_mode(dge_mode)
    _check_oob_mode(api, oob_mode)
    _check_priority(api, priority)
    _check_hwdge_engine(api, engine, dge_mode)
    _dma.check_dma_copy_modes(api, dst, src, dge_mode)
    if dst_rmw_op is not None:
        op = _op_name(dst_rmw_op)
        if op != "add":
            fail("err_unsupported_dma_rmw_op", f"'{api}' supports dst_rmw_op=nl.add only, got {op}")
        if oob_mode is not None and oob_mode is not _oob_mode.error:
            fail("err_invalid_oob_mode", f"'{api}' with dst_rmw_op allows only oob_mode=nisa.oob_mode.error")
    _dma.dma_copy(dst, src, dst_rmw_op=dst_rmw_op, oob_mode=oob_mode, dge_mode=dge_mode, engine=engine)
    return NkiInstruction(name or api)


def _check_hwdge_engine(api: str, eng: Any, mode: Any) -> None:
    """Hardware DGE is triggered by the Sync or the Scalar engine's sequencer; ``engine=`` picks which, and
    means nothing for the other modes."""
    if eng is None or eng is engine.unknown:
        return
    if not isinstance(eng, engine) or eng not in (engine.sync, engine.scalar):
        raise ValueError(f"'{api}': engine must be nisa.engine.sync or nisa.engine.scalar (the sequencers that "
                         f"trigger hardware DGE), got {eng!r}")
    if mode is not dge_mode.hwdge:
        raise ValueError(f"'{api}': engine={eng} is only valid with dge_mode=nisa.dge_mode.hwdge, got "
                         f"dge_mode={mode!r}")


def dma_transpose(dst: NKITensor, src: NKITensor, axes: Optional[Sequence[int]] = None,
                  priority: Optional[int] = None, dge_mode: Any = None, oob_mode: Any = None,
                  name: Optional[str] = None) -> NkiInstruction:
    """``dst = src`` transposed by the DMA engine into SBUF: (1, 0) for 2-D, (2, 1, 0) for 3-D, (3, 1, 2, 0) for
    4-D sources. ``src.dtype`` must be ``dst.dtype`` (the DMA transposes without converting)."""
    api = "dma_transpose"
    _check_memory(api, "dst", dst)
    _check_memory(api, "src", src)
    dge_mode = check_dge_mode(dge_mode)
    _check_oob_mode(api, oob_mode)
    _check_priority(api, priority)
    if src.dtype != dst.dtype:
        fail("err_unsupported_dtype", f"'{api}' moves data without converting it: src is "
                                      f"{src.dtype} and dst {dst.dtype}; transpose into a tile of the source's "
                                      f"dtype and convert with nisa.tensor_copy")
    _dma.dma_transpose(src, axes=axes, dst=dst, dge_mode=dge_mode, oob_mode=oob_mode)
    return NkiInstruction(name or api)


def dma_compute(dst: NKITensor, srcs: Sequence[NKITensor], reduce_op: Any, scales: Optional[Sequence[float]] = None,
                unique_indices: bool = True, oob_mode: Any = None, name: Optional[str] = None) -> NkiInstruction:
    """``dst = reduce_op(srcs[0] * scales[0], srcs[1] * scales[1], ...)`` in fp32 by the DMA engine's compute
    logic; only ``nl.add`` and scales of 1.0 exist. A tile-indexed operand makes it a read-modify-write
    scatter (``dst[idx] = dst[idx] + src``) or gather (``dst = dst + src[idx]``)."""
    _check_oob_mode("dma_compute", oob_mode)
    _dma.dma_compute(dst, srcs, reduce_op, scales=scales, oob_mode=oob_mode, unique_indices=unique_indices)
    return NkiInstruction(name or "dma_compute")
