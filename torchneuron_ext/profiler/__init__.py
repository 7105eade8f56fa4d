"""Profiling the neuron device.

- Built-in per-op timing, without torch.profiler: `timing()`, `op_stats()`, `timing_table()`.
- torch.profiler integration: `ProfilerActivity.PrivateUse1` fills the NEURON columns of
  `key_averages()` and the device lanes of the Chrome trace (a Kineto plugin in the C++ library).
- TorchNeuron's profiling API: `NeuronConfig`, `ProfileMode`, `NeuronProfiler`.
- Reports: `summarize_trace()` / `format_report()` (also `torchneuron-ext report PATH`).
- Device memory by category over time (parameters, gradients, activations, ...): `memory_timelines(prof)`.
"""
from .config import NeuronConfig, NeuronProfiler, ProfileMode
from .memory_timeline import MemoryTimeline, memory_timelines
from .report import TraceSummary, format_report, summarize_trace
from .timing import (
    OpStat,
    disable_timing,
    enable_timing,
    op_stats,
    reset_timing,
    timing,
    timing_enabled,
    timing_table,
)

__all__ = [
    "MemoryTimeline", "NeuronConfig", "NeuronProfiler", "OpStat", "ProfileMode", "TraceSummary", "disable_timing", "enable_timing",
    "format_report", "memory_timelines", "op_stats", "reset_timing", "summarize_trace", "timing", "timing_enabled", "timing_table",
]
