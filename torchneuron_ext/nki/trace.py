"""An NKI launch's instruction-level profile as Chrome trace events (Perfetto, chrome://tracing and our HTML
report open it): a lane per engine and DMA queue, each instruction an event, its dependencies as arrows.

The instructions are the schedule model's records (nki/schedule.py, ``ScheduledInstruction``): times are
projected on the target, from the launch's start; nothing here was measured on a NeuronCore. This is our
own JSON, not Neuron Explorer's NTFF.

Layout of one launch:

- a process per core of the launch (``pid``), named after the kernel, core and target;
- a thread per lane, named and sorted in a fixed order: the launch's own span ("launch", which carries
  the launch's totals in its args), Tensor, Vector, Scalar, GpSimd, the DMA queues by number, collectives;
- an "X" event per instruction (category ``CAT_INSTRUCTION``) whose args hold its source line, opcode,
  operands (role, memory, name, shape, dtype, bytes), bytes, FLOPs, the time it waited on dependencies,
  its dependencies and whether it is on the critical path;
- a flow ("s" at the producer, "f" with ``bp: "e"`` at the consumer, category ``CAT_DEPENDENCY``) per
  dependency, named ``FLOW_DEPENDENCY``; one from another core's lane (a meeting point: ``core_barrier``,
  ``sendrecv``, a collective, whose exchange waited for that core's last instruction) is named
  ``FLOW_CORE_MEETING``.

numpy-free and torch-free: the NKI core's layer (the profiler's torch side, profiler/kernel_trace.py, places
these events beside the launch's device event).
"""
from __future__ import annotations

import json
import os
from typing import Any, Optional, Sequence

# The trace's vocabulary for these events; the readers (profiler/html/kernel_view.py) use the same names.
CAT_INSTRUCTION = "nki_instruction"
CAT_LAUNCH = "nki_launch"
CAT_DEPENDENCY = "nki_dependency"
FLOW_DEPENDENCY = "dependency"
FLOW_CORE_MEETING = "core meeting"
FORMAT = "torchneuron_ext-nki-kernel-trace/1"

# Lanes top to bottom, as Neuron Explorer's device profile orders the engines; DMA queues come after
# GpSimd by number (any count), collectives last.
_ENGINE_LANES = ("tensor", "vector", "scalar", "gpsimd")
LANE_LABELS = {"launch": "launch (projected)", "tensor": "Tensor Engine (PE)", "vector": "Vector Engine (DVE)",
               "scalar": "Scalar Engine (ACT)", "gpsimd": "GpSimd Engine (POOL)", "collective": "Collectives",
               "dma:spill": "DMA spill/reload"}
# A lane's thread id inside its process: fixed per lane, so lanes keep their order and tids in any trace.
_LANE_TID = {"launch": 0, "tensor": 1, "vector": 2, "scalar": 3, "gpsimd": 4, "dma:spill": 47, "collective": 63}
_DMA_TID_BASE = 16


def lane_rank(queue: str) -> tuple:
    """Where a lane sorts: the launch, the engines, the DMA queues by number, the collectives, then the rest."""
    if queue == "launch":
        return (0, 0, "")
    if queue in _ENGINE_LANES:
        return (1, _ENGINE_LANES.index(queue), "")
    if queue.startswith("dma:"):
        n = queue[4:]
        return (2, int(n) if n.isdigit() else 1 << 20, n)
    if queue == "collective":
        return (3, 0, "")
    return (4, 0, queue)


def lane_tid(queue: str) -> int:
    """The thread id of a lane (stable across launches and traces)."""
    if queue in _LANE_TID:
        return _LANE_TID[queue]
    if queue.startswith("dma:") and queue[4:].isdigit():
        return _DMA_TID_BASE + int(queue[4:])
    return 64 + sum(map(ord, queue)) % 1024


def lane_label(queue: str) -> str:
    if queue in LANE_LABELS:
        return LANE_LABELS[queue]
    if queue.startswith("dma:"):
        return f"DMA queue {queue[4:]}"
    return queue


def lanes(instructions: Sequence[Any]) -> list[str]:
    """The lanes the instructions use, in their stable order."""
    return sorted({i.queue for i in instructions}, key=lane_rank)


def _operand(op: Any) -> dict:
    return {"role": op.role, "memory": op.memory, "name": op.name, "shape": list(op.shape), "dtype": op.dtype,
            "bytes": op.nbytes}


def _dep_key(core: int, dep: Any) -> tuple:
    return tuple(dep) if isinstance(dep, (tuple, list)) else (core, dep)


def launch_events(schedule: Any, kernel: str, *, launch: int = 0, origin_us: float = 0.0,
                  pid_of_core: Optional[dict] = None, tid_base: int = 0, core_tid_stride: int = 0,
                  flow_id_base: int = 0, name_processes: bool = True, lane_prefix: str = "",
                  extra_args: Optional[dict] = None) -> list[dict]:
    """The events of one launch's schedule (a ``KernelSchedule`` whose launch ran inside
    ``nki.schedule.recording()``).

    Args:
        schedule: the launch's KernelSchedule; it must hold its instructions.
        kernel: the kernel's name, for the process names and the launch span.
        launch: this launch's number in the trace (its instructions' ``launch`` arg; flows are per launch).
        origin_us: where the launch starts on the trace's clock, microseconds.
        pid_of_core: the process of each core (default: core + 1).
        tid_base: added to every lane's thread id (to keep the lanes apart from a process's other threads).
        core_tid_stride: added per core number (when the cores share one process).
        flow_id_base: added to every flow id (ids must be unique in the whole trace).
        name_processes: add process_name / process_sort_index metadata (False when the caller names them).
        lane_prefix: put before every lane's name.
        extra_args: merged into the launch span's args.
    """
    records = list(schedule.instructions)
    if not records and schedule.instruction_count:
        raise ValueError(f"the schedule of {kernel} has no instruction records: launch it inside "
                         f"nki.schedule.recording() (nki.profile and nki.benchmark(save_trace_name=...) do)")
    cores = sorted({i.core for i in records}) or [0]
    pids = {c: (pid_of_core or {}).get(c, c + 1) for c in cores}
    by_key = {(i.core, i.index): i for i in records}
    critical = {(i.core, i.index) for i in schedule.critical_path()}
    us = 1e6
    events: list[dict] = []

    def tid(core: int, queue: str) -> int:
        return tid_base + core * core_tid_stride + lane_tid(queue)

    for c in cores:
        pid = pids[c]
        if name_processes:
            label = f"{kernel} core {c}" if len(cores) > 1 else kernel
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": f"{label} (NKI, projected on {schedule.target})"}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        core_label = f"core {c} " if len(cores) > 1 and core_tid_stride else ""
        for q in ["launch"] + lanes([i for i in records if i.core == c]):
            t = tid(c, q)
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": t,
                           "args": {"name": f"{lane_prefix}{core_label}{lane_label(q)}"}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": t, "args": {"sort_index": t}})
    busy_us = {q: b * us for q, b in sorted(schedule.engine_busy_s.items(), key=lambda kv: lane_rank(kv[0]))}
    summary = {"kernel": kernel, "launch": launch, "target": schedule.target, "cores": len(cores),
               "makespan_us": schedule.makespan_s * us, "flops": int(schedule.flops),
               "hbm_bytes": int(schedule.hbm_bytes), "instructions": int(schedule.instruction_count or len(records)),
               "engine_busy_us": busy_us, "format": FORMAT}
    summary.update(extra_args or {})
    events.append({"ph": "X", "cat": CAT_LAUNCH, "name": kernel, "pid": pids[cores[0]], "tid": tid(cores[0], "launch"),
                   "ts": origin_us, "dur": schedule.makespan_s * us, "args": summary})
    flow = flow_id_base
    for i in records:
        key = (i.core, i.index)
        deps = [_dep_key(i.core, d) for d in i.deps]
        events.append({
            "ph": "X", "cat": CAT_INSTRUCTION, "name": i.opcode, "pid": pids[i.core], "tid": tid(i.core, i.queue),
            "ts": origin_us + i.start_s * us, "dur": (i.end_s - i.start_s) * us,
            "args": {"launch": launch, "index": i.index, "core": i.core, "engine": i.engine, "queue": i.queue,
                     "opcode": i.opcode, "line": f"{os.path.basename(i.file)}:{i.line}" if i.file else "",
                     "file": i.file, "lineno": i.line, "operands": [_operand(o) for o in i.operands],
                     "bytes": int(i.nbytes), "flops": int(i.flops), "wait_us": i.wait_s * us,
                     "deps": [list(d) if d[0] != i.core else d[1] for d in deps], "critical": key in critical}})
        for d in deps:
            src = by_key.get(d)
            if src is None:
                continue  # a producer whose record was not kept (another launch): no arrow to draw
            flow += 1
            name = FLOW_DEPENDENCY if src.core == i.core else FLOW_CORE_MEETING
            events.append({"ph": "s", "cat": CAT_DEPENDENCY, "name": name, "id": flow, "pid": pids[src.core],
                           "tid": tid(src.core, src.queue), "ts": origin_us + src.start_s * us})
            events.append({"ph": "f", "bp": "e", "cat": CAT_DEPENDENCY, "name": name, "id": flow,
                           "pid": pids[i.core], "tid": tid(i.core, i.queue), "ts": origin_us + i.start_s * us})
    return events


def kernel_trace(schedule: Any, kernel: str, extra: Optional[dict] = None) -> dict:
    """A whole Chrome trace of one launch: ``{"traceEvents": [...], "displayTimeUnit": "ns", ...}``; the keys of
    ``extra`` go to the top level (readers of Chrome traces ignore keys they do not know)."""
    # The events first: streaming readers (Perfetto's JSON tokenizer) meet them before our own keys.
    # A process per core, and lane ids and names that differ per core too: viewers that group lanes by
    # thread across processes (our report's timeline) keep the cores' lanes apart.
    trace = {"traceEvents": launch_events(schedule, kernel, core_tid_stride=128), "displayTimeUnit": "ns",
             "format": FORMAT, "kernel": kernel, "target": schedule.target,
             "note": ("instruction times projected on the target by the schedule model (docs/cost_model.md); "
                      "simulated, not measured, and not a Neuron Explorer NTFF")}
    for key, value in (extra or {}).items():
        if key not in ("traceEvents", "displayTimeUnit"):
            trace[key] = value
    return trace


def write_kernel_trace(path: str, schedule: Any, kernel: str, extra: Optional[dict] = None) -> str:
    """Write ``kernel_trace(schedule, kernel, extra)`` as JSON to ``path``; returns the path."""
    # dumps, not dump: json.dump to a file takes the pure-Python encoder, several times slower.
    text = json.dumps(kernel_trace(schedule, kernel, extra), separators=(",", ":"))
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path
