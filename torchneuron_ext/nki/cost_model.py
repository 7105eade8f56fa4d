"""The instruction-level latency model of ``nki.benchmark`` (docs/cost_model.md, "NKI kernels").

Every instruction is charged to the engine that runs it, at that engine's clock from the shared
target record (torchneuron_ext/trainium/targets.py, one physical NeuronCore of the launch's target), and
placed in the launch's schedule (nki/schedule.py): engines run concurrently on the device as far as the
instructions' dependencies allow, so the estimate is the schedule's makespan. ``busy_s`` keeps each engine's
total (its maximum was the estimate before the schedule: perfect overlap) and the serial sum is reported
too, as the bound with no overlap at all. The per-instruction costs are the NKI ISA reference's (Neuron
2.26) for NeuronCore-v2, carried to v3/v4 by clock:

- Vector and Scalar: max(MIN_II, N) cycles, N the free elements per partition (partitions run in
  parallel); GpSimd: GPSIMD_START + N cycles.
- Tensor engine: max(min(MIN_II, stationary free size), moving free size) cycles; fp32 at a quarter rate
  (trainium/projection.py's te_instruction_cycles, shared with the eager matmul's instruction model).
- DMA: the fixed cross-engine cost per transfer, then bytes at the core's memory bandwidth.
- Spills (runtime.Launch.check_live_ranges): live tiles over SBUF/PSUM capacity, saved and reloaded
  (SBUF by DMA to HBM, PSUM to SBUF by Vector copies), as AWS's compiler inserts them; placed in the
  schedule from the instruction where they occur (schedule.Scheduler.spill).
- Collectives and cross-core transfers (``nki.collectives``, ``nisa.sendrecv``, ``nisa.core_barrier``):
  the collective model of trainium/projection.py (``collective``: the runtime's algorithm for the size, one
  NeuronLink port per rank, the latency floor of a collective; sendrecv and core_barrier without the floor),
  on a queue of their own (the collective DMA rings run beside the compute engines).

The cores of an LNC=2 launch run at the same time, each with its own engines and schedule, which meet at
the cores' exchanges: the launch's estimate is the slower core's makespan (``Costs.concurrent``);
instruction counts, bytes and FLOPs add up.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Optional, Union

from ..trainium import projection, targets
from . import schedule as _schedule
from .cores import CoreStopped

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma", "collective")


def hardware(target: Union[targets.Target, str]) -> targets.Target:
    """The rates a launch is timed at: one physical NeuronCore of its target (a record, or a name
    such as "trn2"). A simulator-only target (nki.memory.Target) carries trn2's rates."""
    record = targets.by_name(target) if isinstance(target, str) else target
    return record.physical_core()


class Costs:
    """Counts instructions per engine and estimates their device time."""

    def __init__(self, target: Any, record: Optional[bool] = None) -> None:
        self.target = target
        hw = self.hw = hardware(target)
        self._clock_hz = {"tensor": hw.tensor_clock_hz, "vector": hw.vector_clock_hz,
                          "scalar": hw.scalar_clock_hz, "gpsimd": hw.gpsimd_clock_hz}
        self._dma_bytes_per_s = hw.memory_bytes_per_s
        self.busy_s = dict.fromkeys(ENGINES, 0.0)
        self.instructions: Counter = Counter()
        self.bytes_read = 0
        self.bytes_written = 0
        self.flops = 0
        # Bytes the compiler spills out of a full SBUF (to HBM) or PSUM (to SBUF) and reloads (spill).
        self.spill_bytes: Counter = Counter()
        self.clock = 0  # instructions so far: the time axis of the tiles' live ranges (runtime._account)
        # Set on the cores of a concurrent launch: another core failed, so this one stops at its next
        # instruction rather than running the kernel to its end.
        self.stop: Any = None
        # Set on the cores of a concurrent launch: called with the new clock, tells the other cores how far
        # this one is (cores.CoreGroup.advance).
        self.advance: Any = None
        # When each instruction runs on the target (nki/schedule.py): its makespan is the estimate.
        # record: keep every instruction's record (None: as schedule.recording() says on this thread).
        self.scheduler = _schedule.scheduler_for(target, record)
        self.spill_s = 0.0  # spill traffic's time (the compiler's spills, Costs.spill), also in the schedule
        self._merged: Optional[list] = None  # the cores' schedulers of a concurrent launch (Costs.concurrent)

    def _tick(self) -> None:
        self.clock += 1
        if self.stop is not None and self.stop.is_set():
            raise CoreStopped()
        if self.advance is not None:
            self.advance(self.clock)

    def compute(self, engine: str, name: str, free_elements: int) -> None:
        self._tick()
        if engine == "gpsimd":
            cycles = self.hw.gpsimd_start_cycles + free_elements
        else:
            cycles = max(self.hw.nki_min_ii_cycles, free_elements)
        seconds = cycles / self._clock_hz[engine]
        self.busy_s[engine] += seconds
        self.instructions[name] += 1
        self.scheduler.issue(engine, name, seconds)

    def cycles(self, engine: str, name: str, cycles: int) -> None:
        """An instruction whose cost AWS's reference states in cycles of its engine (nisa.topk: 4n + K)."""
        self._tick()
        seconds = cycles / self._clock_hz[engine]
        self.busy_s[engine] += seconds
        self.instructions[name] += 1
        self.scheduler.issue(engine, name, seconds)

    def matmul(self, name: str, k: int, m: int, n: int, fp32: bool) -> None:
        """One nc_matmul of stationary [k, m] and moving [k, n]: the cycles of the eager matmul's instruction
        model too (projection.te_instruction_cycles: max(min(MIN_II, m), n), x fp32_slowdown for fp32). An
        fp8 double_row or MX instruction contracts 2 or 4 rows per partition in the time of one BF16
        instruction, so it is charged as BF16 here (its k counts the rows)."""
        self._tick()
        cycles = projection.te_instruction_cycles(m, n, "Float" if fp32 else "BFloat16", self.hw)
        seconds = cycles / self._clock_hz["tensor"]
        self.busy_s["tensor"] += seconds
        self.instructions[name] += 1
        self.flops += 2 * k * m * n
        self.scheduler.issue("tensor", name, seconds, flops=2 * k * m * n)

    def dma(self, name: str, nbytes: int, to_hbm: bool, from_hbm: bool, queue: Optional[str] = None) -> None:
        """One transfer: the fixed cross-engine cost, then its bytes at the core's DMA bandwidth. In the
        schedule the fixed parts of transfers on different queues overlap; their bytes share the bandwidth.
        ``queue``: the DMA queue the kernel chose (dma_copy(engine=...)); None spreads transfers round-robin."""
        self._tick()
        seconds = self.hw.dma_fixed_s + nbytes / self._dma_bytes_per_s
        self.busy_s["dma"] += seconds
        self.instructions[name] += 1
        self.scheduler.issue("dma", name, seconds, nbytes=nbytes, dma_fixed_s=self.hw.dma_fixed_s, queue=queue)
        if from_hbm:
            self.bytes_read += nbytes
        if to_hbm:
            self.bytes_written += nbytes

    def collective(self, name: str, nbytes: int, group_size: int, from_hbm: bool = False,
                   to_hbm: bool = False) -> None:
        """A collective or cross-core transfer of ``nbytes`` (the larger of what one rank sends and
        receives) among ``group_size`` ranks, timed by the cost model's collectives (projection.collective):
        an ``nki.collectives`` operation is a collective instruction run by the CC cores, as nccom-test's
        NEFFs are, so it pays the collective latency floor and its algorithm's steps; ``nisa.sendrecv`` and
        ``nisa.core_barrier`` are the kernel's own transfer and semaphore instructions: their steps only
        (projection.collective_stages), no floor."""
        self._tick()
        op = kind = name.rsplit(".", 1)[-1]
        if kind in ("sendrecv", "collective_permute", "collective_permute_implicit",
                    "collective_permute_implicit_reduce"):
            kind = "send"  # one hop to a neighbour: the buffer once and one step
        elif kind == "core_barrier":
            kind = "barrier"
        if op in ("sendrecv", "core_barrier"):
            seconds = sum(s.seconds for s in projection.collective_stages(kind, nbytes, nbytes, group_size, self.hw))
        else:
            seconds = projection.collective(kind, nbytes, nbytes, group_size, self.hw).work_s
        self.busy_s["collective"] += seconds
        self.instructions[name] += 1
        self.scheduler.issue("collective", name, seconds, nbytes=nbytes)
        if from_hbm:
            self.bytes_read += nbytes
        if to_hbm:
            self.bytes_written += nbytes

    def spill(self, memory: str, nbytes: int, clock: Optional[int] = None) -> None:
        """``nbytes`` (over all partitions) of live tiles did not fit ``memory`` ("sbuf" or "psum") at
        ``clock`` (Costs.clock of the access that overflowed it; None: the last instruction): AWS's compiler
        inserts spills and refills to the next memory tier. SBUF spills go to HBM by DMA; PSUM spills to
        SBUF by engine copies (an fp32 element per partition and cycle). Each byte is saved and reloaded
        once, each a transfer (or copy) of its own in the schedule. No instruction is counted: the kernel
        did not write them."""
        self.spill_bytes[memory] += nbytes
        index = max((self.clock if clock is None else clock) - 1, 0)  # the instruction counted at that clock
        if memory == "psum":
            seconds = (nbytes // (4 * self.hw.num_partitions)) / self._clock_hz["vector"]
            self.busy_s["vector"] += 2 * seconds
            self.spill_s += 2 * seconds
            for opcode in ("psum_spill", "psum_reload"):
                self.scheduler.spill("vector", opcode, index, seconds)
            return
        seconds = self.hw.dma_fixed_s + nbytes / self._dma_bytes_per_s
        self.busy_s["dma"] += 2 * seconds
        self.spill_s += 2 * seconds
        for opcode in ("spill", "reload"):
            self.scheduler.spill("dma", opcode, index, seconds, nbytes=nbytes, dma_fixed_s=self.hw.dma_fixed_s)
        self.bytes_read += nbytes
        self.bytes_written += nbytes

    @classmethod
    def concurrent(cls, target: Any, cores: "list[Costs]") -> "Costs":
        """The costs of cores that ran at the same time: each engine as busy as on the busiest core (so the
        estimate is the slower core's), the counts summed."""
        total = cls(target, record=False)
        total._merged = [c.scheduler for c in cores]
        total.spill_s = max((c.spill_s for c in cores), default=0.0)
        for c in cores:
            for engine, busy in c.busy_s.items():
                total.busy_s[engine] = max(total.busy_s[engine], busy)
            total.instructions.update(c.instructions)
            total.bytes_read += c.bytes_read
            total.bytes_written += c.bytes_written
            total.flops += c.flops
            total.spill_bytes.update(c.spill_bytes)
            total.clock = max(total.clock, c.clock)
        return total

    @property
    def total_instructions(self) -> int:
        return sum(self.instructions.values())

    def finish(self) -> None:
        """The launch ended: the last instruction's writes are in (nki/schedule.py)."""
        for s in self._merged or [self.scheduler]:
            s.finish()

    @property
    def schedule(self) -> "_schedule.KernelSchedule":
        """When each instruction runs on the target (nki/schedule.py); instructions are listed only if the
        launch was asked to keep them (schedule.recording())."""
        self.finish()
        return _schedule.merged(self.target, self._merged or [self.scheduler], self.flops,
                                self.bytes_read + self.bytes_written, self.makespan_s)

    @property
    def makespan_s(self) -> float:
        self.finish()
        schedulers = self._merged or [self.scheduler]
        if not all(s.enabled for s in schedulers):  # schedule.disabled(): perfect overlap
            return max(self.busy_s.values())
        return max(s.makespan_s for s in schedulers)

    @property
    def estimated_latency_s(self) -> float:
        """The projected time: the schedule's makespan (engines overlapping as dependencies allow), the
        compiler's spills placed in it."""
        return self.makespan_s

    @property
    def serial_latency_s(self) -> float:
        return sum(self.busy_s.values())

    @property
    def busiest_engine(self) -> str:
        return max(self.busy_s.items(), key=lambda kv: kv[1])[0]
