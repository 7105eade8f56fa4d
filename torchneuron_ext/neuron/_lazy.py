"""Lazy initialisation of the runtime and the fork guard (torch.cuda's shape)."""
from __future__ import annotations

import threading

from .. import _C

_initialized = False
_lock = threading.Lock()


def is_initialized() -> bool:
    """Whether the neuron runtime has been initialised in this process."""
    return _initialized and not _C._is_in_bad_fork()


def _is_in_bad_fork() -> bool:
    return bool(_C._is_in_bad_fork())


def _lazy_init() -> None:
    """Initialise the runtime on first use; raise a clear error when it cannot be."""
    global _initialized
    if _initialized and not _C._is_in_bad_fork():
        return
    with _lock:
        if _initialized and not _C._is_in_bad_fork():
            return
        if _C._is_in_bad_fork():
            raise RuntimeError(
                _C._BAD_FORK_MESSAGE + " (multiprocessing.set_start_method('spawn') or torch.multiprocessing.spawn)."
            )
        _C._numerics_mode()  # raises ValueError for a bad TORCHNEURON_EXT_NUMERICS
        _C._rng_source()  # and for a bad TORCHNEURON_EXT_RNG
        _C._init()  # raises ValueError for a bad NEURON_RT_* configuration
        _initialized = True


def init() -> None:
    """Initialise the neuron runtime (normally done on first use)."""
    _lazy_init()
