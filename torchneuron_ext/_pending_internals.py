"""Inventory entries whose install sites other branches of issue 28 are moving (the NKI torch
integration into nki/torch/, profiler/config.py's imports). Each block belongs next to its site
(the entry's `where`) and moves there once those branches have landed; until then the inventory
(torchneuron_ext/_torch_internals.py) imports this module with the other declaring modules."""
from __future__ import annotations

import os

from . import _torch_internals as _ti


def _check_dynamo_constant_marker() -> None:
    _ti.source_mentions(os.path.join("_dynamo", "variables", "functions.py"), '"_dynamo_marked_constant"')
    _ti.source_mentions(os.path.join("_dynamo", "decorators.py"), "fn._dynamo_marked_constant = True")


def _check_infer_schema() -> None:
    fn = _ti.attribute("torch._library.infer_schema", "infer_schema")
    _ti.parameters(fn, "prototype_function", "mutates_args", label="infer_schema")


def _check_dispatcher_python() -> None:
    import torch

    _ti.attribute("torch", "library.Library._destroy", "library.get_kernel", "_C._dispatch_has_kernel_for_dispatch_key")
    _ti.parameters(torch.library.Library.impl, "with_keyset", label="torch.library.Library.impl")
    op = torch.ops.aten.add.Tensor
    for name in ("_schema", "_overloadname", "_dispatch_cache"):
        if not hasattr(op, name):
            raise _ti.Broken(f"OpOverload.{name} does not exist")


def _check_dispatch_tls() -> None:
    _ti.attribute("torch", "_C._len_torch_dispatch_stack", "_C._dispatch_tls_is_dispatch_key_excluded",
                  "_C.DispatchKey.AutogradFunctionality", "_subclasses.FakeTensor")


def _check_record_function_fast() -> None:
    _ti.attribute("torch", "_C._profiler._RecordFunctionFast", "autograd._profiler_enabled")


# -- nki/torch_ops.py, nki/aten_routing.py, nki/kernel.py (moving to nki/torch/) --------------------------
_ti.register(
    "P14", "Dynamo's constant marker", "torchneuron_ext/nki/torch_ops.py (`_kernel_key`)",
    "Dynamo treating a function with `_dynamo_marked_constant = True` as assume_constant_result "
    "(set directly: importing Dynamo costs seconds)",
    "use torch._dynamo.assume_constant_result lazily, or the new marker", _check_dynamo_constant_marker)
_ti.register(
    "P15", "schema inference", "torchneuron_ext/nki/torch_ops.py",
    "torch._library.infer_schema.infer_schema(prototype_function, mutates_args=)",
    "nki/torch_ops.py (torch.library.infer_schema is the public alias)", _check_infer_schema)
_ti.register(
    "P16", "Python dispatcher internals", "torchneuron_ext/nki/aten_routing.py (route_aten)",
    "torch.library.Library._destroy, Library.impl(..., with_keyset=True), OpOverload._schema / "
    "_overloadname / _dispatch_cache (the Python dispatcher's per-key cache), "
    "torch._C._dispatch_has_kernel_for_dispatch_key", "AtenRoute in nki/aten_routing.py", _check_dispatcher_python)
_ti.register(
    "P17", "dispatch TLS queries", "torchneuron_ext/nki/kernel.py, nki/aten_routing.py",
    "torch._C._len_torch_dispatch_stack, _dispatch_tls_is_dispatch_key_excluded("
    "DispatchKey.AutogradFunctionality), torch._subclasses.FakeTensor",
    "_tracing / _warn_without_autograd", _check_dispatch_tls)
_ti.register(
    "P18", "fast record function", "torchneuron_ext/nki/kernel.py (_profiler_scope)",
    "torch._C._profiler._RecordFunctionFast (a FUNCTION-scope op that gets Kineto's correlation id)",
    "_profiler_scope in nki/kernel.py", _check_record_function_fast)

