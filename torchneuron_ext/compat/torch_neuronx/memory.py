"""TorchNeuron's memory API (``torch_neuronx.memory_stats`` and friends) over the emulator's allocator.

TorchNeuron's ``memory_stats`` is a flat dict: ``allocated_bytes``, ``reserved_bytes`` and ``active_bytes``,
each ``{"current", "peak", "allocated", "freed"}``, plus the counters ``num_alloc_retries``, ``num_ooms``,
``num_tensor_frees`` and ``allocation_requests``. ``torch.neuron.memory_stats`` keeps torch.cuda's keys
("allocated_bytes.all.current", ...); both read the same allocator. Unlike the pre-release TorchNeuron,
whose ``reserved_bytes`` were always 0, the emulator's caching allocator reports what it holds.
"""
from __future__ import annotations

from typing import Any

from torchneuron_ext import neuron

__all__ = ["max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved", "memory_stats",
           "memory_summary", "reset_accumulated_memory_stats", "reset_peak_memory_stats"]

_BYTE_STATS = ("allocated_bytes", "reserved_bytes", "active_bytes")
_FIELDS = ("current", "peak", "allocated", "freed")


def memory_stats(device: Any = None) -> dict[str, Any]:
    """The allocator's statistics for a device (current device by default), in TorchNeuron's layout."""
    cuda_style = neuron.memory_stats(device)
    out: dict[str, Any] = {
        stat: {field: int(cuda_style.get(f"{stat}.all.{field}", 0)) for field in _FIELDS} for stat in _BYTE_STATS
    }
    out["num_alloc_retries"] = int(cuda_style.get("num_alloc_retries", 0))
    out["num_ooms"] = int(cuda_style.get("num_ooms", 0))
    out["num_tensor_frees"] = int(cuda_style.get("num_tensor_frees", 0))
    out["allocation_requests"] = int(cuda_style.get("allocation.all.allocated", 0))
    return out


def memory_allocated(device: Any = None) -> int:
    """Bytes held by tensors on the device."""
    return neuron.memory_allocated(device)


def max_memory_allocated(device: Any = None) -> int:
    """Peak of memory_allocated since the start or the last reset_peak_memory_stats."""
    return neuron.max_memory_allocated(device)


def memory_reserved(device: Any = None) -> int:
    """Bytes the caching allocator holds (in use plus cached)."""
    return neuron.memory_reserved(device)


def max_memory_reserved(device: Any = None) -> int:
    """Peak of memory_reserved since the start or the last reset_peak_memory_stats."""
    return neuron.max_memory_reserved(device)


def reset_peak_memory_stats(device: Any = None) -> None:
    """Make the peaks equal to the current values."""
    neuron.reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: Any = None) -> None:
    """Zero the accumulated counters (allocated/freed totals, retries, OOMs)."""
    neuron.reset_accumulated_memory_stats(device)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A human-readable table of the device's memory use."""
    return neuron.memory_summary(device, abbreviated)
