"""At interpreter exit, let PyTorch's autograd device threads finish with their last backward first.

With ``TORCHNEURON_EXT_AUTOGRAD_THREADS=device`` a backward runs on PyTorch's worker thread for the device, and
that thread drops its last reference to the backward's GraphTask just after waking the caller. The GraphTask
holds the caller's thread-local state, which holds a Python object (the ``contextvars`` context
``torch.autograd`` stashes for every backward); releasing it needs the GIL. If the program ends right after a
backward, the interpreter may already be finalizing: the worker cannot take the GIL, Python ends the thread
through a noexcept destructor, and the process aborts ("terminate called without an active exception"), after
all the work succeeded.

Before finalization (atexit), one more backward on each device's worker thread, started without that stash,
queues behind whatever the worker still holds: when it returns, the worker has let go of the previous graph,
and the new one holds no Python object, so releasing it needs no GIL. In the default mode (backward on the
calling thread) there is nothing to drain.
"""
from __future__ import annotations

import atexit

import torch

from ._lazy import is_initialized
from .device import local_devices


def drain_autograd_device_threads() -> None:
    if not is_initialized() or not torch.autograd.is_multithreading_enabled():
        return  # no neuron work yet, or backward runs on the calling thread (the default)
    from torch.autograd.variable import Variable

    engine = Variable._execution_engine
    for device in local_devices():
        try:
            x = torch.zeros((), device=f"neuron:{device}", requires_grad=True)
            y = x * 2
            # Not torch.autograd.backward: it stashes the contextvars context this drain must not capture.
            engine.run_backward((y,), (torch.ones((), device=y.device),), False, False, (), True, True)
        except Exception:  # noqa: BLE001 - exiting: a device that cannot run this has nothing to drain
            continue


atexit.register(drain_autograd_device_threads)
