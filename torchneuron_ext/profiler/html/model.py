"""A Chrome trace reduced to what the HTML viewer draws: lanes, events in columns, flows, counters.

The page must open a trace of a million events in a couple of seconds, so events are not embedded
as one JSON object each. They are stored as typed columns (start and duration in nanoseconds, name
index, lane, ...) in one binary blob, deflated and base64-encoded; the page inflates it with the
browser's DecompressionStream and reads the columns as typed arrays without parsing per event.
Each event's args (JSON text, found through the argLength column) are a second blob the page
inflates only after it has opened.

Events are ordered by lane, then row (nesting depth), then start, so each row is one contiguous,
non-overlapping, start-sorted range: the timeline finds what is on screen by binary search.

What each event is (its lane, its tier, a flow point, a counter sample) is the trace's one
classification (profiler/trace_events.py), which the text report reads too; this module lays it out.
"""
from __future__ import annotations

import base64
import json
import zlib
from collections import defaultdict
from typing import Any, Union

import numpy as np

from ...instrumentation import trace_schema as S
from ..trace_events import GROUPS, ClassifiedTrace, classify

# An event's tier as an index into this ("": none), the enumerator's tiers in its order.
TIERS = ("",) + S.TIERS
_ESCAPE = 0xFFFFFFFF  # in a uint32 time column: the value is the next one of the escape column
try:  # optional: several times faster on big traces; the standard library does the same job
    import orjson

    def _encode_args(args: Any) -> bytes:
        return orjson.dumps(args, default=str, option=orjson.OPT_NON_STR_KEYS)
except ImportError:
    _json_encode = json.JSONEncoder(separators=(",", ":"), default=str).encode

    def _encode_args(args: Any) -> bytes:
        return _json_encode(args).encode()


class _Columns:
    """Little-endian typed columns packed into one buffer, each aligned for its typed array."""

    _DTYPES = {"f64": "<f8", "f32": "<f4", "u32": "<u4", "u16": "<u2", "u8": "u1", "i32": "<i4"}

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self.index: dict[str, list] = {}

    def add(self, name: str, dtype: str, values: Any) -> None:
        data = np.ascontiguousarray(values, dtype=self._DTYPES[dtype])
        pad = (-self._size) % 8
        if pad:
            self._parts.append(b"\0" * pad)
            self._size += pad
        self.index[name] = [dtype, self._size, int(data.size)]
        self._parts.append(data.tobytes())
        self._size += data.nbytes

    def add_ns(self, label: str, ns: np.ndarray) -> None:
        """Non-negative integer nanoseconds as uint32 `<label>Ns`; a value too large for uint32 is
        written as 0xFFFFFFFF and kept, in order, in float64 `<label>Escapes`."""
        big = ns >= _ESCAPE
        self.add(label + "Ns", "u32", np.where(big, _ESCAPE, ns))
        self.add(label + "Escapes", "f64", ns[big].astype(np.float64))

    def encode(self) -> str:
        return _pack(b"".join(self._parts))


def _pack(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data, 6)).decode("ascii")


def _lane_label(group: str, pid: Any, tid: Any, thread_names: dict, process_names: dict) -> str:
    name = thread_names.get((pid, tid))
    if group == "framework":
        # Kineto names its own spans with string pids and tids ("Spans" / "PyTorch Profiler").
        proc = process_names.get(pid) or (pid if isinstance(pid, str) else f"pid {pid}")
        return f"{proc} / {name or (tid if isinstance(tid, str) else f'thread {tid}')}"
    return name or f"{group} {tid}"


def build_profile(trace: Union[dict, ClassifiedTrace], name: str, source: str = "") -> dict[str, Any]:
    """Reduce one Chrome trace (a dict with "traceEvents", or its classification) to the viewer's
    profile record."""
    c = classify(trace)
    spans = c.spans
    n = len(spans)
    tier_index = {t: k for k, t in enumerate(TIERS)}
    blobs = [_encode_args(args) if args else b"" for args in spans.args]
    start = spans.ts
    dur = spans.dur
    end = start + dur
    lane_ids = {key: k for k, key in enumerate(c.lanes)}
    lane_of = np.array(spans.lane, dtype=np.int64)
    counters = c.counters
    thread_names, process_names = c.thread_names, c.process_names
    bounds = [start.min(), end.max()] if n else []
    for samples in counters.values():
        bounds += [min(t for t, _ in samples), max(t for t, _ in samples)]
    t_min, t_max = (float(min(bounds)), float(max(bounds))) if bounds else (0.0, 0.0)

    # Lanes top to bottom: by group, framework lanes by process and thread, device lanes by tid.
    keys = sorted(lane_ids, key=lambda k: (GROUPS.index(k[0]), str(k[1]) if k[0] == "framework" else "",
                                           _num(k[2]), str(k[2])))
    if len(keys) > 65535:
        raise ValueError(f"trace has {len(keys)} lanes; the viewer supports up to 65535")
    rank = np.empty(max(len(keys), 1), dtype=np.int64)
    for r, k in enumerate(keys):
        rank[lane_ids[k]] = r
    lane_rank = rank[lane_of] if n else lane_of

    # Rows: the nesting depth within a lane. Parents first (earlier start, then longer), and a span
    # opens a new row only while an enclosing one is still open, so within a row spans never overlap
    # and are sorted by start and by end: the page binary-searches them.
    # In whole nanoseconds, the columns' own values: the float microseconds of a trace with an epoch origin
    # (about 1.7e15 us) carry a quarter of a microsecond, so spans 1 ns apart could share a row and overlap.
    start_ns, end_ns = spans.start_ns, np.maximum(spans.end_ns, spans.start_ns)
    by_start = np.lexsort((-end_ns, start_ns, lane_rank))
    depth = np.empty(n, dtype=np.int64)
    depth_sorted = _depths(lane_rank[by_start].tolist(), start_ns[by_start].tolist(), end_ns[by_start].tolist())
    depth[by_start] = depth_sorted
    rows_of_lane = np.zeros(len(keys), dtype=np.int64)
    if n:
        np.maximum.at(rows_of_lane, lane_rank, depth + 1)
    rows_of_lane = np.maximum(rows_of_lane, 1)
    first_row = np.concatenate(([0], np.cumsum(rows_of_lane)[:-1])).astype(np.int64)
    final = np.lexsort((start_ns, depth, lane_rank))  # lane, then row, then start
    row_id = first_row[lane_rank] + depth
    row_starts = np.zeros(int(rows_of_lane.sum()) + 1, dtype=np.uint32)
    if n:
        row_starts[1:] = np.cumsum(np.bincount(row_id, minlength=int(rows_of_lane.sum())))
    index_of = np.empty(n, dtype=np.int64)
    index_of[final] = np.arange(n)

    lane_records = []
    for r, (group, pid, tid) in enumerate(keys):
        lane_records.append({
            "group": group, "label": _lane_label(group, pid, tid, thread_names, process_names),
            "pid": pid if isinstance(pid, (int, str)) else str(pid), "tid": tid if isinstance(tid, (int, str)) else str(tid),
            "rows": int(rows_of_lane[r]), "firstRow": int(first_row[r]),
        })

    flows = _resolve_flows(c.flow_points, keys, lane_ids, lane_of, start, end, index_of)
    lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=n)
    if lengths.sum() >= 2**32:
        raise ValueError("the trace's event arguments exceed 4 GiB; the viewer cannot embed them")
    # Columns compress best as small integers: times in whole nanoseconds (a Chrome trace's
    # resolution), starts as deltas within each row, args as lengths, flow sources (sorted) as deltas.
    cols = _Columns()
    # The classification's nanoseconds (Spans.start_ns), moved to t_min: the same whole nanoseconds the
    # report sums, and spans that touched or were apart never overlap.
    t_min_ns = int(np.rint((t_min - spans.origin_us) * 1000.0))
    start_ns = spans.start_ns[final] - t_min_ns
    delta = np.diff(start_ns, prepend=0)
    firsts = row_starts[:-1][row_starts[:-1] < row_starts[1:]].astype(np.int64)
    delta[firsts] = start_ns[firsts]
    cols.add_ns("start", delta)
    cols.add_ns("dur", np.maximum(spans.end_ns[final] - spans.start_ns[final], 0))
    cols.add("name", "u32", np.array(spans.name, dtype=np.uint32)[final] if n else [])
    cols.add("lane", "u16", lane_rank[final])
    # Categories past the 255th share the last index (the column is a byte).
    cols.add("cat", "u8", np.minimum(np.array(spans.cat, dtype=np.int64), 255)[final] if n else [])
    cols.add("tier", "u8", np.array([tier_index.get(t, 0) for t in spans.tier], dtype=np.uint8)[final] if n else [])
    cols.add("rowStart", "u32", row_starts)
    cols.add("argLength", "u32", lengths[final])
    cols.add("flowFromDelta", "u32", np.diff(flows[:, 0].astype(np.int64), prepend=0))
    cols.add("flowTo", "u32", flows[:, 1])
    counter_records = []
    for (pid, cname), samples in sorted(counters.items(), key=lambda kv: (_counter_core(kv[0][1]), kv[0][1])):
        samples = sorted(samples, key=lambda sample: sample[0])  # the classification stays as it was
        names: dict[str, None] = {}
        for _, args in samples:
            names.update((k, None) for k, v in args.items() if isinstance(v, (int, float)))
        prefix = f"counter{len(counter_records)}"
        ts_ns = np.rint((np.array([t for t, _ in samples], dtype=np.float64) - spans.origin_us) * 1000.0).astype(np.int64) - t_min_ns
        cols.add_ns(prefix + ".ts", np.diff(ts_ns, prepend=0))
        for sname in names:
            # A sample without this series holds its previous value (0 before the first one).
            vals, last = [], 0.0
            for _, args in samples:
                v = args.get(sname)
                if isinstance(v, (int, float)):
                    last = float(v)
                vals.append(last)
            cols.add(f"{prefix}.v.{sname}", "f64", vals)
        counter_records.append({"label": cname, "pid": pid if isinstance(pid, (int, str)) else str(pid),
                                "column": prefix, "series": list(names), "samples": len(samples)})
    return {
        "name": name, "source": source, "t0": t_min, "duration": t_max - t_min, "events": n,
        "lanes": lane_records, "groups": list(GROUPS), "tiers": list(TIERS), "strings": list(c.names),
        "cats": list(c.cats), "counters": counter_records, "flows": int(len(flows)),
        "columns": cols.index, "blob": cols.encode(),
        # Event args are most of the bytes and only needed once an event is clicked: a blob of their
        # own, inflated by the page after it has opened.
        "argsBlob": _pack(b"".join([blobs[i] for i in final.tolist()])),
    }


def _depths(lanes: list, starts: list, ends: list) -> list[int]:
    """Nesting depth of each span, given spans sorted by lane, start, then longest first."""
    out = [0] * len(starts)
    stack: list[float] = []
    current = None
    for k, (lane, s, e) in enumerate(zip(lanes, starts, ends)):
        if lane != current:
            current, stack = lane, []
        while stack and stack[-1] <= s:
            stack.pop()
        out[k] = len(stack)
        stack.append(e)
    return out


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("inf")


def _counter_core(name: str) -> float:
    """'NC3 HBM' sorts as core 3."""
    if name.startswith("NC"):
        return _num(name[2:].split()[0])
    return float("inf")


def _resolve_flows(points: list[tuple], keys: list[tuple], lane_ids: dict, lane_of: np.ndarray,
                   start: np.ndarray, end: np.ndarray, index_of: np.ndarray) -> np.ndarray:
    """Bind each flow's start and finish to events, as Chrome's trace viewer does: a point binds to
    the innermost slice enclosing it on its thread; a finish without bp="e" binds to the next slice
    that starts at or after it. Returns (from, to) event indices, sorted."""
    empty = np.zeros((0, 2), dtype=np.uint32)
    if not points or not len(start):
        return empty
    # Events of each thread (a thread's events can sit in several lanes), by start, parents first.
    thread_ids: dict[tuple, int] = {}
    thread_of_lane = np.empty(len(lane_ids), dtype=np.int64)
    for key in keys:
        thread_of_lane[lane_ids[key]] = thread_ids.setdefault((key[1], key[2]), len(thread_ids))
    thread_of = thread_of_lane[lane_of]
    order_all = np.lexsort((-end, start, thread_of))
    bounds = np.searchsorted(thread_of[order_all], np.arange(len(thread_ids) + 1))
    points_of_thread: dict[int, list[int]] = defaultdict(list)
    for k, p in enumerate(points):
        t = thread_ids.get((p[3], p[4]))
        if t is not None:
            points_of_thread[t].append(k)
    bound_arr = np.full(len(points), -1, dtype=np.int64)
    eps = 1e-6
    for thread, pks in points_of_thread.items():
        order = order_all[bounds[thread]:bounds[thread + 1]]
        s = start[order]
        e = end[order].tolist()
        ts = [points[k][0] for k in pks]
        ts_arr, pks_arr = np.array(ts), np.array(pks)
        cand_arr = np.searchsorted(s, ts_arr + eps, side="right") - 1
        index = index_of[order]
        # Most points fall inside the slice that starts last before them; only the rest need a walk.
        direct = (cand_arr >= 0) & (end[order][np.maximum(cand_arr, 0)] + eps >= ts_arr)
        bound_arr[pks_arr[direct]] = index[cand_arr[direct]]
        cand = cand_arr.tolist()
        for j in np.flatnonzero(~direct).tolist():
            k = pks[j]
            t, c = ts[j], cand[j]
            hit = -1
            for i in range(c, max(c - 256, -1), -1):  # innermost enclosing: latest start still covering t
                if e[i] + eps >= t:
                    hit = i
                    break
            ph, bp = points[k][1], points[k][5]
            if hit < 0 and ph != "s" and bp != "e" and c + 1 < len(s):
                hit = c + 1  # a finish binds to the next slice
            if hit >= 0:
                bound_arr[k] = index[hit]
    bound = bound_arr.tolist()
    open_flows: dict[tuple, int] = {}
    early: dict[tuple, list[int]] = {}  # finishes seen before their start
    flows: list[tuple[int, int]] = []
    # In time order, a start before a finish at the same time. The device's clock is shifted onto
    # the profiler's, so a dispatch can appear to begin a hair before the op that launched it: a
    # finish that comes before its start waits for it.
    time_order = np.lexsort((np.array([p[1] != "s" for p in points]), np.array([p[0] for p in points])))
    for k in time_order.tolist():
        _, ph, fid, _, _, _, cat = points[k]
        key = (cat, fid)
        if ph == "s":
            if bound[k] >= 0:
                open_flows[key] = bound[k]
                for dst in early.pop(key, []):
                    if dst != bound[k]:
                        flows.append((bound[k], dst))
            continue
        src = open_flows.get(key)
        if bound[k] < 0:
            continue
        if src is None:
            early.setdefault(key, []).append(bound[k])
            continue
        if bound[k] == src:
            continue
        flows.append((src, bound[k]))
        if ph == "t":
            open_flows[key] = bound[k]  # a step continues the chain from where it landed
    if not flows:
        return empty
    out = np.array(sorted(flows), dtype=np.uint32)
    return out
