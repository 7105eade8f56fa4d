"""Reading a neuron trace: where the time went, host against device, op by op.

`summarize_trace(path_or_dict)` reduces a Chrome trace written by torch.profiler on neuron
(`export_chrome_trace` or `NeuronProfiler.export_trace`) to a TraceSummary; `format_report`
turns that into text. Host time of an op is its dispatch span on the runtime lane (entry to
exit); device time is its kernel on the hardware lane. Beside those measured times stand the cost
model's projections for a Trainium target (torchneuron_ext.costmodel): per op, and for the whole
trace replayed on the target (projected device busy, wall and verdict). What each event is comes
from the trace's one classification (trace_events.py), which the HTML viewer reads too.
"""
from __future__ import annotations

import dataclasses
import os
from collections import defaultdict
from typing import Any, Optional, Union

from ..instrumentation import trace_schema as S
from ..trainium.projection import resolve_target
from ..trainium.targets import Target
from ._format import format_bytes, format_us
from .projection import ProjectedTimeline, project_trace, union_length
from .trace_events import COPY, REGION_KERNEL, ClassifiedTrace, Dispatch, activity_op, classify


@dataclasses.dataclass
class OpRow:
    name: str
    tier: str
    calls: int = 0
    host_us: float = 0.0
    device_us: float = 0.0
    bytes: int = 0
    projected_us: float = 0.0  # the cost model's time on the target (not a measurement)
    bound: str = ""  # what bounds its projection most often: compute, memory or launch


@dataclasses.dataclass
class ProjectedSummary:
    """The trace replayed on a Trainium target by the cost model."""

    target: str
    wall_us: float
    device_busy_us: float
    launch_us: float
    launches: int
    verdict: str

    @property
    def device_busy_share(self) -> float:
        return self.device_busy_us / self.wall_us if self.wall_us > 0 else 0.0


@dataclasses.dataclass
class TraceSummary:
    wall_us: float
    device_busy_us: float
    host_dispatch_us: float
    ops: list[OpRow]
    generic_ops: dict[str, int]
    transfers: dict[str, tuple[int, int]]  # direction -> (count, bytes)
    peak_hbm_bytes: dict[int, int]
    kernels: int
    cores: list[int]
    projected: Optional[ProjectedSummary] = None
    numerics: str = "host"  # TORCHNEURON_EXT_NUMERICS of the profiled run

    @property
    def device_busy_share(self) -> float:
        return self.device_busy_us / self.wall_us if self.wall_us > 0 else 0.0

    @property
    def verdict(self) -> str:
        if self.kernels == 0:
            return "no device activity"
        return "device-bound" if self.device_busy_share >= 0.5 else "host-bound"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["device_busy_share"] = self.device_busy_share
        d["verdict"] = self.verdict
        if self.projected is not None:
            d["projected"]["device_busy_share"] = self.projected.device_busy_share
        return d


def summarize_trace(trace: Union[str, os.PathLike, dict, ClassifiedTrace],
                    target: Optional[Union[str, Target]] = None, *,
                    projection: Optional[ProjectedTimeline] = None) -> TraceSummary:
    """The trace's summary; `target` (default NEURON_EMU_TARGET, trn2) is the projection's. A trace
    already classified (trace_events.classify) is read from its classification, not walked again;
    `projection`, the trace's projection when the caller has it (add_projected_lanes
    returns it), is not computed again."""
    c = classify(trace)
    if projection is not None and target is not None and \
            projection.target.label != resolve_target(target).label:
        raise ValueError(f"the projection is on {projection.target.label}, the summary's target is "
                         f"{resolve_target(target).label}")
    rows: dict[str, OpRow] = {}
    host = 0.0
    generic: dict[str, int] = defaultdict(int)
    transfers: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    cores: set[int] = set()
    # Rows in the trace's order of kernels, copies and dispatches: an op's row takes the tier of its
    # first record, and ops that tie keep that order.
    for a in c.neuron_spans:
        if isinstance(a, Dispatch):
            host += a.dur
            if a.op:
                rows.setdefault(a.op, OpRow(a.op, a.tier)).host_us += a.dur
            continue
        if a.kind == REGION_KERNEL:  # part of its compiled graph's launch, timed by the graph
            continue
        row = rows.setdefault(a.op, OpRow(a.op, a.tier))
        row.calls += 1
        row.device_us += a.dur
        row.bytes += a.bytes
        if a.kind == COPY:
            transfers[a.direction][0] += 1
            transfers[a.direction][1] += a.bytes
        else:
            cores.add(a.device)
            if a.tier == "generic":
                generic[a.op] += 1
    kernels = [(a.ts, a.ts + a.dur) for a in c.activities if a.kind != REGION_KERNEL]
    # Wall: from the first to the last span of the framework, the runtime and the device.
    measured = c.spans_of(S.CAT_CPU_OP, S.CAT_KERNEL, S.CAT_MEMCPY, S.CAT_RUNTIME, S.CAT_USER_ANNOTATION)
    wall = 0.0
    if len(measured):
        t_min = float(c.spans.ts[measured].min())
        t_max = float((c.spans.ts[measured] + c.spans.dur[measured]).max())
        wall = t_max - t_min if t_max > t_min else 0.0
    # At least 0: a counter that reads below zero means nothing is allocated.
    peak = {core: max(0, *(int(mb * 2**20) for mb in samples)) for core, samples in c.hbm_allocated.items()}
    projected = _project(projection or project_trace(c, target), rows)
    ops = sorted(rows.values(), key=lambda r: (r.device_us, r.host_us), reverse=True)
    return TraceSummary(
        projected=projected, wall_us=wall, device_busy_us=union_length(kernels), host_dispatch_us=host, ops=ops,
        generic_ops=dict(sorted(generic.items(), key=lambda kv: -kv[1])),
        transfers={k: (v[0], v[1]) for k, v in sorted(transfers.items())},
        peak_hbm_bytes=dict(sorted(peak.items())), kernels=len(kernels), cores=sorted(cores),
        numerics=c.numerics,
    )


def _project(timeline: ProjectedTimeline, rows: dict[str, OpRow]) -> ProjectedSummary:
    bounds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for k in timeline.kernels:
        op = activity_op(k.name)
        row = rows.get(op)
        if row is None:
            continue
        row.projected_us += k.duration_us
        bounds[op][k.projection.bound] += k.duration_us
    for op, by_bound in bounds.items():
        rows[op].bound = max(by_bound.items(), key=lambda kv: kv[1])[0]
    return ProjectedSummary(target=timeline.target.label, wall_us=timeline.wall_us,
                            device_busy_us=timeline.busy_us, launch_us=timeline.launch_us,
                            launches=sum(1 for k in timeline.kernels if k.projection.launch_s > 0),
                            verdict=timeline.verdict)


_PROJECTED_ADVICE = {
    "host-bound": ["    on the target the device would idle between kernels: the host's own work per kernel is the",
                   "    cost; give each dispatch more work (bigger batches, fused ops, torch.compile)"],
    "launch-bound": ["    on the target most device time would be per-kernel launch overhead, not work:",
                     "    fewer, larger kernels (torch.compile, fused ops) cut it"],
    "device-bound": ["    on the target the kernels' own work dominates: look at the top ops by projected time",
                     "    and their bound (compute: the engine's peak; memory: HBM bandwidth)"],
}


def format_report(summary: TraceSummary, top: int = 15) -> str:
    s = summary
    lines = ["neuron profile report", "=" * 21]
    if s.numerics != "host":  # the numbers (and precision bugs) are Trainium's, not the host's
        lines.append(f"numerics             {s.numerics} (TORCHNEURON_EXT_NUMERICS: float64 computed in float32, "
                     "int64 in int32, fresh memory NaN / 0xA5)")
    lines.append(f"wall time            {format_us(s.wall_us)}")
    lines.append(f"device busy          {format_us(s.device_busy_us)} ({100 * s.device_busy_share:.1f}% of wall)")
    lines.append(f"host dispatch        {format_us(s.host_dispatch_us)}")
    lines.append(f"kernels              {s.kernels} on core(s) {', '.join(map(str, s.cores)) or '-'}")
    lines.append(f"verdict              {s.verdict}")
    if s.verdict == "host-bound":
        lines.append("  the device waits on the host between kernels: fuse ops (torch.compile, fused ops such as")
        lines.append("  torch.rms_norm) or batch more work per op")
    elif s.verdict == "device-bound":
        lines.append("  kernels dominate: look at the top ops by device time")
    p = s.projected
    if p is not None:
        lines.append("")
        lines.append(f"projected on {p.target} (cost model, docs/cost_model.md; not a measurement)")
        lines.append(f"  device busy        {format_us(p.device_busy_us)} ({100 * p.device_busy_share:.1f}% of "
                     "projected wall)")
        lines.append(f"  wall               {format_us(p.wall_us)}")
        lines.append(f"  launches           {p.launches}, {format_us(p.launch_us)} of launch overhead")
        lines.append(f"  verdict            {p.verdict}")
        lines += _PROJECTED_ADVICE.get(p.verdict, [])
    lines.append("")
    lines.append(f"top ops by device time (of {len(s.ops)}; projected: the cost model's)")
    header = (f"  {'op':<40}{'tier':<9}{'calls':>6}{'host':>11}{'device':>11}{'bytes':>11}"
              f"{'projected':>11}  bound")
    lines += [header, "  " + "-" * (len(header) - 2)]
    for r in s.ops[:top]:
        lines.append(f"  {r.name[:39]:<40}{r.tier:<9}{r.calls:>6}{format_us(r.host_us):>11}{format_us(r.device_us):>11}"
                     f"{format_bytes(r.bytes):>11}{format_us(r.projected_us):>11}  {r.bound or '-':<7}".rstrip())
    if p is not None and any(r.projected_us for r in s.ops):
        lines.append("")
        lines.append(f"top ops by projected time on {p.target}")
        for r in sorted(s.ops, key=lambda r: r.projected_us, reverse=True)[:5]:
            if r.projected_us <= 0:
                break
            share = 100 * r.projected_us / p.device_busy_us if p.device_busy_us else 0.0
            lines.append(f"  {r.name[:39]:<40}{format_us(r.projected_us):>11}{share:>6.1f}%  {r.bound}")
    lines.append("")
    if s.generic_ops:
        total = sum(s.generic_ops.values())
        lines.append(f"generic-path ops ({total} of {s.kernels} kernels ran a host kernel without a native one)")
        for name, n in list(s.generic_ops.items())[:10]:
            lines.append(f"  {name:<40}{n:>6} calls")
    else:
        lines.append("generic-path ops     none")
    lines.append("")
    if s.transfers:
        lines.append("transfers")
        for direction, (count, nbytes) in s.transfers.items():
            lines.append(f"  {direction:<10}{count:>6} copies {format_bytes(nbytes):>12}")
    else:
        lines.append("transfers            none")
    if s.peak_hbm_bytes:
        lines.append("")
        lines.append("peak HBM allocated   " + ", ".join(f"NC{c} {format_bytes(b)}" for c, b in s.peak_hbm_bytes.items()))
    return "\n".join(lines) + "\n"
