"""The instruction-level latency model of ``nki.benchmark`` (docs/cost_model.md, "NKI kernels").

Every instruction is charged to the engine that runs it, at that engine's clock from the shared
target record (torchneuron_ext/trainium/targets.py, one physical NeuronCore of the launch's target).
Engines run concurrently on the device, so the estimate is the busiest engine's total (perfect
overlap); the serial sum is reported too, as the bound with no overlap at all. The per-instruction
costs are the NKI ISA reference's (Neuron 2.26) for NeuronCore-v2, carried to v3/v4 by clock:

- Vector and Scalar: max(MIN_II, N) cycles, N the free elements per partition (partitions run in
  parallel); GpSimd: GPSIMD_START + N cycles.
- Tensor engine: max(min(64, stationary free size), moving free size) cycles; fp32 at a quarter rate.
- DMA: the fixed cross-engine cost per transfer, then bytes at the core's memory bandwidth.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Union

from ..trainium import targets

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")


def hardware(target: Union[targets.Target, str]) -> targets.Target:
    """The rates a launch is timed at: one physical NeuronCore of its target (a record, or a name
    such as "trn2"). A simulator-only target (nki.memory.Target) carries trn2's rates."""
    record = targets.by_name(target) if isinstance(target, str) else target
    return record.physical_core()


class Costs:
    """Counts instructions per engine and estimates their device time."""

    def __init__(self, target: Any) -> None:
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
        self.clock = 0  # instructions so far: the time axis of the tiles' live ranges (runtime._account)

    def compute(self, engine: str, name: str, free_elements: int) -> None:
        self.clock += 1
        if engine == "gpsimd":
            cycles = self.hw.gpsimd_start_cycles + free_elements
        else:
            cycles = max(self.hw.nki_min_ii_cycles, free_elements)
        self.busy_s[engine] += cycles / self._clock_hz[engine]
        self.instructions[name] += 1

    def matmul(self, name: str, k: int, m: int, n: int, fp32: bool) -> None:
        self.clock += 1
        cycles = max(min(64, m), n) * (self.hw.fp32_slowdown if fp32 else 1)
        self.busy_s["tensor"] += cycles / self._clock_hz["tensor"]
        self.instructions[name] += 1
        self.flops += 2 * k * m * n

    def dma(self, name: str, nbytes: int, to_hbm: bool, from_hbm: bool) -> None:
        self.clock += 1
        self.busy_s["dma"] += self.hw.dma_fixed_s + nbytes / self._dma_bytes_per_s
        self.instructions[name] += 1
        if from_hbm:
            self.bytes_read += nbytes
        if to_hbm:
            self.bytes_written += nbytes

    @property
    def total_instructions(self) -> int:
        return sum(self.instructions.values())

    @property
    def estimated_latency_s(self) -> float:
        return max(self.busy_s.values())

    @property
    def serial_latency_s(self) -> float:
        return sum(self.busy_s.values())

    @property
    def busiest_engine(self) -> str:
        return max(self.busy_s.items(), key=lambda kv: kv[1])[0]
