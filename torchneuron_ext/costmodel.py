"""Projected Trainium time: how long each recorded device kernel would take on a real NeuronCore.

Every time the profiler measures here is the host CPU's. This module is the model that says what
the same work would cost on the chosen target (``NEURON_EMU_TARGET``: ``trn1``, ``trn2`` (default)
or ``trn3``, with ``:lnc=1`` / ``:lnc=2`` on trn2/trn3; ``NKI_TARGET`` is used when it is set and
``NEURON_EMU_TARGET`` is not). One table of public hardware numbers (``_BASE``, per physical core;
``get_target`` scales it to the logical-core size) serves every
kind of kernel: eager ATen kernels, compiled graphs, NKI kernels (``nki/cost_model.py``), copies,
collectives and custom C++ ops. docs/cost_model.md gives every constant's source, the formulas,
worked cases and a validation against public measurements.

Projections are made lazily, when a table, report or trace is built, from what the runtime records
per kernel (op name, tier, bytes read and written, FLOPs of matmul-like ops, element count, dtype),
so profiling pays nothing for them while it runs.
"""
from __future__ import annotations

import bisect
import dataclasses
import math
import os
from typing import Any, Iterable, Optional

from .instrumentation import trace_schema as _schema

# ---------------------------------------------------------------------------------------------
# The hardware table. Per *physical* NeuronCore; an LNC=2 logical core is two of them
# (Target.scaled). Sources per constant: docs/cost_model.md, "Constants".
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Target:
    """The constants of one Trainium generation at one logical-core size."""

    name: str
    lnc: int
    tensor_clock_hz: float
    pe_rows: int
    pe_cols: int
    fp8_speedup: float          # Tensor Engine FP8 rate over BF16 (double_row / MX modes)
    fp32_slowdown: float        # Tensor Engine FP32 rate is BF16's divided by this
    vector_clock_hz: float
    vector_lanes_16bit: int     # elements per cycle, BF16/FP16 (performance mode)
    vector_lanes_other: int     # elements per cycle, FP32 and other dtypes
    scalar_clock_hz: float
    scalar_lanes_16bit: int
    scalar_lanes_other: int
    gpsimd_clock_hz: float
    gpsimd_cores: int
    gpsimd_simd_bits: int
    hbm_bytes_per_s: float      # the core's share of the chip's HBM bandwidth
    dma_engines: int
    dma_bytes_per_s_per_engine: float
    dma_fixed_s: float          # descriptor setup + semaphore to start, per transfer
    host_bytes_per_s: float     # host DRAM <-> device (PCIe class)
    launch_s: float             # one NEFF execution in eager mode, on top of its work
    link_bytes_per_s: float     # the core's share of the chip's NeuronLink bandwidth
    link_hop_s: float           # per step inside an instance
    cores_per_instance: int     # ranks beyond this cross EFA
    efa_bytes_per_s: float      # per core
    efa_hop_s: float
    nki_min_ii_cycles: int      # engine initiation interval of a short instruction
    gpsimd_start_cycles: int

    @property
    def tensor_peak_flops(self) -> float:
        """BF16/FP16/TF32 dense peak: 128 x 128 PEs, one multiply-add (2 FLOPs) per PE per cycle."""
        return self.pe_rows * self.pe_cols * 2 * self.tensor_clock_hz * self.lnc

    @property
    def memory_bytes_per_s(self) -> float:
        """What a kernel streaming HBM can move: the lower of HBM's share and the core's DMA engines."""
        return min(self.hbm_bytes_per_s, self.dma_engines * self.dma_bytes_per_s_per_engine) * self.lnc

    @property
    def label(self) -> str:
        return self.name if self.name == "trn1" else f"{self.name} LNC={self.lnc}"


_BASE = {
    "trn1": Target(
        name="trn1", lnc=1, tensor_clock_hz=2.8e9, pe_rows=128, pe_cols=128, fp8_speedup=1.0, fp32_slowdown=4.0,
        vector_clock_hz=1.12e9, vector_lanes_16bit=128, vector_lanes_other=128,
        scalar_clock_hz=1.4e9, scalar_lanes_16bit=128, scalar_lanes_other=128,
        gpsimd_clock_hz=1.4e9, gpsimd_cores=8, gpsimd_simd_bits=512,
        hbm_bytes_per_s=820e9 / 2, dma_engines=16, dma_bytes_per_s_per_engine=17e9, dma_fixed_s=1.3e-6,
        host_bytes_per_s=16e9, launch_s=12e-6,
        link_bytes_per_s=384e9 / 2, link_hop_s=1.5e-6, cores_per_instance=32,
        efa_bytes_per_s=800e9 / 8 / 32, efa_hop_s=15e-6, nki_min_ii_cycles=64, gpsimd_start_cycles=150,
    ),
    "trn2": Target(
        name="trn2", lnc=1, tensor_clock_hz=2.4e9, pe_rows=128, pe_cols=128, fp8_speedup=2.0, fp32_slowdown=4.0,
        vector_clock_hz=0.96e9, vector_lanes_16bit=512, vector_lanes_other=128,
        scalar_clock_hz=1.2e9, scalar_lanes_16bit=128, scalar_lanes_other=128,
        gpsimd_clock_hz=1.2e9, gpsimd_cores=8, gpsimd_simd_bits=512,
        hbm_bytes_per_s=2.9e12 / 8, dma_engines=16, dma_bytes_per_s_per_engine=23e9, dma_fixed_s=1.3e-6,
        host_bytes_per_s=16e9, launch_s=12e-6,
        link_bytes_per_s=1.28e12 / 8, link_hop_s=1.5e-6, cores_per_instance=128,
        efa_bytes_per_s=3.2e12 / 8 / 128, efa_hop_s=15e-6, nki_min_ii_cycles=64, gpsimd_start_cycles=150,
    ),
    "trn3": Target(
        name="trn3", lnc=1, tensor_clock_hz=2.4e9, pe_rows=128, pe_cols=128, fp8_speedup=1.0, fp32_slowdown=4.0,
        vector_clock_hz=1.2e9, vector_lanes_16bit=512, vector_lanes_other=256,
        scalar_clock_hz=1.2e9, scalar_lanes_16bit=256, scalar_lanes_other=128,
        gpsimd_clock_hz=1.2e9, gpsimd_cores=8, gpsimd_simd_bits=512,
        hbm_bytes_per_s=4.9e12 / 8, dma_engines=16, dma_bytes_per_s_per_engine=33e9, dma_fixed_s=1.3e-6,
        host_bytes_per_s=16e9, launch_s=12e-6,
        link_bytes_per_s=2.56e12 / 8, link_hop_s=1.5e-6, cores_per_instance=128,
        efa_bytes_per_s=12.8e12 / 8 / (64 * 8), efa_hop_s=15e-6, nki_min_ii_cycles=64, gpsimd_start_cycles=150,
    ),
}
_DEFAULT_LNC = {"trn1": 1, "trn2": 2, "trn3": 2}
# inf2 has Trn1's NeuronCore-v2 (the NKI simulator accepts it as a target).
_ALIASES = {"inf2": "trn1"}
TARGET_NAMES = tuple(_BASE)


def get_target(name: str = "trn2", lnc: Optional[int] = None) -> Target:
    """The constants of `name` (trn1, trn2, trn3) at logical-core size `lnc` (1 or 2; trn1: 1)."""
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in _BASE:
        raise ValueError(f"unknown Trainium target {name!r}: use one of {', '.join(TARGET_NAMES)}")
    lnc = _DEFAULT_LNC[key] if lnc is None else lnc
    allowed = (1,) if key == "trn1" else (1, 2)
    if lnc not in allowed:
        raise ValueError(f"LNC={lnc} is not a logical-core size of {key}: use {' or '.join(map(str, allowed))}")
    base = _BASE[key]
    # Two physical cores per logical core: twice the engines, DMA rings and HBM share, half the
    # logical cores per instance (one rank per logical core).
    return dataclasses.replace(base, lnc=lnc, link_bytes_per_s=base.link_bytes_per_s * lnc,
                               efa_bytes_per_s=base.efa_bytes_per_s * lnc,
                               cores_per_instance=base.cores_per_instance // lnc)


def parse_target(spec: str) -> Target:
    """``trn2``, ``trn2:lnc=1``, ``trn3:lnc=2`` (also ``trn2:1``)."""
    name, _, rest = spec.partition(":")
    lnc: Optional[int] = None
    if rest:
        value = rest.split("=", 1)[-1].strip()
        try:
            lnc = int(value)
        except ValueError:
            raise ValueError(f"NEURON_EMU_TARGET={spec!r}: {rest!r} is not a logical-core size; "
                             "use e.g. trn2:lnc=1") from None
    return get_target(name, lnc)


def default_target() -> Target:
    """NEURON_EMU_TARGET, else the NKI simulator's generation (NKI_TARGET, else
    NEURON_PLATFORM_TARGET_OVERRIDE, in the simulator's order), else trn2 at LNC=2."""
    for var in ("NEURON_EMU_TARGET", "NKI_TARGET", "NEURON_PLATFORM_TARGET_OVERRIDE"):
        spec = os.environ.get(var, "").strip()
        if spec:
            try:
                return parse_target(spec)
            except ValueError as e:
                raise ValueError(f"{var}={spec!r}: {e}") from None
    return get_target("trn2")


def resolve_target(target: Optional[Target | str] = None) -> Target:
    """A Target as given, parsed from a spec such as "trn2:lnc=1", or the default one."""
    if target is None:
        return default_target()
    return parse_target(target) if isinstance(target, str) else target


# ---------------------------------------------------------------------------------------------
# Which engine runs which operator.
# ---------------------------------------------------------------------------------------------

_TENSOR_OPS = frozenset({
    "mm", "bmm", "addmm", "addmm_", "baddbmm", "baddbmm_", "addbmm", "addbmm_", "mv", "addmv", "addmv_", "dot",
    "matmul", "linear", "convolution", "convolution_overrideable", "_convolution",
    "convolution_backward_overrideable", "convolution_backward", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward", "scaled_dot_product_attention",
    "_scaled_dot_product_fused_attention_overrideable", "_scaled_dot_product_fused_attention_overrideable_backward",
})
# Transcendentals and activations: the Scalar (activation) engine's lookup tables.
_SCALAR_OPS = frozenset({
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sigmoid", "rsqrt", "sqrt", "gelu", "silu",
    "erf", "erfc", "erfinv", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "pow", "softplus",
    "elu", "selu", "celu", "mish", "hardswish", "hardsigmoid", "logit", "glu", "_log_softmax", "log_sigmoid",
    "log_sigmoid_forward",
})
# Normalizations and softmax: statistics and normalization on Vector, the exp / rsqrt pass on Scalar.
_NORM_OPS = frozenset({
    "softmax", "_softmax", "log_softmax", "_log_softmax", "layer_norm", "native_layer_norm", "rms_norm",
    "_fused_rms_norm", "batch_norm", "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "group_norm", "native_group_norm", "_batch_norm_with_update",
})
NORM_VECTOR_PASSES = 2   # statistics (bn_stats / reduce), then normalize (tensor_scalar)
NORM_SCALAR_PASSES = 1   # exp with accumulate (softmax) or the scale activation (norms)
BACKWARD_PASSES = 2      # a backward kernel reads its forward's inputs and the incoming gradient


def _base_op(name: str) -> tuple[str, bool]:
    """aten::gelu_backward -> ("gelu", True); aten::mul_ -> ("mul", False)."""
    op = name.split("::", 1)[-1].split(".", 1)[0]
    backward = op.endswith("_backward") or "_backward_" in op
    op = op.replace("_backward_data", "").replace("_backward_input", "").replace("_backward", "")
    if op.endswith("_") and not op.startswith("_") and op[:-1]:
        op = op[:-1]
    return op, backward


def _is_16bit(dtype: str) -> bool:
    return dtype in ("BFloat16", "Half", "bfloat16", "float16")


def _is_fp8(dtype: str) -> bool:
    return dtype.lower().startswith("float8")


@dataclasses.dataclass(frozen=True)
class Projection:
    """One kernel's projected duration and the inputs that produced it."""

    duration_s: float
    engine: str           # tensor, vector, scalar, gpsimd, dma, pcie, link, efa, none
    bound: str            # compute, memory or launch
    work_s: float         # the duration without the launch overhead
    launch_s: float
    flops: int = 0
    bytes: int = 0
    elements: int = 0

    def args(self, target: Target) -> dict[str, Any]:
        return {"model": "costmodel", "target": target.label, "engine": self.engine, "bound": self.bound,
                "projected us": round(self.duration_s * 1e6, 3), "launch us": round(self.launch_s * 1e6, 3),
                "flops": self.flops, "bytes": self.bytes, "elements": self.elements}


def _pick(launch_s: float, candidates: dict[str, float], flops: int, nbytes: int, elements: int) -> Projection:
    engine, work = "none", 0.0
    for name, seconds in candidates.items():
        if seconds > work:
            engine, work = name, seconds
    if launch_s > 0 and launch_s >= work:
        bound = "launch"
    else:
        bound = "memory" if engine in ("dma", "pcie", "link", "efa") else "compute"
    return Projection(launch_s + work, engine if work > 0 else "none", bound, work, launch_s, flops, nbytes, elements)


def tensor_engine_s(flops: float, dtype: str, target: Target) -> float:
    """FLOPs at the Tensor Engine's dense peak for the dtype (FP8 faster, FP32 at its own rate)."""
    peak = target.tensor_peak_flops
    if _is_fp8(dtype):
        peak *= target.fp8_speedup
    elif not _is_16bit(dtype):
        peak /= target.fp32_slowdown
    return flops / peak


def vector_engine_s(elements: float, dtype: str, target: Target, passes: float = 1.0) -> float:
    lanes = target.vector_lanes_16bit if _is_16bit(dtype) else target.vector_lanes_other
    return elements * passes / (lanes * target.vector_clock_hz * target.lnc)


def scalar_engine_s(elements: float, dtype: str, target: Target, passes: float = 1.0) -> float:
    lanes = target.scalar_lanes_16bit if _is_16bit(dtype) else target.scalar_lanes_other
    return elements * passes / (lanes * target.scalar_clock_hz * target.lnc)


def gpsimd_s(elements: float, dtype: str, target: Target) -> float:
    """One element per SIMD lane per cycle over the 8 cores (512 bits: 16 fp32, 32 bf16 per core)."""
    bits = 16 if _is_16bit(dtype) else 8 if _is_fp8(dtype) or dtype in ("Char", "Byte", "Bool") else 32
    lanes = target.gpsimd_cores * target.gpsimd_simd_bits // bits
    return elements / (lanes * target.gpsimd_clock_hz * target.lnc)


def memory_s(nbytes: float, target: Target) -> float:
    return nbytes / target.memory_bytes_per_s


def eager_kernel(name: str, bytes_read: int, bytes_written: int, flops: int = 0, elements: int = 0,
                 dtype: str = "", target: Optional[Target | str] = None, launch: bool = True) -> Projection:
    """An ATen kernel run as its own NEFF: max over the engines it uses (roofline), plus one launch.

    `launch=False` for kernels that are part of a bigger launch (an op inside a compiled graph).
    """
    t = resolve_target(target)
    op, backward = _base_op(name)
    nbytes = bytes_read + bytes_written
    passes = BACKWARD_PASSES if backward else 1
    cands = {"dma": memory_s(nbytes, t)}
    if op in _TENSOR_OPS and flops:
        cands["tensor"] = tensor_engine_s(flops, dtype, t)
    elif op in _NORM_OPS:
        cands["vector"] = vector_engine_s(elements, dtype, t, NORM_VECTOR_PASSES * passes)
        cands["scalar"] = scalar_engine_s(elements, dtype, t, NORM_SCALAR_PASSES * passes)
    elif op in _SCALAR_OPS:
        cands["scalar"] = scalar_engine_s(elements, dtype, t, passes)
    elif elements:
        cands["vector"] = vector_engine_s(elements, dtype, t, passes)
    return _pick(t.launch_s if launch else 0.0, cands, flops, nbytes, elements)


def custom_kernel(bytes_read: int, bytes_written: int, elements: int, dtype: str = "",
                  target: Optional[Target | str] = None) -> Projection:
    """A custom C++ op on GpSimd: its elements through the 8 cores' SIMD lanes, or its bytes, plus a launch."""
    t = resolve_target(target)
    nbytes = bytes_read + bytes_written
    return _pick(t.launch_s, {"gpsimd": gpsimd_s(elements, dtype, t), "dma": memory_s(nbytes, t)}, 0, nbytes,
                 elements)


def copy(direction: str, bytes_read: int, bytes_written: int, target: Optional[Target | str] = None) -> Projection:
    """A transfer: host<->device over PCIe-class bandwidth, device->device through HBM (read and write)."""
    t = resolve_target(target)
    if direction in ("HtoD", "DtoH"):
        nbytes = max(bytes_read, bytes_written)
        cands = {"pcie": t.dma_fixed_s + nbytes / t.host_bytes_per_s}
    else:
        nbytes = bytes_read + bytes_written
        cands = {"dma": t.dma_fixed_s + memory_s(nbytes, t)}
    return _pick(0.0, cands, 0, nbytes, 0)


def collective(name: str, bytes_read: int, bytes_written: int, group_size: int,
               target: Optional[Target | str] = None) -> Projection:
    """Bytes over NeuronLink (EFA beyond one instance) plus per-step latency, ring algorithms.

    all_reduce: 2(N-1)/N of the buffer and 2(N-1) steps; all_gather, reduce_scatter, all_to_all:
    (N-1)/N of the full buffer and N-1 steps; broadcast, reduce, gather, scatter, barrier: the
    buffer once and ceil(log2 N) steps; send/recv: the buffer and one step.
    """
    t = resolve_target(target)
    n = max(int(group_size), 1)
    op = name.split("::", 1)[-1].rstrip("_").lower()
    inter = n > t.cores_per_instance
    bw = t.efa_bytes_per_s if inter else t.link_bytes_per_s
    hop = t.efa_hop_s if inter else t.link_hop_s
    full = max(bytes_read, bytes_written)
    if n == 1:
        data, steps = 0.0, 0
    elif "allreduce" in op or "all_reduce" in op:
        data, steps = 2 * (n - 1) / n * full, 2 * (n - 1)
    elif any(k in op for k in ("allgather", "all_gather", "reduce_scatter", "alltoall", "all_to_all")):
        data, steps = (n - 1) / n * full, n - 1
    elif op in ("send", "recv", "recv_anysource"):
        data, steps = full, 1
    else:
        data, steps = full, math.ceil(math.log2(n))
    return _pick(0.0, {"efa" if inter else "link": data / bw + steps * hop}, 0, full, 0)


def nki_kernel(model_s: float, bytes_read: int, bytes_written: int, flops: int,
               target: Optional[Target | str] = None) -> Projection:
    """An NKI kernel: the simulator's instruction-level estimate (nki/cost_model.py), plus one launch.

    Without an estimate (a trace from elsewhere) the roofline of its bytes and FLOPs stands in.
    """
    t = resolve_target(target)
    nbytes = bytes_read + bytes_written
    mem, comp = memory_s(nbytes, t), tensor_engine_s(flops, "BFloat16", t)
    if model_s > 0:
        return _pick(t.launch_s, {"dma" if mem >= comp else "tensor": model_s}, flops, nbytes, 0)
    return _pick(t.launch_s, {"dma": mem, "tensor": comp}, flops, nbytes, 0)


def compiled_kernel(name: str, bytes_read: int, bytes_written: int, flops: int = 0, elements: int = 0,
                    dtype: str = "", target: Optional[Target | str] = None) -> Projection:
    """A compiled graph pays one launch; its generated kernels run inside it and pay none."""
    t = resolve_target(target)
    graph = name.split("::")[-1].startswith("graph_")
    nbytes = bytes_read + bytes_written
    cands = {"dma": memory_s(nbytes, t)}
    if flops:
        cands["tensor"] = tensor_engine_s(flops, dtype, t)
    if elements:
        cands["vector"] = vector_engine_s(elements, dtype, t)
    return _pick(t.launch_s if graph else 0.0, cands, flops, nbytes, elements)


def project(name: str, tier: str, bytes_read: int = 0, bytes_written: int = 0, flops: int = 0, elements: int = 0,
            dtype: str = "", target: Optional[Target | str] = None, model_ns: int = 0, group_size: int = 1,
            launch: bool = True, copy_direction: str = "") -> Projection:
    """The projection of one recorded device activity, by its tier (and op name)."""
    t = resolve_target(target)
    if copy_direction:
        return copy(copy_direction, bytes_read, bytes_written, t)
    if tier == "collective":
        return collective(name, bytes_read, bytes_written, group_size, t)
    if tier == "nki":
        p = nki_kernel(model_ns / 1e9, bytes_read, bytes_written, flops, t)
    elif tier == "custom":
        p = custom_kernel(bytes_read, bytes_written, elements, dtype, t)
    elif tier == "compiled":
        p = compiled_kernel(name, bytes_read, bytes_written, flops, elements, dtype, t)
    else:
        p = eager_kernel(name, bytes_read, bytes_written, flops, elements, dtype, t)
    if not launch and p.launch_s:
        p = _pick(0.0, {p.engine: p.work_s}, p.flops, p.bytes, p.elements)
    return p


# ---------------------------------------------------------------------------------------------
# A projected timeline from a Chrome trace.
# ---------------------------------------------------------------------------------------------

# Projected lanes live past kineto_plugin.cpp's 64 lanes per core (hardware, runtime streams,
# collectives, transfers): tid = PROJECTED_TID_BASE + 2 * core (+1: the core's collectives, which
# run on their own queues beside compute); a non-default stream's kernels: PROJECTED_STREAM_TID_BASE + i.
PROJECTED_TID_BASE = 1 << 16
# Lanes of the non-default streams that ran kernels, one per (core, stream), in order of appearance.
PROJECTED_STREAM_TID_BASE = PROJECTED_TID_BASE + (1 << 12)
_NEURON_PID = _schema.NEURON_PID


@dataclasses.dataclass
class ProjectedKernel:
    name: str
    tier: str
    core: int
    stream: int
    dispatch_us: float    # on the projected clock
    start_us: float
    duration_us: float
    measured_us: float
    projection: Projection


@dataclasses.dataclass
class ProjectedTimeline:
    target: Target
    kernels: list[ProjectedKernel]
    origin_us: float         # the trace's first event (both clocks start here)
    host_end_us: float       # the last host event, on the projected clock

    @property
    def device_end_us(self) -> float:
        return max((k.start_us + k.duration_us for k in self.kernels), default=self.origin_us)

    @property
    def wall_us(self) -> float:
        return max(self.host_end_us, self.device_end_us) - self.origin_us

    @property
    def busy_us(self) -> float:
        return union_length([(k.start_us, k.start_us + k.duration_us) for k in self.kernels])

    @property
    def launch_us(self) -> float:
        return sum(k.projection.launch_s * 1e6 for k in self.kernels)

    @property
    def verdict(self) -> str:
        """host-bound when the device would idle over half the wall time; else launch-bound when
        launches are most of its busy time; else device-bound."""
        if not self.kernels:
            return "no device activity"
        if self.wall_us <= 0 or self.busy_us / self.wall_us < 0.5:
            return "host-bound"
        return "launch-bound" if self.launch_us >= 0.5 * self.busy_us else "device-bound"


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals: busy time, overlaps counted once."""
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


_copy_direction = _schema.copy_direction
op_name = _schema.op_name  # neuron::mul.Tensor -> aten::mul.Tensor (and compiled::graph_0 as it is)


def project_trace(trace: dict[str, Any], target: Optional[Target | str] = None,
                  group_size: Optional[int] = None) -> ProjectedTimeline:
    """Replay a trace's device activities on the target.

    The projected clock is the host's with the emulated kernels taken out: on the host each kernel
    runs inside its dispatch, on Trainium it runs on the device while the host goes on, so a kernel
    is dispatched at its measured start minus the measured time of the kernels before it. It then
    starts at the later of that and the end of the previous projected kernel on its core and stream,
    and lasts its projected duration. Activities inside a compiled graph's span (its generated
    kernels, its extern ATen calls) are part of that one launch: they pay no launch of their own
    and run in order within it.
    """
    t = resolve_target(target)
    events = trace.get("traceEvents", [])
    if group_size is None:
        info = trace.get("distributedInfo") or {}
        group_size = int(info.get("world_size", os.environ.get("WORLD_SIZE", "1")) or 1)
    host_events = [e for e in events if e.get("ph") == "X" and e.get("cat") in
                   (_schema.CAT_CPU_OP, _schema.CAT_USER_ANNOTATION, _schema.CAT_RUNTIME, _schema.CAT_PYTHON)]
    # Kernels run inside a compiled graph are its children: annotations on the hardware lane.
    device = sorted((e for e in events if e.get("ph") == "X" and (e.get("cat") in (_schema.CAT_KERNEL, _schema.CAT_MEMCPY) or (
        e.get("cat") == _schema.CAT_ANNOTATION and e.get("args", {}).get(_schema.IN) == _schema.IN_COMPILED_REGION))),
        key=lambda e: (float(e.get("ts", 0)), -float(e.get("dur", 0))))
    starts = [float(e.get("ts", 0)) for e in host_events + device]
    if not starts:
        return ProjectedTimeline(t, [], 0.0, 0.0)
    origin = min(starts)
    host_end = max(float(e.get("ts", 0)) + float(e.get("dur", 0)) for e in host_events + device)

    # The host time spent executing emulated kernels is what the real device takes over:
    # compressed(ts) = ts - the measured time of the (top-level) kernels that ended by ts.
    ends: list[float] = []
    removed: list[float] = []
    total_removed = 0.0

    def compressed(ts: float) -> float:
        i = bisect.bisect_right(ends, ts)
        return ts - (removed[i - 1] if i else 0.0)

    out: list[ProjectedKernel] = []
    memo: dict[tuple, Projection] = {}
    lane_end: dict[tuple[int, int], float] = {}
    # core -> [measured end, the graph's kernel, its own projected duration, its children's so far]
    graphs: dict[int, list] = {}
    for e in device:
        args = e.get("args", {})
        ts, dur = float(e.get("ts", 0)), float(e.get("dur", 0))
        core, stream = int(args.get(_schema.DEVICE, 0)), int(args.get(_schema.STREAM, 0))
        tier, name = str(args.get(_schema.TIER, "native")), str(e.get("name", ""))
        is_copy = e.get("cat") == _schema.CAT_MEMCPY
        graph = graphs.get(core)
        inside = graph is not None and ts < graph[0]
        # Traces without the split (older exports) give the total under "bytes".
        # A collective's own group (a subgroup is not the world); older traces: the trace's world size.
        ranks = int(args.get(_schema.GROUP_SIZE, 0) or group_size) if tier == "collective" else 1
        key = (name, tier, args.get(_schema.BYTES_READ, args.get(_schema.BYTES, 0)), args.get(_schema.BYTES_WRITTEN, 0),
               args.get(_schema.FLOPS, 0), args.get(_schema.ELEMENTS, 0), args.get(_schema.DTYPE, ""),
               args.get(_schema.MODEL_NS, 0),
               inside, is_copy, ranks)
        proj = memo.get(key)
        if proj is None:  # a loop's kernels repeat: project each distinct one once
            proj = memo[key] = project(
                op_name(name), tier, int(key[2]), int(key[3]), int(key[4]), int(key[5]), str(key[6]), t,
                int(key[7]), ranks, launch=not inside, copy_direction=_copy_direction(name) if is_copy else "")
        # A graph's kernels were dispatched with it (one launch).
        dispatch = graph[1].dispatch_us if inside else compressed(ts)
        key = (core, -1 if tier == "collective" else stream)
        if inside:
            # One launch, then the graph's kernels back to back on the device. The graph's record
            # sums its kernels' bytes and FLOPs without their dtypes; once its children are seen,
            # they (each with its own dtype) make its duration.
            parent = graph[1]
            start = parent.start_us + parent.projection.launch_s * 1e6 + graph[3]
            graph[3] += proj.duration_s * 1e6
            parent.duration_us = parent.projection.launch_s * 1e6 + graph[3]
        else:
            start = max(dispatch, lane_end.get(key, origin))
        k = ProjectedKernel(name, tier, core, stream, dispatch, start, proj.duration_s * 1e6, dur, proj)
        out.append(k)
        if inside:
            lane_end[(graph[1].core, graph[1].stream)] = graph[1].start_us + graph[1].duration_us
            continue
        lane_end[key] = start + k.duration_us
        if tier == "compiled" and name.split("::")[-1].startswith("graph_"):
            graphs[core] = [ts + dur, k, k.duration_us, 0.0]
        # A collective runs beside the host (async_op); every other activity held the host here.
        if tier != "collective" and (not ends or ts + dur >= ends[-1]):
            total_removed += dur
            ends.append(ts + dur)
            removed.append(total_removed)
    return ProjectedTimeline(t, out, origin, compressed(host_end))


def projected_lane_events(timeline: ProjectedTimeline) -> list[dict[str, Any]]:
    """Chrome-trace events of the projected lanes: "NC<i> projected (<target>)" per core.

    Kernels of another stream than the default may overlap the default stream's on the projection
    (each stream is its own queue), so each such stream gets a lane of its own beside its core's,
    "NC<i> projected stream <s> (<target>)": a lane never holds overlapping kernels.
    """
    events: list[dict[str, Any]] = []
    label = timeline.target.label
    lanes: dict[int, tuple[int, str]] = {}  # tid -> (sort index, name)
    stream_tids: dict[tuple[int, int], int] = {}
    base: dict[int, dict[str, Any]] = {}  # per distinct projection (project_trace shares them)
    for k in timeline.kernels:
        collective = k.tier == "collective"
        if collective or k.stream == 0:
            tid = PROJECTED_TID_BASE + 2 * k.core + collective
            what = "projected collectives" if collective else "projected"
            lanes.setdefault(tid, (tid, f"NC{k.core} {what} ({label})"))
        else:
            tid = stream_tids.get((k.core, k.stream))
            if tid is None:
                tid = stream_tids[(k.core, k.stream)] = PROJECTED_STREAM_TID_BASE + len(stream_tids)
                # Sorted after its core's lanes (ties keep tid order).
                lanes[tid] = (PROJECTED_TID_BASE + 2 * k.core + 1, f"NC{k.core} projected stream {k.stream} ({label})")
        model_args = base.get(id(k.projection))
        if model_args is None:
            model_args = base[id(k.projection)] = k.projection.args(timeline.target)
        args = dict(model_args)
        args.update({"tier": k.tier, "device": k.core, "stream": k.stream,
                     "dispatch ts": round(k.dispatch_us, 3), "measured us": round(k.measured_us, 3)})
        events.append({"ph": "X", "cat": _schema.CAT_PROJECTED, "name": k.name, "pid": _NEURON_PID, "tid": tid,
                       "ts": round(k.start_us, 3), "dur": round(k.duration_us, 3), "args": args})
    for tid, (sort_index, name) in sorted(lanes.items()):
        events.append({"ph": "M", "name": "thread_name", "pid": _NEURON_PID, "tid": tid, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": _NEURON_PID, "tid": tid,
                       "args": {"sort_index": sort_index}})
    return events


def add_projected_lanes(trace: dict[str, Any], target: Optional[Target | str] = None) -> ProjectedTimeline:
    """Project the trace and append the projected lanes to its events (idempotent)."""
    events = trace.setdefault("traceEvents", [])
    events[:] = [e for e in events if e.get("cat") != _schema.CAT_PROJECTED and not (
        e.get("ph") == "M" and e.get("pid") == _NEURON_PID and int(e.get("tid", 0) or 0) >= PROJECTED_TID_BASE)]
    timeline = project_trace(trace, target)
    events.extend(projected_lane_events(timeline))
    return timeline


def world_size() -> int:
    """The default process group's size when torch.distributed is initialized, else WORLD_SIZE, else 1."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_world_size()
    except (ImportError, RuntimeError):
        pass
    try:
        return max(int(os.environ.get("WORLD_SIZE", "1") or 1), 1)
    except ValueError:
        return 1


def project_stats(stats: Iterable[Any], target: Optional[Target | str] = None,
                  group_size: Optional[int] = None) -> dict[tuple[str, str], float]:
    """Projected total seconds per (op, tier) of op_stats() rows, from each op's mean call.

    A row sums an operator's calls over every process group, so collectives are projected over
    `group_size` ranks (default: the world, `world_size()`).
    """
    t = resolve_target(target)
    ranks = group_size
    out = {}
    for s in stats:
        n = s.calls_timed
        if not n:
            continue
        if ranks is None and s.tier == "collective":
            ranks = world_size()  # only when needed: it costs microseconds
        if s.name == "aten::_copy_from":
            # The row's host <-> device calls over PCIe, the others device to device through HBM.
            h = min(getattr(s, "host_transfer_calls", 0), n)
            h_read, h_written = getattr(s, "host_transfer_read", 0), getattr(s, "host_transfer_written", 0)
            total = copy("HtoD", h_read // h, h_written // h, t).duration_s * h if h else 0.0
            if n - h:
                total += copy("DtoD", (s.bytes_read - h_read) // (n - h), (s.bytes_written - h_written) // (n - h),
                              t).duration_s * (n - h)
            out[(s.name, s.tier)] = total
            continue
        p = project(s.name, s.tier, s.bytes_read // n, s.bytes_written // n, s.flops // n,
                    getattr(s, "elements", 0) // n, getattr(s, "dtype", ""), t, group_size=ranks or 1)
        out[(s.name, s.tier)] = p.duration_s * n
    return out
