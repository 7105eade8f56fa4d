"""When PyTorch traces instead of running, and the names a traced launch or route is known by.

One predicate decides, for kernel launches (kernel.py's trace handler) and ATen routes alike, whether a
call is seen by torch.compile or a tracing mode (fake, functional, proxy) and must become an operator in
the graph; one digest names code for the plans, graph keys and compile caches that must change with it.
"""
from __future__ import annotations

import hashlib
from typing import Any

import torch

from ... import _torch_internals
from .. import runtime

_torch_internals.require("P22")

from torch.utils._pytree import tree_flatten  # noqa: E402


_torch_internals.register(
    "P17", "dispatch TLS queries", "torchneuron_ext/nki/torch/tracing.py, nki/torch/launch.py, nki/torch/aten_routing.py",
    "torch._C._len_torch_dispatch_stack, _dispatch_tls_is_dispatch_key_excluded("
    "DispatchKey.AutogradFunctionality), torch._subclasses.FakeTensor",
    "under_tracing in nki/torch/tracing.py, TorchArguments.check_autograd in nki/torch/launch.py",
    _torch_internals.has_attributes("torch", "_C._len_torch_dispatch_stack",
                                    "_C._dispatch_tls_is_dispatch_key_excluded",
                                    "_C.DispatchKey.AutogradFunctionality", "_subclasses.FakeTensor"))



def under_tracing(args: Any = None) -> bool:
    """True while torch.compile or a tracing mode sees the call. ``args``: also when any of them is a fake
    tensor (an ATen route may be reached under a fake mode that is no longer on the dispatch stack)."""
    if torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0:
        return True
    return args is not None and any(isinstance(a, torch._subclasses.FakeTensor) for a in tree_flatten(args)[0])


def kernel_traced() -> bool:
    """The kernel-launch form: a kernel called inside a running kernel runs inline, never traced."""
    return runtime.current_or_none() is None and under_tracing()


def digest(value: Any, length: int) -> str:
    """A short stable hash of ``value`` (bytes as they are, anything else by its repr): the same in every
    process, so graphs and caches that carry it stay valid across runs."""
    data = value if isinstance(value, bytes) else repr(value).encode()
    return hashlib.sha1(data).hexdigest()[:length]

