"""TorchNeuron's profiling API: NeuronConfig, ProfileMode and NeuronProfiler, so scripts written
for `torch_neuronx.profiling` run here unchanged.

    cfg = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir="./out")
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                experimental_config=cfg, on_trace_ready=NeuronProfiler(cfg).export_trace):
        model(x)
"""
from __future__ import annotations

import datetime
import enum
import json
import os
import socket
from typing import Any, Iterable, Optional, Union

import torch

from .. import _C, _torch_internals
from ..instrumentation import numerics
from ..instrumentation import trace_schema as S
from .kernel_trace import add_kernel_lanes
from .memory_timeline import REQUIRED_OPTIONS, memory_timelines
from .projection import add_projected_lanes


def _check_experimental_config() -> None:
    cls = _torch_internals.attribute("torch", "_C._profiler._ExperimentalConfig")
    try:
        cls(custom_profiler_config="{}")
    except TypeError as e:
        raise _torch_internals.Broken(f"_ExperimentalConfig(custom_profiler_config=...) fails: {e}") from None


_torch_internals.register(
    "P19", "Kineto experimental config", "torchneuron_ext/profiler/config.py (NeuronConfig)",
    "subclassing torch._C._profiler._ExperimentalConfig(custom_profiler_config=...), which Kineto "
    "parses as KEY=value lines", "NeuronConfig in profiler/config.py", _check_experimental_config)
_torch_internals.require("P19")

from torch._C._profiler import _ExperimentalConfig  # noqa: E402


class ProfileMode(enum.Enum):
    """What a capture records. DEVICE: kernel executions and transfers (hardware and transfer
    lanes). RUNTIME: the runtime's dispatch spans (runtime lanes). CPU_UTIL and HOST_MEMORY are
    accepted for compatibility; the emulator records no separate data for them (host time and
    device memory are already in the trace)."""

    DEVICE = "DEVICE"
    RUNTIME = "RUNTIME"
    CPU_UTIL = "CPU_UTIL"
    HOST_MEMORY = "HOST_MEMORY"


def _parse_cores(spec: Union[str, int, Iterable[int], None]) -> Optional[list[int]]:
    if spec is None or spec == "":
        return None
    if isinstance(spec, int):
        return [spec]
    if not isinstance(spec, str):
        return sorted({int(c) for c in spec})
    cores: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo, hi = (int(p) for p in part.split("-", 1))
                if lo > hi:
                    raise ValueError
                cores.update(range(lo, hi + 1))
            else:
                cores.add(int(part))
        except ValueError:
            raise ValueError(
                f"capture_enabled_for_nc={spec!r}: {part!r} is not a core or an ascending range; use e.g. \"0,2-5\""
            ) from None
    return sorted(cores)


class NeuronConfig(_ExperimentalConfig):
    """Profiling options for the neuron device, passed to torch.profiler as `experimental_config`."""

    def __init__(
        self,
        modes: Optional[Iterable[ProfileMode]] = None,
        profile_output_dir: Union[str, os.PathLike] = "./neuron_profile",
        capture_enabled_for_nc: Union[str, int, Iterable[int], None] = None,
        max_events_per_nc: Optional[int] = None,
        neff_cache_dir: Optional[str] = None,
        precache_node_info: bool = True,
    ):
        modes = list(modes) if modes is not None else [ProfileMode.DEVICE, ProfileMode.RUNTIME]
        for m in modes:
            if not isinstance(m, ProfileMode):
                raise TypeError(f"modes must be ProfileMode values, got {m!r}")
        if max_events_per_nc is not None and (not isinstance(max_events_per_nc, int) or max_events_per_nc <= 0):
            raise ValueError(f"max_events_per_nc must be a positive int, got {max_events_per_nc!r}")
        self.modes = modes
        self.profile_output_dir = os.fspath(profile_output_dir)
        self.capture_enabled_for_nc = _parse_cores(capture_enabled_for_nc)
        self.max_events_per_nc = max_events_per_nc
        self.neff_cache_dir = neff_cache_dir
        self.precache_node_info = precache_node_info
        payload = {
            "modes": ",".join(m.value for m in modes),
            "capture_enabled_for_nc": ",".join(map(str, self.capture_enabled_for_nc or [])),
            "max_events_per_nc": max_events_per_nc or 0,
        }
        # Kineto reads the custom config as one "KEY=value" line: no '=' may appear in the value.
        super().__init__(custom_profiler_config=json.dumps(payload, separators=(",", ":")).replace("=", "\\u003d"))

    def __repr__(self) -> str:
        return (f"NeuronConfig(modes={[m.value for m in self.modes]}, profile_output_dir={self.profile_output_dir!r}, "
                f"capture_enabled_for_nc={self.capture_enabled_for_nc}, max_events_per_nc={self.max_events_per_nc})")


_NEURON_PID = S.NEURON_PID  # the trace's device process


def add_dispatch_flows(events: list[dict[str, Any]]) -> None:
    """Draw an arrow from each framework op to the runtime span it dispatched (the same correlation
    id, "External id" in Kineto's trace); Kineto itself links runtime span to kernel."""
    ops: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            ext = e.get("args", {}).get("External id")
            if ext is not None:
                ops[ext] = e  # innermost op wins: it comes later in Kineto's order
    flows = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == S.CAT_RUNTIME:
            ext = e.get("args", {}).get("External id")
            op = ops.get(ext)
            if op is None:
                continue
            fid = 1_000_000_000 + int(ext)
            flows.append({"ph": "s", "id": fid, "pid": op["pid"], "tid": op["tid"], "ts": op["ts"],
                          "cat": S.CAT_DISPATCH, "name": S.CAT_DISPATCH})
            flows.append({"ph": "f", "id": fid, "pid": e["pid"], "tid": e["tid"], "ts": e["ts"],
                          "cat": S.CAT_DISPATCH, "name": S.CAT_DISPATCH, "bp": "e"})
    events.extend(flows)


def add_device_counters(trace: dict[str, Any], memory: Optional[list] = None) -> None:
    """Add the HBM usage counter of each core (from the last session) and name the device process."""
    memory = _C._last_memory_timeline() if memory is None else memory
    events = trace.setdefault("traceEvents", [])
    events.append({"ph": "M", "name": "process_name", "pid": _NEURON_PID, "tid": 0,
                   "args": {"name": "Neuron (emulated NeuronCores)"}})
    events.append({"ph": "M", "name": "process_sort_index", "pid": _NEURON_PID, "tid": 0, "args": {"sort_index": 1}})
    base_ns = trace.get("baseTimeNanoseconds", 0)
    for device, t_ns, allocated, reserved in memory:
        events.append({
            "ph": "C", "name": S.hbm_counter_name(device), "pid": _NEURON_PID, "tid": 0,
            "ts": (t_ns - base_ns) / 1e3,
            "args": {S.HBM_ALLOCATED_MB: round(allocated / 2**20, 3), S.HBM_RESERVED_MB: round(reserved / 2**20, 3)},
        })


class NeuronProfiler:
    """Exports a finished torch.profiler session the way TorchNeuron does:
    `<profile_output_dir>/<host>_pid_<pid>/<timestamp>/trace.json` (with the summary under its
    "neuron" key) and `summary.txt` (the report of `torchneuron-ext report`)."""

    def __init__(self, config: Optional[NeuronConfig] = None):
        self.config = config or NeuronConfig()
        self.last_export_dir: Optional[str] = None

    def output_dir(self) -> str:
        stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
        return os.path.join(self.config.profile_output_dir, f"{socket.gethostname()}_pid_{os.getpid()}", stamp)

    def export_trace(self, prof: torch.profiler.profile) -> str:
        """on_trace_ready callback: write the trace and the summary; returns the directory."""
        from .report import format_report, summarize_trace

        out = self.output_dir()
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
        add_device_counters(trace)
        add_dispatch_flows(trace["traceEvents"])
        add_kernel_lanes(trace)  # NKI launches' instructions, when asked (kernel_trace.py)
        # Trace consumers such as HolisticTraceAnalysis read the rank from here; the cost model
        # projects a collective over its record's group size, world_size for traces without it.
        info = trace.setdefault("distributedInfo", {"rank": int(os.environ.get("RANK", "0"))})
        info.setdefault("world_size", int(os.environ.get("WORLD_SIZE", "1")))
        projection = add_projected_lanes(trace)
        # Read by summarize_trace: a report of a run in trainium numerics says so in its header.
        trace["neuron"] = {"numerics": numerics.mode()}
        summary = summarize_trace(trace, projection=projection)  # the lanes' projection, not a second one
        # The summary travels inside the trace: tools that load every .json in a profile
        # directory as a trace (HTA does) would choke on a separate JSON file.
        trace["neuron"] = {
            "numerics": summary.numerics,
            "config": {
                "modes": [m.value for m in self.config.modes],
                "capture_enabled_for_nc": self.config.capture_enabled_for_nc,
                "max_events_per_nc": self.config.max_events_per_nc,
            },
            "summary": summary.to_dict(),
        }
        if all(getattr(prof, option, False) for option in REQUIRED_OPTIONS):
            # The HTML report's memory by category; the trace's clock, so it lines up with the events.
            trace["neuron"]["memory_timeline"] = {
                str(d): m.to_dict() for d, m in memory_timelines(prof, trace.get("baseTimeNanoseconds", 0)).items()}
        with open(path, "w") as f:
            json.dump(trace, f)
        with open(os.path.join(out, "summary.txt"), "w") as f:
            f.write(format_report(summary))
        self.last_export_dir = out
        return out
