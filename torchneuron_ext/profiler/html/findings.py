"""Ranked findings for the summary page: what limits this profile, in plain words, with what to try.

Each finding carries the time it puts at stake (microseconds); the page lists them largest first,
like the insights on Neuron Explorer's summary page.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from .._format import format_bytes, format_us
from ..report import TraceSummary


@dataclasses.dataclass
class Finding:
    key: str
    title: str
    detail: str
    advice: str
    at_stake_us: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "0%"


def _ratio(part: float, whole: float) -> str:
    """2.40x / 35% of / 0.081% of: a ratio that reads well at any size."""
    r = part / whole
    return f"{r:.2f}x" if r >= 1 else f"{100 * r:.2g}% of"


def _kernel_ops(s: TraceSummary) -> list:
    return [r for r in s.ops if r.calls > 0 and r.device_us > 0]


def find(summary: TraceSummary, limit: int = 5) -> list[Finding]:
    """The findings of one profile, largest time at stake first (at most `limit`)."""
    s = summary
    out: list[Finding] = []
    if s.kernels == 0:
        return [Finding(
            "no_device_activity", "No device activity was recorded",
            "The trace has no neuron kernels or transfers.",
            "Profile with activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1] and run work on "
            "device=\"neuron\" inside the profiler.", 0.0)]
    kernel_ops = _kernel_ops(s)
    compiled = any(r.tier == "compiled" for r in kernel_ops)
    idle = max(0.0, s.wall_us - s.device_busy_us)
    mean_kernel = s.device_busy_us / s.kernels
    if s.verdict == "host-bound":
        advice = ("Fewer, larger device operations: fuse ops (torch.compile(model, backend=\"neuron\"), fused ops "
                  "such as torch.rms_norm or scaled_dot_product_attention) or batch more work per call.")
        if compiled:
            advice = ("Compiled graphs are already in use: look for graph breaks "
                      "(torchneuron_ext.compiler.graph_breaks) and eager ops left between graphs, or batch more "
                      "work per call.")
        out.append(Finding(
            "host_bound", f"Host-bound: the device idles {_share(idle, s.wall_us)} of the wall time",
            f"Kernels kept the device busy {format_us(s.device_busy_us)} of {format_us(s.wall_us)}; "
            f"{s.kernels} kernels averaged {format_us(mean_kernel)} each, and the device waited for the host "
            f"between them.", advice, idle))
    else:
        top = max(kernel_ops, key=lambda r: r.device_us, default=None)
        detail = f"Kernels kept the device busy {_share(s.device_busy_us, s.wall_us)} of {format_us(s.wall_us)}."
        if top is not None:
            detail += (f" The largest is {top.name}: {_share(top.device_us, s.device_busy_us)} of device time "
                       f"over {top.calls} calls.")
        out.append(Finding(
            "device_bound", f"Device-bound: kernels fill {_share(s.device_busy_us, s.wall_us)} of the wall time",
            detail, "Speed up the top ops by device time: fewer passes over memory (fused or compiled kernels), "
            "lower precision (torch.autocast(\"neuron\")), or less work.", s.device_busy_us))
    overhead = sum(max(0.0, r.host_us - r.device_us) for r in s.ops if r.calls > 0)
    device_of_dispatched = sum(r.device_us for r in s.ops if r.calls > 0 and r.host_us > 0)
    if overhead > 0 and device_of_dispatched > 0:
        out.append(Finding(
            "dispatch_overhead",
            f"Dispatch overhead is {format_us(overhead)}, {_ratio(overhead, device_of_dispatched)} the kernel time",
            f"The runtime spent {format_us(s.host_dispatch_us)} in dispatch spans, of which "
            f"{format_us(overhead)} went to preparing launches rather than running kernels "
            f"({format_us(overhead / s.kernels)} per kernel).",
            "Each eager op pays this once: torch.compile turns a sequence of ops into one launch.", overhead))
    if s.generic_ops:
        n_generic = sum(s.generic_ops.values())
        generic_rows = [r for r in s.ops if r.name in s.generic_ops]
        spent = sum(r.device_us + max(0.0, r.host_us - r.device_us) for r in generic_rows)
        names = ", ".join(f"{name} ({n})" for name, n in list(s.generic_ops.items())[:4])
        out.append(Finding(
            "generic_path", f"{_share(n_generic, s.kernels)} of kernels took the generic path",
            f"{n_generic} of {s.kernels} kernels ran a host kernel through the boxed fallback, without a native "
            f"kernel: {names}. They took {format_us(spent)}.",
            "Find them with torchneuron_ext.get_fallback_ops() or warn_on_generic_path(); replace them with "
            "ops that have native kernels, or keep them out of hot loops.", spent))
    if s.transfers:
        copy_row = next((r for r in s.ops if r.name == "aten::_copy_from"), None)
        spent = copy_row.device_us if copy_row else 0.0
        count = sum(c for c, _ in s.transfers.values())
        nbytes = sum(b for _, b in s.transfers.values())
        kinds = ", ".join(f"{d} {c}x {format_bytes(b)}" for d, (c, b) in s.transfers.items())
        out.append(Finding(
            "transfers", f"{count} transfers moved {format_bytes(nbytes)} in {format_us(spent)}",
            f"Copies by direction: {kinds}; {_share(spent, s.device_busy_us)} of device busy time.",
            "Keep tensors on the device between steps; avoid .cpu(), .item() and printing device tensors "
            "inside loops; move inputs once, with non_blocking=True from pinned memory.", spent))
    if not compiled and s.kernels >= 8:
        small = [r for r in kernel_ops if r.device_us / r.calls < 50.0]
        small_calls = sum(r.calls for r in small)
        if small_calls >= s.kernels / 2:
            spent = sum(r.host_us for r in small)
            out.append(Finding(
                "small_kernels", f"{_share(small_calls, s.kernels)} of kernels are shorter than 50 us",
                f"{small_calls} kernels of {len(small)} ops averaged under 50 us each; at that size launch cost "
                "rivals the work.", "Try torch.compile(model, backend=\"neuron\") to fuse them, or larger "
                "batches.", spent))
    out.sort(key=lambda f: -f.at_stake_us)
    projected = _projected(s)
    if projected is not None:  # second, whatever its size: it is on another clock
        out.insert(1, projected)
    return out[:limit]


_PROJECTED_ADVICE = {
    "host-bound": "The device would wait for the host: give each dispatch more work (larger batches, fused ops, "
                  "torch.compile) before tuning kernels.",
    "launch-bound": "Launch overhead would dominate the device: fewer, larger kernels (torch.compile, fused ops "
                    "such as torch.rms_norm).",
    "device-bound": "The kernels' own work would dominate: speed up the top ops by projected time (memory-bound: "
                    "fewer passes over HBM; compute-bound: bf16 on the Tensor Engine).",
}


def _projected(s: TraceSummary) -> "Finding | None":
    """The cost model's reading: where the time would go on the Trainium target."""
    p = s.projected
    if p is None or p.verdict not in _PROJECTED_ADVICE:
        return None
    top = max(s.ops, key=lambda r: r.projected_us, default=None)
    detail = (f"The cost model (docs/cost_model.md) replays the trace on {p.target}: device busy "
              f"{format_us(p.device_busy_us)} of a projected {format_us(p.wall_us)} wall "
              f"({_share(p.device_busy_us, p.wall_us)}), {p.launches} launches costing {format_us(p.launch_us)}.")
    if top is not None and top.projected_us > 0:
        detail += (f" The largest is {top.name}: {format_us(top.projected_us)} projected, {top.bound}-bound "
                   f"(measured here: {format_us(top.device_us)}).")
    return Finding(f"projected_{p.verdict.replace('-', '_')}", f"Projected on {p.target}: {p.verdict} (a model)",
                   detail, _PROJECTED_ADVICE[p.verdict], p.wall_us)


# Transfers whose fixed per-transfer cost is at least this share of the DMA queues' time are "small".
_SMALL_TRANSFERS = 0.5


def _kernel_bound(v: Any) -> tuple[str, str, str]:
    """(title, detail, advice) of a kernel view's bound (profiler/html/kernel_view.py)."""
    util = v.class_utilisation
    path = v.critical_by_class
    on_path = ", ".join(f"{name} {format_us(path[k])}" for k, name in
                        (("tensor", "Tensor"), ("vector_scalar", "Vector/Scalar"), ("dma", "DMA"), ("waits", "waits"))
                        if path.get(k, 0) >= 0.0005)  # under half a nanosecond: rounding, not time
    common = (f"Projected on {v.target}: {format_us(v.makespan_us)} for {v.instructions} instructions; busiest lane "
              f"per class: Tensor {_share(util['tensor'], 1)}, Vector/Scalar {_share(util['vector_scalar'], 1)}, DMA "
              f"{_share(util['dma'], 1)}; MFU {100 * v.mfu:.1f}%, HBM bandwidth {100 * v.hbm_utilisation:.1f}%. "
              f"Critical path: {v.critical_path_length} instructions ({on_path or 'none'}).")
    if v.bound == "tensor":
        advice = ("Feed the Tensor Engine full tiles: BF16 or FP8 operands (FP32 runs at a quarter of the rate), "
                  "a 128-row stationary and 512-column moving tile per nc_matmul, and accumulate in PSUM across K "
                  "instead of copying partial sums out.")
        if v.mfu < 0.5 * util["tensor"]:
            advice = ("The Tensor Engine is busy but does little work per busy cycle (MFU under half its "
                      "utilisation): its instructions are too small for their fixed cost. Give each nc_matmul a "
                      "128-row stationary and up to 512 moving columns, and accumulate in PSUM across K.")
        return "Tensor Engine-bound", common, advice
    if v.bound == "vector_scalar":
        return ("Vector/Scalar-bound", common,
                "Do fewer elementwise passes: combine steps in one instruction (nisa.tensor_scalar applies two ops, "
                "nisa.activation a function with scale and bias), move work between the Vector and Scalar engines "
                "so both run, keep GpSimd for what only it can do, and give each instruction a long free dimension.")
    if v.bound == "dma":
        detail = common + (f" {v.dma_transfers} transfer{'s' if v.dma_transfers != 1 else ''} averaged {format_bytes(v.dma_mean_bytes)}; the fixed "
                           f"per-transfer cost is {_share(v.dma_fixed_share, 1)} of the DMA queues' time.")
        if v.dma_fixed_share >= _SMALL_TRANSFERS:
            return ("DMA-bound: many small transfers", detail,
                    "Batch loads into larger tiles (one DMA per tile, not per row), hoist loop-invariant loads out "
                    "of the loop, and spread independent transfers over the DMA queues.")
        return ("DMA-bound: HBM bandwidth", detail,
                "Move fewer bytes: reuse tiles held in SBUF across iterations instead of reloading them, load in "
                "BF16 rather than FP32, and fuse kernels so intermediates never go to HBM.")
    return ("Dependency stalls: no engine is busy half the time", common,
            "The engines wait on each other: double-buffer (allocate each tile in a buffer of 2 or more so the load "
            "of the next tile overlaps work on this one), keep more independent tiles in flight, and issue loads "
            "before the compute that needs them.")


def kernel_findings(views: list) -> list[Finding]:
    """One finding per NKI kernel with an instruction-level profile (kernel_view.kernel_views): the bound that
    limits it, with what to try. Projected on the target: a model, like the projected finding."""
    out = []
    for v in views:
        title, detail, advice = _kernel_bound(v)
        runs = f" ({v.launches} launches, the longest shown)" if v.launches > 1 else ""
        out.append(Finding(f"nki_kernel_{v.bound}", f"NKI kernel {v.kernel}: {title}{runs}", detail, advice,
                           v.total_us))
    return out
