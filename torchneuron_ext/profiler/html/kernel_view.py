"""The kernel view of the HTML report: an NKI launch's instruction-level profile read back from a trace.

The instruction events are nki/trace.py's (a launch span carrying the launch's totals, an event per
instruction); they are in a trace written by ``nki.profile`` / ``nki.benchmark(save_trace_name=...)`` or
exported by torch.profiler with the NKI instructions switched on (profiler/kernel_trace.py). Everything
here is projected on the launch's target by the schedule model: a model, not a measurement.

For each kernel (its longest launch when it ran several times) the view holds:

- per-lane utilisation: the time the lane's instructions occupy it / the launch's makespan;
- MFU: the Tensor Engine work at the target's peak for each instruction's dtype (BF16/FP16 peak; FP32
  at 1/fp32_slowdown of it; FP8 at fp8_speedup times it) over the makespan of every core of the launch;
- HBM bandwidth utilisation: HBM bytes moved / makespan / the cores' HBM bandwidth (trainium/targets.py);
- the critical path (the chain that sets the makespan) and its time per engine class;
- the top source lines by projected time;
- the bound: which engine class limits the launch, or dependency stalls when none is near saturation
  (findings.kernel_findings turns it into a finding with what to try).
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from ...nki.trace import CAT_INSTRUCTION, CAT_LAUNCH, lane_label, lane_rank
from ...trainium import targets as _targets
from ..trace_events import ClassifiedTrace, TraceFormatError

# The engine classes a bound is named by (Neuron Explorer's grouping): GpSimd does the Vector Engine's
# kind of work, collectives move data as DMA does.
CLASSES = ("tensor", "vector_scalar", "dma")
CLASS_LABELS = {"tensor": "Tensor Engine", "vector_scalar": "Vector/Scalar", "dma": "DMA", "stalls": "dependency stalls",
                "waits": "waits"}
_CLASS_OF_ENGINE = {"tensor": "tensor", "vector": "vector_scalar", "scalar": "vector_scalar",
                    "gpsimd": "vector_scalar", "dma": "dma", "collective": "dma"}
# Below this, no engine class is busy enough to be the limit: the launch waits on its dependencies.
SATURATED = 0.5
CRITICAL_PATH_ROWS = 40
TOP_LINES = 10


@dataclasses.dataclass
class LaneUse:
    core: int
    lane: str
    label: str
    busy_us: float
    utilisation: float
    instructions: int


@dataclasses.dataclass
class SourceLine:
    line: str          # "file.py:12"
    file: str
    time_us: float     # its instructions' projected time, summed over lanes
    share: float       # of all instructions' time
    instructions: int
    engines: list


@dataclasses.dataclass
class KernelView:
    kernel: str
    target: str
    launches: int             # launches of this kernel in the trace; the view is of the longest
    total_us: float           # their makespans summed
    cores: int
    makespan_us: float
    instructions: int
    flops: int
    hbm_bytes: int
    lanes: list               # LaneUse, in lane order
    class_utilisation: dict   # CLASSES -> the busiest lane of the class's utilisation
    mfu: float
    tensor_peak_flops: float  # per core, BF16/FP16 dense
    hbm_utilisation: float
    hbm_bytes_per_s: float    # per core
    critical_path: list       # dicts: index, core, lane, opcode, line, start_us, dur_us, wait_us
    critical_path_length: int
    critical_by_class: dict   # CLASSES + "waits" -> microseconds on the critical path
    top_lines: list           # SourceLine, largest first
    bound: str                # a CLASSES key or "stalls"
    dma_transfers: int
    dma_mean_bytes: float
    dma_fixed_share: float    # of the DMA queues' busy time, the per-transfer fixed cost

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def peak_flops(target: _targets.Target, dtype: str) -> float:
    """The Tensor Engine's dense peak for ``dtype`` on one physical core of ``target``."""
    core = target.physical_core()
    d = dtype.lower()
    if d.startswith("float8") or d.startswith("fp8"):
        return core.tensor_peak_flops * core.fp8_speedup
    if d in ("bfloat16", "float16", "half", "tfloat32"):
        return core.tensor_peak_flops
    return core.tensor_peak_flops / core.fp32_slowdown


def _instruction_dtype(args: dict) -> str:
    """The dtype a Tensor Engine instruction ran at: FP32 if any SBUF input is FP32, FP8 if all are FP8."""
    ins = [o.get("dtype", "") for o in args.get("operands", []) if o.get("role") == "in" and o.get("memory") != "psum"]
    if not ins:
        return "bfloat16"
    kinds = [peak_kind(d) for d in ins]
    return "float32" if "fp32" in kinds else "float8" if all(k == "fp8" for k in kinds) else "bfloat16"


def peak_kind(dtype: str) -> str:
    d = dtype.lower()
    if d.startswith("float8") or d.startswith("fp8"):
        return "fp8"
    return "16" if d in ("bfloat16", "float16", "half", "tfloat32") else "fp32"


class _Launch:
    __slots__ = ("args", "ts", "instructions")

    def __init__(self, args: dict, ts: float) -> None:
        self.args, self.ts, self.instructions = args, ts, []


def _launches(c: ClassifiedTrace) -> list[_Launch]:
    spans = c.spans
    launches: dict = {}
    order: list = []
    for k in c.spans_of(CAT_LAUNCH).tolist():
        args = spans.args[k] or {}
        key = args.get("launch", k)
        launches[key] = _Launch(args, float(spans.ts[k]))
        order.append(key)
    for k in c.spans_of(CAT_INSTRUCTION).tolist():
        args = spans.args[k]
        if not isinstance(args, dict):
            continue
        launch = launches.get(args.get("launch"))
        if launch is not None:
            launch.instructions.append((float(spans.ts[k]) - launch.ts, float(spans.dur[k]), args))
    return [launches[k] for k in order]


def kernel_views(trace: ClassifiedTrace) -> list[KernelView]:
    """One view per kernel with instruction events in the trace (the longest of its launches), largest
    total projected time first."""
    by_kernel: dict = defaultdict(list)
    kernel = "?"
    views = []
    try:
        for launch in _launches(trace):
            if launch.instructions:
                by_kernel[str(launch.args.get("kernel", "?"))].append(launch)
        for kernel, launches in by_kernel.items():
            longest = max(launches, key=lambda lt: float(lt.args.get("makespan_us", 0.0)))
            views.append(_view_of(kernel, longest, len(launches),
                                  sum(float(lt.args.get("makespan_us", 0.0)) for lt in launches)))
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise TraceFormatError(f"malformed NKI instruction profile of kernel {kernel!r} (events of category "
                               f"{CAT_LAUNCH!r} / {CAT_INSTRUCTION!r}, written by nki/trace.py): {e}") from None
    views.sort(key=lambda v: -v.total_us)
    return views


def _view_of(kernel: str, launch: _Launch, launches: int, total_us: float) -> KernelView:
    """The view of one launch (``launches`` of the kernel in the trace, ``total_us`` their makespans)."""
    a = launch.args
    target = _targets.by_name(str(a.get("target", _targets.DEFAULT)))
    core = target.physical_core()
    cores = max(1, int(a.get("cores", 1)))
    makespan = float(a.get("makespan_us", 0.0)) or max((s + d for s, d, _ in launch.instructions), default=0.0)
    busy: dict = defaultdict(float)
    count: dict = defaultdict(int)
    lines: dict = {}
    ideal_tensor_s = 0.0
    dma_n, dma_bytes = 0, 0
    for start, dur, args in launch.instructions:
        key = (int(args.get("core", 0)), str(args.get("queue", "?")))
        busy[key] += dur
        count[key] += 1
        line = str(args.get("line", "")) or "(no source line)"
        rec = lines.setdefault(line, [0.0, 0, set(), str(args.get("file", ""))])
        rec[0] += dur
        rec[1] += 1
        rec[2].add(str(args.get("engine", "")))
        flops = int(args.get("flops", 0))
        if flops and args.get("engine") == "tensor":
            ideal_tensor_s += flops / peak_flops(target, _instruction_dtype(args))
        if args.get("engine") == "dma":
            dma_n += 1
            dma_bytes += int(args.get("bytes", 0))
    lanes = [LaneUse(c, q, lane_label(q), b, b / makespan if makespan > 0 else 0.0, count[(c, q)])
             for (c, q), b in sorted(busy.items(), key=lambda kv: (kv[0][0], lane_rank(kv[0][1])))]
    util = {k: 0.0 for k in CLASSES}
    for lane in lanes:
        cls = _CLASS_OF_ENGINE.get(lane.lane.split(":")[0])
        if cls is not None:
            util[cls] = max(util[cls], lane.utilisation)
    makespan_s = makespan * 1e-6
    mfu = ideal_tensor_s / (makespan_s * cores) if makespan_s > 0 else 0.0
    hbm_bytes = int(a.get("hbm_bytes", 0))
    hbm_util = hbm_bytes / (makespan_s * core.hbm_bytes_per_s * cores) if makespan_s > 0 else 0.0
    path = sorted((x for x in launch.instructions if x[2].get("critical")), key=lambda x: x[0])
    by_class = {k: 0.0 for k in CLASSES}
    by_class["waits"] = 0.0
    prev_end = 0.0
    for start, dur, args in path:
        by_class["waits"] += max(0.0, start - prev_end)
        by_class[_CLASS_OF_ENGINE.get(str(args.get("engine")), "dma")] += dur
        prev_end = max(prev_end, start + dur)
    by_class["waits"] += max(0.0, makespan - prev_end) if path else 0.0
    total_time = sum(r[0] for r in lines.values()) or 1.0
    top = [SourceLine(line, r[3], r[0], r[0] / total_time, r[1], sorted(r[2]))
           for line, r in sorted(lines.items(), key=lambda kv: -kv[1][0])[:TOP_LINES]]
    dma_busy = sum(lane.busy_us for lane in lanes if lane.lane.startswith("dma"))
    fixed_share = min(1.0, dma_n * core.dma_fixed_s * 1e6 / dma_busy) if dma_busy > 0 else 0.0
    busiest = max(CLASSES, key=lambda k: util[k])
    bound = busiest if util[busiest] >= SATURATED else "stalls"
    return KernelView(
        kernel=kernel, target=target.name, launches=launches, total_us=total_us,
        cores=cores, makespan_us=makespan, instructions=int(a.get("instructions", len(launch.instructions))),
        flops=int(a.get("flops", 0)), hbm_bytes=hbm_bytes, lanes=lanes, class_utilisation=util, mfu=mfu,
        tensor_peak_flops=core.tensor_peak_flops, hbm_utilisation=hbm_util, hbm_bytes_per_s=core.hbm_bytes_per_s,
        critical_path=[{"index": int(x[2].get("index", 0)), "core": int(x[2].get("core", 0)),
                        "lane": str(x[2].get("queue", "")), "opcode": str(x[2].get("opcode", "")),
                        "line": str(x[2].get("line", "")), "start_us": x[0], "dur_us": x[1],
                        "wait_us": float(x[2].get("wait_us", 0.0))} for x in path[:CRITICAL_PATH_ROWS]],
        critical_path_length=len(path), critical_by_class=by_class, top_lines=top, bound=bound,
        dma_transfers=dma_n, dma_mean_bytes=dma_bytes / dma_n if dma_n else 0.0, dma_fixed_share=fixed_share)


def format_kernel_views(views: list, top: int = 5) -> str:
    """The kernel views as text, for ``torchneuron-ext report`` (the HTML report's Kernels tab in brief)."""
    from .._format import format_us

    if not views:
        return ""
    out = ["", "NKI kernels: instruction-level profile, projected by the schedule model (not a measurement)"]
    for v in views:
        runs = f", longest of {v.launches} launches" if v.launches > 1 else ""
        out.append(f"  {v.kernel} on {v.target}{runs}: makespan {format_us(v.makespan_us)}, {v.instructions} "
                   f"instructions, MFU {100 * v.mfu:.1f}%, HBM bandwidth {100 * v.hbm_utilisation:.1f}%, bound: "
                   f"{CLASS_LABELS[v.bound]}")
        out.append(f"    {'lane':<28} {'busy':>10} {'util':>6}")
        for lane in v.lanes:
            label = f"core {lane.core} {lane.label}" if v.cores > 1 else lane.label
            out.append(f"    {label:<28} {format_us(lane.busy_us):>10} {100 * lane.utilisation:5.1f}%")
        out.append("    top lines: " + ", ".join(f"{line.line or '?'} {format_us(line.time_us)} ({100 * line.share:.0f}%)"
                                                 for line in v.top_lines[:top]))
        parts = ", ".join(f"{CLASS_LABELS.get(k, k)} {format_us(us)}" for k, us in v.critical_by_class.items()
                          if us >= 0.0005)
        out.append(f"    critical path: {v.critical_path_length} instructions ({parts})")
    return "\n".join(out) + "\n"
