"""NKI's torch integration lives in torchneuron_ext.nki.torch; the paths users imported before stay the same
modules, and the core knows the integration only through what it registered."""
from __future__ import annotations

import importlib

import torch

import torchneuron_ext
import torchneuron_ext.nki.torch as integration
from torchneuron_ext.nki import arguments, dtypes, kernel


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
    assert type(arguments.make()) is TorchArguments
    assert kernel._trace_handler is not None
    assert dtypes.as_dtype(torch.bfloat16) == dtypes.bfloat16


def test_a_route_installed_through_the_new_path_keys_compile_caches() -> None:
    # A fresh process, so that nothing has imported the former path torchneuron_ext.nki.aten_routing.
    import os
    import subprocess
    import sys
    code = (
        "import sys, torch\n"
        "from torchneuron_ext.nki.torch import route_aten\n"
        "from torchneuron_ext.compiler import backend\n"
        "assert 'torchneuron_ext.nki.aten_routing' not in sys.modules\n"
        "with route_aten('aten::rms_norm', lambda *args, **kwargs: NotImplemented):\n"
        "    print(backend._routing_tag())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "nki-routes:aten::rms_norm=" in proc.stdout
