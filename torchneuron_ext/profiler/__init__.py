"""Profiling the neuron device.

- Built-in per-op timing, without torch.profiler: `timing()`, `op_stats()`, `timing_table()`.
- torch.profiler integration: `ProfilerActivity.PrivateUse1` fills the NEURON columns of
  `key_averages()` and the device lanes of the Chrome trace (a Kineto plugin in the C++ library).
- TorchNeuron's profiling API: `NeuronConfig`, `ProfileMode`, `NeuronProfiler`.
- Reports: `summarize_trace()` / `format_report()` (also `torchneuron-ext report PATH`).
- NKI launches' instruction-level profile in the trace, when asked: `nki_instructions()` (or
  TORCHNEURON_EXT_NKI_INSTRUCTIONS=1), placed by the export or `add_kernel_lanes(trace)`.
- Device memory by category over time (parameters, gradients, activations, ...): `memory_timelines(prof)`.
"""
from .config import NeuronConfig, NeuronProfiler, ProfileMode
from .kernel_trace import add_kernel_lanes, nki_instructions
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
    "MemoryTimeline", "NeuronConfig", "NeuronProfiler", "OpStat", "ProfileMode", "TraceSummary", "add_kernel_lanes",
    "disable_timing", "enable_timing", "nki_instructions",
    "format_report", "memory_timelines", "op_stats", "reset_timing", "summarize_trace", "timing", "timing_enabled",
    "timing_table",
]
