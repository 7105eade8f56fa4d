"""``torch_neuronx.utils``: TorchNeuron's helper functions, with their meaning on the emulated device.

The configuration queries read the same environment variables as TorchNeuron, with its defaults (those
its ``import`` sets: ``TORCH_NEURONX_MLIR_ATEN_OPS=1``...), so test code that branches on them takes
TorchNeuron's default branch. ``is_sync_mode_enabled()`` is always True: the emulator executes every op
synchronously. The NEFF-cache logging functions do nothing (there is no NEFF cache); the op-logging ones
record into ``torch_neuronx.get_executed_ops()`` / ``get_fallback_ops()``.
"""
from __future__ import annotations

import os
import typing as _t
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, Optional, get_args

import numpy as np
import torch
from packaging.version import Version

from ... import _env, _torch_internals

__all__ = [
    "MXFP8", "TORCH_VERSION", "cast_dtype_if_needed", "convert_for_neuron", "flatten_tensors",
    "get_device_from_tensors", "get_gmm_align", "get_lnc_setting", "get_logical_neuron_cores",
    "get_neuron_registered_ops", "get_platform_target", "get_worker_multiplier", "is_float8_e4m3_supported",
    "is_float8_e4m3fn_supported", "is_mxocp_supported", "is_neff_cache_disabled", "is_stablehlo_enabled",
    "is_sync_mode_enabled", "log_executed_op", "log_neff_cache_hit", "log_neff_cache_miss",
    "log_neff_cache_store", "log_offloaded_op", "map_external_dtype_to_torch", "map_torch_dtype_to_external",
    "move_pytree_to_cpu", "move_pytree_to_neuron", "skip_op_preconditions", "suppress_specific_warnings",
    "use_mlir_aten_ops",
]

TORCH_VERSION = Version(torch.__version__)

# ============================================================ tensors


def flatten_tensors(obj: _t.Any) -> list[torch.Tensor]:
    """Every tensor of a tensor or nested lists/tuples of tensors, depth first, in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in flatten_tensors(item)]
    return []


def get_device_from_tensors(tensors: _t.Any) -> torch.device:
    """The device of the first tensor in a (nested) structure; the current neuron device if there is none."""
    stack = [tensors]
    while stack:
        obj = stack.pop(0)
        if isinstance(obj, torch.Tensor):
            return obj.device
        if isinstance(obj, (list, tuple)):
            stack[:0] = list(obj)
    from torchneuron_ext import neuron

    return torch.device("neuron", neuron.current_device())


def move_pytree_to_cpu(obj: _t.Any) -> _t.Any:
    """Copy every neuron tensor of a nested list/tuple/dict to the CPU (other leaves unchanged)."""
    if isinstance(obj, torch.Tensor):
        return obj.to("cpu") if obj.device.type == "neuron" else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(move_pytree_to_cpu(x) for x in obj)
    if isinstance(obj, dict):
        return {k: move_pytree_to_cpu(v) for k, v in obj.items()}
    return obj


def move_pytree_to_neuron(obj: _t.Any) -> _t.Any:
    """Copy every tensor of a nested list/tuple/dict to the neuron device (other leaves unchanged)."""
    if isinstance(obj, torch.Tensor):
        return obj.to("neuron")
    if isinstance(obj, (list, tuple)):
        return type(obj)(move_pytree_to_neuron(x) for x in obj)
    if isinstance(obj, dict):
        return {k: move_pytree_to_neuron(v) for k, v in obj.items()}
    return obj


@contextmanager
def suppress_specific_warnings(patterns: _t.Iterable[str]) -> _t.Iterator[None]:
    """Within the block, warnings whose message contains one of ``patterns`` are not shown."""
    patterns = list(patterns)
    original = warnings.showwarning

    def _show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        if any(p in str(message) for p in patterns):
            return
        original(message, category, filename, lineno, file, line)

    warnings.showwarning = _show
    try:
        yield
    finally:
        warnings.showwarning = original


# ============================================================ configuration


def use_mlir_aten_ops() -> bool:
    """TORCH_NEURONX_MLIR_ATEN_OPS, on by default as in TorchNeuron: ATen ops lowered through torch-mlir.

    The emulator has no lowering; this only reports the variable, so tests branch as on TorchNeuron. Like
    every switch of the package it reads 1/true/on/yes and 0/false/off/no (_env.flag).
    """
    return _env.flag("TORCH_NEURONX_MLIR_ATEN_OPS", True)


def is_stablehlo_enabled() -> bool:
    """TORCH_NEURONX_ENABLE_STABLEHLO, on by default (a report; nothing is lowered here)."""
    return _env.flag("TORCH_NEURONX_ENABLE_STABLEHLO", True)


def is_sync_mode_enabled() -> bool:
    """Whether each op has finished when its call returns (TorchNeuron: NEURON_LAUNCH_BLOCKING=1).

    Always True on the emulator, which executes synchronously whatever NEURON_LAUNCH_BLOCKING says.
    """
    return True


def get_gmm_align() -> int:
    """TORCH_NEURONX_ATEN_GMM_ALIGN (default 128): TorchNeuron's grouped-matmul offset alignment."""
    return int(os.environ.get("TORCH_NEURONX_ATEN_GMM_ALIGN", "128"))


def skip_op_preconditions() -> bool:
    """TORCH_NEURONX_SKIP_OP_PRECONDITIONS, off by default (a report; the emulator has no lowering preconditions)."""
    return _env.flag("TORCH_NEURONX_SKIP_OP_PRECONDITIONS", False)


def is_neff_cache_disabled() -> bool:
    """TORCH_NEURONX_DISABLE_NEFF_CACHE, off by default (a report; the emulator has no NEFF cache)."""
    return _env.flag("TORCH_NEURONX_DISABLE_NEFF_CACHE", False)


def get_platform_target() -> str:
    """The Trainium generation: "trn2" unless NEURON_EMU_TARGET, NKI_TARGET or
    NEURON_PLATFORM_TARGET_OVERRIDE says otherwise (trainium.targets.target_from_environment).

    It is the generation the NKI simulator checks kernels against.
    """
    from torchneuron_ext.trainium.targets import target_from_environment

    return target_from_environment().name


def get_lnc_setting() -> str:
    """The hardware's default logical NeuronCore size: "2" on trn2 and trn3, "1" on trn1 and inf2."""
    from torchneuron_ext.trainium.targets import target_from_environment

    return str(target_from_environment().default_lnc)


def get_logical_neuron_cores() -> str:
    """NEURON_LOGICAL_NC_CONFIG if set, else the platform's default (get_lnc_setting())."""
    return os.environ.get("NEURON_LOGICAL_NC_CONFIG", get_lnc_setting())


def get_worker_multiplier() -> int:
    """2 on trn2 with LNC=1 (twice the logical cores), otherwise 1."""
    return 2 if get_platform_target() == "trn2" and get_logical_neuron_cores() == "1" else 1


def _get_instance_type() -> str:
    from torchneuron_ext import neuron

    return neuron.get_device_name(0) if neuron.device_count() else "trn2.48xlarge"


# ============================================================ op and NEFF-cache logging


def log_executed_op(op_name: str) -> None:
    """Record ``op_name`` as executed on Neuron (torch_neuronx.get_executed_ops())."""
    from . import _python_executed

    _python_executed.add(str(op_name))


def log_offloaded_op(op_name: str) -> None:
    """Record ``op_name`` as fallen back to the CPU (torch_neuronx.get_fallback_ops())."""
    from . import _python_offloaded

    _python_offloaded.add(str(op_name))


def log_neff_cache_hit(cache_key: str) -> None:
    """No-op: the emulator compiles no NEFFs, so there is no NEFF cache to log."""


def log_neff_cache_miss(cache_key: str) -> None:
    """No-op: the emulator compiles no NEFFs, so there is no NEFF cache to log."""


def log_neff_cache_store(cache_key: str) -> None:
    """No-op: the emulator compiles no NEFFs, so there is no NEFF cache to log."""


# ============================================================ dtypes


def cast_dtype_if_needed(tensor: torch.Tensor, target_dtype: Optional[torch.dtype]) -> torch.Tensor:
    """``tensor.to(target_dtype)``, or ``tensor`` itself when target_dtype is None or already its dtype."""
    if target_dtype is None or tensor.dtype == target_dtype:
        return tensor
    return tensor.to(dtype=target_dtype)


def is_float8_e4m3_supported() -> bool:
    """float8_e4m3 (IEEE-style, with infinities) is trn2's FP8 format."""
    return get_platform_target() == "trn2"


def is_float8_e4m3fn_supported() -> bool:
    """float8_e4m3fn (OCP, no infinities) is every other generation's."""
    return get_platform_target() != "trn2"


def is_mxocp_supported() -> bool:
    """OCP microscaling (MXFP8) formats: every generation but trn2."""
    return get_platform_target() != "trn2"


_MXFP8_value_tensor_dtypes = Literal["float8_e4m3fn", "float8_e5m2"]


@dataclass
class MXFP8:
    """An MXFP8 tensor: FP8 data, its block scales, and the data's dtype name."""

    data: torch.Tensor
    scale: torch.Tensor
    dtype: _MXFP8_value_tensor_dtypes

    def __post_init__(self) -> None:
        if not is_mxocp_supported():
            raise Exception(f"MXOCP is not supported on this platform target: {get_platform_target()}")
        supported = get_args(_MXFP8_value_tensor_dtypes)
        if self.dtype not in supported:
            raise ValueError(f"Unsupported MXFP8 Value Tensor dtype: {self.dtype}. "
                             f"Supported MXFP8 Value Tensor dtypes: {supported}")


_NAME_TO_TORCH = {
    "float32": torch.float32, "float16": torch.float16, "float64": torch.float64, "bfloat16": torch.bfloat16,
    "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8,
    "uint8": torch.uint8, "uint16": torch.uint16, "uint32": torch.uint32, "uint64": torch.uint64,
    "bool": torch.bool, "bool_": torch.bool, "float8_e5m2": torch.float8_e5m2,
}


def _dtype_name(obj: _t.Any) -> Optional[str]:
    """The name of a numpy/ml_dtypes dtype or scalar type, or of an NKI dtype alias; None otherwise."""
    inner = getattr(obj, "dtype", None)  # torchneuron_ext.nki's dtype aliases wrap a numpy dtype
    if isinstance(inner, np.dtype) and not isinstance(obj, np.ndarray):
        obj = inner
    try:
        return np.dtype(obj).name if not isinstance(obj, str) else None
    except TypeError:
        return None


def map_external_dtype_to_torch(nki_or_numpy_dtype: _t.Any) -> torch.dtype:
    """The torch dtype of an NKI or numpy dtype (``nl.bfloat16``, ``np.float32``, ``np.dtype("int8")``, ...).

    As in TorchNeuron: torch dtypes pass through; FP8 follows the platform (float8_e4m3 maps to
    torch.float8_e4m3fn on trn2 and is refused elsewhere; float8_e4m3fn is refused on trn2); anything
    unknown maps to torch.float32.
    """
    if isinstance(nki_or_numpy_dtype, torch.dtype):
        return nki_or_numpy_dtype
    name = _dtype_name(nki_or_numpy_dtype)
    target = get_platform_target()
    if name == "float8_e4m3":
        if is_float8_e4m3_supported():
            return torch.float8_e4m3fn
        raise RuntimeError(f"Unexpected dtype {nki_or_numpy_dtype} for platform {target}")
    if name == "float8_e4m3fn":
        if not is_float8_e4m3fn_supported():
            raise RuntimeError(f"Unsupported dtype {nki_or_numpy_dtype} for platform {target}")
        return torch.float8_e4m3fn
    return _NAME_TO_TORCH.get(name or "", torch.float32)


def map_torch_dtype_to_external(_dtype: torch.dtype) -> _t.Any:
    """The NKI/numpy dtype of a torch dtype (bfloat16 and FP8 as ml_dtypes; bool as uint8, as TorchNeuron).

    torch.float8_e4m3fn raises RuntimeError, as in TorchNeuron ("not supported in neuronxcc").
    """
    import ml_dtypes

    if _dtype == torch.float8_e4m3fn:
        raise RuntimeError("float8_e4m3fn is not supported in neuronxcc. ")
    table = {
        torch.bool: np.dtype(np.uint8),
        torch.bfloat16: np.dtype(ml_dtypes.bfloat16),
        torch.float8_e5m2: np.dtype(ml_dtypes.float8_e5m2),
        torch.float8_e4m3fnuz: np.dtype(ml_dtypes.float8_e4m3fn),
        torch.float8_e5m2fnuz: np.dtype(ml_dtypes.float8_e5m2),
    }
    if _dtype in table:
        return table[_dtype]
    return torch.empty(1, dtype=_dtype).numpy().dtype


def convert_for_neuron(tensor: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """TorchNeuron's 64-to-32-bit narrowing (int64 to int32, float64 to float32); other dtypes unchanged.

    TorchNeuron's hardware computes in 32 bits; the emulator computes 64-bit dtypes natively, so this is
    only needed by code that asks for the narrowing itself.
    """
    target = {torch.int64: torch.int32, torch.float64: torch.float32}.get(tensor.dtype)
    if target is None:
        return tensor
    return tensor.to(target, non_blocking=non_blocking)


# ============================================================ op registrations


def get_neuron_registered_ops(as_sorted: bool = False, keep_variant: bool = False) -> _t.Union[set[str], list[str]]:
    """Operators with a kernel registered for the neuron dispatch key (PrivateUse1).

    Names without their namespace: "add" (or "add.Tensor" with ``keep_variant``). Every operator that
    reaches the emulator runs (the generic path takes the rest), so this lists the specialised kernels.
    """
    _torch_internals.require("P21")
    names = set()
    for reg in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"):
        if "::" in reg:
            op = reg.split("::", 1)[1]
            names.add(op if keep_variant else op.split(".")[0])
    return sorted(names) if as_sorted else names
