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
    return t if alias is None else by_name(alias, t.lnc).at_release(t.runtime_release)


def get_target(name: str = "trn2", lnc: Optional[int] = None) -> Target:
    """The projection target `name` (trn1, trn2, trn3; inf2 is trn1) at logical-core size `lnc`
    (1 or 2; trn1: 1; default: the generation's)."""
    key = name.strip().lower()
    return by_name(PROJECTED_AS.get(key, key), lnc)


def parse_target(spec: str) -> Target:
    """``trn2``, ``trn2:lnc=1``, ``trn3:lnc=2`` (also ``trn2:1``), ``trn1:release=2.10``."""
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


# ---------------------------------------------------------------------------------------------
# Tensor Engine efficiency by shape (docs/cost_model.md, "Tensor Engine efficiency").
# A matmul is the instruction sequence the compiler issues for it, not its FLOPs over the peak: tiles of
# at most 128 (K, the PE rows) x 128 (stationary free: the PE columns) and 128 x 512 (moving free: one
# 2 KiB PSUM bank of fp32 per partition), each nc_matmul costing max(min(MIN_II, stationary free),
# moving free) Tensor Engine cycles (AWS's NKI ISA reference, Neuron 2.26; the Trn1 architecture
# guide's initiation interval max(N, MM_INIT_LATENCY = 64) with background, fast LoadStationary).
# ---------------------------------------------------------------------------------------------

# The Tensor Engine's power-delivery limit (Neuron Explorer's summary page, dI/dt): on Trn2 and Trn3 it
# starts at ~50% of its maximum utilisation and ramps to full over ~3 us after idle. An eager matmul is
# its own NEFF, reached after a launch gap (~12 us) of an idle Tensor Engine, so each pays the ramp.
TE_THROTTLE = {"trn2": (0.5, 3e-6), "trn3": (0.5, 3e-6)}  # (starting fraction, ramp seconds)

# Operators whose Tensor Engine work is one (batched) M x K @ K x N, and which of their inputs are the two
# matrices (torch's "Input Dims" order): the shape path of eager_kernel / compiled_kernel.
_MATMUL_OPERANDS = {
    "mm": (0, 1), "bmm": (0, 1), "addmm": (1, 2), "baddbmm": (1, 2), "addbmm": (1, 2), "mv": (0, 1),
    "addmv": (1, 2), "dot": (0, 1), "vdot": (0, 1), "matmul": (0, 1), "linear": (0, 1), "_int_mm": (0, 1),
}


def _fp_kind(dtype: str) -> str:
    return "fp8" if _is_fp8(dtype) else "16" if _is_16bit(dtype) else "fp32"


def te_instruction_cycles(stationary_free: int, moving_free: int, dtype: str, target: Target) -> float:
    """One nc_matmul's Tensor Engine cycles when issued back to back: max(min(MIN_II, stationary free),
    moving free) for BF16/FP16 (the moving tile streams one column per cycle; a short moving tile waits
    for the MultiplyMoving initiation interval or the stationary load), x fp32_slowdown for FP32, / the
    FP8 rate (double_row on trn2: K = 256 in the time of 128)."""
    cycles = float(max(min(target.nki_min_ii_cycles, stationary_free), moving_free))
    kind = _fp_kind(dtype)
    if kind == "fp32":
        cycles *= target.fp32_slowdown
    elif kind == "fp8":
        cycles /= target.fp8_speedup
    return cycles


def _tiles(extent: int, tile: int) -> list[tuple[int, int]]:
    """(size, count) of the tiles covering `extent`: the full tiles and the remainder."""
    full, rest = divmod(max(int(extent), 1), tile)
    return [(s, c) for s, c in ((tile, full), (rest, 1 if rest else 0)) if c]


@dataclasses.dataclass(frozen=True)
class MatmulPlan:
    """The instruction sequence of one (batched) M x K @ K x N on one logical core (matmul_plan)."""

    instructions: int        # nc_matmul instructions
    cycles: float            # their Tensor Engine cycles, summed over the logical core's physical cores
    output_tiles: int        # PSUM tiles copied to SBUF (one per output tile, after its K accumulation)
    eviction_cycles: float   # copy cycles of those evictions (one element per partition and cycle)
    stationary: str          # "lhs": stationary tiles from M (moving from N); "rhs": the transposed mapping
    flops: int               # 2 M K N x batch, the useful work
    tensor_s: float          # Tensor Engine seconds on the logical core
    eviction_s: float        # seconds of the PSUM evictions on the logical core (psum_copy_rate_hz)
    peak_flops: float        # the logical core's BF16 peak

    @property
    def efficiency(self) -> float:
        """Useful FLOPs over what the Tensor Engine's BF16 peak does in the same time (1 = the peak)."""
        return 0.0 if self.tensor_s <= 0 else self.flops / (self.tensor_s * self.peak_flops)


def matmul_plan(m: int, k: int, n: int, dtype: str = "BFloat16", target: Optional[Target | str] = None,
                batch: int = 1) -> MatmulPlan:
    """The nc_matmul instructions a compiler issues for `batch` products of M x K @ K x N.

    Each of ceil(K/128) contraction tiles of each output tile is one instruction of its real sizes (the
    remainder tiles are short, not padded work: a short tile still costs max(min(64, stationary free),
    moving free) cycles, which is how the array's fill shows). Of the two mappings (M on the stationary
    side and N on the moving side, or the transpose, which the Trn1 architecture guide recommends for a
    matrix-vector product: the matrix stationary, the vector moving) the cheaper is taken. Each output tile
    is accumulated over K in one PSUM bank, then copied to SBUF (max(MIN_II, free) cycles: TensorE cannot
    read PSUM) by Vector, and Scalar beside it from NeuronCore-v3 on (psum_copy_rate_hz). The work is split
    over the logical core's physical cores.
    """
    t = resolve_target(target)
    m, k, n, batch = max(int(m), 1), max(int(k), 1), max(int(n), 1), max(int(batch), 1)
    kt = math.ceil(k / t.pe_array)
    stat_max, mov_max = t.gemm_stationary_fmax, t.gemm_moving_fmax
    best = None
    for side, (sd, md) in (("lhs", (m, n)), ("rhs", (n, m))):
        cycles, tiles, evict = 0.0, 0, 0.0
        for s_size, s_count in _tiles(sd, stat_max):
            for m_size, m_count in _tiles(md, mov_max):
                count = s_count * m_count
                cycles += count * kt * te_instruction_cycles(s_size, m_size, dtype, t)
                tiles += count
                evict += count * max(t.nki_min_ii_cycles, m_size)
        if best is None or cycles < best[1]:
            best = (side, cycles, tiles, evict)
    side, cycles, tiles, evict = best
    tiles_total = tiles * batch
    instructions = tiles_total * kt
    cycles *= batch
    evict *= batch
    return MatmulPlan(instructions, cycles, tiles_total, evict, side, 2 * m * k * n * batch,
                      cycles / (t.tensor_clock_hz * t.lnc), evict / (psum_copy_rate_hz(t) * t.lnc),
                      t.tensor_peak_flops)


def psum_copy_rate_hz(target: Target) -> float:
    """Elements per partition and second the engines that read PSUM can copy out of it: the Vector engine on
    NeuronCore-v2, where Vector and Scalar cannot access PSUM at the same time (A2); Vector and Scalar side
    by side from NeuronCore-v3 on, which lifts that limit for different banks (A3): each output tile has a
    bank of its own."""
    if target.generation <= 2:
        return target.vector_clock_hz
    return target.vector_clock_hz + target.scalar_clock_hz


def matmul_s(m: int, k: int, n: int, dtype: str = "BFloat16", target: Optional[Target | str] = None,
             batch: int = 1) -> float:
    """Tensor Engine seconds of `batch` products M x K @ K x N on the target's logical core, as the
    instruction sequence of matmul_plan (the entry point for other lowerings, e.g. convolution)."""
    return matmul_plan(m, k, n, dtype, target, batch).tensor_s


def te_throttle_s(work_s: float, target: Target) -> float:
    """Extra seconds Tensor Engine work of `work_s` (at full rate) takes when it starts from idle on a
    target with the dI/dt limit: the rate ramps linearly from f0 to 1 over the ramp, so the first
    ramp x (1 + f0) / 2 of work takes the whole ramp. 0 on trn1 (no such limit documented)."""
    spec = TE_THROTTLE.get(target.name)
    if not spec or work_s <= 0:
        return 0.0
    f0, ramp = spec
    ramp_work = ramp * (1 + f0) / 2
    if work_s >= ramp_work:
        return ramp - ramp_work
    # f0 t + (1 - f0) t^2 / (2 ramp) = work_s
    a = (1 - f0) / (2 * ramp)
    t = (-f0 + math.sqrt(f0 * f0 + 4 * a * work_s)) / (2 * a)
    return t - work_s


def _dims_list(dims: Any) -> Optional[list]:
    if isinstance(dims, str):
        import json
        try:
            dims = json.loads(dims)
        except ValueError:
            return None
    return dims if isinstance(dims, (list, tuple)) else None


def matmul_dims(name: str, input_dims: Any) -> Optional[tuple[int, int, int, int]]:
    """(batch, M, K, N) of a matmul-family kernel from its inputs' shapes (torch's "Input Dims": one list
    per argument, [] for non-tensors), or None when the op is not one product or the shapes do not say.
    mm [M,K]@[K,N]; bmm/baddbmm/addbmm [B,M,K]@[B,K,N]; mv [M,K]@[K]; dot [K].[K]; linear
    [..., K] with weight [N, K]; matmul of 2-D or batched 3-D operands."""
    op, _ = _base_op(name)
    pos = _MATMUL_OPERANDS.get(op)
    dims = _dims_list(input_dims)
    if pos is None or dims is None or len(dims) <= pos[1]:
        return None
    a, b = dims[pos[0]], dims[pos[1]]
    if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)) or not a or not b:
        return None
    try:
        a, b = [int(x) for x in a], [int(x) for x in b]
    except (TypeError, ValueError, OverflowError):
        return None
    if op == "linear":
        if len(b) != 2:
            return None
        return (1, math.prod(a[:-1]), a[-1], b[0])
    if op in ("dot", "vdot") and len(a) == len(b) == 1:
        return (1, 1, a[0], 1)
    if op in ("mv", "addmv") and len(a) == 2 and len(b) == 1:
        return (1, a[0], a[1], 1)
    if len(a) == 2 and len(b) == 2:
        return (1, a[0], a[1], b[1])
    if len(a) == 3 and len(b) == 3 and op in ("bmm", "baddbmm", "addbmm", "matmul"):
        return (a[0], a[1], a[2], b[2])
    if op == "matmul" and len(a) >= 2 and len(b) == 2:
        return (1, math.prod(a[:-1]), a[-1], b[1])
    return None


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


# Attention kernels (SDPA forward and backward): the positions of query and key (and value) in their
# arguments, and the products their FLOPs count (flops.cpp: 4 B H L S D forward, 8 backward).
_ATTENTION_QKV = {
    "_scaled_dot_product_flash_attention_for_cpu": (0, 1, 2),
    "_scaled_dot_product_fused_attention_overrideable": (0, 1, 2),
    "_scaled_dot_product_flash_attention_for_cpu_backward": (1, 2, 3),
    "_scaled_dot_product_fused_attention_overrideable_backward": (1, 2, 3),
}


def matmul_products(name: str, input_dims: Any) -> Optional[list[tuple[int, int, int, int]]]:
    """The (batch, M, K, N) products a Tensor Engine kernel is made of, from its inputs' shapes: one for the
    matmul family (matmul_dims); for attention with query (B, H, L, D), key (B, H, S, D) and value
    (B, H, S, Dv), forward Q K^T (L x D x S) and P V (L x S x Dv) per head, backward dP = dO V^T
    (L x Dv x S), dV = P^T dO (S x L x Dv), dQ = dS K (L x S x D), dK = dS^T Q (S x L x D): the products
    the FLOP rule counts. None when the shapes do not say."""
    one = matmul_dims(name, input_dims)
    if one is not None:
        return [one]
    op = name.split("::", 1)[-1].split(".", 1)[0]
    pos = _ATTENTION_QKV.get(op)
    dims = _dims_list(input_dims)
    if pos is None or dims is None or len(dims) <= pos[2]:
        return None
    try:
        q, k, v = ([int(x) for x in dims[i]] for i in pos)
    except (TypeError, ValueError, OverflowError):
        return None
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    bh, length, d, s, dv = q[0] * q[1], q[2], q[3], k[2], v[3]
    if op.endswith("_backward"):
        return [(bh, length, dv, s), (bh, s, length, dv), (bh, length, s, d), (bh, s, length, d)]
    return [(bh, length, d, s), (bh, length, s, dv)]


def _tensor_work_s(name: str, flops: int, dtype: str, t: Target, input_dims: Any,
                   from_idle: bool) -> tuple[float, float]:
    """(Tensor Engine seconds, seconds of its PSUM evictions) of a matmul-family or attention kernel: its
    instruction sequence (matmul_plan of each product) when its operands' shapes are known, else its FLOPs
    at the peak (the roofline fallback, no evictions). `from_idle`: the kernel is its own NEFF, so on
    trn2/trn3 it pays the Tensor Engine's throttle ramp (te_throttle_s)."""
    products = matmul_products(name, input_dims) if input_dims is not None else None
    te = evict = 0.0
    if products:
        for batch, m, k, n in products:
            plan = matmul_plan(m, k, n, dtype, t, batch)
            te += plan.tensor_s
            evict += plan.eviction_s
    else:
        te = tensor_engine_s(flops, dtype, t)
    if from_idle:
        te += te_throttle_s(te, t)
    return te, evict

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
        taps = math.prod(w[2:])
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
    te_instruction_cycles (the NKI cost model's Tensor formula: max(min(MIN_II, columns), moving free), FP32
    at a quarter rate).
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
    cycles = sum(cols_count * pix_count * te_instruction_cycles(cols, pixels, dtype, target)
                 for cols, cols_count in _tiles(g.cout, target.gemm_stationary_fmax)
                 for pixels, pix_count in _tiles(g.pixels, fmax))
    return per_tile * cycles * g.groups / (target.tensor_clock_hz * target.lnc)


# Row gathers (embedding lookups): the DMA engines gather the indexed rows by descriptor (indirect DMA, the
# DGE page of the NKI docs), so the table is not streamed; the record's bytes read hold the whole table.
_ROW_GATHER_OPS = frozenset({"embedding", "index_select"})


def row_gather_bytes(bytes_read: int, bytes_written: int) -> int:
    """The bytes a row gather moves: the rows it reads (as many bytes as it writes, at most the inputs)
    and the rows it writes; the indices are left out (a few bytes per row)."""
    return min(bytes_read, bytes_written) + bytes_written


# Indexed writes into an existing tensor (a KV cache's new position, `x[idx] = v`, scatters): the DMA engines
# write the touched rows by descriptor as they gather (the same DGE page), so the destination is not streamed.
# An in-place kernel's record reads the whole destination and its other inputs and writes the whole
# destination; what moves is the other inputs (source rows, indices, mask) read once and as many bytes of the
# destination written, and read too when the write accumulates.
_INDEXED_WRITE_OPS = frozenset({"index_copy_", "index_put_", "_index_put_impl_", "masked_scatter_", "scatter_"})
_INDEXED_ACCUMULATE_OPS = frozenset({"index_add_", "scatter_add_", "scatter_reduce_", "index_reduce_"})


def _indexed_write_kind(name: str) -> str:
    """"write" or "accumulate" for an in-place indexed write (aten::index_copy_, aten::scatter_add_.default,
    aten::index_put_ with accumulate is counted as a write: the record does not say), else ""."""
    op = name.split("::", 1)[-1].split(".", 1)[0]
    if op in _INDEXED_WRITE_OPS:
        return "write"
    if op in _INDEXED_ACCUMULATE_OPS:
        return "accumulate"
    return ""


def indexed_write_bytes(bytes_read: int, bytes_written: int, accumulate: bool = False) -> int:
    """The bytes an in-place indexed write moves, from its record (the whole destination read and written,
    plus the other inputs read): the other inputs read once, as many bytes of the destination written (the
    indices count as rows there: a few bytes per row), and read again when accumulating; at most the record's
    bytes. A value broadcast over many rows (`x[idx] = 0`) is undercounted: the record does not hold the rows."""
    others = max(bytes_read - bytes_written, 0)
    return min(others * (3 if accumulate else 2), bytes_read + bytes_written)


def convolution_eviction_s(geometry: ConvGeometry, target: Target) -> float:
    """Seconds of a lowered convolution's PSUM evictions, as for a matmul (matmul_plan): each output tile
    (up to 128 output channels x up to `gemm_moving_fmax` pixels) is copied out of PSUM once, after its
    accumulation over the input-channel tiles and taps, at `max(MIN_II, pixels)` cycles
    (psum_copy_rate_hz). It binds where an output tile has few instructions: a 1x1 convolution over at most
    128 input channels is one 512-cycle instruction per tile, 183 ns on trn1's Tensor Engine against
    457 ns to evict. A depthwise convolution (the Vector engine's) has none."""
    g = geometry
    if g.groups > 1 and g.cin == 1:
        return 0.0
    cycles = sum(cols_count * pix_count * max(target.nki_min_ii_cycles, pixels)
                 for _, cols_count in _tiles(g.cout, target.gemm_stationary_fmax)
                 for pixels, pix_count in _tiles(g.pixels, target.gemm_moving_fmax))
    return cycles * g.groups / (psum_copy_rate_hz(target) * target.lnc)


def _convolution_engine_s(bytes_read: int, bytes_written: int, flops: int, elements: int, dtype: str, t: Target,
                          weight_shape: Optional[tuple], groups: int) -> tuple[float, float]:
    """A forward convolution record's (Tensor Engine seconds, PSUM eviction seconds): convolution_s and
    convolution_eviction_s, or the dense peak and no evictions if its geometry cannot be recovered."""
    geometry = convolution_geometry(bytes_read, bytes_written, flops, elements, dtype, weight_shape, groups)
    if geometry is None:
        return tensor_engine_s(flops, dtype, t), 0.0
    return convolution_s(geometry, dtype, t), convolution_eviction_s(geometry, t)


def out_variant_bytes_read(name: str, bytes_read: int, bytes_written: int) -> int:
    """The bytes an `out=` kernel (`aten::addmm.out`, `aten::add.out`: overload `out` or `*_out`) reads. Its
    record counts every tensor argument as read, the `out` tensor too (the kernel wrapper's rule, which is right
    for an in-place op: `add_` reads its destination); the device only writes it. Inductor's extern matmul
    calls are all `out=` (a compiled DistilBERT's addmm.out records 1,574,400 B read for 128 x 768 @ 768 x 768
    bf16 with a bias: 1,377,792 B of operands and its 196,608 B output)."""
    overload = name.split("::", 1)[-1].partition(".")[2]
    if bytes_written and (overload == "out" or overload.endswith("_out")):
        return max(bytes_read - bytes_written, 0)
    return bytes_read


def kernel_class(name: str) -> str:
    """What kind of work an ATen kernel is, as the projection charges it (eager_kernel's branches): "tensor"
    (the Tensor Engine: matmul family, convolution, attention), "gather" (a row gather by the DMA engines),
    "indexed write" (an in-place write through indices), else "vector" (elementwise, normalizations,
    reductions: Vector and Scalar passes over the elements). A compiler fuses the "vector" kernels
    (profiler/fusion.py)."""
    op, backward = _base_op(name)
    if _indexed_write_kind(name):
        return "indexed write"
    if op in _TENSOR_OPS or op in _CONV_OPS:
        return "tensor"
    if op in _ROW_GATHER_OPS and not backward:
        return "gather"
    return "vector"


def eager_kernel(name: str, bytes_read: int, bytes_written: int, flops: int = 0, elements: int = 0,
                 dtype: str = "", target: Optional[Target | str] = None, launch: bool = True,
                 input_dims: Any = None, conv_weight: Optional[tuple] = None, conv_groups: int = 1,
                 on_chip_bytes: int = 0) -> Projection:
    """An ATen kernel run as its own NEFF: max over the engines it uses (roofline), plus one launch.

    `launch=False` for kernels that are part of a bigger launch (an op inside a compiled graph).
    `input_dims` (torch's "Input Dims": the arguments' shapes), where known, projects a matmul-family
    kernel as its Tensor Engine instruction sequence (matmul_plan) instead of its FLOPs at the peak.
    `on_chip_bytes`: bytes of the record that a compiled program keeps in SBUF (profiler/fusion.py), taken
    out of the memory traffic only: the record's bytes still give the engines' work (a convolution's
    geometry).
    """
    t = resolve_target(target)
    op, backward = _base_op(name)
    bytes_read = out_variant_bytes_read(name, bytes_read, bytes_written)
    nbytes = bytes_read + bytes_written
    passes = BACKWARD_PASSES if backward else 1
    indexed = _indexed_write_kind(name)
    if indexed and bytes_written and bytes_read > bytes_written:
        moved = indexed_write_bytes(bytes_read, bytes_written, indexed == "accumulate")
        # The elements touched: the other inputs' bytes in the destination's element size (its record's
        # elements are the destination's, its bytes written the destination's bytes).
        touched = (bytes_read - bytes_written) * elements // bytes_written
        cands = {"dma": memory_s(moved, t)}
        if touched:
            cands["vector"] = vector_engine_s(touched, dtype, t)
        return _pick(t.launch_s if launch else 0.0, cands, flops, moved, touched)
    moved = row_gather_bytes(bytes_read, bytes_written) if op in _ROW_GATHER_OPS and not backward else nbytes
    if on_chip_bytes:
        moved = nbytes = max(moved - on_chip_bytes, 0)
    cands = {"dma": memory_s(moved, t)}
    if op in _CONV_OPS and flops and not backward:
        cands["tensor"], evict = _convolution_engine_s(bytes_read, bytes_written, flops, elements, dtype, t,
                                                       conv_weight, conv_groups)
        if evict > 0:
            cands["vector"] = evict
    elif op in _TENSOR_OPS and flops:
        cands["tensor"], evict = _tensor_work_s(name, flops, dtype, t, input_dims, launch)
        if evict > 0:
            cands["vector"] = evict
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


# ---------------------------------------------------------------------------------------------
# Collectives: the runtime's algorithms, a latency floor, one NeuronLink port per rank, EFA across
# instances (docs/cost_model.md, "Collectives: algorithms and latency floor").
# ---------------------------------------------------------------------------------------------

# The runtime's empirical choice inside an instance (neuron-runtime/explore/intranode-collective-comm.rst,
# "Algorithm Summary"): Mesh below 1 MB, RDH for 1-56 MB, KangaRing above 56 MB (Ring where KangaRing
# does not apply). nccom-test's sizes are powers of two and its "MB" is MiB, so the bounds are too.
MESH_BELOW_BYTES = 1 << 20
KANGARING_ABOVE_BYTES = 56 << 20

# What changed in the runtime's collectives, by the Neuron SDK release that changed it (Target.runtime_release;
# docs/cost_model.md, "Collectives by runtime release"). Only changes the release notes quantify or that name
# an algorithm are here; "up to" figures are not.
# Neuron 2.11 (Neuron Runtime 2.14.8, 2023-06-14): "Added All-to-All All-Reduce support for Neuron Collective
# operations, which is expected to improve All-Reduce performance by 3-7x in most cases": the first algorithm
# other than Ring. Before it every stage, inside an instance and across, is a Ring (N-1 steps a phase).
RING_ONLY_BEFORE = (2, 11)
# Neuron 2.16 (Neuron Collectives 2.19.7.0, 2023-12-21): "Improve collectives barrier latency from 500us to 40us".
# The collectives library (libnccom, with the OFI plugin for EFA) is what carries a collective between instances;
# the model reads its barrier as paid once by every collective whose group spans instances, in place of the floor
# where it is the longer (both are the fixed cost of getting the ranks to start together). Inside an instance the
# barrier is not paid: the 2.10 runtime's single-instance collectives took 58 us, not 500. (docs/cost_model.md,
# "Collectives by runtime release", for the evidence and the 2.24 "32x2" note this replaces.)
COLLECTIVES_BARRIER = ((2, 16), 500e-6, 40e-6)  # (the release that cut it, the barrier before, from it on)


@dataclasses.dataclass(frozen=True)
class CollectiveStage:
    """One stage of a collective: an algorithm over `ranks` ranks of one interconnect."""

    algorithm: str        # ring, mesh, single-step mesh, rdh, kangaring, direct, tree
    ranks: int
    link: str             # "link" (NeuronLink, inside an instance) or "efa" (across instances)
    steps: int            # algorithm steps, each paying the interconnect's step latency
    wire_bytes: float     # what one rank sends over the stage
    seconds: float        # steps x step latency + wire bytes / the rank's bandwidth
    latency_s: float = 0.0  # the steps x step latency part of `seconds`


def _collective_kind(name: str) -> str:
    op = name.split("::", 1)[-1].rstrip("_").lower()
    if "allreduce" in op or "all_reduce" in op:
        return "all_reduce"
    if "allgather" in op or "all_gather" in op:
        return "all_gather"
    if "reduce_scatter" in op:
        return "reduce_scatter"
    if "alltoall" in op or "all_to_all" in op:
        return "all_to_all"
    if op in ("send", "recv", "recv_anysource") or "permute" in op or op == "sendrecv":
        return "send"
    return "tree"


def _ranks_per_chip(t: Target) -> int:
    """Ranks on one chip: 2 NeuronCore-v2 per Trainium, 8 physical cores per Trainium2/3, over the LNC.
    KangaRing pairs two of a device's four (or more) ranks (intranode-collective-comm.rst), so Trn2/Trn3."""
    return max(1, (2 if t.generation == 2 else 8) // t.lnc)


def collective_stage(kind: str, nbytes: float, ranks: int, target: Target, link: str = "link") -> CollectiveStage:
    """One collective of `kind` (all_reduce, all_gather, reduce_scatter, all_to_all) over `ranks` ranks of
    one interconnect, on a buffer of `nbytes` (all-reduce's buffer, all-gather's output, reduce-scatter's
    input), by the algorithm the runtime documents for its size.

    Per phase (a reduce-scatter or an all-gather; an all-reduce is both), each rank sends (N-1)/N of the
    buffer whatever the algorithm (intranode- and internode-collective-comm.rst: "traffic = (N-1) * C");
    the algorithms differ in steps: Ring N-1, Mesh 1, RDH log2 N, KangaRing N/2 (pairs of ranks of a chip,
    one of them active per cycle). The all-reduce's Single-step Mesh sends the whole buffer to every peer
    in one step ((N-1) x B) and is taken where it is faster than two Mesh steps. Bandwidth and step
    latency: one NeuronLink port in one direction and `link_hop_s` (link), or the rank's EFA share and
    `efa_hop_s` (efa).
    """
    n = max(int(ranks), 1)
    bw = target.link_port_bytes_per_s if link == "link" else target.efa_bytes_per_s
    hop = target.link_hop_s if link == "link" else target.efa_hop_s
    if n == 1:
        return CollectiveStage("none", 1, link, 0, 0.0, 0.0)
    phases = 2 if kind == "all_reduce" else 1
    per_phase = (n - 1) / n * nbytes
    if target.runtime_release < RING_ONLY_BEFORE:
        algorithm, steps = "ring", n - 1
    elif nbytes < MESH_BELOW_BYTES:
        algorithm, steps = "mesh", 1
    elif nbytes <= KANGARING_ABOVE_BYTES and n & (n - 1) == 0:
        algorithm, steps = "rdh", int(math.log2(n))
    elif link == "link" and n % 2 == 0 and n >= 4 and _ranks_per_chip(target) >= 4:
        algorithm, steps = "kangaring", n // 2
    else:
        algorithm, steps = "ring", n - 1
    stage = CollectiveStage(algorithm, n, link, phases * steps, phases * per_phase,
                            phases * (steps * hop + per_phase / bw), phases * steps * hop)
    if kind == "all_reduce" and algorithm == "mesh":
        single = CollectiveStage("single-step mesh", n, link, 1, (n - 1) * nbytes, hop + (n - 1) * nbytes / bw, hop)
        if single.seconds < stage.seconds:
            stage = single
    return stage


def group_instances(group_size: int, target: Target, instances: Optional[int] = None) -> int:
    """How many instances a group of `group_size` ranks spans: `instances` when given (nccom-test's ``-N``
    divides the workers equally over the nodes; a one-rank-per-node group has as many instances as ranks),
    else the fewest that hold it (`Target.cores_per_instance` ranks each).

    Groups are symmetric (internode-collective-comm.rst: "The number of participating ranks on each node is
    consistent"), so `instances` must divide the group and leave at most an instance's ranks on each."""
    n = max(int(group_size), 1)
    if instances is None:
        return math.ceil(n / target.cores_per_instance)
    if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
        raise ValueError(f"instances={instances!r}: the number of instances a group spans is a positive integer")
    if n % instances:
        raise ValueError(f"a group of {n} ranks cannot spread evenly over {instances} instances: the runtime forms "
                         "groups with the same number of ranks on each instance; use a divisor of the group size")
    if n // instances > target.cores_per_instance:
        raise ValueError(f"{n} ranks over {instances} instance{'s' * (instances > 1)} puts {n // instances} on "
                         f"each, more than the {target.cores_per_instance} ranks of a {target.name} instance at "
                         f"LNC={target.lnc}; use at least {math.ceil(n / target.cores_per_instance)} instances")
    return instances


def collective_stages(name: str, bytes_read: int, bytes_written: int, group_size: int,
                      target: Optional[Target | str] = None, instances: Optional[int] = None) -> list[CollectiveStage]:
    """The stages a collective runs as, without its latency floor (`collective` adds it).

    Inside an instance one stage (`collective_stage`). Across instances, X instances of Y ranks each (groups
    are symmetric: internode-collective-comm.rst; X from `group_instances`), the hierarchical algorithm:
    all-reduce = intra-instance reduce-scatter + inter-instance all-reduce of 1/Y of the buffer +
    intra-instance all-gather; all-gather = inter (1/Y) then intra; reduce-scatter = intra then inter (1/Y);
    all-to-all = intra, then the buffer's (X-1)/X over EFA. A one-rank-per-node group (Y = 1) is its inter
    stage alone ("Communication Groups - Only One Rank per Node"). Send/recv and permutes: the buffer once,
    one step. Broadcast, reduce, gather, scatter, barrier: the buffer once and ceil(log2 N) steps (a tree).
    """
    t = resolve_target(target)
    n = max(int(group_size), 1)
    kind = _collective_kind(name)
    full = float(max(bytes_read, bytes_written))
    instances = group_instances(n, t, instances)
    if n == 1:
        return []
    link = "efa" if instances > 1 else "link"
    bw = t.efa_bytes_per_s if link == "efa" else t.link_port_bytes_per_s
    hop = t.efa_hop_s if link == "efa" else t.link_hop_s
    if kind == "send":
        return [CollectiveStage("direct", n, link, 1, full, hop + full / bw, hop)]
    if kind == "tree":
        steps = math.ceil(math.log2(n))
        return [CollectiveStage("tree", n, link, steps, full, steps * hop + full / bw, steps * hop)]
    if instances == 1:
        return [collective_stage(kind, full, n, t)]
    local = math.ceil(n / instances)
    if kind == "all_reduce":
        stages = [collective_stage("reduce_scatter", full, local, t),
                  collective_stage("all_reduce", full / local, instances, t, "efa"),
                  collective_stage("all_gather", full, local, t)]
    elif kind == "all_gather":
        stages = [collective_stage("all_gather", full / local, instances, t, "efa"),
                  collective_stage("all_gather", full, local, t)]
    elif kind == "reduce_scatter":
        stages = [collective_stage("reduce_scatter", full, local, t),
                  collective_stage("reduce_scatter", full / local, instances, t, "efa")]
    else:
        stages = [collective_stage("all_to_all", full / instances, local, t),
                  collective_stage("all_to_all", full, instances, t, "efa")]
    # One rank per instance has no intra-instance stage.
    return [s for s in stages if s.ranks > 1]


def collective(name: str, bytes_read: int, bytes_written: int, group_size: int,
               target: Optional[Target | str] = None, instances: Optional[int] = None) -> Projection:
    """A collective run by the Neuron runtime: its fixed cost (`collective_fixed_s`) plus its stages
    (`collective_stages`), on the runtime of `Target.runtime_release` (RING_ONLY_BEFORE, COLLECTIVES_BARRIER).

    `instances`: how many instances the group's ranks are spread over, evenly (`group_instances`); default,
    packed into the fewest. The engine is "efa" when the group spans instances, else "link"; the bound is
    memory (the interconnect).
    """
    t = resolve_target(target)
    full = max(bytes_read, bytes_written)
    stages = collective_stages(name, bytes_read, bytes_written, group_size, t, instances)
    if not stages:
        return _pick(0.0, {}, 0, full, 0)
    spans = group_instances(group_size, t, instances) > 1
    engine = "efa" if spans else "link"
    seconds = collective_fixed_s(t, spans) + sum(s.seconds for s in stages)
    return _pick(0.0, {engine: seconds}, 0, full, 0)


def collective_fixed_s(target: Target, spans_instances: bool = False) -> float:
    """What one collective costs whatever its size: the floor (`Target.collective_floor_s`: the CC cores' setup
    and semaphore handshakes, read off the small-size end of AWS's nccom-test sweeps) or, for a group across
    instances, the collectives library's barrier between its ranks where that is longer: 500 us before Neuron
    2.16, 40 us from it (COLLECTIVES_BARRIER)."""
    if not spans_instances:
        return target.collective_floor_s
    cut_in, before, after = COLLECTIVES_BARRIER
    return max(target.collective_floor_s, before if target.runtime_release < cut_in else after)


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
                    dtype: str = "", target: Optional[Target | str] = None, input_dims: Any = None,
                    conv_weight: Optional[tuple] = None, conv_groups: int = 1) -> Projection:
    """A compiled graph pays one launch; its generated kernels run inside it and pay none.

    An extern matmul call inside it with `input_dims` known is its instruction sequence (matmul_plan); an
    extern convolution is its lowering (convolution_s)."""
    t = resolve_target(target)
    graph = name.split("::")[-1].startswith("graph_")
    bytes_read = out_variant_bytes_read(name, bytes_read, bytes_written)
    nbytes = bytes_read + bytes_written
    cands = {"dma": memory_s(nbytes, t)}
    op, backward = _base_op(name)
    if elements:
        cands["vector"] = vector_engine_s(elements, dtype, t)
    if flops and op in _CONV_OPS and not backward:
        cands["tensor"], evict = _convolution_engine_s(bytes_read, bytes_written, flops, elements, dtype, t,
                                                       conv_weight, conv_groups)
        if evict > 0:
            cands["vector"] = max(cands.get("vector", 0.0), evict)
    elif flops:
        cands["tensor"], evict = _tensor_work_s(name, flops, dtype, t, input_dims, False)
        if evict > 0:
            cands["vector"] = max(cands.get("vector", 0.0), evict)
    return _pick(t.launch_s if graph else 0.0, cands, flops, nbytes, elements)


def project(name: str, tier: str, bytes_read: int = 0, bytes_written: int = 0, flops: int = 0, elements: int = 0,
            dtype: str = "", target: Optional[Target | str] = None, model_ns: int = 0, group_size: int = 1,
            launch: bool = True, copy_direction: str = "", input_dims: Any = None,
            conv_weight: Optional[tuple] = None, conv_groups: int = 1, on_chip_bytes: int = 0) -> Projection:
    """The projection of one recorded device activity, by its tier (and op name). `on_chip_bytes` (an ATen
    kernel of a fused program: eager_kernel) are not moved through HBM."""
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
        p = compiled_kernel(name, bytes_read, bytes_written, flops, elements, dtype, t, input_dims=input_dims,
                            conv_weight=conv_weight, conv_groups=conv_groups)
    else:
        p = eager_kernel(name, bytes_read, bytes_written, flops, elements, dtype, t, launch=launch,
                         input_dims=input_dims, conv_weight=conv_weight, conv_groups=conv_groups,
                         on_chip_bytes=on_chip_bytes)
    if not launch and p.launch_s:
        p = _pick(0.0, {p.engine: p.work_s}, p.flops, p.bytes, p.elements)
    return p
