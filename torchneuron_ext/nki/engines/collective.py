"""Data movement between the cores of a launch: what ``nisa.sendrecv``, ``nisa.core_barrier`` and
``nki.collectives`` compute once the cores have met (nki/cores.py), and what they are charged.

A rank is a logical core: a launch is one rank (rank 0), with one or two physical cores (``kernel[2]``:
``nl.program_id(0)``); kernel.launch_ranks runs a kernel on several ranks at once. The cross-core
instructions meet the other cores of the same rank; a collective meets the same-numbered core of every
rank of its group. A core's values are copied when it arrives at the meeting point, so what
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
    """This core's rank: the logical core it belongs to (0 unless the kernel runs on several ranks)."""
    return runtime.current().rank


def core() -> int:
    """This core's number in its rank (nl.program_id(0) under kernel[2])."""
    return runtime.current().core_index


def _check(api: str, named: Sequence[int], what: str, count: int, kind: str, where: str, hint: str) -> tuple:
    out = []
    for r in named:
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)):
            raise TypeError(f"{api}: {what} must be integers ({kind}s), got {r!r}")
        r = int(r)
        if not 0 <= r < count:
            fail("err_invalid_rank", f"{api}: {what} names {kind} {r}, but {where} {count} {kind}"
                                     f"{'s' if count > 1 else ''} (0..{count - 1}){hint}")
        out.append(r)
    return tuple(out)


def check_ranks(api: str, named: Sequence[int], what: str) -> tuple:
    """Ranks a collective names, each one a rank the kernel runs on."""
    count = runtime.current().rank_count
    return _check(api, named, what, count, "rank", "the kernel runs on",
                  "" if count > 1 else ": a launch is one rank (a logical core); nki.launch_ranks runs several")


def check_cores(api: str, named: Sequence[int], what: str) -> tuple:
    """Cores a cross-core instruction names, each one a core of this rank."""
    launch = runtime.current()
    legacy = launch.dialect == "legacy" and launch.grid not in ((), (1,))
    return _check(api, named, what, launch.core_count, "core", "this rank has",
                  ": kernel[2] runs two" + (" (legacy SPMD instances run one after another and are not cores)"
                                            if legacy else ""))


def _exchange(threads: "dict[int, int]", key: Any, value: Any, what: str, linked: bool) -> dict:
    """Meet the threads ``threads`` maps names to (this one among them): {name: value} of each. ``linked``:
    the others are cores of this launch (their schedule records are this launch's)."""
    launch = runtime.current()
    if launch.cores is None:
        return {name: value for name in threads}  # one core: _check has made sure no other is named
    # A meeting point of the cores' schedules too (nki/schedule.py): each brings the time its work so far
    # ends and the instruction that ends it, and none goes on before the last of them arrives.
    scheduler = launch.costs.scheduler
    got = launch.cores.exchange(launch._thread, key, tuple(sorted(threads.values())),
                                (value, scheduler.arrival()), what)
    scheduler.meet([arrived for _, arrived in got.values()], linked)
    return {name: got[t][0] for name, t in threads.items()}


def exchange_cores(key: Any, cores: Sequence[int], value: Any, what: str) -> dict:
    """Meet the other ``cores`` of this rank under ``key``: {core: value} of each (this core included)."""
    launch = runtime.current()
    named = set(cores) | {launch.core_index}
    return _exchange({c: launch.thread_of(launch.rank, c) for c in named}, ("core", launch.rank, key), value, what,
                     True)


def exchange_ranks(key: Any, ranks: Sequence[int], value: Any, what: str) -> dict:
    """Meet the same-numbered core of the other ``ranks`` under ``key``: {rank: value} of each. Each core
    of a logical core issues its own collectives, on its own data, as on the device."""
    launch = runtime.current()
    named = set(ranks) | {launch.rank}
    return _exchange({r: launch.thread_of(r, launch.core_index) for r in named},
                     ("rank", launch.core_index, key), value, what, False)


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
