"""Route an ATen operator on neuron to an NKI implementation, falling back to the normal kernel.

``route_aten("aten::rms_norm", fn)`` makes every ``aten::rms_norm`` call on neuron tensors call
``fn`` with the operator's arguments (as its schema lists them). ``fn`` returns the result (usually
from an ``nki_op``), or ``NotImplemented`` for inputs its kernel cannot take, and the operator then
runs its normal kernel. Where the route sits decides how autograd stays correct:

- An operator that is a composition of others (CompositeImplicitAutograd, as ``aten::rms_norm`` is
  in torch 2.13) has no kernel of its own and no derivative formula: autograd differentiates its
  decomposition. The route is installed at ``AutogradPrivateUse1`` (and ``PrivateUse1``, for
  inference mode), so the NKI path must bring its own backward: an ``nki_op`` with
  ``register_autograd``. A result without autograd history where one is needed is an error.
- Any other operator has a derivative formula that runs above the backend: the route is installed
  at ``PrivateUse1`` and replaces only the forward computation.

The fallback is the kernel the dispatcher had for that key before the route was installed.
Operators that write into their arguments or return views cannot be routed (an NKI kernel produces
new memory), and neither can an operator that is already routed.
"""
from __future__ import annotations

import threading
import warnings
from typing import Any, Callable, Optional, Union

import torch

from ... import _torch_internals


def _check_dispatcher_python() -> None:
    import torch

    _torch_internals.attribute("torch", "library.Library._destroy", "library.get_kernel",
                               "_C._dispatch_has_kernel_for_dispatch_key")
    _torch_internals.parameters(torch.library.Library.impl, "with_keyset", label="torch.library.Library.impl")
    op = torch.ops.aten.add.Tensor
    for name in ("_schema", "_overloadname", "_dispatch_cache"):
        if not hasattr(op, name):
            raise _torch_internals.Broken(f"OpOverload.{name} does not exist")


_torch_internals.register(
    "P16", "Python dispatcher internals", "torchneuron_ext/nki/torch/aten_routing.py (route_aten)",
    "torch.library.Library._destroy, Library.impl(..., with_keyset=True), OpOverload._schema / "
    "_overloadname / _dispatch_cache (the Python dispatcher's per-key cache), "
    "torch._C._dispatch_has_kernel_for_dispatch_key", "AtenRoute in nki/torch/aten_routing.py", _check_dispatcher_python)


_torch_internals.require("P22")

from torch.utils._pytree import tree_flatten, tree_map  # noqa: E402

from .tracing import digest, under_tracing  # noqa: E402

__all__ = ["route_aten", "AtenRoute", "routes", "cache_tag"]

_active: dict[str, "AtenRoute"] = {}
_tls = threading.local()


class AtenRoute:
    """An installed route: counts of calls ``routed`` to the NKI path and of ``fallbacks`` (calls on real
    tensors; calls made while torch.compile or a fake-tensor mode traces count as ``traced``); ``remove()``."""

    def __init__(self, op: torch._ops.OpOverload, fn: Callable, keys: tuple) -> None:
        self.op, self.fn, self.keys = op, fn, keys
        self.name = op.name()
        self.routed = 0
        self.fallbacks = 0
        self.traced = 0
        self._lib: Optional[torch.library.Library] = None
        self._expected: dict = {}

    # -- installation --------------------------------------------------------
    def _install(self) -> None:
        _torch_internals.require("P16")
        _torch_internals.require("P17")
        lib = torch.library.Library(self.op.namespace, "IMPL")
        name = self.op._schema.name.split("::", 1)[1]
        if self.op._overloadname != "default":
            name = f"{name}.{self.op._overloadname}"
        try:
            for key in self.keys:
                original = torch.library.get_kernel(self.op, key)
                kernel = self._kernel(original, key)
                with warnings.catch_warnings():
                    # Replacing a C++ kernel warns once per process; here that is the point.
                    warnings.simplefilter("ignore")
                    lib.impl(name, kernel, key, with_keyset=True)
        except Exception:
            lib._destroy()
            raise
        finally:
            _forget_dispatch(self.op)
        self._lib = lib

    def remove(self) -> None:
        """Uninstall the route: the operator's kernels are the ones it had before."""
        if self._lib is not None:
            self._lib._destroy()
            self._lib = None
            _active.pop(self.name, None)
            _forget_dispatch(self.op)

    @property
    def installed(self) -> bool:
        return self._lib is not None

    def __enter__(self) -> "AtenRoute":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __repr__(self) -> str:
        state = "installed" if self.installed else "removed"
        return (f"<AtenRoute {self.name} -> {getattr(self.fn, '__name__', self.fn)} at {'+'.join(self.keys)}, "
                f"{state}, routed={self.routed}, fallbacks={self.fallbacks}, traced={self.traced}>")

    # -- the kernel ----------------------------------------------------------
    def _kernel(self, original: Any, key: str) -> Callable:
        autograd = key.startswith("Autograd")

        def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            busy = getattr(_tls, "busy", None)
            if busy is None:
                busy = _tls.busy = set()
            if self.name in busy:  # fn itself called the operator: that call is the normal one
                return original.call_boxed(keyset, *args, **kwargs)
            busy.add(self.name)
            try:
                out = self.fn(*args, **kwargs)
            finally:
                busy.discard(self.name)
            tracing = under_tracing(args)
            if out is NotImplemented:
                if tracing:
                    self.traced += 1
                else:
                    self.fallbacks += 1
                return original.call_boxed(keyset, *args, **kwargs)
            self._check(out, args, kwargs, autograd)
            if tracing:
                self.traced += 1
            else:
                self.routed += 1
            return out
        kernel.__name__ = f"nki_route_{self.name.replace('::', '_')}"
        return kernel

    def _check(self, out: Any, args: tuple, kwargs: dict, autograd: bool) -> None:
        expected = self._expected_outputs(args, kwargs)
        leaves, _ = tree_flatten(out)
        got = [(tuple(t.shape), t.dtype, t.device.type) if isinstance(t, torch.Tensor) else type(t).__name__
               for t in leaves]
        if expected is not None and got != expected:
            raise RuntimeError(
                f"the NKI route for {self.name} returned {_fmt(got)} but the operator returns {_fmt(expected)} "
                f"for these inputs; return NotImplemented from {getattr(self.fn, '__name__', 'the route')} "
                f"for inputs the kernel does not handle")
        if autograd and torch.is_grad_enabled():
            needs_grad = any(isinstance(t, torch.Tensor) and t.requires_grad
                             for t in tree_flatten((args, kwargs))[0])
            if needs_grad and not any(isinstance(t, torch.Tensor) and t.requires_grad for t in leaves
                                      if t.is_floating_point() or t.is_complex()):
                raise RuntimeError(
                    f"the NKI route for {self.name} returned a result without autograd history although an "
                    f"input requires grad, so gradients would be silently lost. {self.name} has no derivative "
                    f"formula of its own (it is CompositeImplicitAutograd): route it to an nki_op with "
                    f"op.register_autograd(backward, setup_context=...), or return NotImplemented when "
                    f"inputs require grad")

    def _expected_outputs(self, args: tuple, kwargs: dict) -> Optional[list]:
        """Output shapes, dtypes and device types from the normal kernel on meta tensors (cached)."""
        try:
            key = tuple(_meta_key(a) for a in tree_flatten((args, kwargs))[0])
            hash(key)
        except TypeError:
            return None
        if key in self._expected:
            return self._expected[key]
        device = next((a.device.type for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)),
                      "neuron")

        def to_meta(a: Any) -> Any:
            return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta") \
                if isinstance(a, torch.Tensor) else a
        try:
            with torch.no_grad():
                meta_out = self.op(*tree_map(to_meta, args), **tree_map(to_meta, kwargs))
        except Exception:  # noqa: BLE001  no meta kernel: skip the check rather than fail the call
            result = None
        else:
            result = [(tuple(t.shape), t.dtype, device) if isinstance(t, torch.Tensor) else type(t).__name__
                      for t in tree_flatten(meta_out)[0]]
        self._expected[key] = result
        return result


def _forget_dispatch(op: torch._ops.OpOverload) -> None:
    # The Python dispatcher (active while torch.compile traces) caches which kernel serves each key.
    op._dispatch_cache.clear()


def cache_tag() -> str:
    """The installed routes, for compile caches: a graph traced with a route differs from one without."""
    if not _active:
        return ""
    parts = []
    for name, r in sorted(_active.items()):
        fn = r.fn
        code = getattr(fn, "__code__", None)
        code_hash = digest(code.co_code, 8) if code is not None else ""
        parts.append(f"{name}={getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}:{code_hash}")
    return "|nki-routes:" + ",".join(parts)


def _meta_key(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        if isinstance(a, torch._subclasses.FakeTensor) or any(not isinstance(s, int) for s in a.shape):
            return ("tensor", tuple(int(s) for s in a.shape), a.dtype)
        return ("tensor", tuple(a.shape), a.dtype)
    if isinstance(a, list):
        return tuple(_meta_key(x) for x in a)
    return a


def _fmt(outs: list) -> str:
    return ", ".join(f"{list(o[0])} {str(o[1]).replace('torch.', '')} on {o[2]}" if isinstance(o, tuple) else o
                     for o in outs) or "nothing"


def _resolve(op: Union[str, torch._ops.OpOverload, torch._ops.OpOverloadPacket]) -> torch._ops.OpOverload:
    if isinstance(op, torch._ops.OpOverload):
        return op
    if isinstance(op, torch._ops.OpOverloadPacket):
        return op.default
    if not isinstance(op, str):
        raise TypeError(f"route_aten takes an operator name like 'aten::rms_norm' or torch.ops.aten.rms_norm, "
                        f"got {type(op).__name__}")
    qualified = op if "::" in op else f"aten::{op}"
    namespace, _, rest = qualified.partition("::")
    base, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), base)
        return getattr(packet, overload or "default")
    except (AttributeError, RuntimeError):
        raise ValueError(f"no operator {qualified!r}: give its name as in the schema, e.g. 'aten::rms_norm' "
                         f"or 'aten::add.Tensor'") from None


def _route_keys(op: torch._ops.OpOverload) -> tuple:
    name = op.name()
    schema = op._schema
    if schema.is_mutable:
        raise ValueError(
            f"{name} writes into its arguments ({schema}); only functional operators can be routed to an NKI "
            f"kernel: route the functional form (e.g. aten::add.Tensor rather than aten::add_.Tensor)")
    if any(r.alias_info is not None for r in schema.returns):
        raise ValueError(f"{name} returns a view of its input ({schema}); an NKI kernel writes new memory, so it "
                         f"cannot implement a view operator")
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    # A composite operator keeps no derivative formula even when neuron registers a kernel of its own at
    # AutogradPrivateUse1 (csrc/aten does for rms_norm, linear, pad, ...: the composite again, so op
    # tracking names the operator); that kernel runs above PrivateUse1, so a route there would be
    # bypassed whenever autograd is on. The route replaces it, and falls back to it.
    if has(name, "CompositeImplicitAutograd") and not has(name, "Autograd"):
        return ("AutogradPrivateUse1", "PrivateUse1")
    return ("PrivateUse1",)


def route_aten(op: Union[str, torch._ops.OpOverload], fn: Optional[Callable] = None) -> Any:
    """Run ``op`` on neuron tensors through ``fn`` (usually an ``nki_op``); see the module docstring.

    ``fn`` receives the operator's arguments and returns the result, or ``NotImplemented`` to let the
    normal kernel run. Returns an :class:`AtenRoute` (``remove()`` it, or use it as a context
    manager); with ``fn`` omitted, returns a decorator that installs the route.

    Example::

        def rms_norm(x, normalized_shape, weight=None, eps=None):
            if x.dtype != torch.float32 or weight is None or len(normalized_shape) != 1:
                return NotImplemented
            return my_nki_rms_norm(x, weight, 1e-6 if eps is None else eps)

        route = route_aten("aten::rms_norm", rms_norm)
    """
    overload = _resolve(op)

    def install(fn: Callable) -> AtenRoute:
        if not callable(fn):
            raise TypeError(f"route_aten needs a callable for {overload.name()}, got {type(fn).__name__}")
        name = overload.name()
        if name in _active:
            raise RuntimeError(f"{name} is already routed to {getattr(_active[name].fn, '__name__', '?')}: "
                               f"remove() that route first")
        route = AtenRoute(overload, fn, _route_keys(overload))
        route._install()
        _active[name] = route
        return route

    if fn is None:
        _route_keys(overload)  # report an operator that cannot be routed at decoration time
        return install
    return install(fn)


def routes() -> dict[str, AtenRoute]:
    """The routes installed now, by operator name."""
    return dict(_active)
