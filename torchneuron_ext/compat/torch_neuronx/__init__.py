"""``torch_neuronx``: TorchNeuron's public Python surface on the emulated neuron device.

AWS's TorchNeuron is imported as ``torch_neuronx``; with ``TORCHNEURON_EXT_NKI_COMPAT=1`` (or
``torchneuron_ext.compat.aliases.install()``, or the test-suite plugin
``torchneuron_ext.compat.testing.torchneuron_suite``) that name resolves to this package when the real one
is not installed (compat/aliases.py). Its former path, ``torchneuron_ext.torch_neuronx``, is this package
too. Every name here keeps TorchNeuron's signature and meaning (see docs/torch_neuronx.md); each is backed
by the emulator's ``torch.neuron``:

- devices: ``device_count``, ``current_device``, ``set_device``, ``device``, ``get_device_properties``,
  ``synchronize``, ``is_neuron_runtime_initialized``, ``empty_cache``;
- streams and events: ``Stream``, ``Event``, ``current_stream``, ``default_stream``, ``set_stream``,
  ``stream`` / ``StreamContext``;
- memory (TorchNeuron's flat ``memory_stats`` dict): ``memory_allocated``, ``max_memory_allocated``,
  ``memory_reserved``, ``max_memory_reserved``, ``memory_stats``, ``memory_summary``,
  ``reset_peak_memory_stats``, ``reset_accumulated_memory_stats``;
- op tracking: ``get_executed_ops``, ``get_fallback_ops``, ``clear_op_tracking``;
- ``neuron`` (TorchNeuron's ``torch.neuron`` module, see neuron.py), ``utils``, ``distributed``, ``env``,
  ``profiling`` / ``NeuronProfiler``, ``nki_op`` / ``wrap_nki`` / ``nki`` / ``nki_hop``, ``get_dynamo_metrics`` /
  ``reset_dynamo_metrics``.

TorchNeuron's lowering internals (``python_ops``, ``neuron_dynamo_backend``, ``kernels``, ``_C``, NEFF
caches) are out of scope: they raise an ImportError / AttributeError that says so.
"""
from __future__ import annotations

import importlib as _importlib
from typing import Any, Optional, Union

import torch

import torchneuron_ext as _ext
from torchneuron_ext import _C as _ext_C
from torchneuron_ext import neuron as _neuron
from torchneuron_ext.neuron import Event, Stream, StreamContext
from torchneuron_ext.neuron import _lazy as _neuron_lazy
from torchneuron_ext.neuron.device import InvalidDeviceError as _InvalidDeviceError
from torchneuron_ext.neuron.device import _get_device_index as _neuron_device_index
from torchneuron_ext.neuron.device import local_devices as _local_devices

from . import _scope, env
from .memory import (
    max_memory_allocated,
    max_memory_reserved,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)

__version__ = _ext.__version__

__all__ = [
    "Event", "Stream", "StreamContext", "clear_op_tracking", "current_device", "current_stream", "default_stream",
    "device", "device_count", "empty_cache", "get_device_properties", "get_dynamo_metrics", "get_executed_ops",
    "get_fallback_ops", "is_neuron_runtime_initialized", "max_memory_allocated", "max_memory_reserved",
    "memory_allocated", "memory_reserved", "memory_stats", "memory_summary", "neuron", "nki_op",
    "reset_accumulated_memory_stats", "reset_dynamo_metrics", "reset_peak_memory_stats", "set_device",
    "set_stream", "stream", "synchronize", "wrap_nki",
]

DeviceLike = Union[torch.device, str, int, None]


def _autoload() -> None:
    """TorchNeuron's ``torch.backends`` entry point; the emulator's own autoload already registered neuron."""


def _lazy_init() -> None:
    """Start the (emulated) Neuron runtime if it is not started: TorchNeuron's private initialiser."""
    _neuron_lazy._lazy_init()


def is_neuron_runtime_initialized() -> bool:
    """Whether the Neuron runtime has started in this process (False in a forked child)."""
    return _neuron_lazy.is_initialized()


# --------------------------------------------------------------------------- devices


def device_count() -> int:
    """Number of Neuron devices (logical NeuronCores) visible to this process."""
    return _neuron.device_count()


def current_device() -> int:
    """Index of the calling thread's current Neuron device."""
    return _neuron.current_device()


def _device_index(device: DeviceLike, node_wide: bool = False) -> int:
    """An explicit device (int, "neuron:i", torch.device) as an index, refused exactly as the runtime refuses it.

    torch.neuron's normaliser and the runtime's check decide, so that in a distributed job (which owns only
    neuron:LOCAL_RANK) this refuses what the runtime refuses; only TorchNeuron's error types and the start of
    its messages are kept ("Invalid device id: i." followed by the runtime's reason). With ``node_wide``, an
    index of the node that another process of the job owns is accepted (get_device_properties describes it,
    as TorchNeuron does).
    """
    if device is None:  # torch.neuron would read it as the current device
        raise ValueError(f"Invalid device specification: {device}")
    if isinstance(device, bool):  # TorchNeuron refuses it; torch.neuron would read True as neuron:1
        raise ValueError(f"Invalid device id: {device}")
    try:
        return _neuron_device_index(device, optional=True)
    except _InvalidDeviceError as e:
        requested = device if isinstance(device, int) else torch.device(device).index
        if node_wide and 0 <= requested < device_count():
            return requested
        raise _InvalidDeviceError(f"Invalid device id: {requested}. {e}") from None
    except TypeError:
        if isinstance(device, int):  # beyond the runtime's index type, so it has no message of its own
            local = _local_devices()
            raise _InvalidDeviceError(
                f"Invalid device id: {device}. Valid range is {local.start} to {local.stop - 1} for this process"
            ) from None
        raise ValueError(f"Invalid device specification: {device}") from None
    except ValueError:  # a device of another type
        raise ValueError(f"Expected neuron device, got {torch.device(device).type}") from None


def set_device(device: DeviceLike) -> None:
    """Make ``device`` the calling thread's current Neuron device (ValueError when it does not exist)."""
    _neuron.set_device(_device_index(device))


def get_device_properties(device: DeviceLike = None) -> Any:
    """Properties of a Neuron device (``name``: the instance type, ``total_memory``: HBM bytes, ...).

    ``device`` is an index, ``"neuron:i"`` or a torch.device; None is the current device. A device that
    does not exist raises ValueError.
    """
    index = current_device() if device is None else _device_index(device, node_wide=True)
    _lazy_init()
    return _neuron.get_device_properties(index)


def _get_device_index(device: DeviceLike, optional: bool = False, allow_cpu: bool = False) -> Optional[int]:
    """TorchNeuron's private helper: None stays None when ``optional``, else the current device; any other
    device is checked as every function here checks it."""
    if device is None:
        return None if optional else current_device()
    return _device_index(device)


class device(_neuron.device):
    """Context manager that makes ``device`` the current Neuron device for its block.

    As in TorchNeuron, a device that does not exist raises ValueError (when the manager is created).
    """

    def __init__(self, device: DeviceLike):
        if device is not None and not (isinstance(device, int) and device < 0):
            _device_index(device)
        super().__init__(device if not (isinstance(device, int) and device < 0) else None)


def synchronize(device: DeviceLike = None) -> None:
    """Wait for all work in all streams of a Neuron device (the current one by default) to finish."""
    _neuron.synchronize(None if device is None else _device_index(device))


def empty_cache() -> None:
    """Return the caching allocator's free blocks to the (emulated) runtime."""
    _neuron.empty_cache()


# --------------------------------------------------------------------------- streams


def current_stream(device: DeviceLike = None) -> torch.Stream:
    """The calling thread's current stream on a Neuron device (the current device by default)."""
    return _neuron.current_stream(None if device is None else _device_index(device))


def default_stream(device: DeviceLike = None) -> torch.Stream:
    """The default stream (id 0) of a Neuron device."""
    return _neuron.default_stream(None if device is None else _device_index(device))


def set_stream(stream: Optional[torch.Stream]) -> None:
    """Make ``stream`` the current stream of its device (None: no change)."""
    _neuron.set_stream(stream)


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    """Context manager that makes ``stream`` (and its device) current for its block."""
    return _neuron.stream(stream)


# --------------------------------------------------------------------------- op tracking

_python_executed: set[str] = set()
_python_offloaded: set[str] = set()

# The operators TorchNeuron registers as CPU fallbacks (torch_neuronx/python_ops/cpu_fallback_registrations.py):
# linalg decompositions whose CPU results are column-major; on Trainium their arguments are copied to the CPU,
# the CPU kernel runs, and the results are copied back with the CPU's strides. They therefore never run on the
# device there. The emulator computes them the same way, the CPU's kernel over host views of device memory (its
# generic path), so when one ran it is reported as TorchNeuron reports it: a fallback, not an executed op.
CPU_FALLBACK_OPS = frozenset({
    "aten::linalg_qr", "aten::_linalg_svd", "aten::_linalg_eigh", "aten::linalg_cholesky_ex", "aten::linalg_inv_ex",
    "aten::linalg_lu_factor_ex", "aten::linalg_ldl_factor_ex", "aten::_linalg_slogdet", "aten::_linalg_det",
    "aten::cholesky_inverse", "aten::triangular_solve",
})


def get_executed_ops() -> list[str]:
    """Names of the operators that ran on the Neuron device since the last clear ("aten::add.Tensor", ...)."""
    return sorted((set(_ext.get_executed_ops()) - CPU_FALLBACK_OPS) | _python_executed)


def get_fallback_ops() -> list[str]:
    """Operators that ran on the CPU instead of the Neuron device.

    On Trainium these are the ops TorchNeuron copies to the CPU and back. The emulator runs every other operator
    on device memory (its generic path is a host kernel over zero-copy views of device memory, which TorchNeuron
    runs as device kernels: ``torchneuron_ext.get_fallback_ops()`` lists those), so this holds the operators
    TorchNeuron registers as CPU fallbacks (``CPU_FALLBACK_OPS``, linalg decompositions) that ran, and the ops
    recorded with ``torch_neuronx.utils.log_offloaded_op``.
    """
    return sorted((set(_ext.get_executed_ops()) & CPU_FALLBACK_OPS) | _python_offloaded)


def clear_op_tracking() -> None:
    """Forget the operators recorded so far (executed and fallback)."""
    _ext.clear_op_tracking()
    _python_executed.clear()
    _python_offloaded.clear()


# --------------------------------------------------------------------------- torch.compile metrics


def get_dynamo_metrics() -> list[dict[str, Any]]:
    """One record per graph compiled by ``torch.compile(backend="neuron")``.

    TorchNeuron's records time its FX passes, StableHLO lowering and neuronx-cc; the emulator's are
    torchneuron_ext.compiler.get_metrics()'s (FX nodes, kernels generated, compile seconds per phase, cache
    hits, calls).
    """
    return torch.neuron.get_dynamo_metrics()


def reset_dynamo_metrics() -> None:
    """Forget the compile metrics recorded so far."""
    torch.neuron.reset_dynamo_metrics()


# --------------------------------------------------------------------------- lazy names

_SUBMODULES = ("utils", "distributed", "nki_hop", "memory", "xla_impl")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    if name == "profiling":
        return _importlib.import_module(f"{__name__}.profiling")
    if name in ("nki_op", "wrap_nki"):
        # The package root's public names, so this does not depend on where NKI's torch integration lives.
        return getattr(_ext, name)
    if name == "nki":
        return _importlib.import_module("torchneuron_ext.nki")
    if name == "nki_jit":  # the XLA-era decorator: legacy-dialect kernels
        return _importlib.import_module("torchneuron_ext.nki.legacy").jit
    if name == "NeuronProfiler":
        from .profiling import NeuronProfiler

        return NeuronProfiler
    if name == "_is_in_bad_fork":
        return bool(_ext_C._is_in_bad_fork())
    if name == "_initialized":
        return _neuron_lazy.is_initialized()
    raise _scope.attribute_error("torch_neuronx", name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULES) | {"nki", "nki_jit", "nki_op", "wrap_nki", "NeuronProfiler",
                                                        "profiling"})


from . import neuron  # noqa: E402  (TorchNeuron's torch.neuron module: torch_neuronx.neuron)

env.check_environment()
