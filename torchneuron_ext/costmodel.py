"""Projected Trainium time: how long each recorded device kernel would take on a real NeuronCore.

Every time the profiler measures here is the host CPU's. The cost model says what the same work
would cost on the chosen target (``NEURON_EMU_TARGET``: ``trn1``, ``trn2`` (default) or ``trn3``,
with ``:lnc=1`` / ``:lnc=2`` on trn2/trn3; then ``NKI_TARGET``, then
``NEURON_PLATFORM_TARGET_OVERRIDE``). docs/cost_model.md gives every constant's source, the
formulas, worked cases and a validation against public measurements.

This module is the name users import; the model lives in three places, re-exported here:

- the target records and their environment reader: torchneuron_ext/trainium/targets.py;
- the formulas that project one activity: torchneuron_ext/trainium/projection.py;
- the replay of a trace (and of op_stats() rows) and its Chrome lanes: torchneuron_ext/profiler/projection.py;
- the dry run (a program on fake tensors, projected without running it): torchneuron_ext/profiler/dry_run.py,
  and its program as one compiled NEFF with the compiler's fusion: torchneuron_ext/profiler/fusion.py.
"""
from __future__ import annotations

from .instrumentation.trace_schema import op_name
from .profiler.dry_run import DryRunError, DryRunResult, MemoryReport, dry_run, dry_run_script, is_dry_run
from .profiler.fusion import CompiledProgram, FusedKernel, compiled_program
from .profiler.projection import (
    PROJECTED_STREAM_TID_BASE,
    PROJECTED_TID_BASE,
    ProjectedKernel,
    ProjectedTimeline,
    add_projected_lanes,
    project_stats,
    project_trace,
    projected_lane_events,
    union_length,
    world_size,
)
from .trainium.projection import (
    BACKWARD_PASSES,
    CONV_TAP_STACKING,
    NORM_SCALAR_PASSES,
    NORM_VECTOR_PASSES,
    Projection,
    collective,
    compiled_kernel,
    ConvGeometry,
    convolution_eviction_s,
    convolution_geometry,
    convolution_s,
    copy,
    custom_kernel,
    default_target,
    eager_kernel,
    get_target,
    MatmulPlan,
    gpsimd_s,
    matmul_dims,
    matmul_plan,
    matmul_products,
    matmul_s,
    memory_s,
    nki_kernel,
    parse_target,
    project,
    resolve_target,
    indexed_write_bytes,
    kernel_class,
    out_variant_bytes_read,
    row_gather_bytes,
    scalar_engine_s,
    te_instruction_cycles,
    te_throttle_s,
    tensor_engine_s,
    vector_engine_s,
)
from .trainium.targets import GENERATIONS as TARGET_NAMES
from .trainium.targets import Target

__all__ = [
    "CONV_TAP_STACKING", "ConvGeometry", "convolution_eviction_s", "convolution_geometry", "convolution_s", "row_gather_bytes",
    "indexed_write_bytes",
    "BACKWARD_PASSES", "DryRunError", "DryRunResult", "MemoryReport", "dry_run", "dry_run_script", "is_dry_run", "NORM_SCALAR_PASSES", "NORM_VECTOR_PASSES", "PROJECTED_STREAM_TID_BASE", "PROJECTED_TID_BASE",
    "ProjectedKernel", "ProjectedTimeline", "Projection", "TARGET_NAMES", "Target", "add_projected_lanes",
    "collective", "compiled_kernel", "copy", "custom_kernel", "default_target", "eager_kernel", "get_target",
    "gpsimd_s", "memory_s", "nki_kernel", "op_name", "parse_target", "project", "project_stats", "project_trace",
    "projected_lane_events", "resolve_target", "scalar_engine_s", "tensor_engine_s", "union_length",
    "vector_engine_s", "world_size",
    # Tensor Engine efficiency by shape (docs/cost_model.md)
    "MatmulPlan", "matmul_dims", "matmul_plan", "matmul_products", "matmul_s", "te_instruction_cycles",
    "te_throttle_s",
    # A dry run's program as one compiled NEFF, with the compiler's fusion (docs/cost_model.md)
    "CompiledProgram", "FusedKernel", "compiled_program", "kernel_class", "out_variant_bytes_read",
]
