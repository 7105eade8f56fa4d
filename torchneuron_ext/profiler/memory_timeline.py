"""Device memory over time by what it holds (parameters, optimizer state, inputs, temporaries, activations,
gradients, autograd detail, unknown), per NeuronCore: torch.profiler's memory profile, the one
``export_memory_timeline`` draws for CUDA, read for the neuron device.

Torch's memory profile keys every tensor on its device, so it works for neuron unchanged once the session
recorded what it needs (``profile_memory=True, record_shapes=True, with_stack=True``); only its plotting asks
torch.cuda for the peaks. `memory_timelines(prof)` reads it per core; `NeuronProfiler.export_trace` writes the
result into the trace (``trace["neuron"]["memory_timeline"]``), where the HTML report draws it.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

import torch

from .. import _torch_internals

_torch_internals.register(
    "P23", "memory profile by category", "torchneuron_ext/profiler/memory_timeline.py",
    "torch.profiler.profile._memory_profile(), torch.profiler._memory_profiler.MemoryProfileTimeline"
    "._coalesce_timeline(device) (times in us, sizes by category) and _CATEGORY_TO_INDEX (its columns, less one)",
    "memory_timelines in profiler/memory_timeline.py",
    lambda: (_torch_internals.attribute("torch.profiler", "profile._memory_profile"),
             _torch_internals.attribute("torch.profiler._memory_profiler", "MemoryProfileTimeline._coalesce_timeline"),
             _torch_internals.attribute("torch.profiler._memory_profiler", "_CATEGORY_TO_INDEX")))

# What a session must record for the categories: allocations, the ops' input shapes and the Python stacks
# (torch tells parameters and optimizer state apart by the module and optimizer calls on the stack).
REQUIRED_OPTIONS = ("profile_memory", "record_shapes", "with_stack")


@dataclasses.dataclass(frozen=True)
class MemoryTimeline:
    """One core's device memory by category: at each time the bytes each category holds."""

    device: int
    categories: tuple[str, ...]  # column names: "parameter", ..., "unknown"
    t_us: tuple[float, ...]  # microseconds: since the trace's base time when one was given, else Unix time
    bytes: tuple[tuple[int, ...], ...]  # per time, per category

    def totals(self) -> list[int]:
        return [sum(row) for row in self.bytes]

    @property
    def peak_index(self) -> int:
        """The first sample at the highest total (0 for an empty timeline)."""
        totals = self.totals()
        return max(range(len(totals)), key=lambda k: (totals[k], -k)) if totals else 0

    @property
    def peak_bytes(self) -> int:
        return self.totals()[self.peak_index] if self.bytes else 0

    def to_dict(self) -> dict[str, Any]:
        k = self.peak_index
        return {"device": self.device, "categories": list(self.categories), "t_us": list(self.t_us),
                "bytes": [list(row) for row in self.bytes], "peak_bytes": self.peak_bytes,
                "peak_us": self.t_us[k] if self.t_us else 0.0,
                "peak_by_category": dict(zip(self.categories, self.bytes[k])) if self.bytes else {}}


def _columns() -> tuple[list[int], tuple[str, ...]]:
    """The coalesced timeline's columns that hold a category (its first one holds none), and their names."""
    _torch_internals.require("P23")
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX

    order = sorted(_CATEGORY_TO_INDEX.items(), key=lambda kv: kv[1])
    return [i + 1 for _, i in order], tuple("unknown" if c is None else c.name.lower() for c, _ in order)


def memory_timelines(prof: torch.profiler.profile, base_ns: Optional[int] = None) -> dict[int, MemoryTimeline]:
    """Each neuron core's memory timeline by category, from a finished torch.profiler session that recorded
    ``profile_memory=True, record_shapes=True, with_stack=True``; `base_ns` (a Chrome trace's
    ``baseTimeNanoseconds``) puts the times on the trace's clock. Cores the session saw no tensor of are absent."""
    missing = [o for o in REQUIRED_OPTIONS if not getattr(prof, o, False)]
    if missing:
        raise ValueError(f"the memory timeline by category needs a session with {', '.join(o + '=True' for o in missing)} "
                         "(torch.profiler.profile(..., profile_memory=True, record_shapes=True, with_stack=True))")
    if getattr(prof, "profiler", None) is None or getattr(prof.profiler, "kineto_results", None) is None:
        raise ValueError("the memory timeline is read from a finished session: call it after the profile stopped")
    _torch_internals.require("P23")
    from torch.profiler._memory_profiler import MemoryProfileTimeline

    profile = MemoryProfileTimeline(prof._memory_profile())
    backend = torch._C._get_privateuse1_backend_name()
    devices = sorted({key.device.index or 0 for _, _, (key, _), _ in profile.timeline if key.device.type == backend})
    columns, names = _columns()
    shift = (base_ns or 0) / 1000.0
    out: dict[int, MemoryTimeline] = {}
    for d in devices:
        times, sizes = profile._coalesce_timeline(f"{backend}:{d}")
        out[d] = MemoryTimeline(d, names, tuple(t - shift for t in times),
                                tuple(tuple(int(row[c]) for c in columns) for row in sizes))
    return out
