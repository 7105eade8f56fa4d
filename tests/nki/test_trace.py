"""The instruction-level trace of an NKI launch (nki/trace.py): lanes per core, dependency arrows, and the
arrows of a meeting point between the cores' lanes."""
from __future__ import annotations

import numpy as np

from torchneuron_ext.nki import schedule
from torchneuron_ext.nki.trace import CAT_DEPENDENCY, FLOW_CORE_MEETING, FLOW_DEPENDENCY, kernel_trace

from .test_schedule import uneven_then_barrier


def _flows(events: list) -> list:
    """(name, start event, finish event) of every flow, paired by id."""
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    return [(e["name"], starts[e["id"]], e) for e in events if e.get("ph") == "f"]


def test_a_barrier_draws_arrows_between_the_cores_lanes():
    a = np.ones((128, 512), np.float32)
    with schedule.recording():
        uneven_then_barrier[2](a)
    s = uneven_then_barrier.last_result.schedule
    events = kernel_trace(s, "uneven_then_barrier")["traceEvents"]
    flows = _flows(events)
    assert flows and all(f["cat"] == CAT_DEPENDENCY for _, _, f in flows)
    meetings = [(src, dst) for name, src, dst in flows if name == FLOW_CORE_MEETING]
    # Each core's barrier waits on the other core's last instruction: one arrow each way, from one core's
    # process (pid core + 1) to the other's, ending on the collective lane.
    assert sorted((src["pid"], dst["pid"]) for src, dst in meetings) == [(1, 2), (2, 1)]
    barrier = {e["pid"]: e for e in events if e.get("ph") == "X" and e["name"] == "core_barrier"}
    for src, dst in meetings:
        assert (dst["tid"], dst["ts"]) == (barrier[dst["pid"]]["tid"], barrier[dst["pid"]]["ts"])
        assert src["ts"] <= dst["ts"]
    # Within a core the arrows are dependencies; the critical path's instructions are on both cores.
    assert all(src["pid"] == dst["pid"] for name, src, dst in flows if name == FLOW_DEPENDENCY)
    critical = {e["pid"] for e in events if e.get("ph") == "X" and e["args"].get("critical")}
    assert critical == {1, 2}
