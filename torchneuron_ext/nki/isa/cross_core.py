"""``nisa.core_barrier`` and ``nisa.sendrecv``: the instructions between the two physical cores of an LNC=2
logical core (NeuronCore-v3 and later), run for real between the concurrently running cores of a launch
(nki/cores.py, nki/engines/collective.py)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .. import runtime
from .._isa_common import engine as _engine
from ..engines import collective as _cc
from ..errors import fail
from ..memory import sbuf
from ..tensor import NKITensor

__all__ = ["core_barrier", "sendrecv", "dma_engine"]


from .._isa_common import dma_engine  # noqa: E402  (one enumeration for nki.isa and nki.isa.constants)


_DmaEngine = dma_engine  # sendrecv's parameter of the same name hides the class inside it


def _needs_lnc2(api: str) -> None:
    launch = runtime.current()
    if launch.target.generation < 3:
        fail("err_unsupported_instruction",
             f"nisa.{api} is available on NeuronCore-v3 or newer; the launch's target {launch.target.name} is "
             f"NeuronCore-v{launch.target.generation}")


def core_barrier(data: NKITensor, cores: Sequence[int], engine: Any = _engine.gpsimd,
                 name: Optional[str] = None) -> None:
    """Wait until every core in ``cores`` has reached this barrier: what the cores wrote into ``data``
    before it is visible to all of them after it.

    ``data`` names the tensor whose writes the barrier orders; it is not read. AWS documents shared HBM (the
    case where the other core's writes matter) and its docstring's "must", but AWS's NKI Library, tested in
    AWS's simulator, also passes a core's own SBUF tile (moe_cte's dynamic block counter), and AWS's simulator
    guide says the instruction uses "thread-safe synchronization primitives". So any tensor is accepted; anything else has no writes to
    order and is refused."""
    _needs_lnc2("core_barrier")
    if not isinstance(data, NKITensor):
        raise TypeError(f"nisa.core_barrier: data must be a tensor (the data the cores synchronize on), got "
                        f"{type(data).__name__}")
    # Which engine waits changes what else can run meanwhile, not what the barrier does.
    if engine is not None and not isinstance(engine, _engine):
        raise TypeError(f"nisa.core_barrier: engine must be an nisa engine such as nisa.gpsimd_engine, got {engine!r}")
    # AWS's kernels write the one-core barrier `(0)`, which Python reads as the index 0.
    if isinstance(cores, (int, np.integer)) and not isinstance(cores, bool):
        cores = (int(cores),)
    try:
        named = tuple(cores)
    except TypeError:
        raise TypeError(f"nisa.core_barrier: cores must be a tuple of core indices such as (0, 1), got {cores!r}")
    # AWS documents cores=(0, 1); its kernels also pass (0,) at LNC=1, a barrier of one core (a no-op).
    if not named or len(set(named)) != len(named):
        fail("err_invalid_rank", f"nisa.core_barrier: cores must name distinct cores, e.g. (0, 1), got {named!r}")
    participants = _cc.check_cores("nisa.core_barrier", named, "cores")
    if _cc.core() not in participants:
        fail("err_invalid_rank", f"nisa.core_barrier: core {_cc.core()} runs a barrier of cores {named!r} that it "
                                 f"is not one of")
    _cc.exchange_cores(("core_barrier", tuple(sorted(participants))), participants, None,
                       f"nisa.core_barrier(cores={named!r})")
    _cc.charge("core_barrier", 0, len(participants), hbm=False)


def sendrecv(src: NKITensor, dst: NKITensor, send_to_rank: int, recv_from_rank: int, pipe_id: int,
             dma_engine: dma_engine = dma_engine.dma, name: Optional[str] = None) -> None:
    """Send ``src`` to core ``send_to_rank``'s ``dst`` while receiving core ``recv_from_rank``'s ``src`` into
    this core's ``dst``; sendrecvs with the same ``pipe_id`` complete together."""
    api = "nisa.sendrecv"
    _needs_lnc2("sendrecv")
    for arg, t in (("src", src), ("dst", dst)):
        if not isinstance(t, NKITensor):
            raise TypeError(f"{api}: {arg} must be an SBUF tile, got {type(t).__name__}")
        if t.buffer is not sbuf:
            fail("err_unsupported_memory", f"{api}: {arg} must be in SBUF, got a tile in {t.buffer.name}")
    if src.dtype != dst.dtype:
        fail("err_dtype_mismatch", f"{api}: src and dst must have the same dtype, got {src.dtype} and {dst.dtype}")
    if tuple(src.shape) != tuple(dst.shape):
        fail("err_shape_mismatch", f"{api}: src and dst must have the same shape, got {tuple(src.shape)} and "
                                   f"{tuple(dst.shape)}")
    if not isinstance(dma_engine, _DmaEngine):
        raise ValueError(f"{api}: dma_engine must be nisa.dma_engine.dma or nisa.dma_engine.gpsimd_dma, got "
                         f"{dma_engine!r}")
    if dma_engine.name == "gpsimd_dma":
        per_partition = int(np.prod(src.shape[1:])) * src.itemsize
        limit = _cc.gpsimd_dma_limit(src.itemsize)
        if per_partition > limit:
            fail("err_size_of_dimension_exceed_arch_limit",
                 f"{api}: dma_engine=gpsimd_dma moves at most {limit} bytes per partition of "
                 f"{8 * src.itemsize}-bit data, got {per_partition}")
    if isinstance(pipe_id, bool) or not isinstance(pipe_id, (int, np.integer)):
        raise TypeError(f"{api}: pipe_id must be an integer, got {pipe_id!r}")
    # sendrecv's ranks are the cores of this logical core (0 or 1), not collective ranks.
    to, frm = _cc.check_cores(api, (send_to_rank, recv_from_rank), "send_to_rank/recv_from_rank")
    me = _cc.core()
    what = f"{api}(send_to_rank={to}, recv_from_rank={frm}, pipe_id={int(pipe_id)})"
    got = _cc.exchange_cores(("sendrecv", int(pipe_id)), (to, frm), (_cc.snapshot(src), to, frm), what)
    values, their_to, _their_from = got[frm]
    if their_to != me:
        fail("err_invalid_rank", f"{api}: core {me} receives from core {frm}, but core {frm} sends to core "
                                 f"{their_to} in the same pipe ({int(pipe_id)})")
    if values.shape != tuple(dst.shape) or values.dtype != dst.dtype:
        fail("err_shape_mismatch", f"{api}: core {frm} sends a {values.shape} {values.dtype} tile into core "
                                   f"{me}'s {tuple(dst.shape)} {dst.dtype} dst")
    _cc.write(dst, values, "sendrecv")
    _cc.charge("sendrecv", _cc.nbytes(src), 2, hbm=False)
