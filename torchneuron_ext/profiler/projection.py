"""The projected timeline: a trace's device activities replayed on a Trainium target, and its lanes.

The formulas that cost one activity are trainium/projection.py's; here a whole trace (or the
op_stats() rows) is replayed on them. The activities come from the trace's one classification
(trace_events.classify), so the projection reads exactly the kernels, copies and compiled-region
kernels the report and the viewer read. The projected lanes are written back into the Chrome trace
under the trace schema's names (instrumentation/trace_schema.py).
"""
from __future__ import annotations

import bisect
import dataclasses
import os
from typing import Any, Iterable, Optional, Union

from ..instrumentation import trace_schema as S
from ..trainium.projection import CONV_GROUPS_ARG, CONV_WEIGHT_ARG, Projection, copy, project, resolve_target
from ..trainium.targets import Target
from .trace_events import COPY, ClassifiedTrace, classify

PROJECTED_TID_BASE = S.PROJECTED_TID_BASE
PROJECTED_STREAM_TID_BASE = S.PROJECTED_STREAM_TID_BASE
_NEURON_PID = S.NEURON_PID
# The host's own spans: what the projected clock keeps of the measured one.
_HOST_CATS = (S.CAT_CPU_OP, S.CAT_USER_ANNOTATION, S.CAT_RUNTIME, S.CAT_PYTHON)
_COLLECTIVE, _COMPILED = "collective", "compiled"


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


def _op_input_dims(events: list) -> dict[Any, Any]:
    """torch's cpu_op events recorded with record_shapes=True: their "Input Dims" by correlation id
    ("External id", which the runtime span and the kernel of the op share)."""
    dims: dict[Any, Any] = {}
    for e in events:
        if isinstance(e, dict) and e.get("cat") == S.CAT_CPU_OP:
            a = e.get("args")
            if isinstance(a, dict) and S.INPUT_DIMS in a and "External id" in a:
                dims[a["External id"]] = (e.get("name", ""), a[S.INPUT_DIMS])  # the innermost op wins
    return dims


def _input_dims(args: dict[str, Any], op_dims: dict[Any, Any], op: str) -> Optional[tuple]:
    """A kernel's operand shapes, hashable: its own "Input Dims" (the dry run writes them), else those of
    its framework op of the same name (a trace recorded with record_shapes=True), else None (the
    roofline fallback)."""
    if not isinstance(args, dict):
        return None
    dims = args.get(S.INPUT_DIMS)
    if dims is None and op_dims:
        ext = args.get("External id")
        named = op_dims.get(ext) if isinstance(ext, (int, str)) else None
        if named is not None and named[0].split("::")[-1] == op.split("::")[-1]:
            dims = named[1]
    if dims is None:
        return None
    if not isinstance(dims, (list, tuple)):
        return None
    try:
        return tuple(tuple(int(x) for x in d) if isinstance(d, (list, tuple)) else () for d in dims)
    except (TypeError, ValueError, OverflowError):
        return None


def project_trace(trace: Union[dict[str, Any], ClassifiedTrace], target: Optional[Union[Target, str]] = None,
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
    if isinstance(trace, ClassifiedTrace):
        c = trace
    else:
        c = classify(trace if "traceEvents" in trace else dict(trace, traceEvents=[]))
    if group_size is None:
        info = c.trace.get("distributedInfo") or {}
        group_size = int(info.get("world_size", os.environ.get("WORLD_SIZE", "1")) or 1)
    host = c.spans_of(*_HOST_CATS)
    # Kernels run inside a compiled graph are its children: annotations on the hardware lane.
    device = sorted(c.activities, key=lambda a: (a.ts, -a.dur))
    if not len(host) and not device:
        return ProjectedTimeline(t, [], 0.0, 0.0)
    starts, finishes = [], []
    if len(host):
        starts.append(float(c.spans.ts[host].min()))
        finishes.append(float((c.spans.ts[host] + c.spans.dur[host]).max()))
    if device:
        starts.append(device[0].ts)  # sorted by start
        finishes.append(max(a.ts + a.dur for a in device))
    origin, host_end = min(starts), max(finishes)

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
    op_dims = _op_input_dims(c.trace.get("traceEvents") or [])
    lane_end: dict[tuple[int, int], float] = {}
    # core -> [measured end, the graph's kernel, its own projected duration, its children's so far]
    graphs: dict[int, list] = {}
    for a in device:
        args = c.spans.args[a.index] or {}
        ts, dur, core, stream, tier, name = a.ts, a.dur, a.device, a.stream, a.tier, a.name
        is_copy = a.kind == COPY
        graph = graphs.get(core)
        inside = graph is not None and ts < graph[0]
        # Traces without the split (older exports) give the total under "bytes".
        read = a.bytes_read if S.BYTES_READ in args else int(args.get(S.BYTES, 0))
        # A collective's own group (a subgroup is not the world); older traces: the trace's world size.
        ranks = int(args.get(S.GROUP_SIZE, 0) or group_size) if tier == _COLLECTIVE else 1
        dims = _input_dims(args, op_dims, S.op_name(name)) if a.flops and not is_copy else None
        key = (name, tier, read, a.bytes_written, a.flops, a.elements, str(args.get(S.DTYPE, "")), a.model_ns,
               inside, is_copy, ranks, dims, tuple(args.get(CONV_WEIGHT_ARG) or ()), int(args.get(CONV_GROUPS_ARG, 1)))
        proj = memo.get(key)
        if proj is None:  # a loop's kernels repeat: project each distinct one once
            proj = memo[key] = project(
                S.op_name(name), tier, read, a.bytes_written, a.flops, a.elements, key[6], t, a.model_ns, ranks,
                launch=not inside, copy_direction=S.copy_direction(name) if is_copy else "", input_dims=dims,
                conv_weight=key[12] or None, conv_groups=key[13])
        # A graph's kernels were dispatched with it (one launch).
        dispatch = graph[1].dispatch_us if inside else compressed(ts)
        lane = (core, -1 if tier == _COLLECTIVE else stream)
        if inside:
            # One launch, then the graph's kernels back to back on the device. The graph's record
            # sums its kernels' bytes and FLOPs without their dtypes; once its children are seen,
            # they (each with its own dtype) make its duration.
            parent = graph[1]
            start = parent.start_us + parent.projection.launch_s * 1e6 + graph[3]
            graph[3] += proj.duration_s * 1e6
            parent.duration_us = parent.projection.launch_s * 1e6 + graph[3]
        else:
            start = max(dispatch, lane_end.get(lane, origin))
        k = ProjectedKernel(name, tier, core, stream, dispatch, start, proj.duration_s * 1e6, dur, proj)
        out.append(k)
        if inside:
            lane_end[(graph[1].core, graph[1].stream)] = graph[1].start_us + graph[1].duration_us
            continue
        lane_end[lane] = start + k.duration_us
        if tier == _COMPILED and name.split("::")[-1].startswith("graph_"):
            graphs[core] = [ts + dur, k, k.duration_us, 0.0]
        # A collective runs beside the host (async_op); every other activity held the host here.
        if tier != _COLLECTIVE and (not ends or ts + dur >= ends[-1]):
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
        collective = k.tier == _COLLECTIVE
        if collective or k.stream == 0:
            tid = PROJECTED_TID_BASE + 2 * k.core + collective
            what = S.LANE_PROJECTED_COLLECTIVES if collective else S.LANE_PROJECTED
            lanes.setdefault(tid, (tid, f"NC{k.core}{what} ({label})"))
        else:
            tid = stream_tids.get((k.core, k.stream))
            if tid is None:
                tid = stream_tids[(k.core, k.stream)] = PROJECTED_STREAM_TID_BASE + len(stream_tids)
                # Sorted after its core's lanes (ties keep tid order).
                lanes[tid] = (PROJECTED_TID_BASE + 2 * k.core + 1,
                              f"NC{k.core}{S.LANE_PROJECTED_STREAM}{k.stream} ({label})")
        model_args = base.get(id(k.projection))
        if model_args is None:
            model_args = base[id(k.projection)] = k.projection.args(timeline.target)
        args = dict(model_args)
        args.update({S.TIER: k.tier, S.DEVICE: k.core, S.STREAM: k.stream,
                     "dispatch ts": round(k.dispatch_us, 3), "measured us": round(k.measured_us, 3)})
        events.append({"ph": "X", "cat": S.CAT_PROJECTED, "name": k.name, "pid": _NEURON_PID, "tid": tid,
                       "ts": round(k.start_us, 3), "dur": round(k.duration_us, 3), "args": args})
    for tid, (sort_index, name) in sorted(lanes.items()):
        events.append({"ph": "M", "name": "thread_name", "pid": _NEURON_PID, "tid": tid, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": _NEURON_PID, "tid": tid,
                       "args": {"sort_index": sort_index}})
    return events


def add_projected_lanes(trace: dict[str, Any], target: Optional[Union[Target, str]] = None) -> ProjectedTimeline:
    """Project the trace and append the projected lanes to its events (idempotent)."""
    events = trace.setdefault("traceEvents", [])
    events[:] = [e for e in events if e.get("cat") != S.CAT_PROJECTED and not (
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
