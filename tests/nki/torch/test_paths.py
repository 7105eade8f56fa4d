"""NKI's torch integration lives in torchneuron_ext.nki.torch; the paths users imported before stay the same
modules, and the core knows the integration only through what it registered."""
from __future__ import annotations

import importlib

import torch

import torchneuron_ext
import torchneuron_ext.nki.torch as integration
from torchneuron_ext.nki import dtypes, kernel


def test_old_paths_are_the_moved_modules() -> None:
    for old, new in (("torch_ops", "ops"), ("aten_routing", "aten_routing"), ("interop", "interop")):
        assert importlib.import_module(f"torchneuron_ext.nki.{old}") is \
            importlib.import_module(f"torchneuron_ext.nki.torch.{new}")
    from torchneuron_ext.nki.aten_routing import route_aten
    from torchneuron_ext.nki.interop import numpy_to_cpu_tensor, tensor_view  # noqa: F401
    from torchneuron_ext.nki.torch_ops import nki_op, wrap_nki
    assert (integration.nki_op, integration.wrap_nki, integration.route_aten) == (nki_op, wrap_nki, route_aten)
    assert (torchneuron_ext.nki_op, torchneuron_ext.route_aten) == (nki_op, route_aten)


def test_the_integration_registered_itself_with_the_core() -> None:
    from torchneuron_ext.nki.torch.launch import TorchArguments
    assert kernel._arguments is TorchArguments
    assert kernel._trace_handler is not None
    assert dtypes.as_dtype(torch.bfloat16) == dtypes.bfloat16
