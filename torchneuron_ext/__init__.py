"""torchneuron_ext: AWS Trainium's `neuron` device, emulated on the host CPU.

Importing this package (or just `import torch`, through the `torch.backends`
entry point) registers the device: `torch.device("neuron")`, `torch.neuron`,
`Tensor.neuron()`, and kernels for every ATen operator.

What the import does, in order (each is where it is named):
1. loads the extension `_C`, which registers the kernels with the dispatcher, re-routes the
   composites that must run on the device (csrc/aten/host_kernel_routing.cpp) and wraps the
   process's CPU allocator so a refused host allocation releases the device caches;
2. checks the PyTorch internals the registration relies on (`_torch_internals.require`);
3. imports `neuron` (torch.neuron), `profiler` (which turns timing on when
   TORCHNEURON_EXT_TIMING asks) and the op-tracking functions;
4. renames PrivateUse1 to "neuron", registers `torch.neuron` and generates the `Tensor.neuron()`
   family of methods (`_register`);
5. installs the compiler's hooks (Dynamo's device interface and Inductor's backend for "neuron" are
   registered lazily, when Dynamo is first imported);
6. installs the import aliases of AWS's packages when TORCHNEURON_EXT_NKI_COMPAT asks;
7. registers torch.distributed's "neuron" backend and, under torchrun, pins the process to its core.
The NKI simulator, its torch integration and the cost model's projections are imported on first use.
"""
from __future__ import annotations


def _autoload() -> None:
    """Entry point of the `torch.backends` group: `import torch` imports this package.

    Defined before `import torch` because, when this package is imported first,
    torch's own autoload finds it half-initialised and looks this name up.
    """


import os as _os  # noqa: E402
import sys as _sys  # noqa: E402

import torch  # noqa: E402

try:
    from . import _C  # noqa: E402  loading the library registers the device with PyTorch
except ImportError as _error:
    raise ImportError(
        f"torchneuron_ext's C++ library (_C) is not built in {_os.path.dirname(__file__)}: build it with "
        "`MAX_JOBS=2 pip install --no-build-isolation -e .` from the checkout. Until then, "
        "TORCH_DEVICE_BACKEND_AUTOLOAD=0 lets `import torch` run without this backend."
    ) from _error
from . import _torch_internals
from . import neuron
from . import profiler
from .instrumentation import numerics, op_tracking as ops
from .instrumentation.op_tracking import (clear_op_tracking, get_executed_ops, get_fallback_ops, get_op_counts,
                                          warn_on_generic_path)

# `torchneuron_ext.ops` and `torchneuron_ext.numerics` are public names of modules that live in instrumentation/.
_sys.modules[__name__ + ".ops"] = ops
_sys.modules[__name__ + ".numerics"] = numerics

__version__ = "0.1.0"

__all__ = [
    "clear_op_tracking",
    "get_executed_ops",
    "get_fallback_ops",
    "get_op_counts",
    "neuron",
    "nki_op",
    "profiler",
    "route_aten",
    "set_hbm_capacity",
    "warn_on_generic_path",
    "wrap_nki",
]

set_hbm_capacity = neuron.set_hbm_capacity


def _check_autoload() -> None:
    _torch_internals.attribute("torch", "_import_device_backends", "_is_device_backend_autoload_enabled")
    _torch_internals.source_mentions("__init__.py", '"torch.backends"', "TORCH_DEVICE_BACKEND_AUTOLOAD")


_torch_internals.register(
    "P1", "backend autoload", "torchneuron_ext/__init__.py (_autoload before `import torch`)",
    "torch's `torch.backends` entry-point autoload (torch._import_device_backends) looking up "
    "`torchneuron_ext:_autoload` on a possibly half-imported package",
    "keep _autoload defined before `import torch`; follow the new autoload protocol", _check_autoload)
_torch_internals.register(
    "P2", "PrivateUse1 device module", "torchneuron_ext/__init__.py (_register)",
    "torch._C._get_privateuse1_backend_name, torch._register_device_module",
    "_register() in torchneuron_ext/__init__.py",
    _torch_internals.has_attributes("torch", "_C._get_privateuse1_backend_name", "_register_device_module",
                                    "utils.rename_privateuse1_backend",
                                    "utils.generate_methods_for_privateuse1_backend"))


def _register() -> None:
    _torch_internals.require("P1")
    _torch_internals.require("P2")
    if torch._C._get_privateuse1_backend_name() != "neuron":
        torch.utils.rename_privateuse1_backend("neuron")
    if getattr(torch, "neuron", None) is not neuron:
        torch._register_device_module("neuron", neuron)
    if not hasattr(torch.Tensor, "is_neuron"):
        torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)


_register()

from .compiler import _hooks as _compiler_hooks  # noqa: E402

_compiler_hooks.install()

# Other products' module names (neuronxcc.nki, nki, torch_neuronx), when the environment asks. The variable
# is read by _env.flag in install_from_environment; this test only spares importing compat/ when it is unset.
if _os.environ.get("TORCHNEURON_EXT_NKI_COMPAT", "").strip():
    from .compat import aliases as _compat_aliases

    _compat_aliases.install_from_environment()


def __getattr__(name: str) -> object:
    # The NKI integration loads numpy and the simulator, so it is imported on first use, not by `import torch`.
    if name in ("nki_op", "wrap_nki", "route_aten"):
        from .nki import torch as nki_torch

        return getattr(nki_torch, name)
    if name == "nki":
        import importlib

        return importlib.import_module(".nki", __name__)
    raise AttributeError(f"module 'torchneuron_ext' has no attribute {name!r}")

# torch.distributed's "neuron" backend; also pins a torchrun worker to its core
# (NEURON_RT_VISIBLE_CORES from LOCAL_RANK) before the runtime starts.
from . import distributed  # noqa: E402

distributed.install()
