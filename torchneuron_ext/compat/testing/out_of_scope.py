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

_XLA_COLLECTIVES = ("a limit of TorchNeuron's XLA lowering of collectives ({}); the emulator runs the collective "
                    "as NCCL and gloo do")
_CO = "tests/distributed/collective_ops/"

OUT_OF_SCOPE: list[tuple[str, str]] = [
    ("tests/streams/test_error_handler.py::*", _NEURONX_CC),
    ("tests/operations/test_copy_neuron_to_neuron.py::test_copy_blocking_synchronizes_stream",
     "TorchNeuron's asynchronous NRT queues (a blocking copy must synchronize its stream); the emulator executes "
     "synchronously, with nothing to synchronize"),
    ("tests/streams/test_stream_creation.py::*::test_single_stream_mode_default", _SINGLE_STREAM),
    ("tests/views/test_contiguous_ops.py::*::test_contiguous_rejects_unsupported_memory_format", _MEMORY_FORMAT),
    *[(_CO + f, _XLA_COLLECTIVES.format("empty tensors are refused; NCCL exchanges nothing"))
      for f in ("test_all_reduce.py::*::test_zero_size_tensor", "test_reduce.py::*::test_zero_size_tensor",
                "test_all_gather.py::*::test_empty_tensor", "test_all_gather_coalesced.py::*::test_empty_tensor",
                "test_gather.py::*::test_empty_tensor")],
    (_CO + "test_alltoall.py::*::test_shape_mismatch_error",
     _XLA_COLLECTIVES.format("all_to_all tensors of one shape; NCCL takes a shape per peer, and a real disagreement "
                             "between ranks is still refused, naming the ranks")),
    *[(_CO + "test_alltoall.py::*::" + t,
       "Trainium's all-to-all topology (replica groups of the sizes its rings support, starting at multiples of "
       "their size); the emulator exchanges between any ranks, as NCCL and gloo do")
      for t in ("test_alltoall_partial_group_supported_fail_cases*", "test_alltoall_partial_group_unsupported_world_size")],
    (_CO + "test_alltoall_base.py::*::test_invalid_split_sizes_error",
     _XLA_COLLECTIVES.format("all_to_all_single with even splits only")),
    (_CO + "test_reduce_scatter_base.py::*::test_unsupported_op",
     _XLA_COLLECTIVES.format("reduce-scatter without PRODUCT")),
    (_CO + "test_reduce_scatter_tensor_coalesced.py::*::test_shape_mismatch_error",
     _XLA_COLLECTIVES.format("coalesced reduce-scatter inputs of one shape beyond dim 0")),
]


def reason_for(nodeid: str) -> Optional[str]:
    for pattern, reason in OUT_OF_SCOPE:
        if fnmatch.fnmatchcase(nodeid, pattern):
            return reason
    return None
