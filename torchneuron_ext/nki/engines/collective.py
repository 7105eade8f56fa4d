"""Data movement between the cores of a launch: what ``nisa.sendrecv``, ``nisa.core_barrier`` and
``nki.collectives`` compute once the cores have met (nki/cores.py), and what they are charged.

The ranks of a launch are its cores: ``kernel[2]`` has ranks 0 and 1 (``nl.program_id(0)``), a launch
with one core has rank 0 only. A core's values are copied when it arrives at the meeting point, so what
another core receives is what was there when the instruction was issued, as a DMA reads it.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from .. import dtypes, runtime
from ..errors import fail
from ..memory import sbuf
from ..tensor import NKITensor
from .elementwise import BINARY, op_name
from .operands import store_into

REDUCE_OPS = ("add", "minimum", "maximum")


def rank() -> int:
    """This core's rank in its launch."""
    return runtime.current().core_index


def ranks() -> int:
    """How many ranks (cores running at the same time) the running launch has."""
    return runtime.current().core_count


def check_ranks(api: str, named: Sequence[int], what: str) -> tuple:
    """Ranks an instruction names, each one a core of this launch."""
    count = ranks()
    out = []
    for r in named:
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)):
            raise TypeError(f"{api}: {what} must be integers (ranks), got {r!r}")
        r = int(r)
        if not 0 <= r < count:
            launch = runtime.current()
            fail("err_invalid_rank",
                 f"{api}: {what} names rank {r}, but this launch has {count} rank{'s' if count > 1 else ''} "
                 f"(0..{count - 1}): the ranks of a launch are its cores, kernel[2] runs two"
                 + (" (legacy SPMD instances run one after another and are not ranks)"
                    if launch.dialect == "legacy" and launch.grid not in ((), (1,)) else ""))
        out.append(r)
    return tuple(out)


def exchange(key: Any, participants: Sequence[int], value: Any, what: str) -> dict:
    """Meet the other ``participants`` (this core among them) under ``key``: {rank: value} of each."""
    launch = runtime.current()
    me = launch.core_index
    participants = tuple(sorted(set(participants) | {me}))
    if launch.cores is None:
        return {me: value}  # check_ranks has made sure no other rank is named
    return launch.cores.exchange(me, key, participants, value, what)


def reduce_fn(api: str, op: Any) -> Callable:
    name = op_name(op)
    if name not in REDUCE_OPS:
        raise ValueError(f"{api}: op must be nl.add, nl.minimum or nl.maximum, got {op!r}")
    return BINARY[name]


def reduce_values(fn: Callable, values: Sequence[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """Fold ``values`` in rank order; floats in fp32, as the collective engine accumulates."""
    work = np.float32 if dtypes.is_float(dtype) else np.int64
    acc = np.asarray(values[0], dtype=work)
    for v in values[1:]:
        acc = fn(acc, np.asarray(v, dtype=work))
    return np.asarray(acc)


def snapshot(t: NKITensor) -> np.ndarray:
    """The values a core sends: copied, so its later writes do not change what the others receive."""
    return np.array(t.read(), copy=True)


def write(dst: NKITensor, values: np.ndarray, api: str) -> None:
    store_into(dst, values, api)


def charge(api: str, nbytes: int, group_size: int, hbm: bool) -> None:
    runtime.current().costs.collective(api, int(nbytes), group_size, from_hbm=hbm, to_hbm=hbm)


def nbytes(t: NKITensor) -> int:
    return int(np.prod(t.shape)) * t.itemsize


def same_memory(api: str, tensors: Sequence[NKITensor], allow_sbuf: bool = True) -> bool:
    """All tensors on HBM, or (where the collective allows) all in SBUF; whether they are on HBM."""
    for t in tensors:
        if not isinstance(t, NKITensor):
            raise TypeError(f"{api}: srcs and dsts must be NKI tensors, got {type(t).__name__}")
    kinds = {t.buffer.is_hbm for t in tensors}
    if len(kinds) > 1:
        fail("err_unsupported_memory", f"{api}: tensors must all be on HBM or all in SBUF, got "
                                       f"{', '.join(t.buffer.name for t in tensors)}")
    hbm = kinds.pop() if kinds else True
    if not hbm:
        bad = [t.buffer.name for t in tensors if t.buffer is not sbuf]
        if bad or not allow_sbuf:
            fail("err_unsupported_memory", f"{api}: tensors must be on HBM"
                 + ("" if not allow_sbuf else " or in SBUF") + f", got {', '.join(t.buffer.name for t in tensors)}")
    return hbm


def gpsimd_dma_limit(itemsize: int) -> int:
    """Bytes per partition sendrecv's GpSimd DMA moves: 1024 for 32-bit types, 512 for 16-bit, 256 for
    8-bit (nisa.sendrecv's documentation)."""
    return {4: 1024, 2: 512, 1: 256}.get(itemsize, 1024)


def flat(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values).reshape(-1)


def metadata_rows(api: str, meta: NKITensor, n: int, has_rdispls: bool) -> "tuple[np.ndarray, Optional[Any]]":
    """The (rows, n) uint32 table of an all_gather_v / all_to_all_v, and where row 2 is written back."""
    rows = 4 if has_rdispls else 3
    if not isinstance(meta, NKITensor):
        raise TypeError(f"{api}: metadata_tensor must be an NKI tensor, got {type(meta).__name__}")
    if meta.dtype != np.uint32:
        fail("err_dtype_mismatch", f"{api}: metadata_tensor must be uint32, got {dtypes.name(meta.dtype)}")
    want = (rows, n) if meta.buffer.is_hbm else (1, rows, n)
    if tuple(meta.shape) != want and not (not has_rdispls and tuple(meta.shape) in ((4, n), (1, 4, n))):
        fail("err_shape_mismatch", f"{api}: metadata_tensor must have shape {want} ({rows} rows, one column per "
                                   f"rank of the group) on {'HBM' if meta.buffer.is_hbm else 'SBUF'}, got "
                                   f"{tuple(meta.shape)}")
    table = np.array(meta.read(), copy=True).reshape(-1, n).astype(np.int64)
    return table, meta
