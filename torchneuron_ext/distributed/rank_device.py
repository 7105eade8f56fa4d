"""One NeuronCore per rank, numbered as TorchNeuron numbers it.

In a distributed job each process owns one core, its ``LOCAL_RANK``'s, and PyTorch sees it as
``neuron:LOCAL_RANK`` on a node of ``LOCAL_WORLD_SIZE`` devices: ``device_count()`` is the node's
process count, the current device is the rank's core, and the other indices (the other processes'
cores) are refused with TorchNeuron's messages.

TorchNeuron sets this up when the first ``"neuron"`` process group is created, and so does
:func:`setup_rank_device`. When torchrun's environment already says it all at import
(``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE``), :func:`number_from_environment` does it then, so a script may call
``torch.neuron.set_device(local_rank)`` or create tensors on ``neuron:{local_rank}`` before
``init_process_group``, as CUDA scripts do.
"""
from __future__ import annotations

import os
import socket
import warnings
from typing import Any, MutableMapping

_VISIBLE = "NEURON_RT_VISIBLE_CORES"

# The layout this process took, once: TorchNeuron sets it for the first "neuron" group only.
_layout_done = False


def _non_negative(name: str, value: str) -> int:
    if not value.strip().isdigit():
        raise ValueError(f"{name}='{value}' is not a non-negative integer; torchrun sets it per worker")
    return int(value.strip())


def select_rank_core(environ: MutableMapping[str, str] | None = None) -> str | None:
    """Set ``NEURON_RT_VISIBLE_CORES`` from ``LOCAL_RANK`` unless the user chose cores already.

    Returns the core list now in effect for this process, or None when the process is not a
    torchrun worker and nothing was chosen. NEURON_RT_NUM_CORES does not stop it: in a distributed
    job each process owns one core, as on TorchNeuron.
    """
    env = os.environ if environ is None else environ
    if env.get(_VISIBLE):
        return env[_VISIBLE]
    local_rank = env.get("LOCAL_RANK")
    if local_rank is None:
        return None
    env[_VISIBLE] = str(_non_negative("LOCAL_RANK", local_rank))
    return env[_VISIBLE]


def number_from_environment() -> None:
    """At import: take neuron:LOCAL_RANK now when torchrun set LOCAL_RANK and LOCAL_WORLD_SIZE.

    Silent when it cannot (no torchrun, one core per rank not chosen, a bad value): the process
    group's setup then either does it or raises the error. An import must not fail.
    """
    from .. import _C

    local_rank, local_world = os.environ.get("LOCAL_RANK"), os.environ.get("LOCAL_WORLD_SIZE")
    if not local_rank or not local_world or _C._is_initialized():
        return
    try:
        _C._reload_core_config()
        if _C._end_device() - _C._first_device() == 1:
            _C._set_local_layout(_non_negative("LOCAL_RANK", local_rank),
                                 _non_negative("LOCAL_WORLD_SIZE", local_world))
    except (ValueError, RuntimeError):
        return


def _layout_from_store(rank: int, world_size: int, store: Any) -> tuple[int, int]:
    """(local rank, local world size) of this process: the ranks on this host, in rank order."""
    host = socket.gethostname()
    store.set(f"torchneuron_ext/host/{rank}", host)
    on_host = [r for r in range(world_size) if store.get(f"torchneuron_ext/host/{r}").decode() == host]
    return on_host.index(rank), len(on_host)


def setup_rank_device(rank: int, world_size: int, store: Any) -> None:
    """Number this process's core neuron:LOCAL_RANK, at the creation of its first "neuron" group.

    The local rank and the node's process count come from LOCAL_RANK and LOCAL_WORLD_SIZE when both
    are set, else from the store (the ranks that share this host), as on TorchNeuron.
    """
    global _layout_done
    if _layout_done:
        return
    from .. import _C

    env = os.environ
    if env.get("LOCAL_RANK") and env.get("LOCAL_WORLD_SIZE"):
        local_rank = _non_negative("LOCAL_RANK", env["LOCAL_RANK"])
        local_world = _non_negative("LOCAL_WORLD_SIZE", env["LOCAL_WORLD_SIZE"])
    else:
        local_rank, local_world = _layout_from_store(rank, world_size, store)
    if _C._is_initialized():
        _layout_done = True
        if _C._first_device() == local_rank and _C._end_device() - local_rank == 1 and local_rank < local_world:
            _C._set_local_layout(local_rank, local_world)  # the same core, now counted on its node
            return
        first, end = _C._first_device(), _C._end_device()
        warnings.warn(
            f"neuron: the runtime started before init_process_group(backend='neuron'), so this process keeps "
            f"its NeuronCores numbered neuron:{first} to neuron:{end - 1} instead of owning neuron:{local_rank} "
            f"alone. TorchNeuron refuses this order; create neuron tensors and call torch.neuron functions after "
            f"init_process_group.", stacklevel=3)
        return
    if not env.get(_VISIBLE):
        env[_VISIBLE] = str(local_rank)
    _C._reload_core_config()
    if _C._config_error():
        raise ValueError(_C._config_error())
    count = _C._end_device() - _C._first_device()
    if count != 1:
        raise RuntimeError(
            f"Attempted to have more than one device per process in distributed setup: "
            f"{_VISIBLE}='{env[_VISIBLE]}' gives rank {rank} {count} NeuronCores. Each process of a distributed "
            f"job owns one core; give each rank one core id, or leave {_VISIBLE} unset and each rank takes the "
            f"core of its LOCAL_RANK.")
    _C._set_local_layout(local_rank, local_world)
    _layout_done = True
