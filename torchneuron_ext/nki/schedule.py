"""The schedule model of an NKI launch: when each instruction runs on the target (docs/cost_model.md, "NKI
kernels: the schedule").

Every instruction the simulator runs is issued, in program order, to its engine's queue (Tensor, Vector,
Scalar, GpSimd, one of the DMA queues, the collective queue). It starts when its queue is free and its
operands are ready: the instructions that last wrote what it reads (read-after-write), and those that last
read or wrote what it writes (write-after-read, write-after-write), have ended, plus a semaphore wait when the
producer ran on another queue. It ends its modelled duration later (nki/cost_model.py's per-instruction
costs). Engines overlap; the launch's projected time is the makespan, the last instruction's end.

Dependencies are tracked per allocation (runtime.Storage) and, inside it, per box of element indices the
view covers (a view's start and extent in each dimension of the allocation). A view the box cannot describe
(a reshape across dimensions, a negative stride) counts as the whole allocation; an allocation with more
than ``MAX_ENTRIES`` distinct boxes in flight folds its older half into one entry covering them all, ending
when the last of them ends (conservative: it may add a wait on old accesses, never drops one). Accesses reach the schedule through NKITensor.read/write (an instruction reads its operands
before it is counted and writes its results after), so every instruction's operands are seen without its
engine naming them.

The online part is O(1) amortised per instruction (bounded lists per allocation); the per-instruction
records (``ScheduledInstruction``) are kept only when asked (``recording()``, or ``Costs(record=True)``).
"""
from __future__ import annotations

import contextlib
import gc
import math
import operator
import sys
import threading
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from ..trainium import targets as _targets
from . import dtypes
from .data_address import data_address
from .errors import _is_internal

# An allocation with more distinct boxes than this in flight has them merged into one (see the docstring).
MAX_ENTRIES = 16
# The views' boxes kept per allocation (_Region.boxes), forgotten all at once past this many.
_MAX_BOXES = 1024


@dataclass(frozen=True)
class Operand:
    role: str            # "in" or "out"
    memory: str          # "sbuf", "psum", "hbm", "shared_hbm", ...
    name: str            # the tensor's name if it has one, else ""
    shape: tuple         # the operand's (view's) shape
    dtype: str           # numpy/ml_dtypes name, e.g. "bfloat16"
    nbytes: int


@dataclass(frozen=True)
class ScheduledInstruction:
    index: int                 # program order within its core (0-based)
    core: int                  # physical core of the launch (0 or 1 at LNC=2)
    engine: str                # "tensor" | "vector" | "scalar" | "gpsimd" | "dma" | "collective"
    queue: str                 # the lane: the engine's name, or "dma:<n>" for a DMA queue
    opcode: str                # the API name, e.g. "nc_matmul", "dma_copy"
    file: str                  # the kernel source file of the calling line ("" if unknown)
    line: int                  # its line number (0 if unknown)
    start_s: float             # projected start on the target, seconds from the launch's start
    end_s: float
    operands: tuple            # tuple[Operand, ...]
    flops: int
    nbytes: int                # bytes moved (DMA) or read+written (compute)
    deps: tuple                # indices (same core) or (core, index) pairs of the instructions it waited on
    wait_s: float              # time it waited on dependencies after its engine was free
    critical_dep: Any = None   # the dependency that set its start (an entry of deps), None if its queue did

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass
class KernelSchedule:
    target: str
    instructions: list         # list[ScheduledInstruction], empty when records were not kept
    makespan_s: float
    engine_busy_s: dict        # engine or queue -> busy seconds
    flops: int
    hbm_bytes: int
    instruction_count: int = 0
    latencies: Any = None      # the LatencyTable the schedule used

    def critical_path(self) -> list:
        """The chain of instructions that sets the makespan: from the last to end, each instruction's
        predecessor is the dependency that set its start or, if its queue was what it waited for, the
        instruction before it on that queue. Empty when records were not kept."""
        if not self.instructions:
            return []
        by_key = {(i.core, i.index): i for i in self.instructions}
        prev_on_queue: dict = {}
        last_seen: dict = {}
        for ins in sorted(self.instructions, key=lambda i: (i.core, i.index)):
            key = (ins.core, ins.queue)
            prev_on_queue[(ins.core, ins.index)] = last_seen.get(key)
            last_seen[key] = ins
        cur = max(self.instructions, key=lambda i: (i.end_s, -i.index))
        path = [cur]
        while True:
            dep = cur.critical_dep
            if dep is not None:
                nxt = by_key.get(dep if isinstance(dep, tuple) else (cur.core, dep))
            else:
                nxt = prev_on_queue.get((cur.core, cur.index))
                if nxt is not None and nxt.end_s < cur.start_s - 1e-15:
                    nxt = None  # neither its queue nor a dependency held it: the chain starts here
            if nxt is None:
                break
            path.append(nxt)
            cur = nxt
        path.reverse()
        return path


@dataclass(frozen=True)
class LatencyTable:
    """The latencies a target's schedule uses, with where each comes from (docs/cost_model.md)."""
    target: str
    dma_queues: int            # DMA queues a kernel's transfers spread over, each in order
    dma_fixed_s: float         # per transfer: descriptor, trigger and completion semaphore (targets.dma_fixed_s)
    dma_bytes_per_s: float     # the core's 16 DMA engines together: one transfer spans them by partition
    dependency_cycles: int     # a compute instruction waiting on another's output: static overhead + access start
    dependency_s: dict = field(default_factory=dict, compare=False)  # engine -> dependency_cycles at its clock
    min_ii_cycles: int = 64    # the shortest instruction of an engine (in the per-instruction costs)
    # The Tensor Engine's dI/dt limit (Trn2, Trn3): a burst starts at te_ramp_floor of full rate and ramps
    # to full over te_ramp_s; it re-engages after a te_ramp_s window below te_ramp_floor busy. 0: none.
    te_ramp_s: float = 0.0
    te_ramp_floor: float = 1.0
    sources: dict = field(default_factory=dict, compare=False)


# DMA queues: "The queue ID is typically tied to the trigger engine and the method of descriptor generation"
# (nki-dma-overview.rst), and a kernel's transfers are triggered from two sequencers: "Each NeuronCore-v3 comes
# with two instances of DGE, which can be commanded through either SyncE or ScalarE sequencer ... The compute
# engine to initiate a DGE command (Sync Engine or ScalarE) is currently determined by NKI compiler"
# (trainium2_arch.rst, DGE). NeuronCore-v2's static DMAs are triggered from the same two sequencers (GpSimd's
# software DGE serves indirect transfers). Transfers the kernel does not place (dma_queue) alternate between
# the two queues in program order.
_DMA_QUEUES = {2: 2, 3: 2, 4: 2}

# The queues by the sequencer that triggers them: SyncE's (AWS's profiles name it qSyncIO), ScalarE's, and
# GpSimd's software DGE (qGpSimdDynamic in nki-dma-overview.rst's profile), which alone generates gathers
# and scatters through a tile of indices (nki-dge.rst: "the only mode that supports indirect (gather/scatter)
# operations", and dge_mode=unknown with vector offsets "will automatically select swdge").
DMA_QUEUE_SYNC, DMA_QUEUE_SCALAR, DMA_QUEUE_GPSIMD = "dma:0", "dma:1", "dma:2"
_TRIGGER_QUEUES = {"sync": DMA_QUEUE_SYNC, "scalar": DMA_QUEUE_SCALAR, "activation": DMA_QUEUE_SCALAR,
                   "gpsimd": DMA_QUEUE_GPSIMD}


_ALTERNATING = {DMA_QUEUE_SYNC: 0, DMA_QUEUE_SCALAR: 1}
# The compiler's spill and reload transfers (AWS's profiles: qSyncSpillReload0, a queue of their own).
DMA_QUEUE_SPILL = "dma:spill"


def dma_queue(trigger: Optional[str] = None, dge: Optional[str] = None, gathered: bool = False) -> Optional[str]:
    """The DMA queue a transfer goes to, as the kernel says: ``trigger`` the engine ``dma_copy(engine=...)``
    names ("sync", "scalar"), ``dge`` its ``dge_mode`` ("swdge", "hwdge", "none"; None or "unknown": the
    compiler's choice), ``gathered`` whether an operand is indexed by a tile of indices. None when the
    kernel leaves it to the compiler: the transfer then takes the next of the alternating queues."""
    if dge == "swdge" or (gathered and dge in (None, "unknown")):
        return DMA_QUEUE_GPSIMD
    if trigger is not None:
        queue = _TRIGGER_QUEUES.get(trigger)
        if queue is None:
            raise ValueError(f"a DMA is triggered by the sync, scalar or gpsimd engine's sequencer, got {trigger!r}")
        return queue
    return None

# A dependent instruction: "with every instruction depending on the output tile of the previous instruction,
# we need to add a static instruction overhead of 100 engine cycles" (trainium_inferentia2_arch.rst, Vector
# Engine), and the tensor access it then starts is not hidden: "a static overhead approximately 60 cycles"
# (same guide, "Tensor access overhead"). The perf guide's chain of dependent 1-element ScalarE instructions
# runs at 264 cycles each: MIN_II (64) + 160 = 224 here.
_DEPENDENCY_CYCLES = 100 + 60

# The Tensor Engine's warm-up, by NeuronCore generation: "On Trn2 and Trn3 the Tensor Engine starts at
# roughly 50% utilization of maximum utilization and ramps to full over about the first ~3 microseconds
# after work begins. If utilization drops below 50% over any ~3 microsecond window - for example during an
# idle gap - the limit re-engages" (Neuron Explorer, overview-summary-page.rst "Understanding throttling",
# and its glossary's "dI/dt (delta current) throttling"). The ramp's shape is not given: linear here.
# NeuronCore-v2 (Trn1) has no such limit documented.
_TE_RAMP = {3: (3e-6, 0.5), 4: (3e-6, 0.5)}


def latency_table(target: Any) -> LatencyTable:
    """The schedule's latencies on ``target`` (a Target record or its name), one physical core."""
    record = _targets.by_name(target) if isinstance(target, str) else target
    hw = record.physical_core()
    clocks = {"tensor": hw.tensor_clock_hz, "vector": hw.vector_clock_hz, "scalar": hw.scalar_clock_hz,
              "gpsimd": hw.gpsimd_clock_hz}
    ramp_s, ramp_floor = _TE_RAMP.get(hw.generation, (0.0, 1.0))
    return LatencyTable(
        target=hw.name,
        dma_queues=_DMA_QUEUES.get(hw.generation, 4),
        dma_fixed_s=hw.dma_fixed_s,
        dma_bytes_per_s=hw.memory_bytes_per_s,
        dependency_cycles=_DEPENDENCY_CYCLES,
        # A DMA's fixed cost already holds its semaphore wait; a collective's its handshake.
        dependency_s={**{e: _DEPENDENCY_CYCLES / c for e, c in clocks.items()}, "dma": 0.0, "collective": 0.0},
        min_ii_cycles=hw.nki_min_ii_cycles,
        te_ramp_s=ramp_s,
        te_ramp_floor=ramp_floor,
        sources={
            "dma_queues": "nki-dma-overview.rst, trainium2_arch.rst (DGE): one queue per trigger engine, SyncE "
                          "and ScalarE",
            "dma_fixed_s": "trainium_costs.md section 3: ~1.3 us cross-engine per transfer [DBW]",
            "dma_bytes_per_s": "trainium/targets.py memory_bytes_per_s (16 DMA engines per core)",
            "dependency_cycles": "trainium_inferentia2_arch.rst: 100-cycle static overhead of a dependent "
                                 "instruction + ~60-cycle tensor access start",
            "min_ii_cycles": "ISA reference (Neuron 2.26): MIN_II ~ 64 cycles",
            "te_ramp_s": "Neuron Explorer, 'Understanding throttling' (dI/dt): on Trn2 and Trn3 the Tensor Engine "
                         "starts at ~50% utilization and ramps to full over ~3 us; re-engages after a ~3 us window "
                         "below 50%",
        })


# -- recording switch ---------------------------------------------------------------------------------------
_local = threading.local()


@contextlib.contextmanager
def _thread_flag(name: str) -> Iterator[None]:
    prev = getattr(_local, name, False)
    setattr(_local, name, True)
    try:
        yield
    finally:
        setattr(_local, name, prev)


def recording() -> "contextlib.AbstractContextManager[None]":
    """Keep every instruction's record (ScheduledInstruction) for the launches started inside."""
    return _thread_flag("record")


def recording_requested() -> bool:
    return getattr(_local, "record", False)


def disabled() -> "contextlib.AbstractContextManager[None]":
    """Launches started inside keep no schedule: their estimate is the busiest engine's total (perfect
    overlap, the model before the schedule). For measuring what the schedule costs (bench/nki_simulator.py)."""
    return _thread_flag("off")


def scheduler_for(target: Any, record: Optional[bool] = None) -> "Scheduler":
    """The scheduler of a new launch's core: as ``recording()`` and ``disabled()`` say on this thread."""
    if getattr(_local, "off", False):
        return NullScheduler(target)
    return Scheduler(target, recording_requested() if record is None else record)


# -- dependency tracking ------------------------------------------------------------------------------------
def box_of(base: Any, arr: Any, base_address: Optional[int] = None) -> Optional[tuple]:
    """The element box ``arr`` (a view of the allocation ``base``) covers, flattened as (lo0, hi0, lo1, hi1,
    ...) over ``base``'s dimensions (hi inclusive); None when a box cannot describe it (the whole allocation).
    ``base_address``: ``base``'s data address if the caller has it."""
    bstrides = base.strides
    bshape = base.shape
    if base_address is None:
        base_address = data_address(base)
    off = data_address(arr) - base_address
    n = len(bstrides)
    if off < 0 or n == 0:
        return None
    if n == 2 and arr.strides == bstrides and bstrides[1] > 0 and bstrides[0] >= bstrides[1] * bshape[1]:
        # A 2-D slice with unit steps of a row-major allocation (most tiles and HBM blocks): no loops.
        r, rest = divmod(off, bstrides[0])
        c, rest = divmod(rest, bstrides[1])
        h, w = arr.shape
        if rest or r + h > bshape[0] or c + w > bshape[1]:
            return None
        return (r, r + h - 1, c, c + w - 1)
    steps = _VIEW_STEPS.get((bstrides, arr.shape, arr.strides))
    if steps is None:
        steps = _view_steps(bstrides, arr.shape, arr.strides)
    if not steps:
        return None
    out = []
    for s, step, size in zip(bstrides, steps, base.shape):
        lo, off = divmod(off, s)
        hi = lo + step
        if hi >= size:
            return None
        out.append(lo)
        out.append(hi)
    if off:
        return None
    return tuple(out)


# (base strides, view shape, view strides) -> _view_steps: a kernel's views take a few shapes over many offsets.
_VIEW_STEPS: dict = {}


def _view_steps(bstrides: tuple, shape: tuple, strides: tuple) -> tuple:
    """How far a view of ``shape`` and ``strides`` reaches past its first element in each dimension of an
    allocation of ``bstrides`` (the box's hi - lo), each of the view's dimensions counted in the first of the
    allocation's whose stride divides its own; () when a box cannot describe it (a dimension no stride divides,
    or an allocation stride that is not positive). Kept in _VIEW_STEPS."""
    steps = [0] * len(bstrides)
    if any(s <= 0 for s in bstrides):
        steps = []
    for size, t in zip(shape, strides) if steps else ():
        if size <= 1 or t == 0:
            continue
        for d, s in enumerate(bstrides):
            if t >= s and t % s == 0:
                steps[d] += (size - 1) * (t // s)
                break
        else:
            steps = []
            break
    if len(_VIEW_STEPS) >= 4096:
        _VIEW_STEPS.clear()
    result = _VIEW_STEPS[(bstrides, shape, strides)] = tuple(steps)
    return result


def _overlap(a: Optional[tuple], b: Optional[tuple]) -> bool:
    if a is None or b is None:
        return True
    if len(a) != len(b):
        return True
    for i in range(0, len(a), 2):
        if a[i + 1] < b[i] or b[i + 1] < a[i]:
            return False
    return True


def _contains(outer: Optional[tuple], inner: Optional[tuple]) -> bool:
    if outer is None:
        return True
    if inner is None or len(outer) != len(inner):
        return False
    for i in range(0, len(outer), 2):
        if inner[i] < outer[i] or inner[i + 1] > outer[i + 1]:
            return False
    return True


def _overlapping(entries: list, box: Optional[tuple]) -> list:
    """The entries whose boxes overlap ``box`` (``_overlap``), unrolled for 2-D boxes."""
    if box is None:
        return entries
    if len(box) == 4:
        r0, r1, c0, c1 = box
        out = []
        for e in entries:
            b = e[0]
            if b is None:
                out.append(e)
            elif len(b) == 4:
                if not (b[1] < r0 or r1 < b[0] or b[3] < c0 or c1 < b[2]):
                    out.append(e)
            elif _overlap(box, b):
                out.append(e)
        return out
    return [e for e in entries if _overlap(box, e[0])]


def _uncovered(entries: list, box: tuple) -> list:
    """The entries whose boxes ``box`` does not cover (``_contains``), unrolled for 2-D boxes: most tiles and
    HBM blocks, and the schedule's most frequent test."""
    if len(box) == 4:
        r0, r1, c0, c1 = box
        out = []
        for e in entries:
            b = e[0]
            if b is None or len(b) != 4 or b[0] < r0 or b[1] > r1 or b[2] < c0 or b[3] > c1:
                out.append(e)
        return out
    return [e for e in entries if not _contains(box, e[0])]


def _union(entries: list) -> Optional[tuple]:
    first = entries[0][0]
    if first is not None and len(first) == 4:
        # 2-D boxes (most tiles and HBM blocks): one pass, without a generator per dimension.
        r0, r1, c0, c1 = first
        for e in entries:
            b = e[0]
            if b is None or len(b) != 4:
                break
            if b[0] < r0:
                r0 = b[0]
            if b[1] > r1:
                r1 = b[1]
            if b[2] < c0:
                c0 = b[2]
            if b[3] > c1:
                c1 = b[3]
        else:
            return (r0, r1, c0, c1)
    boxes = [e[0] for e in entries]
    if any(b is None for b in boxes) or len({len(b) for b in boxes}) != 1:
        return None
    return tuple(min(b[i] for b in boxes) if i % 2 == 0 else max(b[i] for b in boxes) for i in range(len(boxes[0])))


class _Region:
    """The in-flight accesses of one allocation, for one core's schedule (``owner``): entries [box, end_s,
    index, queue, zero fill]. ``writers_end`` and ``readers_end`` bound their ends from above (every end added
    since the list was last emptied), so that a schedule without records skips a list none of whose entries can
    delay an instruction (``_ready``)."""
    __slots__ = ("writers", "readers", "writers_end", "readers_end", "owner", "base", "base_address", "boxes")

    def __init__(self, owner: Any) -> None:
        self.writers: list = []
        self.readers: list = []
        self.writers_end = self.readers_end = -math.inf
        self.owner = owner
        self.base: Any = None       # the allocation's array and its data address, for box_of
        self.base_address = 0
        self.boxes: dict = {}       # (view's byte offset, shape, strides) -> box_of, while base is the same


_end_of = operator.itemgetter(1)  # an entry's end, the key _fold_oldest sorts by


def _fold_oldest(entries: list) -> list:
    """The older half of ``entries`` (by end) as one entry over their union, the newer half as they are."""
    entries = sorted(entries, key=_end_of)
    old, new = entries[:len(entries) // 2], entries[len(entries) // 2:]
    last = old[-1]
    return [[_union(old), last[1], last[2], last[3], False]] + new


# -- the online scheduler -----------------------------------------------------------------------------------
class Scheduler:
    """One core's schedule, built as the simulator runs: ``access`` for every operand, ``issue`` for every
    instruction (after its reads, before its writes), ``finish`` at the end."""
    enabled = True

    def __init__(self, target: Any, record: bool = False, core: int = 0) -> None:
        self.table = latency_table(target)
        self._dependency_s, self._te_ramp_s = self.table.dependency_s, self.table.te_ramp_s  # read per instruction
        self.record, self.core = record, core
        self.group: Any = None  # the cores launched together (runtime.run_ranks' CoreGroup), which may share memory
        self.queue_free: dict = {}
        self.queue_busy: dict = {}
        self.bandwidth_free = 0.0
        self.floor_s = 0.0  # the last meeting point with another core: no queue starts before it
        self._floor_index: Any = None  # the instruction whose end set floor_s (meet)
        self.makespan_s = 0.0
        self.last_index: Optional[int] = None  # the instruction that ends last so far (sets makespan_s)
        self._meet: Optional[list] = None  # a meeting's arrivals, for the next instruction's record (meet)
        self.count = 0
        # _RECORD_FIELDS fields per instruction, flat (see _finalize); instructions() makes ScheduledInstructions
        self.records: list = []
        self._operand_tuples: dict = {}  # an instruction's operand numbers -> the one tuple records share
        self._built: Optional[list] = None
        self._operands: list = []         # Operand records, numbered (records hold the numbers)
        self._operand_numbers: dict = {}
        self._dma_next = 0
        self._reads: list = []
        self._writes: list = []
        self._pending: Optional[tuple] = None
        self._fill = False
        self._starts: Optional[array] = None  # start of each instruction from _starts_base on (watch_spills)
        self._starts_base = 0
        self.spill_count = 0  # spill and reload transfers placed (spill): not the kernel's instructions
        # The Tensor Engine's dI/dt limit (_throttled_end): the current burst's start, and its instructions
        # of the last te_ramp_s as [start, end] with their busy total.
        self._te_burst: Optional[float] = None
        self._te_window: deque = deque()
        self._te_window_busy = 0.0

    # -- operands -------------------------------------------------------------------------------------------
    def access(self, storage: Any, arr: Any, writing: bool) -> None:
        """An instruction's operand: ``arr``, a view of ``storage``'s allocation, read or written."""
        # storage.sched: the region of the core that first touched the allocation; a dict of every core's
        # when several cores touch it (shared HBM at LNC=2).
        region = storage.sched
        if region is None:
            region = storage.sched = _Region(self)
        elif type(region) is dict:
            region = region.get(self) or region.setdefault(self, _Region(self))
        elif region.owner is not self:
            first = region
            region = _Region(self)
            if self.group is not None and first.owner.group is self.group:
                storage.sched = {first.owner: first, self: region}
            else:  # left by an earlier launch: forget it (and do not keep its schedule alive)
                storage.sched = region
        base = storage.array
        if base is arr:
            box = None
        else:
            if region.base is not base:
                region.base, region.base_address, region.boxes = base, data_address(base), {}
            # A kernel's loops come back to the same views (offset, shape and strides): their boxes are kept.
            key = (data_address(arr) - region.base_address, arr.shape, arr.strides)
            boxes = region.boxes
            box = boxes.get(key, boxes)
            if box is boxes:
                if len(boxes) >= _MAX_BOXES:
                    boxes.clear()
                box = boxes[key] = box_of(base, arr, region.base_address)
        item = (region, box, self._operand(storage, arr, writing) if self.record else None)
        if not writing:
            self._reads.append(item)
            return
        if self._reads and self._pending is not None:
            # Reads since the last instruction that a write follows before the next one are the last
            # instruction's: operands it reads after being counted (copy), or an assignment of its fresh result
            # into a tile (``t[k] = nl.load(...)``), which the compiler folds into the instruction.
            self._pending[7].extend(self._reads)
            self._reads = []
        self._writes.append(item)

    def fill(self, storage: Any, value: Any = 0) -> None:
        """The instruction just issued initialises ``storage`` to ``value`` (``nl.zeros``/``nl.full``'s memset).
        Zeros in PSUM are the accumulation group's start, which the toolchain folds into the matmuls that
        follow: "the first nisa.nc_matmul call overwrites the contents of the psum_buf" (AWS's matmul tutorial,
        of a buffer made by nl.zeros), so a Tensor Engine instruction does not wait for that memset. Any other
        fill (in SBUF, or a value other than zero) is data that every reader waits for."""
        self.access(storage, storage.array, True)
        self._fill = storage.buffer.name == "psum" and _is_zero(value)

    # -- instructions ---------------------------------------------------------------------------------------
    def issue(self, engine: str, opcode: str, seconds: float, flops: int = 0, nbytes: int = 0,
              dma_fixed_s: float = 0.0, queue: Optional[str] = None) -> None:
        """An instruction of ``seconds`` on ``engine`` (for a DMA: ``dma_fixed_s`` of latency, then
        ``seconds - dma_fixed_s`` of transfer at the core's DMA bandwidth)."""
        if self._pending is not None:
            self._finalize()
        reads, self._reads = self._reads, []
        self._fill = False
        if queue is None:
            if engine == "dma":
                queue = f"dma:{self._dma_next}"
                self._dma_next = (self._dma_next + 1) % self.table.dma_queues
            else:
                queue = engine
        elif queue in _ALTERNATING:  # placed by the kernel: the next unplaced transfer takes the other queue
            self._dma_next = (_ALTERNATING[queue] + 1) % self.table.dma_queues
        where = _kernel_line() if self.record else ("", 0)
        self._pending = (engine, queue, opcode, seconds, dma_fixed_s, flops, nbytes, reads, where)

    def finish(self) -> None:
        if self._pending is not None:
            self._finalize()
        self._reads = []
        self._writes = []

    def _finalize(self) -> None:
        engine, queue, opcode, seconds, fixed, flops, nbytes, reads, where = self._pending
        self._pending = None
        writes, self._writes = self._writes, []
        free = self.queue_free.get(queue, self.floor_s)
        lat = self._dependency_s.get(engine, 0.0)
        tensor = queue == "tensor"
        if self.record:
            ready, crit, deps = _dependencies(reads, writes, queue, lat, tensor, free)
        else:
            ready, crit, deps = _ready(reads, writes, queue, lat, tensor, free), None, None
        meeting = self._meet is not None
        if meeting:
            # The exchange after a meeting with other cores (meet): it waited for every core's arrival, and
            # the latest arrival set its start unless its own queue or operands held it longer.
            for t, dep in self._meet:
                if deps is not None:
                    deps.append(dep)
                if t >= ready and crit is None:
                    crit = dep
            self._meet = None
        elif deps is not None and crit is None and ready == self.floor_s and self._floor_index is not None:
            crit = self._floor_index  # held by the last meeting, not by its queue (only records name it)
            deps.append(crit)
        start = ready
        if engine == "dma":
            data_start = max(start + fixed, self.bandwidth_free)
            end = data_start + (seconds - fixed)
            self.bandwidth_free = end
        elif tensor and self._te_ramp_s:
            end = self._throttled_end(start, seconds)
            seconds = end - start
        else:
            end = start + seconds
        self.queue_free[queue] = end
        self.queue_busy[queue] = self.queue_busy.get(queue, 0.0) + seconds
        index = self.count
        self.count += 1
        if end > self.makespan_s:
            self.makespan_s = end
            self.last_index = index
        if meeting:
            self._floor_index = index  # what the instructions the meeting held wait for
        if self._starts is not None:
            self._starts.append(start)
        fill = self._fill
        self._fill = False
        for region, box, _ in reads:
            # The read joins an entry of the same box (the later end), or is a new one.
            readers = region.readers
            for e in readers:
                if e[0] == box:
                    if end >= e[1]:
                        e[1], e[2], e[3] = end, index, queue
                    break
            else:
                readers.append([box, end, index, queue, False])
                if len(readers) > MAX_ENTRIES:
                    region.readers = _fold_oldest(readers)
            if end > region.readers_end:
                region.readers_end = end
        for region, box, _ in writes:
            if box is None:  # the whole allocation: every earlier access is ordered before this one
                region.readers = []
                region.writers = [[None, end, index, queue, fill]]
                region.readers_end, region.writers_end = -math.inf, end
                continue
            if region.readers:
                region.readers = _uncovered(region.readers, box)
            writers = _uncovered(region.writers, box) if region.writers else []
            # No entry left equals box (a box covers itself): a new entry, without searching for an equal one.
            writers.append([box, end, index, queue, fill])
            if len(writers) > MAX_ENTRIES:
                writers = _fold_oldest(writers)
            region.writers = writers
            if end > region.writers_end:
                region.writers_end = end
        if self.record:
            # Plain fields now, a ScheduledInstruction when the schedule is asked for (instructions()). No
            # container is kept per instruction where it can be helped (the fields go into one flat list, equal
            # operand tuples are one object, a single dependency of this core is kept as its int): each kept
            # container counts towards the cyclic collector's next run, and at 100k records its runs (young
            # generations, and full ones over torch's heap) were a third of what the records cost.
            operands = tuple([r[2] for r in reads] + [w[2] for w in writes])
            operands = self._operand_tuples.setdefault(operands, operands)
            n = len(deps)
            if n > 1:
                deps = _sorted_deps(deps)
            elif n == 0:
                deps = ()
            else:
                deps = deps[0] if type(deps[0]) is int else (deps[0],)
            self.records.extend((index, engine, queue, opcode, where[0], where[1], start, end, operands, flops,
                                 nbytes, deps, start - free, crit))

    def _throttled_end(self, start: float, seconds: float) -> float:
        """When a Tensor Engine instruction of ``seconds`` at full rate, started at ``start``, ends under the
        dI/dt limit: a burst runs at ``floor`` of full rate at its start, rising linearly to full over ``ramp``
        (so the rate at x into the burst is floor + (1 - floor) x / ramp, and the work done by x is
        F(x) = floor x + (1 - floor) x^2 / (2 ramp) up to ramp, F(ramp) + (x - ramp) after). A new burst starts
        with the first instruction, and with one whose last ``ramp`` window, entirely after the current
        burst's start, had the engine busy less than ``floor`` of it (an idle gap)."""
        ramp, floor = self.table.te_ramp_s, self.table.te_ramp_floor
        window, lo = self._te_window, start - ramp
        while window and window[0][1] <= lo:
            s0, e0 = window.popleft()
            self._te_window_busy -= e0 - s0
        burst = self._te_burst
        if burst is None:
            burst = start
        elif start - burst >= ramp:
            busy = self._te_window_busy - (lo - window[0][0] if window and window[0][0] < lo else 0.0)
            if busy < floor * ramp:
                burst = start
        self._te_burst = burst
        x0 = start - burst
        if x0 >= ramp:
            end = start + seconds
        else:
            a = (1.0 - floor) / (2.0 * ramp)
            target = floor * x0 + a * x0 * x0 + seconds
            full = ramp * (1.0 + floor) / 2.0  # F(ramp)
            if target >= full:
                end = burst + ramp + (target - full)
            else:
                end = burst + (-floor + math.sqrt(floor * floor + 4.0 * a * target)) / (2.0 * a)
        window.append((start, end))
        self._te_window_busy += end - start
        return end

    def _operand(self, storage: Any, arr: Any, writing: bool) -> int:
        """The operand's number in this schedule's table: records hold numbers, so that they hold no object
        the cyclic collector tracks (it would rescan 100k records again and again: most of their cost)."""
        key = (writing, storage.buffer.name, storage.name, arr.shape, arr.dtype)
        n = self._operand_numbers.get(key)
        if n is None:
            n = self._operand_numbers[key] = len(self._operands)
            self._operands.append(Operand(role="out" if writing else "in", memory=storage.buffer.name,
                                          name=storage.name or "", shape=tuple(arr.shape),
                                          dtype=dtypes.name(arr.dtype), nbytes=int(arr.nbytes)))
        return n

    def instructions(self) -> list:
        """Every kept instruction's record (empty unless ``record``), built once."""
        if self._built is None or len(self._built) != len(self.records) // _RECORD_FIELDS:
            core, ops = self.core, self._operands
            # Bulk construction of records that hold no cycles: without the cyclic collector, which would
            # otherwise rescan the growing list many times (2-3x the construction's own time at 100k).
            enabled = gc.isenabled()
            gc.disable()
            try:
                self._built = _built_records(self.records, core, ops)
            finally:
                if enabled:
                    gc.enable()
        return self._built

    # -- the compiler's spills ---------------------------------------------------------------------------------
    def watch_spills(self) -> None:
        """Keep each instruction's start from now on: the live tiles may go over capacity, and the spills
        found at the end of the instance (runtime.Launch.check_live_ranges) are placed from where they occur."""
        if self._starts is None:
            self._starts = array("d")
            self._starts_base = self.count  # the next instruction placed (the pending one, if any) has this index

    def _time_at(self, index: int) -> float:
        """When instruction ``index`` started (the nearest one kept by watch_spills)."""
        starts = self._starts
        if not starts:
            return self.floor_s
        i = min(max(index - self._starts_base, 0), len(starts) - 1)
        return starts[i]

    def spill(self, engine: str, opcode: str, index: int, seconds: float, nbytes: int = 0,
              dma_fixed_s: float = 0.0) -> None:
        """A spill or reload the compiler inserts where instruction ``index`` overflows a memory (runtime's live
        ranges): SBUF's by DMA on the spill/reload queue (AWS's profiles show them on qSyncSpillReload, apart
        from the kernel's queues), PSUM's as Vector copies on the Vector queue. Placed when the instance ends,
        after the instructions around it: from that instruction's start, behind what its queue holds; it
        delays no instruction of the kernel (no consumer waits on a reload) and its bytes do not take the
        kernel's DMA bandwidth, so it overlaps everything but its own queue, and lengthens the makespan only
        past the kernel's end."""
        if self._pending is not None:
            self._finalize()
        queue = DMA_QUEUE_SPILL if engine == "dma" else engine
        at = self._time_at(index)
        free = self.queue_free.get(queue, self.floor_s)
        start = max(free, at)
        end = start + seconds
        self.queue_free[queue] = end
        self.queue_busy[queue] = self.queue_busy.get(queue, 0.0) + seconds
        n = self.count
        self.count += 1
        self.spill_count += 1
        if end > self.makespan_s:
            self.makespan_s = end
            self.last_index = n
        if self.record:
            self.records.extend((n, engine, queue, opcode, "", 0, start, end, (), 0, nbytes, (), start - free, None))

    # -- cross-core meeting points ----------------------------------------------------------------------------
    def hold_until(self, t: float) -> None:
        """Every queue of this core waits until ``t`` (a meeting point with another core)."""
        if self._pending is not None:
            self._finalize()
        for q in list(self.queue_free):
            self.queue_free[q] = max(self.queue_free[q], t)
        self.floor_s = max(self.floor_s, t)
        self.bandwidth_free = max(self.bandwidth_free, t)

    def ready_time(self) -> float:
        """When this core could start its next instruction at the earliest: its pending instruction done."""
        if self._pending is not None:
            self._finalize()
        return max(self.makespan_s, self.floor_s)

    def arrival(self) -> "tuple[float, int, Optional[int]]":
        """What this core brings to a meeting point: (when its work so far ends, its core, the instruction that
        ends last, None if none has)."""
        t = self.ready_time()
        if self.makespan_s >= self.floor_s:
            return t, self.core, self.last_index
        f = self._floor_index  # this core's own instruction (an int) or another core's (core, index)
        return t, self.core, f

    def meet(self, arrivals: "list[tuple[float, int, Optional[int]]]", linked: bool = True) -> None:
        """A meeting point with other cores (``arrival()`` of each, this one's included): no queue of this core
        starts before the last arrives, and the instruction issued next (the exchange) records the arrivals'
        last instructions as its dependencies, drawn as arrows between the cores' lanes (nki/trace.py), and
        the latest as what set its start, so the critical path crosses cores. ``linked``: the others' records
        are in this core's KernelSchedule (cores of one launch); False for other ranks (other launches),
        whose instructions only this core's own arrival can name."""
        latest = max(t for t, _, _ in arrivals)
        self.hold_until(latest)
        meet = []
        # Latest first; arrivals at the same time (cores that ran the same work) this core's own first, then by
        # core, so the exchange's critical dependency does not follow the order the cores' threads met in.
        for t, core, index in sorted(arrivals, key=lambda a: (-a[0], a[1] != self.core, a[1])):
            if index is None:
                continue
            key = index if type(index) is tuple else (core, index)  # an arrival may name another core's
            if key[0] != self.core and not linked:
                continue
            meet.append((t, key[1] if key[0] == self.core else key))
        self._meet = meet or None
        if meet and meet[0][0] >= latest:
            # The floor's origin, for a core that reaches its next meeting without work of its own since.
            self._floor_index = meet[0][1]


class NullScheduler(Scheduler):
    """A launch inside ``disabled()``: no dependencies tracked, no makespan (``enabled`` False)."""
    enabled = False

    def access(self, storage: Any, arr: Any, writing: bool) -> None:
        return None

    def fill(self, storage: Any, value: Any = 0) -> None:
        return None

    def issue(self, engine: str, opcode: str, seconds: float, flops: int = 0, nbytes: int = 0,
              dma_fixed_s: float = 0.0, queue: Optional[str] = None) -> None:
        self.count += 1

    def watch_spills(self) -> None:
        return None

    def spill(self, engine: str, opcode: str, index: int, seconds: float, nbytes: int = 0,
              dma_fixed_s: float = 0.0) -> None:
        return None


# An instruction's fields in Scheduler.records: index, engine, queue, opcode, file, line, start, end, operand
# numbers, flops, nbytes, deps (a tuple, or an int: the one dependency, of this core), wait, critical dependency.
_RECORD_FIELDS = 14


def _built_records(records: list, core: int, ops: list) -> list:
    """``records`` (the flat fields of _finalize and spill) as ScheduledInstructions. Each is made as its __init__
    would make it (no __post_init__, no default to compute), but its fields go into its __dict__ at once: the
    frozen dataclass's __init__ sets each through object.__setattr__, 3x the time (a third of what keeping
    records cost at 100k instructions). Operands with the same numbers share one tuple."""
    new, cls = object.__new__, ScheduledInstruction
    operand_tuples: dict = {}
    built = []
    append = built.append
    fields = iter(records)
    for r in zip(*[fields] * _RECORD_FIELDS):
        numbers = r[8]
        operands = operand_tuples.get(numbers)
        if operands is None:
            operands = operand_tuples[numbers] = tuple([ops[i] for i in numbers])
        deps = r[11]
        ins = new(cls)
        ins.__dict__.update(index=r[0], core=core, engine=r[1], queue=r[2], opcode=r[3], file=r[4], line=r[5],
                            start_s=r[6], end_s=r[7], operands=operands, flops=r[9], nbytes=r[10],
                            deps=(deps,) if type(deps) is int else deps, wait_s=r[12], critical_dep=r[13])
        append(ins)
    return built


def _is_zero(value: Any) -> bool:
    try:
        return float(value) == 0.0
    except (TypeError, ValueError):
        return False


def _sorted_deps(deps: list) -> tuple:
    """Distinct dependencies in order: indices of this core, then other cores' (core, index) pairs."""
    unique = set(deps)
    try:
        return tuple(sorted(unique))  # all of this core (most instructions): no key function
    except TypeError:
        return tuple(sorted(unique, key=_dep_order))


def _dep_order(dep: Any) -> tuple:
    """Dependencies sort as (core, index): same-core indices first by index, then other cores' pairs."""
    return (0, dep, 0) if type(dep) is int else (1, dep[0], dep[1])


def _dependencies(reads: list, writes: list, queue: str, lat: float, tensor: bool, free: float) -> tuple:
    """When an instruction on ``queue`` whose engine's dependency latency is ``lat`` may start, its queue free at
    ``free``: (start, the dependency that set it or None, every dependency in the order met)."""
    ready = free
    crit = None
    deps = []
    # Read-after-write: the consumer waits for the producer's output and pays the dependency latency,
    # except Tensor after Tensor (matmuls accumulating into one PSUM tile stream in order).
    raw_lat = 0.0 if tensor else lat
    for region, box, _ in reads:
        if region.writers:
            for e in _overlapping(region.writers, box):
                if tensor and e[4]:
                    continue
                t = e[1] + (raw_lat if e[3] == queue else lat)
                deps.append(e[2])
                if t > ready:
                    ready, crit = t, e[2]
    # Write-after-write and write-after-read: in order on one queue; a semaphore wait across queues.
    for region, box, _ in writes:
        for lst in (region.writers, region.readers):
            if not lst:
                continue
            for e in _overlapping(lst, box):
                if tensor and e[4]:
                    continue
                t = e[1] + (0.0 if e[3] == queue else lat)
                deps.append(e[2])
                if t > ready:
                    ready, crit = t, e[2]
    return ready, crit, deps


def _ready(reads: list, writes: list, queue: str, lat: float, tensor: bool, free: float) -> float:
    """``_dependencies``' start alone, for a schedule without records: the start is a maximum, so a list whose
    bound (``_Region``) plus ``lat`` is no later than the start so far cannot raise it and is not searched
    (floating-point addition is monotonic: no entry's end plus a latency up to ``lat`` exceeds the bound's)."""
    ready = free
    raw_lat = 0.0 if tensor else lat
    for region, box, _ in reads:
        if region.writers and region.writers_end + lat > ready:
            ready = _latest(region.writers, box, queue, raw_lat, lat, tensor, ready)
    for region, box, _ in writes:
        if region.writers and region.writers_end + lat > ready:
            ready = _latest(region.writers, box, queue, 0.0, lat, tensor, ready)
        if region.readers and region.readers_end + lat > ready:
            ready = _latest(region.readers, box, queue, 0.0, lat, tensor, ready)
    return ready


def _latest(entries: list, box: Optional[tuple], queue: str, same: float, other: float, tensor: bool,
            ready: float) -> float:
    """The latest of ``ready`` and the ends of the entries overlapping ``box`` (``_overlap``), each plus ``same``
    if it ran on ``queue`` or else ``other``; a Tensor instruction (``tensor``) skips zero fills. Only an entry
    that would be later is tested for overlap, without the list ``_overlapping`` makes."""
    for e in entries:
        t = e[1] + (same if e[3] == queue else other)
        if t > ready and not (tensor and e[4]):
            b = e[0]
            if box is None or b is None:
                ready = t
            elif len(b) == 4 and len(box) == 4:
                if not (b[1] < box[0] or box[1] < b[0] or b[3] < box[2] or box[3] < b[2]):
                    ready = t
            elif _overlap(box, b):
                ready = t
    return ready


_INTERNAL: dict = {}   # code object -> whether it is the package's (or numpy's), for _kernel_line


def _kernel_line() -> "tuple[str, int]":
    """The kernel's line that issued the instruction: the innermost frame outside the package."""
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        internal = _INTERNAL.get(code)
        if internal is None:
            if len(_INTERNAL) > 65536:
                _INTERNAL.clear()
            internal = _INTERNAL[code] = _is_internal(code.co_filename)
        if not internal:
            return code.co_filename, f.f_lineno
        f = f.f_back
    return "", 0


def merged(target: Any, schedulers: "list[Scheduler]", flops: int, hbm_bytes: int,
           makespan_s: Optional[float] = None) -> KernelSchedule:
    """The KernelSchedule of cores that ran side by side: the slowest core's makespan (or ``makespan_s``, the
    launch's estimate), every core's records."""
    instructions: list = []
    busy: dict = {}
    for s in schedulers:
        instructions.extend(s.instructions())
        for q, b in s.queue_busy.items():
            busy[q] = max(busy.get(q, 0.0), b)
    makespan = max((s.makespan_s for s in schedulers), default=0.0) if makespan_s is None else makespan_s
    name = getattr(target, "name", str(target))
    return KernelSchedule(target=name, instructions=instructions, makespan_s=makespan, engine_busy_s=busy,
                          flops=flops, hbm_bytes=hbm_bytes,
                          instruction_count=sum(s.count - s.spill_count for s in schedulers),
                          latencies=schedulers[0].table if schedulers else latency_table(target))
