"""Cost of the built-in per-op timing: a tiny add on neuron with timing off, with timing on, and
under torch.profiler (CPU + NEURON), against plain CPU PyTorch, interleaved in one run. Then the
cost model's projection: nothing is projected while the profiler records (the record only carries
the element count and dtype the model needs, inside the "timing on" figure); the projection runs
when the trace is exported, and its cost per recorded kernel is measured on a trace of many kernels.

    python bench/timing_overhead.py
"""
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

import torchneuron_ext
from torchneuron_ext import costmodel
from torchneuron_ext.profiler import disable_timing, enable_timing, op_stats

N = 20000


def per_op_us(fn) -> float:
    t0 = time.perf_counter()
    for _ in range(N):
        fn()
    return (time.perf_counter() - t0) / N * 1e6


def main() -> None:
    a_c, b_c = torch.randn(4, 4), torch.randn(4, 4)
    a_n, b_n = a_c.neuron(), b_c.neuron()
    cases = {"cpu": [], "neuron, timing off": [], "neuron, timing on": []}
    for _ in range(3):
        per_op_us(lambda: torch.add(a_n, b_n))
    for _ in range(9):
        cases["cpu"].append(per_op_us(lambda: torch.add(a_c, b_c)))
        disable_timing()
        cases["neuron, timing off"].append(per_op_us(lambda: torch.add(a_n, b_n)))
        enable_timing()
        cases["neuron, timing on"].append(per_op_us(lambda: torch.add(a_n, b_n)))
        disable_timing()
    med = {k: statistics.median(v) for k, v in cases.items()}
    with profile(activities=[ProfilerActivity.CPU]):
        cpu_prof = per_op_us(lambda: torch.add(a_c, b_c))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        neuron_prof = per_op_us(lambda: torch.add(a_n, b_n))
    print(f"tiny add (4x4), median of 9 x {N} calls, {torch.get_num_threads()} threads")
    for k, v in med.items():
        print(f"  {k:<28}{v:8.3f} us   {v / med['cpu']:.2f}x cpu")
    print(f"  timing cost per op          {med['neuron, timing on'] - med['neuron, timing off']:8.3f} us   (goal <= 0.5 us)")
    print(f"  under torch.profiler: cpu {cpu_prof:.2f} us, neuron {neuron_prof:.2f} us")
    print(f"  projection per recorded kernel while profiling: 0 us (made lazily, when the trace is exported)")
    print(f"  projection at export (project_trace + lane events): {export_projection_us():.2f} us per kernel")
    print(f"  op_stats() with projected columns: {op_stats_us():.1f} us per call ({len(op_stats())} ops)")


def export_projection_us(kernels: int = 50000) -> float:
    """Projecting a trace of `kernels` recorded kernels, per kernel."""
    ev = []
    for i in range(kernels):
        t = i * 10.0
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": t, "dur": 8.0, "pid": 1, "tid": 1})
        ev.append({"ph": "X", "cat": "kernel", "name": "neuron::add", "ts": t + 2, "dur": 4.0, "pid": 0x4E43,
                   "tid": 0, "args": {"tier": "native", "device": 0, "stream": 0, "bytes read": 128,
                                      "bytes written": 64, "elements": 16, "dtype": "Float"}})
    trace = {"traceEvents": ev}
    t0 = time.perf_counter()
    costmodel.add_projected_lanes(trace, "trn2")
    return (time.perf_counter() - t0) / kernels * 1e6


def op_stats_us(reps: int = 200) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        op_stats()
    return (time.perf_counter() - t0) / reps * 1e6


if __name__ == "__main__":
    main()
