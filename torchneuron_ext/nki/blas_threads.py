"""Run the simulator's BLAS calls on one thread.

A kernel's matmuls are tile-sized (at most 128 x 128 x 512 on trn1/trn2). Multithreaded BLAS buys
nothing at that size and costs a lot: OpenBLAS's worker threads spin and hand off per call, which on a
busy 2-core machine made one 128 x 128 x 512 matmul take 25 ms instead of 0.4 ms. A launch therefore
limits BLAS to one thread (through threadpoolctl) and restores the previous limit afterwards.
"""
from __future__ import annotations

from typing import Any, Optional

_controller: Optional[Any] = None
_unavailable = False


class _NoLimit:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def single_threaded() -> Any:
    """A context manager limiting numpy's BLAS to one thread (a no-op without threadpoolctl)."""
    global _controller, _unavailable
    if _controller is None and not _unavailable:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _unavailable = True
        else:
            # Scanning the loaded libraries takes a few milliseconds: do it once. numpy's BLAS is
            # loaded by now, and it is the one the engines call.
            _controller = ThreadpoolController().select(user_api="blas")
    if _controller is None:
        return _NoLimit()
    return _controller.limit(limits=1)
