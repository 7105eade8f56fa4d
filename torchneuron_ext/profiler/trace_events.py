"""A neuron Chrome trace classified once: what each event is, for every reader of the trace.

The text report (report.py) and the HTML viewer (html/model.py) used to walk a trace's events each on
their own and decide each for itself what a kernel, a copy, a dispatch or an HBM counter is. Here the
events are read once, in one pass, into a ClassifiedTrace:

- spans: every complete ("X") event, as columns in trace order (start, duration, name, category,
  lane, recorded tier, args), each in a lane: (group, pid, tid), its group (framework, runtime,
  hardware, projected, transfer) given by its category;
- activities: the device's work, one DeviceActivity per kernel, copy and kernel run inside a
  compiled region, with the op it ran, its tier, core, stream, times, bytes, FLOPs and model time
  (a compiled graph's launch, which the trace writes as the parts its kernels leave uncovered so that
  torch counts no device time twice, is read back as the one span it was);
- dispatches: the runtime's dispatch spans, with the op they dispatched (neuron_spans: activities
  and dispatches together, in trace order);
- counters (the HBM ones also per core), flow points, thread and process names, the run's numerics.

The names all come from the trace schema (torchneuron_ext/instrumentation/trace_schema.py). A classification is a
snapshot: it keeps a reference to the trace dict, and a trace changed afterwards needs classifying
again. The cost model's replay (profiler/projection.py) reads the same classification.

What cannot be placed is skipped, as Chrome's viewer does: an event that is not an object, a span or
flow point or counter sample without a usable time. A neuron event whose metadata has the wrong type
(a kernel's "bytes" that is not an integer, args that are not an object, an HBM counter without
args) is refused with a TraceFormatError naming the event, not left to fail later as a KeyError.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, NamedTuple, Optional, Union

import numpy as np

from ..instrumentation import trace_schema as S

# Lane groups, top to bottom, as Neuron Explorer's system timeline lays them out ("memory": the
# counters).
GROUPS = ("framework", "runtime", "hardware", "projected", "transfer", "memory")
# A span's lane group by its category; any other category (cpu_op, user_annotation, python_function,
# Kineto's own spans) is the framework's.
GROUP_OF_CAT = {
    S.CAT_RUNTIME: "runtime", "cuda_runtime": "runtime", "cuda_driver": "runtime",
    S.CAT_KERNEL: "hardware", S.CAT_ANNOTATION: "hardware", S.CAT_PROJECTED: "projected",
    S.CAT_MEMCPY: "transfer", S.CAT_MEMSET: "transfer",
    # An NKI launch's instruction-level profile (nki/trace.py): device work, projected on the target.
    # nki/trace.py's CAT_INSTRUCTION and CAT_LAUNCH, spelled out: importing the NKI simulator here would load it
    # with torch (tests/nki/test_kernel_trace.py checks they agree).
    "nki_instruction": "hardware", "nki_launch": "hardware",
}
# Kinds of device activity.
KERNEL = "kernel"
COPY = "copy"
REGION_KERNEL = "region kernel"  # run inside a compiled graph's launch (an annotation on the hardware lane)
COPY_OP = "aten::_copy_from"  # the op every copy ran

TraceSource = Union[str, os.PathLike, dict]


class TraceFormatError(ValueError):
    """The trace is not one this package can read; the message says which event and why."""


class DeviceActivity(NamedTuple):
    """One kernel, copy or region kernel, as its trace record gives it (missing numbers are 0). A
    named tuple: a big trace has hundreds of thousands, and a tuple is the cheapest record to make."""

    index: int  # its span's index in ClassifiedTrace.spans
    kind: str  # KERNEL, COPY or REGION_KERNEL
    name: str  # the event's name: neuron::mm, Memcpy DtoH (neuron -> host)
    op: str  # the op it ran: aten::mm, compiled::graph_0; COPY_OP for a copy
    tier: str  # "native" when the record has none
    device: int
    stream: int
    ts: float  # start, microseconds on the trace's clock
    dur: float  # microseconds, never negative
    # The bytes it moved as the report counts them: a kernel's bytes read and written; a copy's bytes
    # written (a copy moves its size once; traces without the split give its total).
    bytes: int
    bytes_read: int
    bytes_written: int
    flops: int
    elements: int
    model_ns: int  # the kernel's own model of its device time (0: none)
    direction: str  # a copy's HtoD, DtoH or DtoD ("copy" when its name says none); "" otherwise


class Dispatch(NamedTuple):
    """One runtime dispatch span: the host's side of launching an op's kernel or copy."""

    index: int
    op: str  # "" when the record names none
    tier: str
    ts: float
    dur: float


@dataclasses.dataclass
class Spans:
    """The trace's complete events, in trace order, as columns."""

    ts: np.ndarray  # float64 microseconds, on the nanosecond grid of origin_us
    dur: np.ndarray  # float64 microseconds, whole nanoseconds; negative durations read as 0
    name: list[int]  # index into ClassifiedTrace.names
    cat: list[int]  # index into ClassifiedTrace.cats
    lane: list[int]  # index into ClassifiedTrace.lanes
    tier: list[Optional[str]]  # the tier its args record, None when they record none
    args: list[Any]  # the event's args as written (None when it has none)
    # Start and end in whole nanoseconds after origin_us (a whole microsecond at or before the first
    # span). A Chrome trace's resolution is a nanosecond, but a float64 microsecond a few days into a
    # monotonic clock is only good to one: rounded here once, relative to a near origin, every reader
    # (the report's sums, the viewer's columns) counts the same nanoseconds of each span.
    start_ns: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    end_ns: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    origin_us: float = 0.0

    def __len__(self) -> int:
        return len(self.name)


@dataclasses.dataclass
class ClassifiedTrace:
    """What classify() found in one trace; the readers take it in place of the trace."""

    trace: dict  # the trace itself (not a copy)
    path: Optional[str]  # the file it was read from, None for a dict
    spans: Spans
    names: list[str]  # span names, in order of first appearance
    cats: list[str]  # span categories, in order of first appearance
    lanes: list[tuple[str, Any, Any]]  # (group, pid, tid), in order of first appearance
    activities: list[DeviceActivity]  # in trace order
    dispatches: list[Dispatch]  # in trace order
    neuron_spans: list[Union[DeviceActivity, Dispatch]]  # both, in trace order
    counters: dict[tuple[Any, str], list[tuple[float, dict]]]  # (pid, name) -> (ts, args) samples, trace order
    hbm_allocated: dict[int, list[float]]  # core -> its HBM counter's "allocated MB" samples
    flow_points: list[tuple]  # (ts, ph, id, pid, tid, bp, cat) of each flow start, step and finish
    thread_names: dict[tuple[Any, Any], str]
    process_names: dict[Any, str]
    numerics: str  # TORCHNEURON_EXT_NUMERICS of the profiled run ("host" when the trace does not say)
    skipped: int  # events that could not be placed (not an object, no usable time)

    def spans_of(self, *cats: str) -> np.ndarray:
        """Indices of the spans of these categories, in trace order."""
        ids = [self.cats.index(c) for c in cats if c in self.cats]
        if not ids or not len(self.spans):
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(np.isin(np.asarray(self.spans.cat, dtype=np.int64), ids))

    def has_cat(self, cat: str) -> bool:
        return cat in self.cats


def read_trace(trace: TraceSource) -> tuple[Any, Optional[str]]:
    """The trace dict and the file it came from: a dict is itself; a directory is its newest .json.
    What is neither a dict nor a path comes back as it is, for classify to refuse."""
    if not isinstance(trace, (str, os.PathLike)):
        return trace, None
    path = os.fspath(trace)
    if os.path.isdir(path):
        candidates = []
        for root, _, files in os.walk(path):
            candidates += [os.path.join(root, f) for f in files if f.endswith(".json")]
        if not candidates:
            raise FileNotFoundError(f"no trace .json file under {path}")
        path = max(candidates, key=os.path.getmtime)
    try:
        with open(path) as f:
            return json.load(f), path
    except json.JSONDecodeError as e:
        raise TraceFormatError(f"{path} is not a Chrome trace (JSON): {e}") from None


def classify(trace: Union[TraceSource, ClassifiedTrace], path: Optional[str] = None) -> ClassifiedTrace:
    """The trace (a dict, a trace file or a profile directory) classified; a ClassifiedTrace as it is.
    `path` names the file a dict was read from."""
    if isinstance(trace, ClassifiedTrace):
        return trace
    data, read_from = read_trace(trace)
    path = read_from or path
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise TraceFormatError("not a Chrome trace: no 'traceEvents' list")
    return _Classifier(data, path).run(events)


def _bad(i: int, what: str, name: Any, problem: str) -> TraceFormatError:
    return TraceFormatError(f"malformed trace: event {i} ({what} {name!r}): {problem}")


class _Classifier:
    """One pass over the events; the state of the pass."""

    def __init__(self, data: dict, path: Optional[str]) -> None:
        self.data, self.path = data, path

    def run(self, events: list) -> ClassifiedTrace:
        names: dict[str, int] = {}
        cats: dict[str, int] = {}
        lane_ids: dict[tuple, int] = {}
        ts_l: list[float] = []
        dur_l: list[float] = []
        name_l: list[int] = []
        cat_l: list[int] = []
        lane_l: list[int] = []
        tier_l: list[Optional[str]] = []
        args_l: list[Any] = []
        activities: list[DeviceActivity] = []
        dispatches: list[Dispatch] = []
        counters: dict[tuple, list] = {}
        hbm: dict[int, list[float]] = {}
        hbm_core: dict[str, Optional[int]] = {}  # a counter's core by its name (None: not an HBM counter)
        flow_points: list[tuple] = []
        thread_names: dict = {}
        process_names: dict = {}
        skipped = 0
        origin: Optional[float] = None  # see Spans.start_ns
        neuron_spans: list[Union[DeviceActivity, Dispatch]] = []
        # Each device span's record but its times (see _neuron_span). Tuples: one of strings and numbers leaves
        # the garbage collector's tracking, where a list per span made collections scan the whole trace (2x).
        pending: list[tuple] = []
        pending_add = pending.append
        # Plain Python over dicts, once; what the readers do after works on the columns. A loop run
        # for each of up to millions of events: its lookups are bound to locals.
        group_of, tier_key, neuron_span = GROUP_OF_CAT.get, _TIER, self._neuron_span
        ts_add, dur_add, name_add, cat_add, lane_add, tier_add, args_add = (
            ts_l.append, dur_l.append, name_l.append, cat_l.append, lane_l.append, tier_l.append, args_l.append)
        for i, e in enumerate(events):
            if not isinstance(e, dict):
                skipped += 1
                continue
            ph = e.get("ph")
            if ph == "X":
                try:
                    ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
                except (KeyError, TypeError, ValueError):
                    skipped += 1  # a complete event without a time cannot be placed
                    continue
                if not dur > 0:
                    dur = 0.0
                cat = e.get("cat", "")
                if cat.__class__ is not str:
                    cat = str(cat)
                args = e.get("args")
                if cat == _CAT_KERNEL and args.__class__ is dict and _PART in args:
                    # A launch written as the parts its kernels leave uncovered (the Kineto plugin's own_parts):
                    # read as the one launch it was, its first part standing for all.
                    launch = _launch_of(i, e, ts, args)
                    if launch is None:
                        continue
                    ts, dur = launch
                key = (group_of(cat, "framework"), e.get("pid"), e.get("tid"))
                lane = lane_ids.get(key)
                if lane is None:
                    lane = lane_ids[key] = len(lane_ids)
                ename = e.get("name", "")
                if ename.__class__ is not str:
                    ename = str(ename)
                sid = names.get(ename)
                if sid is None:
                    sid = names[ename] = len(names)
                cid = cats.get(cat)
                if cid is None:
                    cid = cats[cat] = len(cats)
                ts_add(ts)
                dur_add(dur)
                name_add(sid)
                cat_add(cid)
                lane_add(lane)
                if args:
                    tier = args.get(tier_key) if isinstance(args, dict) else None
                    tier_add(tier if isinstance(tier, str) else None)
                    args_add(args)
                else:
                    tier_add(None)
                    args_add(None)
                if cat in _DEVICE_CATS:
                    if origin is None and math.isfinite(ts):
                        origin = float(math.floor(ts))
                    # Read and checked here, in trace order; its times come from the rounded columns below.
                    record = neuron_span(i, len(ts_l) - 1, cat, ename, e)
                    if record is not None:
                        pending_add(record)
            elif ph in ("s", "f", "t"):
                try:
                    fid = e["id"]
                    hash(fid)
                    flow_points.append((float(e["ts"]), ph, fid, e.get("pid"), e.get("tid"), e.get("bp"),
                                        e.get("cat", "")))
                except (KeyError, TypeError, ValueError):
                    skipped += 1
            elif ph == "C":
                try:
                    ts = float(e["ts"])
                except (KeyError, TypeError, ValueError):
                    skipped += 1
                    continue
                cname = str(e.get("name", "counter"))
                args = e.get("args")
                core = hbm_core.get(cname, -1)
                if core == -1:
                    core = hbm_core[cname] = S.hbm_counter_core(cname)
                if core is not None:
                    if not isinstance(args, dict):
                        raise _bad(i, "counter", cname, "no 'args' object")
                    value = args.get(S.HBM_ALLOCATED_MB, 0)
                    if isinstance(value, bool) or not isinstance(value, (int, float)):
                        raise _bad(i, "counter", cname, f"{S.HBM_ALLOCATED_MB!r} is {value!r}, not a number")
                    hbm.setdefault(core, []).append(float(value))
                counters.setdefault((e.get("pid"), cname), []).append((ts, args if isinstance(args, dict) else {}))
            elif ph == "M":
                args = e.get("args")
                if not isinstance(args, dict):
                    args = {}
                if e.get("name") == "thread_name":
                    thread_names[(e.get("pid"), e.get("tid"))] = str(args.get("name", ""))
                elif e.get("name") == "process_name":
                    process_names[e.get("pid")] = str(args.get("name", ""))
        ts_a = np.array(ts_l, dtype=np.float64)
        dur_a = np.array(dur_l, dtype=np.float64)
        bad = ~np.isfinite(ts_a + dur_a)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            name_of = list(names)
            raise TraceFormatError("trace has a complete event with a non-finite time or duration "
                                   f"({name_of[name_l[k]]!r} at {ts_l[k]}, lasting {dur_l[k]})")
        if origin is None:
            origin = float(math.floor(ts_a.min())) if len(ts_a) else 0.0
        rel = ts_a - origin  # exact where it matters: times within a factor of two of the origin
        start_ns = np.rint(rel * 1000.0)
        end_ns = np.rint((rel + dur_a) * 1000.0)
        ts_a = origin + start_ns / 1000.0
        dur_a = (end_ns - start_ns) / 1000.0
        # The device spans' records take their times from the columns: one rounding, so an activity and its
        # span count the same nanoseconds.
        ts_of, dur_of = ts_a.tolist(), dur_a.tolist()
        make_activity, make_dispatch = DeviceActivity._make, Dispatch._make
        activity_add, dispatch_add, both_add = activities.append, dispatches.append, neuron_spans.append
        for record in pending:
            index = record[0]
            if len(record) == _DISPATCH_FIELDS:
                r: Union[DeviceActivity, Dispatch] = make_dispatch(record[:3] + (ts_of[index], dur_of[index]))
                dispatch_add(r)
            else:
                r = make_activity(record[:7] + (ts_of[index], dur_of[index]) + record[9:])
                activity_add(r)
            both_add(r)
        neuron = self.data.get("neuron")
        numerics = str((neuron if isinstance(neuron, dict) else {}).get("numerics", "host"))
        return ClassifiedTrace(
            trace=self.data, path=self.path,
            spans=Spans(ts_a, dur_a, name_l, cat_l, lane_l, tier_l, args_l, start_ns.astype(np.int64),
                        end_ns.astype(np.int64), origin),
            names=list(names), cats=list(cats), lanes=list(lane_ids), activities=activities, dispatches=dispatches,
            neuron_spans=neuron_spans,
            counters=counters, hbm_allocated=hbm, flow_points=flow_points, thread_names=thread_names,
            process_names=process_names, numerics=numerics, skipped=skipped)

    @staticmethod
    def _neuron_span(i: int, index: int, cat: str, name: str, e: dict) -> Optional[tuple]:
        """Classify a span of a device category: the fields of its Dispatch or DeviceActivity with None for the
        times (ts, dur), which the caller fills from the rounded columns; None for neither (an annotation
        outside compiled regions)."""
        if cat == _CAT_ANNOTATION:  # Kineto's own annotations are not the device's: only a region's kernels
            args = e.get("args")
            if not isinstance(args, dict) or args.get(_IN) != _IN_COMPILED_REGION:
                return None
        args = e.get("args")
        if args is None:
            args = {}
        try:
            tier = args.get(_TIER, "native")
            if not isinstance(tier, str):
                raise TypeError
            if cat == _CAT_RUNTIME:
                return (index, str(args.get(_OP, "")), tier, None, None)
            if cat == _CAT_KERNEL:
                kind = REGION_KERNEL if args.get(_IN) == _IN_COMPILED_REGION else KERNEL
                op, direction = S.op_name(name), ""
            elif cat == _CAT_MEMCPY:
                kind, op, direction = COPY, COPY_OP, S.copy_direction(name, default="copy")
            else:
                kind, op, direction = REGION_KERNEL, S.op_name(name), ""
            total = int(args.get(_BYTES, 0))
            written = int(args.get(_BYTES_WRITTEN, 0))
            return (index, kind, name, op, tier, int(args.get(_DEVICE, 0)), int(args.get(_STREAM, 0)), None, None,
                    (written if _BYTES_WRITTEN in args else total) if kind is COPY else total,
                    int(args.get(_BYTES_READ, 0)), written, int(args.get(_FLOPS, 0)), int(args.get(_ELEMENTS, 0)),
                    int(args.get(_MODEL_NS, 0)), direction)
        except (AttributeError, TypeError, ValueError, OverflowError):
            raise _explain(i, cat, name, args) from None


_DISPATCH_FIELDS = len(Dispatch._fields)  # a Dispatch's record is this long, a DeviceActivity's longer
assert len(DeviceActivity._fields) != _DISPATCH_FIELDS
assert Dispatch._fields[3:5] == DeviceActivity._fields[7:9] == ("ts", "dur")
_CAT_ANNOTATION, _CAT_RUNTIME, _CAT_KERNEL, _CAT_MEMCPY = S.CAT_ANNOTATION, S.CAT_RUNTIME, S.CAT_KERNEL, S.CAT_MEMCPY
_IN, _IN_COMPILED_REGION, _TIER, _OP = S.IN, S.IN_COMPILED_REGION, S.TIER, S.OP
_PART, _LAUNCH_OFFSET_NS, _LAUNCH_NS = S.PART, S.LAUNCH_OFFSET_NS, S.LAUNCH_NS
_BYTES, _BYTES_READ, _BYTES_WRITTEN, _FLOPS, _ELEMENTS, _MODEL_NS, _DEVICE, _STREAM = (
    S.BYTES, S.BYTES_READ, S.BYTES_WRITTEN, S.FLOPS, S.ELEMENTS, S.MODEL_NS, S.DEVICE, S.STREAM)
_DEVICE_CATS = frozenset((_CAT_KERNEL, _CAT_MEMCPY, _CAT_ANNOTATION, _CAT_RUNTIME))


def _launch_of(i: int, e: dict, ts: float, args: dict) -> Optional[tuple[float, float]]:
    """The (start, duration) of the launch a part belongs to, from its first part; None for the others."""
    part, offset, span = args.get(_PART), args.get(_LAUNCH_OFFSET_NS), args.get(_LAUNCH_NS)
    for key, value in ((_PART, part), (_LAUNCH_OFFSET_NS, offset), (_LAUNCH_NS, span)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise _bad(i, "kernel", e.get("name"), f"{key!r} is {value!r}, not a non-negative number")
    if part != 1:
        return None
    return ts - offset / 1000.0, span / 1000.0


_INTEGERS = (_DEVICE, _STREAM, _BYTES, _BYTES_READ, _BYTES_WRITTEN, _FLOPS, _ELEMENTS, _MODEL_NS)


def _explain(i: int, cat: str, name: str, args: Any) -> TraceFormatError:
    """What is wrong with a device span's metadata (the fast path only knows that something is)."""
    if not isinstance(args, dict):
        return _bad(i, cat, name, f"'args' is a {type(args).__name__}, not an object")
    tier = args.get(_TIER, "native")
    if not isinstance(tier, str):
        return _bad(i, cat, name, f"{_TIER!r} is {tier!r}, not a string")
    for key in _INTEGERS if cat != _CAT_RUNTIME else ():
        value = args.get(key, 0)
        try:
            int(value)
        except (TypeError, ValueError, OverflowError):
            return _bad(i, cat, name, f"{key!r} is {value!r}, not an integer")
    return _bad(i, cat, name, "unreadable metadata")


def activity_op(name: str) -> str:
    """The op of a device activity by its name alone (the cost model's projected kernels carry no
    category): COPY_OP for a copy, else the kernel's op."""
    return COPY_OP if S.is_copy(name) else S.op_name(name)
