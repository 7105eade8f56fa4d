"""The trace's vocabulary for its readers, in one place.

The names the Kineto plugin gives events, lanes and metadata keys are defined once, in
csrc/instrumentation/trace_schema.h, and come from there through `_C._trace_schema()`; the execution
tiers come from the tier enumerator (csrc/instrumentation/op_tracking.h) through `_C._tier_names()`.
What Python itself adds at export (the HBM counters, the projected lanes, the dispatch flows) and
Kineto's own event categories are defined here. The report (profiler/report.py), the HTML viewer
(profiler/html/model.py, its tier colours in profiler/html/page.py) and the cost model read a trace
through this module.
"""
from __future__ import annotations

from .. import _C

_S: dict[str, str] = _C._trace_schema()

NEURON_PID = int(_S["NEURON_PID"])  # the device's pseudo process; its threads are the lanes

# Execution tiers, in the enumerator's order (ExecutionTier).
TIERS: tuple[str, ...] = tuple(_C._tier_names())
# Each tier's badge in the HTML viewer: (background, text colour). Every tier has one (tested).
TIER_COLOURS: dict[str, tuple[str, str]] = {
    "native": ("#e3efe6", "#1d6a3a"),
    "generic": ("#fbe3df", "#9a2a1c"),
    "compiled": ("#e3e9fb", "#27489a"),
    "nki": ("#f1e4f8", "#6a2a8f"),
    "custom": ("#fdf0d5", "#8a5a00"),
    "collective": ("#e0f3f4", "#17666b"),
}

# Event names.
KERNEL_PREFIX = _S["KERNEL_PREFIX"]  # neuron::<op without aten::>
RUNTIME_KERNEL = _S["RUNTIME_KERNEL"]
RUNTIME_COPY = _S["RUNTIME_COPY"]
COPY_NAMES = (_S["COPY_HTOD"], _S["COPY_DTOH"], _S["COPY_DTOD"], _S["COPY_UNKNOWN"])
COPY_PREFIX = _S["COPY_UNKNOWN"]  # every copy's name starts with it ("Memcpy")

# Metadata keys (an event's "args").
DEVICE = _S["DEVICE"]
STREAM = _S["STREAM"]
TIER = _S["TIER"]
OP = _S["OP"]
BYTES = _S["BYTES"]
BYTES_READ = _S["BYTES_READ"]
BYTES_WRITTEN = _S["BYTES_WRITTEN"]
FLOPS = _S["FLOPS"]
ELEMENTS = _S["ELEMENTS"]
DTYPE = _S["DTYPE"]
MODEL_NS = _S["MODEL_NS"]
GROUP_SIZE = _S["GROUP_SIZE"]
IN = _S["IN"]
IN_COMPILED_REGION = _S["IN_COMPILED_REGION"]
PART = _S["PART"]  # a compiled graph's launch, written as the parts its kernels leave uncovered: part k
PARTS = _S["PARTS"]  # of n,
LAUNCH_OFFSET_NS = _S["LAUNCH_OFFSET_NS"]  # where the part starts in the launch,
LAUNCH_NS = _S["LAUNCH_NS"]  # and the launch's whole span
# Torch's own key for the arguments' shapes (a cpu_op's with record_shapes=True); the dry run writes it on a
# matmul-family kernel too, so the cost model can project it as its Tensor Engine instructions.
INPUT_DIMS = "Input Dims"

# Lane names: "NC<core>" and one of these.
LANE_HARDWARE = _S["LANE_HARDWARE"]
LANE_TRANSFERS = _S["LANE_TRANSFERS"]
LANE_COLLECTIVES = _S["LANE_COLLECTIVES"]
LANE_RUNTIME_STREAM = _S["LANE_RUNTIME_STREAM"]

# Kineto's categories of the events the plugin and torch's profiler produce.
CAT_KERNEL = "kernel"
CAT_MEMCPY = "gpu_memcpy"
CAT_MEMSET = "gpu_memset"
CAT_ANNOTATION = "gpu_user_annotation"  # a compiled region's child kernels
CAT_RUNTIME = "privateuse1_runtime"
CAT_CPU_OP = "cpu_op"
CAT_USER_ANNOTATION = "user_annotation"
CAT_PYTHON = "python_function"

# What Python adds at export (profiler/config.py, profiler/projection.py).
CAT_PROJECTED = "neuron_projected"  # the cost model's projected lanes
CAT_DISPATCH = "neuron_dispatch"  # flows from a framework op to its runtime span
HBM_COUNTER_SUFFIX = " HBM"  # counter events "NC<core> HBM"
HBM_ALLOCATED_MB = "allocated MB"
HBM_RESERVED_MB = "reserved MB"
# The projected lanes (profiler/projection.py): "NC<core>" and one of these, then " (<target>)". They
# live past kineto_plugin.cpp's 64 lanes per core (hardware, runtime streams, collectives,
# transfers): tid = PROJECTED_TID_BASE + 2 * core (+1: the core's collectives, which run on their
# own queues beside compute); a non-default stream's kernels: PROJECTED_STREAM_TID_BASE + i.
LANE_PROJECTED = " projected"
LANE_PROJECTED_COLLECTIVES = " projected collectives"
LANE_PROJECTED_STREAM = " projected stream "  # then the stream's number
PROJECTED_TID_BASE = 1 << 16
# Lanes of the non-default streams that ran kernels, one per (core, stream), in order of appearance.
PROJECTED_STREAM_TID_BASE = PROJECTED_TID_BASE + (1 << 12)


def hbm_counter_name(core: int) -> str:
    return f"NC{core}{HBM_COUNTER_SUFFIX}"


def hbm_counter_core(name: str) -> int | None:
    """The core of an "NC<core> HBM" counter, None for another name."""
    if name.startswith("NC") and name.endswith(HBM_COUNTER_SUFFIX):
        core = name[2:-len(HBM_COUNTER_SUFFIX)]
        if core.isdigit():
            return int(core)
    return None


def op_name(kernel_name: str) -> str:
    """The op a kernel event ran: neuron::mul.Tensor -> aten::mul.Tensor, neuron::compiled::graph_0 ->
    compiled::graph_0; other names unchanged."""
    if kernel_name.startswith(KERNEL_PREFIX):
        rest = kernel_name[len(KERNEL_PREFIX):]
        return rest if "::" in rest else "aten::" + rest
    return kernel_name


def copy_direction(name: str, default: str = "DtoD") -> str:
    """HtoD, DtoH or DtoD of a copy event ("Memcpy HtoD (host -> neuron)"); `default` otherwise."""
    parts = name.split()
    return parts[1] if len(parts) > 1 and parts[0] == COPY_PREFIX else default


def is_copy(name: str) -> bool:
    return name.startswith(COPY_PREFIX)
