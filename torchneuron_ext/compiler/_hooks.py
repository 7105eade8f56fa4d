"""Register the neuron device interface when Dynamo's device_interface module is first imported
(and Inductor's CPU behaviour for neuron when torch._inductor.compile_fx is),
so that `import torch` stays cheap (Dynamo costs over a second to import) and the default
`torch.compile()` still works on neuron tensors. Inductor finds its half through torch.neuron's
`Scheduling` / `PythonWrapperCodegen` / `CppWrapperCodegen` attributes (which install() has
registration.register_device_module give torch.neuron), which it asks for at a point where importing
its codegen modules is safe."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from typing import Any, Optional, Sequence

from .. import _torch_internals

_TRIGGERS = ("torch._dynamo.device_interface", "torch._inductor.compile_fx")


def _check_import_hook() -> None:
    torch_dir = os.path.dirname(_torch_internals.attribute("torch", "__file__"))
    for rel in (os.path.join("_dynamo", "device_interface.py"), os.path.join("_inductor", "compile_fx.py")):
        if not os.path.exists(os.path.join(torch_dir, rel)):
            raise _torch_internals.Broken(f"torch/{rel} is gone (the hook waits for its import)")
    if not callable(getattr(importlib.machinery.SourceFileLoader, "exec_module", None)):
        raise _torch_internals.Broken("SourceFileLoader.exec_module is gone")


_torch_internals.register(
    "P5", "post-import hook", "torchneuron_ext/compiler/_hooks.py",
    "a sys.meta_path finder that wraps the loader's exec_module of torch._dynamo.device_interface and "
    "torch._inductor.compile_fx (their module paths)", "_TRIGGERS in compiler/_hooks.py", _check_import_hook)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if name not in _TRIGGERS:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None and spec.loader is not None:
                loader = spec.loader
                original = loader.exec_module

                def exec_module(module: Any, _original: Any = original) -> None:
                    _original(module)
                    _on_import(name)

                loader.exec_module = exec_module  # type: ignore[method-assign]
                return spec
        return None


_pending = set(_TRIGGERS)


def _on_import(name: str) -> None:
    _pending.discard(name)
    from . import registration

    if name == "torch._inductor.compile_fx":
        # Before any graph reaches Inductor (plain torch.compile imports compile_fx when it first
        # compiles): Inductor's classes for neuron, and its CPU special cases (cpu_parity.py).
        # Inductor's own lookup of torch.neuron.Scheduling & co. gives up on privateuse1 backends
        # without a WrapperFxCodegen attribute, so the default torch.compile relied on an earlier
        # backend="neuron" compile having registered them.
        registration.register_all()
    else:
        registration.register_dynamo()


def install() -> None:
    """Register now for modules already imported; hook the others."""
    _torch_internals.require("P5")
    from . import registration

    registration.register_device_module()
    for name in list(_pending):
        if name in sys.modules:
            _on_import(name)
    if _pending and not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())
