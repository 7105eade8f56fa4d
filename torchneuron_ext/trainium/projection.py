"""Projection formulas: how long one device activity would take on a Trainium target.

A roofline per kernel (the busiest engine or the memory traffic) plus a launch term, from what the
runtime records per activity (op name, tier, bytes read and written, FLOPs, elements, dtype, the NKI
simulator's own estimate). docs/cost_model.md gives the formulas, worked cases and their validation;
the rates are the target records' (trainium/targets.py). Replaying a whole trace on these is the
profiler's (profiler/projection.py). Standard library only, like the records.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

from .targets import PROJECTED_AS, Target, by_name, from_spec, target_from_environment


def _projected_as(t: Target) -> Target:
    """The record whose figures project `t`: inf2 is projected (and labelled) as trn1."""
    alias = PROJECTED_AS.get(t.name)
    return t if alias is None else by_name(alias, t.lnc)


def get_target(name: str = "trn2", lnc: Optional[int] = None) -> Target:
    """The projection target `name` (trn1, trn2, trn3; inf2 is trn1) at logical-core size `lnc`
    (1 or 2; trn1: 1; default: the generation's)."""
    key = name.strip().lower()
    return by_name(PROJECTED_AS.get(key, key), lnc)


def parse_target(spec: str) -> Target:
    """``trn2``, ``trn2:lnc=1``, ``trn3:lnc=2`` (also ``trn2:1``)."""
    return _projected_as(from_spec(spec))


def default_target() -> Target:
    """The configured target (trainium.targets.target_from_environment) as projections use it."""
    return _projected_as(target_from_environment())


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


# ---------------------------------------------------------------------------------------------
# Convolution as the Neuron compiler lowers it (docs/cost_model.md, Formulas, "Convolution").
# ---------------------------------------------------------------------------------------------

_CONV_OPS = frozenset({"convolution", "convolution_overrideable", "_convolution", "conv2d", "conv1d", "conv3d"})
# Taps of the filter stacked on the PE array's rows when the input channels of one tile leave room, with
# the replicas aligned to 32- or 64-partition quadrants (AWS's NKI Library conv1d, K replication).
CONV_TAP_STACKING = ((32, 4), (64, 2))
# Trace args a record may carry for a convolution (the dry run writes them; a real run's record has none).
CONV_WEIGHT_ARG = "conv weight shape"
CONV_GROUPS_ARG = "conv groups"


@dataclasses.dataclass(frozen=True)
class ConvGeometry:
    """A forward convolution as an implicit GEMM: `pixels` output positions (batch x spatial) per group,
    `cin` input channels per group, `taps` filter positions (kh x kw), `cout` output channels per group,
    `groups` groups."""
    pixels: int
    cin: int
    taps: int
    cout: int
    groups: int = 1


def _dtype_bytes(dtype: str) -> int:
    if _is_16bit(dtype):
        return 2
    if _is_fp8(dtype) or dtype in ("Char", "Byte", "Bool"):
        return 1
    return 8 if dtype in ("Double", "Long", "ComplexFloat") else 4


def convolution_geometry(bytes_read: int, bytes_written: int, flops: int, elements: int, dtype: str,
                         weight_shape: Optional[tuple] = None, groups: int = 1) -> Optional[ConvGeometry]:
    """A forward convolution's implicit GEMM from its record.

    With the weight's shape (the dry run records it): exact. Without it (a real run's record: bytes, FLOPs,
    elements), the contraction per output element K = FLOPs / (2 x output elements) is exact; the output
    channels are recovered when the largest tensor (`elements`) is the weight (Cout = elements / K) or the
    input (Cout = (input bytes read - elements) / K, with or without a bias), else unknown, and the
    taps are taken as one (K = Cin): the im2col matmul of K, with full PE columns.
    """
    size = _dtype_bytes(dtype)
    out = bytes_written // size
    if out <= 0 or flops <= 0:
        return None
    if weight_shape:
        w = [int(d) for d in weight_shape]
        taps = 1
        for d in w[2:]:
            taps *= d
        cout_total, g = w[0], max(int(groups), 1)
        pixels = out // max(cout_total, 1)
        return ConvGeometry(pixels, w[1], taps, cout_total // g, g)
    k = flops // (2 * out)
    if k <= 0:
        return None
    read = bytes_read // size
    cout = 0
    if elements > out:
        cand = elements // k  # the weight is the largest tensor, the rest is the input (and a bias)
        if cand * k == elements and out % cand == 0 and 0 < read - elements <= elements:
            cout = cand
        else:  # the input is the largest: the rest is the weight (and a bias)
            for per in (k, k + 1):
                cand, left = divmod(read - elements, per)
                if cand > 0 and left == 0 and out % cand == 0:
                    cout = cand
                    break
    if not cout:  # unknown: full PE columns
        cout = min(out, 128)
    return ConvGeometry(max(out // cout, 1), k, 1, cout)


def convolution_s(geometry: ConvGeometry, dtype: str, target: Target) -> float:
    """The Tensor Engine's time for a forward convolution lowered onto the PE array.

    Each group is an implicit GEMM: the output channels are the stationary columns (tiles of up to 128),
    the output pixels the moving free dimension (tiles of up to `gemm_moving_fmax`, 512 on NC-v2/v3), and
    the contraction runs over the input channels on the PE rows (tiles of 128), one filter tap per matmul
    instruction, accumulated in PSUM; when a tile of input channels fills at most 32 (64) rows, 4 (2) taps
    are stacked in one instruction (AWS's NKI Library conv1d). An instruction takes
    max(min(64, columns), moving free) cycles (the NKI cost model's Tensor formula), FP32 at a quarter rate.
    Depthwise convolutions (one input channel per group) run on the Vector engine instead: one
    multiply-accumulate pass per tap over the output.
    """
    g = geometry
    if g.groups > 1 and g.cin == 1:
        return vector_engine_s(g.pixels * g.cout * g.groups, dtype, target, passes=g.taps)
    rows, fmax = target.pe_array, target.gemm_moving_fmax
    cin_tile = min(rows, g.cin)
    stack = 1
    for width, factor in CONV_TAP_STACKING:
        if cin_tile <= width:
            stack = factor
            break
    stack = min(stack, g.taps)
    per_tile = math.ceil(g.cin / rows) * math.ceil(g.taps / stack)
    cycles = 0
    for c0 in range(0, g.cout, target.gemm_stationary_fmax):
        cols = min(target.gemm_stationary_fmax, g.cout - c0)
        full, last = divmod(g.pixels, fmax)
        moving = full * max(min(64, cols), fmax) + (max(min(64, cols), last) if last else 0)
        cycles += per_tile * moving
    cycles *= g.groups
    if _is_fp8(dtype):
        cycles /= target.fp8_speedup
    elif not _is_16bit(dtype):
        cycles *= target.fp32_slowdown
    return cycles / (target.tensor_clock_hz * target.lnc)


# Row gathers (embedding lookups): the DMA engines gather the indexed rows by descriptor (indirect DMA, the
# DGE page of the NKI docs), so the table is not streamed; the record's bytes read hold the whole table.
_ROW_GATHER_OPS = frozenset({"embedding", "index_select"})


def row_gather_bytes(bytes_read: int, bytes_written: int) -> int:
    """The bytes a row gather moves: the rows it reads (as many bytes as it writes, at most the inputs)
    and the rows it writes; the indices are left out (a few bytes per row)."""
    return min(bytes_read, bytes_written) + bytes_written


def _convolution_engine_s(bytes_read: int, bytes_written: int, flops: int, elements: int, dtype: str, t: Target,
                          weight_shape: Optional[tuple], groups: int) -> float:
    """A forward convolution record's Tensor Engine time (convolution_s), at the dense peak if its
    geometry cannot be recovered."""
    geometry = convolution_geometry(bytes_read, bytes_written, flops, elements, dtype, weight_shape, groups)
    return tensor_engine_s(flops, dtype, t) if geometry is None else convolution_s(geometry, dtype, t)


def eager_kernel(name: str, bytes_read: int, bytes_written: int, flops: int = 0, elements: int = 0,
                 dtype: str = "", target: Optional[Target | str] = None, launch: bool = True,
                 conv_weight: Optional[tuple] = None, conv_groups: int = 1) -> Projection:
    """An ATen kernel run as its own NEFF: max over the engines it uses (roofline), plus one launch.

    `launch=False` for kernels that are part of a bigger launch (an op inside a compiled graph).
    """
    t = resolve_target(target)
    op, backward = _base_op(name)
    nbytes = bytes_read + bytes_written
    passes = BACKWARD_PASSES if backward else 1
    cands = {"dma": memory_s(row_gather_bytes(bytes_read, bytes_written) if op in _ROW_GATHER_OPS and not backward
                             else nbytes, t)}
    if op in _CONV_OPS and flops and not backward:
        cands["tensor"] = _convolution_engine_s(bytes_read, bytes_written, flops, elements, dtype, t, conv_weight,
                                                conv_groups)
    elif op in _TENSOR_OPS and flops:
        cands["tensor"] = tensor_engine_s(flops, dtype, t)
    elif op in _NORM_OPS:
        cands["vector"] = vector_engine_s(elements, dtype, t, NORM_VECTOR_PASSES * passes)
        cands["scalar"] = scalar_engine_s(elements, dtype, t, NORM_SCALAR_PASSES * passes)
    elif op in _SCALAR_OPS:
        cands["scalar"] = scalar_engine_s(elements, dtype, t, passes)
    elif op in _ROW_GATHER_OPS and not backward:
        pass  # the DMA engines' gather alone
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
                    dtype: str = "", target: Optional[Target | str] = None,
                    conv_weight: Optional[tuple] = None, conv_groups: int = 1) -> Projection:
    """A compiled graph pays one launch; its generated kernels run inside it and pay none."""
    t = resolve_target(target)
    graph = name.split("::")[-1].startswith("graph_")
    nbytes = bytes_read + bytes_written
    cands = {"dma": memory_s(nbytes, t)}
    op, backward = _base_op(name)
    if flops and op in _CONV_OPS and not backward:
        cands["tensor"] = _convolution_engine_s(bytes_read, bytes_written, flops, elements, dtype, t, conv_weight,
                                                conv_groups)
    elif flops:
        cands["tensor"] = tensor_engine_s(flops, dtype, t)
    if elements:
        cands["vector"] = vector_engine_s(elements, dtype, t)
    return _pick(t.launch_s if graph else 0.0, cands, flops, nbytes, elements)


def project(name: str, tier: str, bytes_read: int = 0, bytes_written: int = 0, flops: int = 0, elements: int = 0,
            dtype: str = "", target: Optional[Target | str] = None, model_ns: int = 0, group_size: int = 1,
            launch: bool = True, copy_direction: str = "", conv_weight: Optional[tuple] = None,
            conv_groups: int = 1) -> Projection:
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
        p = compiled_kernel(name, bytes_read, bytes_written, flops, elements, dtype, t, conv_weight, conv_groups)
    else:
        p = eager_kernel(name, bytes_read, bytes_written, flops, elements, dtype, t, conv_weight=conv_weight,
                         conv_groups=conv_groups)
    if not launch and p.launch_s:
        p = _pick(0.0, {p.engine: p.work_s}, p.flops, p.bytes, p.elements)
    return p
