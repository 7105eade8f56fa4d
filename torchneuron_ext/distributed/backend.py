"""Registration of the ``"neuron"`` backend with torch.distributed.

The backend object is ``torchneuron_ext._C._ProcessGroupNeuron``, a c10d
``Backend`` written in C++ (csrc/distributed/). It is created per process
group around a ``ProcessGroupGloo`` on the same store, which carries the
bytes; this module only wires the two together.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch.distributed as dist

from .. import _C, _env, _torch_internals
from . import attention_sharding
from .rank_device import setup_rank_device

BACKEND_NAME = "neuron"
ProcessGroupNeuron = _C._ProcessGroupNeuron

# On (the default) runs the cross-rank shape/dtype agreement check before each
# collective; off skips it (one small all-gather fewer per collective).
_CHECKS_ENV = "TORCHNEURON_EXT_DIST_CHECKS"


def _check_c10d_registration() -> None:
    if not dist.is_available():
        return
    backend = _torch_internals.attribute("torch.distributed", "Backend")
    for name in ("_plugins", "default_device_backend_map"):
        if not hasattr(backend, name):
            raise _torch_internals.Broken(f"torch.distributed.Backend.{name} does not exist")
    _torch_internals.parameters(backend.register_backend, "extended_api", "devices", label="Backend.register_backend")
    if dist.is_gloo_available() and not hasattr(dist.ProcessGroupGloo, "_set_sequence_number_for_group"):
        raise _torch_internals.Broken("ProcessGroupGloo._set_sequence_number_for_group does not exist")


_torch_internals.register(
    "P20", "c10d backend registration", "torchneuron_ext/distributed/backend.py",
    "dist.Backend._plugins, Backend.default_device_backend_map, register_backend(extended_api=, "
    "devices=), ProcessGroupGloo._set_sequence_number_for_group",
    "register() and _create_backend in distributed/backend.py", _check_c10d_registration)


@dataclasses.dataclass
class NeuronOptions:
    """Per-group options: ``dist.new_group(backend="neuron", pg_options=NeuronOptions(...))``.

    check_signatures: run the cross-rank agreement check (collective kind,
    root, reduction, dtype, shapes) before each collective. None: the
    TORCHNEURON_EXT_DIST_CHECKS default.
    """

    check_signatures: bool | None = None


def checks_enabled_by_default() -> bool:
    """TORCHNEURON_EXT_DIST_CHECKS: on unless 0/false/off/no; a ValueError for a value that is neither."""
    return _env.flag(_CHECKS_ENV, True)


def _create_backend(opts: Any, backend_options: Any) -> ProcessGroupNeuron:
    """The ``extended_api`` creator torch calls for every process group using "neuron"."""
    if not dist.is_gloo_available():
        raise RuntimeError("the neuron backend runs its collectives in gloo, but this torch was built without gloo")
    setup_rank_device(opts.group_rank, opts.group_size, opts.store)
    attention_sharding.register()
    gloo = dist.ProcessGroupGloo(opts.store, opts.group_rank, opts.group_size, opts.timeout)
    gloo.options.global_ranks_in_group = list(opts.global_ranks_in_group)
    gloo.options.group_name = opts.group_id
    gloo._set_sequence_number_for_group()  # as torch does for gloo groups (flight recorder, debug tools)
    if backend_options is not None and not isinstance(backend_options, NeuronOptions):
        raise TypeError(f"the neuron backend takes pg_options=torchneuron_ext.distributed.NeuronOptions(...), "
                        f"got {type(backend_options).__name__}")
    checks = checks_enabled_by_default()
    if backend_options is not None and backend_options.check_signatures is not None:
        checks = backend_options.check_signatures
    return ProcessGroupNeuron(gloo, opts.group_rank, opts.group_size, opts.group_id, checks)


def register() -> None:
    """Make ``init_process_group(backend="neuron")`` (and ``"cpu:gloo,neuron:neuron"``) available."""
    _torch_internals.require("P20")
    if not dist.is_available() or BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    # "cpu" too: a group created with backend="neuron" then also serves CPU
    # tensors (all_gather_object, CPU metrics), through the same gloo transport.
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True,
                                  devices=[BACKEND_NAME, "cpu"])
    # The default backend for neuron tensors, whatever register_backend's
    # first-come rule decided for the device earlier.
    dist.Backend.default_device_backend_map[BACKEND_NAME] = BACKEND_NAME
