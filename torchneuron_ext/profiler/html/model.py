"""A Chrome trace reduced to what the HTML viewer draws: lanes, events in columns, flows, counters.

The page must open a trace of a million events in a couple of seconds, so events are not embedded
as one JSON object each. They are stored as typed columns (float64 start, float32 duration, uint32
name index, ...) in one binary blob, deflated and base64-encoded; the page inflates it with the
browser's DecompressionStream and reads the columns as typed arrays without parsing per event.

Events are ordered by lane, then row (nesting depth), then start, so each row is one contiguous,
non-overlapping, start-sorted range: the timeline finds what is on screen by binary search.
"""
from __future__ import annotations

import base64
import bisect
import json
import struct
import zlib
from collections import defaultdict
from typing import Any, Optional

# Lane groups, top to bottom, as Neuron Explorer's system timeline lays them out.
GROUPS = ("framework", "runtime", "hardware", "transfer", "memory")
_GROUP_OF_CAT = {
    "privateuse1_runtime": "runtime", "cuda_runtime": "runtime", "cuda_driver": "runtime",
    "kernel": "hardware", "gpu_user_annotation": "hardware",
    "gpu_memcpy": "transfer", "gpu_memset": "transfer",
}
TIERS = ("", "native", "generic", "compiled")


class _Columns:
    """Little-endian typed columns packed into one buffer, each aligned for its typed array."""

    _FORMATS = {"f64": "d", "f32": "f", "u32": "I", "u16": "H", "u8": "B", "i32": "i"}

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self.index: dict[str, list] = {}

    def add(self, name: str, dtype: str, values: Any) -> None:
        fmt = self._FORMATS[dtype]
        width = struct.calcsize(fmt)
        pad = (-self._size) % 8
        if pad:
            self._parts.append(b"\0" * pad)
            self._size += pad
        n = len(values)
        if hasattr(values, "tobytes"):  # array.array of the right type
            data = values.tobytes()
        else:
            data = struct.pack(f"<{n}{fmt}", *values)
        self.index[name] = [dtype, self._size, n]
        self._parts.append(data)
        self._size += n * width

    def add_bytes(self, name: str, data: bytes) -> None:
        self.index[name] = ["u8", self._size, len(data)]
        self._parts.append(data)
        self._size += len(data)

    def encode(self) -> str:
        return base64.b64encode(zlib.compress(b"".join(self._parts), 6)).decode("ascii")


def _lane_label(group: str, pid: Any, tid: Any, thread_names: dict, process_names: dict) -> str:
    name = thread_names.get((pid, tid))
    if group == "framework":
        # Kineto names its own spans with string pids and tids ("Spans" / "PyTorch Profiler").
        proc = process_names.get(pid) or (pid if isinstance(pid, str) else f"pid {pid}")
        return f"{proc} / {name or (tid if isinstance(tid, str) else f'thread {tid}')}"
    return name or f"{group} {tid}"


def _assign_rows(spans: list[tuple[float, float, int]]) -> list[int]:
    """Nesting depth of each (start, end, i) span, start-sorted with parents first: within one depth
    spans never overlap, which is what lets the page binary-search a row."""
    depth = [0] * len(spans)
    stack: list[float] = []
    for k, (start, end, _) in enumerate(spans):
        while stack and stack[-1] <= start:
            stack.pop()
        depth[k] = len(stack)
        stack.append(end)
    return depth


def build_profile(trace: dict, name: str, source: str = "") -> dict[str, Any]:
    """Reduce one Chrome trace (a dict with "traceEvents") to the viewer's profile record."""
    from array import array

    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        raise ValueError("not a Chrome trace: no 'traceEvents' list")
    thread_names: dict = {}
    process_names: dict = {}
    lanes: dict[tuple, dict] = {}  # (group, pid, tid) -> lane record
    spans: dict[tuple, list] = defaultdict(list)  # lane key -> [(start, end, event position)]
    flow_points: list[tuple] = []
    counters: dict[tuple, dict] = {}
    t_min, t_max = float("inf"), float("-inf")
    xs: list[dict] = []
    for e in events:
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        if ph == "X":
            try:
                ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
            except (KeyError, TypeError, ValueError):
                continue  # a complete event without a time cannot be placed
            if dur < 0:
                dur = 0.0
            cat = str(e.get("cat", ""))
            group = _GROUP_OF_CAT.get(cat, "framework")
            key = (group, e.get("pid"), e.get("tid"))
            if key not in lanes:
                lanes[key] = {"group": group}
            spans[key].append((ts, ts + dur, len(xs)))
            xs.append(e)
            t_min, t_max = min(t_min, ts), max(t_max, ts + dur)
        elif ph in ("s", "f", "t"):
            try:
                flow_points.append((ph, e["id"], e.get("pid"), e.get("tid"), float(e["ts"]), e.get("bp"),
                                    e.get("cat", "")))
            except (KeyError, TypeError, ValueError):
                continue
        elif ph == "C":
            try:
                ts = float(e["ts"])
            except (KeyError, TypeError, ValueError):
                continue
            ckey = (e.get("pid"), str(e.get("name", "counter")))
            c = counters.setdefault(ckey, {"ts": [], "series": {}})
            args = e.get("args") or {}
            n = len(c["ts"])
            c["ts"].append(ts)
            for k, v in args.items():
                if isinstance(v, (int, float)):
                    c["series"].setdefault(k, [0.0] * n).append(float(v))
            for vals in c["series"].values():  # a series missing from this sample holds its value
                if len(vals) < n + 1:
                    vals.append(vals[-1] if vals else 0.0)
            t_min, t_max = min(t_min, ts), max(t_max, ts)
        elif ph == "M":
            args = e.get("args") or {}
            if e.get("name") == "thread_name":
                thread_names[(e.get("pid"), e.get("tid"))] = str(args.get("name", ""))
            elif e.get("name") == "process_name":
                process_names[e.get("pid")] = str(args.get("name", ""))
    if t_min == float("inf"):
        t_min = t_max = 0.0

    # Order lanes: by group, then framework lanes by (pid, tid), device lanes by tid (core-major).
    def lane_order(key: tuple) -> tuple:
        group, pid, tid = key
        return (GROUPS.index(group), str(pid) if group == "framework" else "", _num(tid), str(tid))

    ordered = sorted(lanes, key=lane_order)
    strings: dict[str, int] = {}
    cats: dict[str, int] = {}
    lane_records = []
    row_starts: list[int] = []  # first event of each (lane, row); rows listed lane by lane
    n = len(xs)
    col_start = array("d")
    col_dur = array("f")
    col_name = array("I")
    col_cat = array("B")
    col_tier = array("B")
    col_lane = array("H")
    arg_blobs: list[bytes] = []
    arg_offsets = array("I", [0])
    position_to_index = [0] * n
    for lane_index, key in enumerate(ordered):
        group, pid, tid = key
        sp = sorted(spans[key], key=lambda s: (s[0], -s[1]))
        depth = _assign_rows(sp)
        rows = max(depth) + 1 if depth else 1
        by_row: list[list] = [[] for _ in range(rows)]
        for s, d in zip(sp, depth):
            by_row[d].append(s)
        first_row = len(row_starts)
        for row in by_row:
            row_starts.append(len(col_start))
            for start, end, pos in row:
                e = xs[pos]
                position_to_index[pos] = len(col_start)
                col_start.append(start - t_min)
                col_dur.append(end - start)
                col_name.append(strings.setdefault(str(e.get("name", "")), len(strings)))
                col_cat.append(cats.setdefault(str(e.get("cat", "")), len(cats)) if len(cats) < 255 else 255)
                args = e.get("args")
                tier = args.get("tier") if isinstance(args, dict) else None
                col_tier.append(TIERS.index(tier) if tier in TIERS else 0)
                col_lane.append(lane_index)
                blob = json.dumps(args, separators=(",", ":"), default=str).encode() if args else b""
                arg_blobs.append(blob)
                arg_offsets.append(arg_offsets[-1] + len(blob))
        lane_records.append({
            "group": group, "label": _lane_label(group, pid, tid, thread_names, process_names),
            "pid": pid, "tid": tid, "rows": rows, "firstRow": first_row,
        })
    row_starts.append(len(col_start))
    if len(lane_records) > 65535:
        raise ValueError(f"trace has {len(lane_records)} lanes; the viewer supports up to 65535")

    flows = _resolve_flows(flow_points, spans, position_to_index)
    cols = _Columns()
    cols.add("start", "f64", col_start)
    cols.add("dur", "f32", col_dur)
    cols.add("name", "u32", col_name)
    cols.add("lane", "u16", col_lane)
    cols.add("cat", "u8", col_cat)
    cols.add("tier", "u8", col_tier)
    cols.add("rowStart", "u32", array("I", row_starts))
    cols.add("argOffset", "u32", arg_offsets)
    cols.add_bytes("args", b"".join(arg_blobs))
    cols.add("flowFrom", "u32", array("I", (f for f, _ in flows)))
    cols.add("flowTo", "u32", array("I", (t for _, t in flows)))
    counter_records = []
    for (pid, cname), c in sorted(counters.items(), key=lambda kv: (_counter_core(kv[0][1]), kv[0][1])):
        order = sorted(range(len(c["ts"])), key=c["ts"].__getitem__)
        prefix = f"counter{len(counter_records)}"
        cols.add(prefix + ".ts", "f64", array("d", (c["ts"][i] - t_min for i in order)))
        series = []
        for sname, vals in c["series"].items():
            cols.add(f"{prefix}.{sname}", "f64", array("d", (vals[i] for i in order)))
            series.append(sname)
        counter_records.append({"label": cname, "pid": pid, "column": prefix, "series": series,
                                "samples": len(order)})
    return {
        "name": name, "source": source, "t0": t_min, "duration": t_max - t_min, "events": n,
        "lanes": lane_records, "groups": list(GROUPS), "tiers": list(TIERS), "strings": list(strings),
        "cats": list(cats), "counters": counter_records, "flows": len(flows),
        "columns": cols.index, "blob": cols.encode(),
    }


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


def _resolve_flows(points: list[tuple], spans: dict[tuple, list],
                   position_to_index: list[int]) -> list[tuple[int, int]]:
    """Bind each flow's start and finish to events, as Chrome's trace viewer does: a point binds to
    the innermost slice enclosing it on its thread; a finish without bp="e" binds to the next slice
    that starts at or after it."""
    per_thread: dict[tuple, tuple[list, list]] = {}
    for (group, pid, tid), sp in spans.items():
        cur = per_thread.get((pid, tid))
        merged = sorted((cur[1] if cur else []) + sp, key=lambda s: (s[0], -s[1]))
        per_thread[(pid, tid)] = ([s[0] for s in merged], merged)

    def bind(pid: Any, tid: Any, ts: float, enclosing: bool) -> Optional[int]:
        entry = per_thread.get((pid, tid))
        if entry is None:
            return None
        starts, sp = entry
        k = bisect.bisect_right(starts, ts + 1e-6) - 1
        for j in range(k, max(k - 256, -1), -1):  # innermost enclosing: latest start that still covers ts
            if sp[j][1] + 1e-6 >= ts:
                return position_to_index[sp[j][2]]
        if not enclosing and k + 1 < len(sp):
            return position_to_index[sp[k + 1][2]]
        return None

    open_flows: dict[tuple, int] = {}
    flows: list[tuple[int, int]] = []
    for ph, fid, pid, tid, ts, bp, cat in sorted(points, key=lambda p: (p[4], p[0] != "s")):
        key = (cat, fid)
        if ph == "s":
            i = bind(pid, tid, ts, True)
            if i is not None:
                open_flows[key] = i
            continue
        src = open_flows.get(key)
        if src is None:
            continue
        dst = bind(pid, tid, ts, bp == "e")
        if dst is None or dst == src:
            continue
        flows.append((src, dst))
        if ph == "t":
            open_flows[key] = dst  # a step continues the chain from where it landed
    flows.sort()
    return flows
