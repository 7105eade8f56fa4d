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
    """The allocator's blocks: address, size, requested size, state and pool."""
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
