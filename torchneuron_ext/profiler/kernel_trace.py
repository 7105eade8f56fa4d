"""NKI launches' instructions in torch.profiler's trace, when asked: a lane per engine and DMA queue of each
core under the device process, each launch's instructions starting where its device event starts.

Asked by ``TORCHNEURON_EXT_NKI_INSTRUCTIONS=1`` in the environment (read at each launch) or, for a block,
``with torchneuron_ext.profiler.nki_instructions():``. Then every NKI launch on neuron tensors while
torch.profiler runs keeps its schedule's records (nki/schedule.py) here, and ``NeuronProfiler.export_trace``
(or ``add_kernel_lanes(trace)`` on a trace exported with ``prof.export_chrome_trace``) adds their events
(nki/trace.py) beside the launches' device events ``neuron::nki::<kernel>``.

The instruction times are projected on the target by the schedule model (the launch's device event is the
simulator's wall time on this host): a launch's lanes show how its makespan would divide among the engines,
drawn from its device event's start, not when they ran here.

A launch is matched to its device event by name and start: a launch's start is its device event's start on
the monotonic clock, so every launch of one export has the same offset to the trace's clock. Launches kept but
never exported are dropped after ``MAX_LAUNCHES`` (oldest first, with one warning).
"""
from __future__ import annotations

import collections
import contextlib
import threading
import warnings
from typing import Any, Iterator, NamedTuple, Optional

from .. import _env
from ..instrumentation import trace_schema as S

ENV = "TORCHNEURON_EXT_NKI_INSTRUCTIONS"
MAX_LAUNCHES = 10_000
# The instruction lanes' thread ids under the device process: above the hardware lanes', below the projected
# lanes' (trace_schema.PROJECTED_TID_BASE, whose range add_projected_lanes rewrites).
TID_BASE = 1 << 15
_TIDS_PER_DEVICE = 256   # cores of a logical core x lanes of a core
_TIDS_PER_CORE = 128
assert TID_BASE + 64 * _TIDS_PER_DEVICE <= S.PROJECTED_TID_BASE
# A launch's start is its device event's (DeviceActivity.start_ns): the offset is exact but for the trace's
# microsecond floats; the margin keeps a launch at the trace's very start from counting as an earlier session's.
_MATCH_TOLERANCE_US = 50.0
_FLOW_ID_BASE = 3_000_000_000


class KeptLaunch(NamedTuple):
    kernel: str
    device: int
    start_ns: int      # _C._now_ns() at the launch's start (the device event's clock)
    schedule: Any      # its KernelSchedule, with instruction records


_lock = threading.Lock()
_kept: "collections.deque[KeptLaunch]" = collections.deque()
_forced = 0
_warned_full = False


def requested() -> bool:
    """Whether NKI launches should keep their instructions for the trace (the profiler's running is the
    caller's to check)."""
    return _forced > 0 or _env.flag(ENV, False)


@contextlib.contextmanager
def nki_instructions() -> Iterator[None]:
    """Keep the instructions of NKI launches made inside while torch.profiler runs, for its trace."""
    global _forced
    with _lock:
        _forced += 1
    try:
        yield
    finally:
        with _lock:
            _forced -= 1


def keep_launch(kernel: str, device: int, start_ns: int, schedule: Any) -> None:
    """An NKI launch's schedule, for the next export."""
    global _warned_full
    if not schedule.instructions:
        return
    with _lock:
        if len(_kept) >= MAX_LAUNCHES:
            _kept.popleft()
            if not _warned_full:
                _warned_full = True
                warnings.warn(f"{MAX_LAUNCHES} NKI launches' instructions were kept for the profiler's trace and "
                              f"none exported: the oldest are dropped. Export with NeuronProfiler(...).export_trace "
                              f"or add_kernel_lanes, or unset {ENV}", stacklevel=3)
        _kept.append(KeptLaunch(kernel, device, start_ns, schedule))


def kept_launches() -> list[KeptLaunch]:
    with _lock:
        return list(_kept)


def clear() -> None:
    global _warned_full
    with _lock:
        _kept.clear()
        _warned_full = False


def add_kernel_lanes(trace: dict, launches: Optional[list] = None) -> int:
    """Add the kept launches' instruction events to ``trace`` (a Chrome trace dict exported by torch.profiler)
    beside their device events; returns how many launches were placed. Placed launches, and those from before
    the trace's start, are no longer kept. ``launches``: the ones to place, as ``kept_launches()`` gives them
    (default: all kept)."""
    events = trace.setdefault("traceEvents", [])
    kept = kept_launches() if launches is None else list(launches)
    if not kept:
        return 0
    # Imported here: the profiler loads with torch, the NKI simulator only when a kernel is used.
    from ..nki import trace as _nki_trace
    device_events: dict = collections.defaultdict(list)
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") == S.CAT_KERNEL:
            name = e.get("name", "")
            if isinstance(name, str) and name.startswith("neuron::nki::"):
                device_events[name].append(e)
    offset = _clock_offset(kept, device_events)
    if offset is None:
        return 0
    # Launches that would start before the trace does belong to an earlier session nobody exported.
    first_us = min((float(e["ts"]) for e in events if isinstance(e, dict) and e.get("ph") == "X"
                    and isinstance(e.get("ts"), (int, float))), default=0.0)
    stale = {i for i, k in enumerate(kept) if k.start_ns / 1e3 + offset < first_us - _MATCH_TOLERANCE_US}
    named: set = set()
    flow_id = _FLOW_ID_BASE
    launch_no = max((e.get("args", {}).get("launch", -1) for e in events
                     if isinstance(e, dict) and e.get("cat") == _nki_trace.CAT_LAUNCH), default=-1) + 1
    # Launches of one kernel and its device events pair in order, latest with latest: a launch is its device
    # event's work, recorded in the same order on one thread. Matching by time alone failed on a loaded host,
    # where the gap between the two clocks' readings varies by more than the tolerance between launches.
    # Launches are told apart by their index in `kept` (up to MAX_LAUNCHES of them: no comparison of tuples).
    by_kernel: dict = collections.defaultdict(list)
    for i, k in enumerate(kept):
        if i not in stale:
            by_kernel[k.kernel].append(i)
    pairs: dict = {}
    for name, mine in by_kernel.items():
        mine.sort(key=lambda i: kept[i].start_ns)
        events_of = sorted(device_events.get(f"neuron::nki::{name}", []), key=lambda e: float(e["ts"]))
        m = min(len(mine), len(events_of))
        pairs.update(zip(mine[len(mine) - m:], events_of[len(events_of) - m:]))
    placed: list = []
    for i, k in enumerate(kept):
        best = pairs.get(i)
        if best is None:
            continue  # a launch of another session, or its device event was dropped
        cores = sorted({ins.core for ins in k.schedule.instructions})
        base = TID_BASE + k.device * _TIDS_PER_DEVICE
        new = _nki_trace.launch_events(
            k.schedule, k.kernel, launch=launch_no, origin_us=float(best["ts"]),
            pid_of_core={c: S.NEURON_PID for c in cores}, tid_base=base, core_tid_stride=_TIDS_PER_CORE,
            flow_id_base=flow_id, name_processes=False, lane_prefix=f"NC{k.device} NKI ",
            extra_args={"device": k.device, "External id": best.get("args", {}).get("External id")})
        flow_id += sum(1 for e in new if e["ph"] == "s")
        for e in new:
            if e["ph"] == "M":
                key = (e["tid"], e["name"])
                if key in named:
                    continue
                named.add(key)
            events.append(e)
        launch_no += 1
        placed.append(i)
    done = {id(kept[i]) for i in stale.union(placed)}
    with _lock:
        # By identity: kept_launches() hands out the kept tuples themselves, and launches kept meanwhile stay.
        remaining = [k for k in _kept if id(k) not in done]
        _kept.clear()
        _kept.extend(remaining)
    return len(placed)


def _clock_offset(kept: list, device_events: dict) -> Optional[float]:
    """The trace clock minus the launches' clock (microseconds), from the latest launch whose kernel has
    device events: its latest device event."""
    for k in reversed(kept):
        candidates = device_events.get(f"neuron::nki::{k.kernel}")
        if candidates:
            return max(float(e["ts"]) for e in candidates) - k.start_ns / 1e3
    return None
