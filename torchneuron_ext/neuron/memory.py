"""HBM accounting of the emulated NeuronCores, with torch.cuda's memory API."""
from __future__ import annotations

import collections
from typing import Any

import torch

from .. import _C
from ._lazy import _lazy_init
from .device import DeviceLike, _get_device_index, local_devices


def _index(device: DeviceLike) -> int:
    _lazy_init()
    return _get_device_index(device, optional=True)


def memory_stats(device: DeviceLike = None) -> "collections.OrderedDict[str, Any]":
    """Allocator statistics, keyed like torch.cuda.memory_stats ("allocated_bytes.all.current", ...)."""
    stats = _C._memory_stats(_index(device))
    return collections.OrderedDict(sorted(stats.items()))


def memory_allocated(device: DeviceLike = None) -> int:
    """Bytes of HBM held by tensors on the device."""
    return int(_C._memory_stats(_index(device))["allocated_bytes.all.current"])


def max_memory_allocated(device: DeviceLike = None) -> int:
    """Peak of memory_allocated since start or the last reset_peak_memory_stats."""
    return int(_C._memory_stats(_index(device))["allocated_bytes.all.peak"])


def memory_reserved(device: DeviceLike = None) -> int:
    """Bytes of HBM the caching allocator holds (in use plus cached)."""
    return int(_C._memory_stats(_index(device))["reserved_bytes.all.current"])


def max_memory_reserved(device: DeviceLike = None) -> int:
    """Peak of memory_reserved since start or the last reset_peak_memory_stats."""
    return int(_C._memory_stats(_index(device))["reserved_bytes.all.peak"])


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    """Make the peaks equal to the current values."""
    _C._reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device: DeviceLike = None) -> None:
    """Alias of reset_peak_memory_stats, as in torch.cuda."""
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: DeviceLike = None) -> None:
    """Zero the accumulated counters (allocated/freed totals, retries, OOMs)."""
    _C._reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """Return cached, unused HBM blocks of every core to the host."""
    if local_devices():
        _C._empty_cache()


def mem_get_info(device: DeviceLike = None) -> tuple[int, int]:
    """(free, total) HBM bytes of the device, as the runtime reports them."""
    free, total = _C._mem_get_info(_index(device))
    return int(free), int(total)


def memory_snapshot(device: DeviceLike = None) -> list[dict[str, Any]]:
    """The allocator's blocks: address, size, requested size, state, pool, and whether it is a host kernel's
    output the core adopted (a segment of its own, counted in memory_reserved())."""
    return list(_C._memory_snapshot(_index(device)))


def get_hbm_capacity(device: DeviceLike = None) -> int:
    """The emulated HBM capacity of the device in bytes."""
    return int(_C._hbm_capacity(_index(device)))


def set_hbm_capacity(capacity: int | str, device: DeviceLike = None) -> None:
    """Set the emulated HBM capacity of a device, in bytes or as "16GiB"; all devices when `device` is "all"."""
    if isinstance(capacity, str):
        parsed = _C._parse_bytes(capacity)
        if parsed is None:
            raise ValueError(f"'{capacity}' is not a size; use bytes or a unit, e.g. \"24GiB\" or \"512MiB\".")
        capacity = parsed
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity <= 0:
        raise ValueError(f"HBM capacity must be a positive number of bytes, got {capacity!r}")
    devices = local_devices() if device == "all" else [_index(device)]
    for d in devices:
        _C._set_hbm_capacity(d, capacity)


def _fmt(n: int) -> str:
    return _C._format_bytes(int(n)) if n >= 0 else "-" + _C._format_bytes(-int(n))


def memory_summary(device: DeviceLike = None, abbreviated: bool = False) -> str:
    """A table of the allocator's statistics, in the style of torch.cuda.memory_summary."""
    index = _index(device)
    stats = _C._memory_stats(index)
    capacity = _C._hbm_capacity(index)
    width = 83
    lines = ["=" * width, f" neuron:{index} memory summary (emulated HBM capacity {_fmt(capacity)})".ljust(width)]
    lines.append("-" * width)
    lines.append(f"{'Metric':<24}|{'Cur Usage':>14} |{'Peak Usage':>14} |{'Tot Alloc':>12} |{'Tot Freed':>12}")
    rows = [
        ("Allocated memory", "allocated_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("Reserved memory", "reserved_bytes", True),
        ("Allocations", "allocation", False),
        ("Active allocs", "active", False),
        ("Segments", "segment", False),
    ]
    pools = [("all", "")] if abbreviated else [("all", ""), ("large_pool", "  from large pool"), ("small_pool", "  from small pool")]
    for title, key, is_bytes in rows:
        lines.append("-" * width)
        for pool, label in pools:
            vals = [stats[f"{key}.{pool}.{f}"] for f in ("current", "peak", "allocated", "freed")]
            shown = [_fmt(v) if is_bytes else str(v) for v in vals]
            name = title if not label else label
            lines.append(f"{name:<24}|{shown[0]:>14} |{shown[1]:>14} |{shown[2]:>12} |{shown[3]:>12}")
    lines.append("-" * width)
    lines.append(
        f"{'OOMs':<24}|{stats['num_ooms']:>14} | Alloc retries: {stats['num_alloc_retries']:<8}"
        f" Tensor frees: {stats['num_tensor_frees']}"
    )
    lines.append("=" * width)
    return "\n".join(lines) + "\n"


# ---- memory history and snapshots, as torch.cuda.memory's ----------------------------------------------

_STACKS = {"python": 1, "all": 2}
_RECORDED_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom")
_skip_actions: frozenset = frozenset()


def _record_memory_history(enabled: str | None = "all", context: str | None = "all", stacks: str = "all",
                           max_entries: int = 2 ** 63 - 1, device: DeviceLike = None, clear_history: bool = False,
                           compile_context: bool = False, global_record_annotations: bool = False,
                           skip_actions: list[str] | None = None) -> None:
    """Record the allocator's events and the stack of each, as ``torch.cuda.memory._record_memory_history``.

    ``enabled``: ``"all"`` keeps the event trace (alloc, free, segment_alloc, segment_free, oom; at most
    ``max_entries`` per core, the oldest dropped), ``"state"`` only the stacks of live allocations, ``None``
    stops recording. ``context``: ``None`` records no stacks (``"state"``, ``"alloc"`` and ``"all"`` record the
    allocating stack; a free records its own). ``stacks``: ``"python"`` (Python and TorchScript frames) or
    ``"all"`` (with C++ frames). Every core of the process is recorded (``device`` is accepted for
    torch.cuda's signature, as CUDA records every device too). ``_snapshot()`` returns what was recorded.
    """
    global _skip_actions
    if enabled not in (None, "state", "all"):
        raise ValueError(f"enabled={enabled!r}: use 'all', 'state' or None")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"context={context!r}: use 'all', 'alloc', 'state' or None")
    if stacks not in _STACKS:
        raise ValueError(f"stacks={stacks!r}: use 'python' or 'all'")
    if compile_context or global_record_annotations:
        raise NotImplementedError("compile_context and global_record_annotations are not recorded on neuron: "
                                  "torch.profiler's trace has the compiled regions and annotations")
    unknown = set(skip_actions or ()) - set(_RECORDED_ACTIONS)
    if unknown:
        raise ValueError(f"skip_actions: unknown action(s) {sorted(unknown)}; the actions are {_RECORDED_ACTIONS}")
    if max_entries < 1:
        raise ValueError(f"max_entries={max_entries}: keep at least one event")
    _skip_actions = frozenset(skip_actions or ())
    _C._record_memory_history(enabled is not None, enabled == "all", 0 if context is None else _STACKS[stacks],
                              min(max_entries, 2 ** 63 - 1), clear_history)


def _snapshot(device: DeviceLike = None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
    """The allocator's state and recorded history in ``torch.cuda.memory._snapshot()``'s format: ``segments``
    (each of this allocator's blocks is its own segment of host memory, with its one block), ``device_traces``
    (per core, the recorded events) and ``allocator_settings``. PyTorch's visualizer reads it
    (``torch.cuda._memory_viz``, pytorch.org/memory_viz after ``_dump_snapshot``)."""
    if augment_with_fx_traces:
        raise NotImplementedError("augment_with_fx_traces is not supported on neuron")
    segments = []
    devices = local_devices()
    for d in devices:
        frames = _C._memory_live_frames(d)
        for b in _C._memory_snapshot(d):
            active = b["state"] == "active_allocated"
            block_frames = frames.get(b["address"], []) if active else []
            segments.append({
                "device": d, "address": b["address"], "total_size": b["size"],
                "allocated_size": b["size"] if active else 0, "active_size": b["size"] if active else 0,
                "requested_size": b["requested_size"] if active else 0, "stream": 0,
                "segment_type": b["pool"], "segment_pool_id": (0, 0), "is_expandable": False,
                "frames": block_frames,
                "blocks": [{"address": b["address"], "size": b["size"],
                            "requested_size": b["requested_size"] if active else 0,
                            "state": b["state"], "frames": block_frames}],
            })
    traces = [[e for e in trace if e["action"] not in _skip_actions]
              for trace in _C._memory_history_traces()[:devices.stop]]
    return {"segments": segments, "device_traces": traces,
            "allocator_settings": {"PYTORCH_NEURON_ALLOC_CONF": "", "max_split_size": -1, "expandable_segments": False,
                                   "roundup_power2_divisions": {"1": 4}}}


def _dump_snapshot(filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False) -> None:
    """Pickle ``_snapshot()`` to ``filename``, for pytorch.org/memory_viz or ``python -m torch.cuda._memory_viz``."""
    import pickle

    snapshot = _snapshot(augment_with_fx_traces=augment_with_fx_traces)
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f)
