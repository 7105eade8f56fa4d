"""A documented, deliberately simple latency model for ``nki.benchmark`` (see docs/nki.md).

Every instruction is charged to the engine that runs it. Engines run concurrently on the device, so
the estimate is the busiest engine's total (perfect overlap); the serial sum is reported too, as the
bound with no overlap at all. Figures are NeuronCore-v2-like and are estimates, not measurements:

- Vector, Scalar (activation) and GpSimd engines: 64 cycles to issue, then one element per
  partition per cycle (GpSimd: one per 8 cycles). Partitions run in parallel.
- Tensor engine: 64 cycles, then one moving column per cycle (bf16/fp8); fp32 operands run at 1/4 rate.
- DMA: 2 us fixed cost per transfer, then bytes at 200 GB/s (one core's share of HBM bandwidth).
- Clock: 1.4 GHz.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

CLOCK_HZ = 1.4e9
ISSUE_CYCLES = 64
DMA_FIXED_S = 2e-6
DMA_BYTES_PER_S = 200e9
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")


class Costs:
    """Counts instructions per engine and estimates their device time."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.busy_s = dict.fromkeys(ENGINES, 0.0)
        self.instructions: Counter = Counter()
        self.bytes_read = 0
        self.bytes_written = 0
        self.flops = 0
        self.clock = 0  # instructions so far: the time axis of the tiles' live ranges (runtime._account)

    def compute(self, engine: str, name: str, free_elements: int) -> None:
        self.clock += 1
        per = 8 if engine == "gpsimd" else 1
        self.busy_s[engine] += (ISSUE_CYCLES + free_elements * per) / CLOCK_HZ
        self.instructions[name] += 1

    def matmul(self, name: str, k: int, m: int, n: int, fp32: bool) -> None:
        self.clock += 1
        self.busy_s["tensor"] += (ISSUE_CYCLES + n * (4 if fp32 else 1)) / CLOCK_HZ
        self.instructions[name] += 1
        self.flops += 2 * k * m * n

    def dma(self, name: str, nbytes: int, to_hbm: bool, from_hbm: bool) -> None:
        self.clock += 1
        self.busy_s["dma"] += DMA_FIXED_S + nbytes / DMA_BYTES_PER_S
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

    def merge(self, other: "Costs") -> None:
        for k, v in other.busy_s.items():
            self.busy_s[k] += v
        self.instructions.update(other.instructions)
        self.bytes_read += other.bytes_read
        self.bytes_written += other.bytes_written
        self.flops += other.flops
