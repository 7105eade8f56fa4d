"""Tests of TorchNeuron's suite that are about what the emulator deliberately does not have.

Each entry is a pattern over pytest node ids (fnmatch) and the reason. Only tests about Trainium hardware,
the neuronx-cc compiler, NEFF caches, XLA/JAX or StableHLO lowering belong here; every other test of the
suite is expected to pass. (Tests whose module or body reaches an out-of-scope part of TorchNeuron, e.g.
``torch_neuronx.python_ops``, are recognised by the error they get and need no entry.)
"""
from __future__ import annotations

import fnmatch
from typing import Optional

_NEURONX_CC = "neuronx-cc compilation (the emulator runs ATen's host kernels; nothing is compiled to a NEFF)"
_SINGLE_STREAM = ("TorchNeuron's single-stream fallback of NRT without host collectives (every stream is the "
                  "default stream); emulated streams are always distinct, as with NEURON_RT_ENABLE_HOST_CC=1")
_MEMORY_FORMAT = ("Trainium's layout limit (TorchNeuron accepts only contiguous and preserve memory formats); the "
                  "emulator supports every memory format, as the CPU does")

OUT_OF_SCOPE: list[tuple[str, str]] = [
    ("tests/streams/test_error_handler.py::*", _NEURONX_CC),
    ("tests/operations/test_copy_neuron_to_neuron.py::test_copy_blocking_synchronizes_stream",
     "TorchNeuron's asynchronous NRT queues (a blocking copy must synchronize its stream); the emulator executes "
     "synchronously, with nothing to synchronize"),
    ("tests/streams/test_stream_creation.py::*::test_single_stream_mode_default", _SINGLE_STREAM),
    ("tests/views/test_contiguous_ops.py::*::test_contiguous_rejects_unsupported_memory_format", _MEMORY_FORMAT),
]


def reason_for(nodeid: str) -> Optional[str]:
    for pattern, reason in OUT_OF_SCOPE:
        if fnmatch.fnmatchcase(nodeid, pattern):
            return reason
    return None
