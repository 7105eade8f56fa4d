"""Zero-copy views between torch tensors (CPU and neuron) and the numpy arrays the simulator runs on."""
from __future__ import annotations

import ctypes
from typing import Any

import ml_dtypes
import numpy as np
import torch

_TORCH_TO_NUMPY = {
    torch.float32: np.dtype(np.float32), torch.float16: np.dtype(np.float16),
    torch.bfloat16: np.dtype(ml_dtypes.bfloat16), torch.float64: np.dtype(np.float64),
    torch.int8: np.dtype(np.int8), torch.int16: np.dtype(np.int16), torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64), torch.uint8: np.dtype(np.uint8), torch.bool: np.dtype(np.bool_),
    torch.uint16: np.dtype(np.uint16), torch.uint32: np.dtype(np.uint32),
    torch.float8_e4m3fn: np.dtype(ml_dtypes.float8_e4m3fn), torch.float8_e5m2: np.dtype(ml_dtypes.float8_e5m2),
}
_NUMPY_TO_TORCH = {v: k for k, v in _TORCH_TO_NUMPY.items()}
_NUMPY_TO_TORCH[np.dtype(ml_dtypes.float8_e4m3)] = torch.float8_e4m3fn  # torch has no IEEE-style e4m3


def torch_to_numpy_dtype(dtype: torch.dtype) -> np.dtype:
    try:
        return _TORCH_TO_NUMPY[dtype]
    except KeyError:
        raise TypeError(f"NKI kernels cannot take tensors of dtype {dtype}") from None


def numpy_to_torch_dtype(dtype: np.dtype) -> torch.dtype:
    try:
        return _NUMPY_TO_TORCH[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"no torch dtype for NKI dtype {dtype}") from None


def tensor_view(t: torch.Tensor) -> np.ndarray:
    """A numpy array that shares memory with ``t`` (CPU or neuron; device memory is host memory here)."""
    t = t.detach()
    dtype = torch_to_numpy_dtype(t.dtype)
    if t.device.type == "cpu":
        if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16, torch.uint32):
            carrier = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]
            return t.view(carrier).numpy().view(dtype)
        return t.numpy()
    if t.device.type != "neuron":
        raise TypeError(f"NKI kernels take numpy arrays, CPU tensors or neuron tensors, got a tensor on {t.device}")
    if t.numel() == 0:
        return np.empty(tuple(t.shape), dtype=dtype)
    item = t.element_size()
    span = (sum((s - 1) * st for s, st in zip(t.shape, t.stride())) + 1) * item
    buf = (ctypes.c_byte * span).from_address(t.data_ptr())
    return np.ndarray(tuple(t.shape), dtype=dtype, buffer=buf, strides=tuple(st * item for st in t.stride()))


def numpy_to_cpu_tensor(arr: np.ndarray) -> torch.Tensor:
    """A CPU tensor sharing memory with ``arr`` (bf16 and fp8 through an integer carrier)."""
    dtype = numpy_to_torch_dtype(arr.dtype)
    if arr.dtype.kind == "V" or arr.dtype in (np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3),
                                              np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)):
        carrier = {1: np.uint8, 2: np.int16}[arr.itemsize]
        return torch.from_numpy(np.ascontiguousarray(arr).view(carrier)).view(dtype)
    return torch.from_numpy(arr)


def neuron_hbm_allocator(device: torch.device):
    """Allocate kernel-created HBM tensors on the neuron device, so outputs need no copy."""
    def allocate(shape: tuple, dtype: np.dtype) -> "tuple[np.ndarray, Any]":
        t = torch.empty(shape, dtype=numpy_to_torch_dtype(dtype), device=device)
        return tensor_view(t), t
    return allocate
