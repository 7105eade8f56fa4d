"""nc_matmul's products off the core's Python thread.

The sgemm of a matmul (a (128, 128) x (128, 512) product: 170 us on this VM, at the core's peak) was a fifth to a
quarter of AWS's MoE kernels' simulation, spent while the core's thread could have gone on with the Python of its
next instructions. Each core therefore hands its products to a worker thread of its own (``_C._NKIProductQueue``,
csrc/nki/product_queue.cpp), which runs them in the order they were issued and never needs the GIL: the sgemm
numpy itself calls (found here), then the store or accumulation into PSUM.

What keeps the values right:
- the operands are float32 arrays nobody writes while the product is queued: a widened copy the core keeps
  (operands._Widened) or one of ``SLOTS`` operand arrays per role, reused only once the product that last used
  it is done (``slot``);
- the PSUM a queued product writes is read or written by nothing else before the queue is drained: every read
  and write of PSUM (tensor._schedule_access) drains this core's queue, except the matmul's own records of its
  destination (``own_access``), which queue behind the earlier products into it. Allocations need no wait: a
  new PSUM tile is fresh memory (the queue keeps the old one alive), or memory the kernel placed it at, which
  is never filled (uninitialised memory keeps its values);
- every instance of a kernel drains its queue before the kernel's results are read (Launch.close_products).
The products are the synchronous path's bit for bit: the same BLAS function with numpy's arguments for
``a.T @ b`` (tests/nki/test_products.py compares them). ``TORCHNEURON_EXT_NKI_ASYNC_PRODUCTS=0`` computes
every product on the core's thread, as before.
"""
from __future__ import annotations

import collections
import ctypes
import os
from typing import Any, Optional

import numpy as np

from ..data_address import data_address

# Operand arrays per role: a product's operands are free again SLOTS products later.
SLOTS = 4
_MAX_SLOT_ARRAYS = 64

ENV = "TORCHNEURON_EXT_NKI_ASYNC_PRODUCTS"
_sgemm: Any = None  # (address, int64) of numpy's sgemm, or False when none was found


def numpy_sgemm() -> Optional[tuple]:
    """The address of the CBLAS sgemm numpy's matmul calls, and whether its integers are 64-bit; None when it
    cannot be found (a numpy without OpenBLAS, no threadpoolctl): products then stay on the core's thread."""
    global _sgemm
    if _sgemm is None:
        _sgemm = _find_sgemm() or False
    return _sgemm or None


def _find_sgemm() -> Optional[tuple]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    numpy_root = os.path.dirname(os.path.realpath(os.path.dirname(np.__file__)))
    for info in threadpool_info():
        path = info.get("filepath") or ""
        if info.get("internal_api") != "openblas" or not os.path.realpath(path).startswith(numpy_root + os.sep
                                                                                         + "numpy"):
            continue  # only numpy's own (numpy/ or numpy.libs/): another library's BLAS may round differently
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            return None
        # scipy-openblas builds name their CBLAS with a prefix, and ILP64 ones with a 64_ suffix.
        for name, int64 in (("scipy_cblas_sgemm64_", True), ("cblas_sgemm64_", True),
                            ("scipy_cblas_sgemm", False), ("cblas_sgemm", False)):
            fn = getattr(lib, name, None)
            if fn is not None:
                return ctypes.cast(fn, ctypes.c_void_p).value, int64
    return None


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0" and numpy_sgemm() is not None and _native_queue() is not None


_native: Any = None


def _native_queue() -> Any:
    """The extension's queue class, or None: the NKI simulator also runs with numpy alone (no torch, no _C)."""
    global _native
    if _native is None:
        try:
            from ... import _C
            _native = _C._NKIProductQueue
        except (ImportError, AttributeError):
            _native = False
    return _native or None


class Products:
    """One core's queue of products, with the arrays it must keep alive and its operand slots."""

    def __init__(self) -> None:
        self._queue = self.make_queue()
        self._held: collections.deque = collections.deque()  # (ticket, arrays the product reads or writes)
        self._slots: dict = {}
        self._issued = 0   # the last ticket handed out
        self._done = 0     # a ticket known done (every earlier one is too)
        self.own_access = False  # set while a matmul does its own destination's bookkeeping

    @staticmethod
    def make_queue() -> Any:
        """The native queue (tests put one in its place that computes nothing until waited for)."""
        address, int64 = numpy_sgemm()
        return _native_queue()(address, int64)

    @property
    def pending(self) -> bool:
        return self._issued > self._done

    def slot(self, role: str, shape: tuple) -> np.ndarray:
        """A float32 array of ``shape`` for operand ``role`` of the next product."""
        ticket = self._issued + 1
        self._wait(ticket - SLOTS)  # the last product that used this slot
        key = (role, ticket % SLOTS, shape)
        arr = self._slots.get(key)
        if arr is None:
            if len(self._slots) >= _MAX_SLOT_ARRAYS:
                self.drain()
                self._slots.clear()
            arr = self._slots[key] = np.empty(shape, np.float32)
        return arr

    def submit(self, a: np.ndarray, b: np.ndarray, target: np.ndarray, accumulate: bool) -> None:
        """Queue ``target (+)= a.T @ b``: ``a`` (k, m) and ``b`` (k, n) C-contiguous float32 that nobody writes
        until the product is done, ``target`` (m, n) float32 rows of contiguous elements."""
        k, m = a.shape
        n = b.shape[1]
        self._issued = self._queue.submit(data_address(a), data_address(b), data_address(target), k, m, n,
                                          target.strides[0] // 4, accumulate)
        self._held.append((self._issued, a, b, target))
        if len(self._held) > 4 * SLOTS:
            done = self._completed()
            while self._held and self._held[0][0] <= done:
                self._held.popleft()

    def drain(self) -> None:
        """Until every queued product is in PSUM."""
        if self._issued > self._done:
            self._queue.wait(self._issued)
            self._done = self._issued
        self._held.clear()

    def _wait(self, ticket: int) -> None:
        if ticket > self._done and ticket > self._completed():
            self._queue.wait(ticket)
            self._done = ticket

    def _completed(self) -> int:
        """The last ticket done, asking the queue."""
        self._done = max(self._done, self._queue.completed())
        return self._done


def target_rows(target: np.ndarray, m: int, n: int) -> Optional[np.ndarray]:
    """``target`` as an (m, n) view whose rows hold contiguous float32 elements, or None (a copy would be
    needed, or its layout is not one the worker writes)."""
    if target.dtype != np.float32:
        return None
    try:
        rows = target.reshape((m, n), copy=False)
    except (ValueError, TypeError):  # TypeError: a numpy before 2.1, whose reshape may copy silently
        return None
    st = rows.strides
    if st[1] != 4 or st[0] < 4 * n or st[0] % 4 or data_address(rows) % 4:
        return None
    return rows
