"""Every place this package relies on PyTorch internals, with what each relies on and a cheap check.

A torch upgrade can rename a private module, change a private signature or drop an attribute that
one of these places uses. Without an inventory that shows up far from its cause (an Inductor
traceback in a compiled graph, a silently wrong stream, a KeyError at the first serialization). So
each install site calls `require(key)` before it patches or relies on anything, and a break fails
there, once, as a `TorchInternalError` that names the internal, what it relied on and what to
update. `check_all()` runs every check (tests/test_torch_internals.py); docs/architecture.md lists
the same entries.

Checks are cheap on purpose (attribute and signature existence, a word in torch's source read as
text, never an import of Dynamo or Inductor), because several run during `import torch`. An entry
whose modules are not imported yet is checked where it is installed, which imports them anyway.

Entries whose key starts with "C" live in C++ (or patch C++ headers). Their installs are checked
where they are compiled or registered (C2 raises, naming the entry, when its registration failed);
the Python check here tests what is observable from Python (the dispatcher's table, a header's
text), so the canary test covers them too.

The Inductor CPU-parity sites (compiler/cpu_parity.py) keep their own policy: a missing site is
warned about, not raised, so compiling never breaks on an upgrade. Their bookkeeping (which site
was installed, with how many literals, or why not) is kept here with the others, `site_status()`.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import sys
from typing import Any, Callable, Optional

VERIFIED_ON = "2.13.0"


class TorchInternalError(RuntimeError):
    """A PyTorch internal this package relies on is missing or has changed in the running torch."""


class _Broken(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class Internal:
    key: str
    name: str
    where: str  # the install site(s) in this package
    relies_on: str
    update: str  # what to change when it breaks
    check: Callable[[], None]  # raises _Broken (or AttributeError/ImportError/...) when broken


# -- check helpers ----------------------------------------------------------------------------------

def _torch() -> Any:
    return sys.modules.get("torch") or importlib.import_module("torch")


def _attr(module: str, *names: str) -> Any:
    """`module.name` for each dotted name (the last one returned); raises naming the missing one."""
    mod = importlib.import_module(module)
    found: Any = None
    for dotted in names:
        obj: Any = mod
        for part in dotted.split("."):
            if not hasattr(obj, part):
                raise _Broken(f"{module}.{dotted} does not exist")
            obj = getattr(obj, part)
        found = obj
    return found


def _params(fn: Any, *names: str, label: str) -> None:
    params = inspect.signature(fn).parameters
    missing = [n for n in names if n not in params]
    if missing:
        raise _Broken(f"{label} has no parameter {', '.join(missing)} (signature {inspect.signature(fn)})")


def _source_mentions(relpath: str, *texts: str) -> None:
    """torch's own source file `relpath` contains each of `texts` (read as text, not imported)."""
    path = os.path.join(os.path.dirname(_torch().__file__), relpath)
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError as e:
        raise _Broken(f"torch/{relpath} is missing ({e.strerror})") from None
    missing = [t for t in texts if t not in source]
    if missing:
        raise _Broken(f"torch/{relpath} no longer mentions {', '.join(map(repr, missing))}")


# -- the checks ---------------------------------------------------------------------------------------

def _check_autoload() -> None:
    _attr("torch", "_import_device_backends", "_is_device_backend_autoload_enabled")
    _source_mentions("__init__.py", '"torch.backends"', "TORCH_DEVICE_BACKEND_AUTOLOAD")


def _check_device_module() -> None:
    _attr("torch", "_C._get_privateuse1_backend_name", "_register_device_module",
          "utils.rename_privateuse1_backend", "utils.generate_methods_for_privateuse1_backend")


def _check_serialization_utils() -> None:
    _source_mentions("serialization.py", "device_module._utils._get_device_index(location, True)")


def _check_accelerator_bindings() -> None:
    _attr("torch", "_C._accelerator_getStream", "_C._accelerator_setStream", "_C._accelerator_synchronizeDevice")


def _check_import_hook() -> None:
    for rel in (os.path.join("_dynamo", "device_interface.py"), os.path.join("_inductor", "compile_fx.py")):
        path = os.path.join(os.path.dirname(_torch().__file__), rel)
        if not os.path.exists(path):
            raise _Broken(f"torch/{rel} is gone (the hook waits for its import)")
    import importlib.machinery

    if not callable(getattr(importlib.machinery.SourceFileLoader, "exec_module", None)):
        raise _Broken("SourceFileLoader.exec_module is gone")


def _check_dynamo_registration() -> None:
    fn = _attr("torch._dynamo.device_interface", "register_interface_for_device")
    _params(fn, "device", "device_interface", label="register_interface_for_device")
    _attr("torch._dynamo.device_interface", "DeviceInterface")


def _check_inductor_registration() -> None:
    fn = _attr("torch._inductor.codegen.common", "register_backend_for_device")
    _params(fn, "device", "device_scheduling", "device_wrapper_codegen", "device_cpp_wrapper_codegen",
            label="register_backend_for_device")
    _attr("torch._inductor.codegen.common", "register_device_op_overrides")
    _attr("torch._inductor.codegen.cpp", "CppScheduling")
    _attr("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu")
    _attr("torch._inductor.codegen.cpu_device_op_overrides", "CpuDeviceOpOverrides")


def _check_wrapper_codegen() -> None:
    cls = _attr("torch._inductor.codegen.wrapper", "PythonWrapperCodegen")
    _params(cls.create, "is_subgraph", "subgraph_name", "parent_wrapper", "partition_signatures",
            label="PythonWrapperCodegen.create")
    _params(cls._generate_kernel_call_helper, "kernel_name", "call_args", "device", "triton",
            label="PythonWrapperCodegen._generate_kernel_call_helper")
    _params(cls.make_allocation, "name", "device", "dtype", "shape", "stride", "allocation_shape", "is_pinned",
            label="PythonWrapperCodegen.make_allocation")
    _params(cls.define_kernel, "kernel_name", "kernel_body", "metadata", "gpu", "cpp_definition",
            label="PythonWrapperCodegen.define_kernel")
    _source_mentions("_inductor/codegen/common.py", '"in_ptr"', '"out_ptr"', 'f"in_out_ptr')
    for name in ("write_header", "codegen_python_shape_tuple", "writeline"):
        if not hasattr(cls, name):
            raise _Broken(f"PythonWrapperCodegen.{name} does not exist")
    _attr("torch._inductor.config", "test_configs.track_memory_lifecycle")


def _check_cpu_literals() -> None:
    from .compiler import cpu_parity

    broken = []
    for site in cpu_parity.CPU_LITERAL_SITES:
        try:
            fn = cpu_parity._resolve(site.module, site.qualname)
        except Exception as e:
            broken.append(f"{site.module}.{site.qualname} ({type(e).__name__}: {e})")
            continue
        if not cpu_parity._count_host_literals(fn.__code__) and not _has_cpu_literal(fn.__code__):
            broken.append(f"{site.module}.{site.qualname} (no 'cpu' literal)")
    if broken:
        raise _Broken("; ".join(broken))


def _has_cpu_literal(code: Any) -> bool:
    for c in code.co_consts:
        if type(c) is str and c == "cpu":
            return True
        if hasattr(c, "co_consts") and _has_cpu_literal(c):
            return True
        if type(c) in (tuple, frozenset) and any(type(v) is str and v == "cpu" for v in c):
            return True
    return False


def _check_cpu_predicates() -> None:
    from .compiler import cpu_parity

    for site in cpu_parity.PREDICATE_SITES:
        if not callable(_attr(site.module, site.name)):
            raise _Broken(f"{site.module}.{site.name} is not callable")
        for name in site.rebind_in:
            importlib.import_module(name)


def _check_fake_conv() -> None:
    torch = _torch()
    impls = _attr("torch._subclasses.fake_impls", "op_implementations_dict")
    for name in ("convolution.default", "_convolution.default", "_convolution.deprecated",
                 "convolution_backward.default"):
        packet, overload = name.split(".")
        op = getattr(getattr(torch.ops.aten, packet), overload)
        if op not in impls:
            raise _Broken(f"fake_impls.op_implementations_dict has no entry for aten.{name}")
    _attr("torch._subclasses.fake_tensor", "FakeTensor", "in_kernel_invocation_manager")


def _check_compile_fx() -> None:
    fn = _attr("torch._inductor.compile_fx", "compile_fx")
    _params(inspect.unwrap(fn), "model_", "example_inputs_", "config_patches", label="compile_fx")
    _attr("torch._inductor.config", "fallback_random")


def _check_compile_metrics() -> None:
    counters = _attr("torch._dynamo.utils", "counters")
    _attr("torch._dynamo.utils", "compilation_time_metrics")
    _attr("torch._inductor.metrics", "generated_kernel_count")
    _attr("torch._inductor", "list_mode_options")
    _attr("torch.compiler", "config.cache_key_tag")
    if not hasattr(counters, "__getitem__"):
        raise _Broken("torch._dynamo.utils.counters is not a mapping")
    _source_mentions(os.path.join("_functorch", "aot_autograd.py"), "_boxed_call")


def _check_dynamo_constant_marker() -> None:
    _source_mentions(os.path.join("_dynamo", "variables", "functions.py"), '"_dynamo_marked_constant"')
    _source_mentions(os.path.join("_dynamo", "decorators.py"), "fn._dynamo_marked_constant = True")


def _check_infer_schema() -> None:
    fn = _attr("torch._library.infer_schema", "infer_schema")
    _params(fn, "prototype_function", "mutates_args", label="infer_schema")


def _check_dispatcher_python() -> None:
    torch = _torch()
    _attr("torch", "library.Library._destroy", "library.get_kernel", "_C._dispatch_has_kernel_for_dispatch_key")
    _params(torch.library.Library.impl, "with_keyset", label="torch.library.Library.impl")
    op = torch.ops.aten.add.Tensor
    for name in ("_schema", "_overloadname", "_dispatch_cache"):
        if not hasattr(op, name):
            raise _Broken(f"OpOverload.{name} does not exist")


def _check_dispatch_tls() -> None:
    _attr("torch", "_C._len_torch_dispatch_stack", "_C._dispatch_tls_is_dispatch_key_excluded",
          "_C.DispatchKey.AutogradFunctionality", "_subclasses.FakeTensor")


def _check_record_function_fast() -> None:
    _attr("torch", "_C._profiler._RecordFunctionFast", "autograd._profiler_enabled")


def _check_experimental_config() -> None:
    cls = _attr("torch", "_C._profiler._ExperimentalConfig")
    try:
        cls(custom_profiler_config="{}")
    except TypeError as e:
        raise _Broken(f"_ExperimentalConfig(custom_profiler_config=...) fails: {e}") from None


def _check_c10d_registration() -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    backend = _attr("torch.distributed", "Backend")
    for name in ("_plugins", "default_device_backend_map"):
        if not hasattr(backend, name):
            raise _Broken(f"torch.distributed.Backend.{name} does not exist")
    _params(backend.register_backend, "extended_api", "devices", label="Backend.register_backend")
    if dist.is_gloo_available() and not hasattr(dist.ProcessGroupGloo, "_set_sequence_number_for_group"):
        raise _Broken("ProcessGroupGloo._set_sequence_number_for_group does not exist")


def _check_schema_lookup() -> None:
    _attr("torch", "_C._get_schema", "_C._dispatch_get_registrations_for_dispatch_key")


def _check_pytree() -> None:
    _attr("torch.utils._pytree", "tree_flatten", "tree_map")


def _check_cpu_allocator() -> None:
    from . import _C

    if not hasattr(_C, "_empty_strided"):
        raise _Broken("torchneuron_ext._C did not load")


def _registered(op: str, key: str, what: str, source: str) -> None:
    """The dispatch table of `op` serves `key` with a `what` entry that `source` (C++) registered."""
    from . import _C  # noqa: F401  (loading it registers the kernels)

    lines = [line for line in _torch()._C._dispatch_dump_table(op).splitlines() if line.startswith(f"{key}:")]
    if not any(source in line and what in line for line in lines):
        raise _Broken(f"{op} has no {what} entry from {source} at {key} (dispatcher: {lines or 'no entry'})")


def _check_device_rng_redirect() -> None:
    # The key itself is not exposed to Python: that it exists is a compile-time fact of generator.cpp,
    # and its alias membership is checked there at load (a TORCH_CHECK naming C2).
    _registered("aten::bernoulli_.float", "TESTING_ONLY_GenericMode", "[kernel]", "csrc/backend/generator.cpp")
    _registered("aten::add.Tensor", "TESTING_ONLY_GenericMode", "fallthrough", "csrc/backend/generator.cpp")


def _check_conj_neg_fallthrough() -> None:
    _registered("aten::_copy_from", "Conjugate", "fallthrough", "csrc/aten/minimal.cpp")
    _registered("aten::_copy_from", "Negative", "fallthrough", "csrc/aten/minimal.cpp")


def _check_tensor_body() -> None:
    from .custom_op import headers

    path = os.path.join(os.path.dirname(_torch().__file__), "include", headers._TENSOR_BODY)
    with open(path, encoding="utf-8") as f:
        if headers.patched_tensor_body(f.read()) is None:
            raise _Broken(f"{path} lacks the anchors {headers._NAMESPACE_ANCHOR.strip()!r} and "
                          f"{headers._CLASS_ANCHOR.strip()!r} (exactly once each)")


def _check_composite_routing() -> None:
    from . import _C

    routed = getattr(_C, "_routed_to_host_kernels", 0)
    if routed == 0:
        raise _Broken("no composite operator was routed to the host kernels")


def _check_sdp_stub() -> None:
    _attr("torch", "_fused_sdp_choice")


def _check_autograd_thread() -> None:
    # The flag the C++ side sets is the one these read and write (c10::AutogradState's thread-local).
    _attr("torch", "autograd.is_multithreading_enabled", "autograd.set_multithreading_enabled")


# -- the inventory ------------------------------------------------------------------------------------

INTERNALS: tuple[Internal, ...] = (
    # -- import torch / registering the device
    Internal("P1", "backend autoload", "torchneuron_ext/__init__.py (_autoload before `import torch`)",
             "torch's `torch.backends` entry-point autoload (torch._import_device_backends) looking up "
             "`torchneuron_ext:_autoload` on a possibly half-imported package",
             "keep _autoload defined before `import torch`; follow the new autoload protocol", _check_autoload),
    Internal("P2", "PrivateUse1 device module", "torchneuron_ext/__init__.py (_register)",
             "torch._C._get_privateuse1_backend_name, torch._register_device_module",
             "_register() in torchneuron_ext/__init__.py", _check_device_module),
    Internal("P3", "serialization's _utils lookup", "torchneuron_ext/neuron/__init__.py (`_utils = _device_mod`)",
             "torch.serialization calling torch.neuron._utils._get_device_index(location, True) to restore "
             "neuron tensors", "the `_utils` alias in neuron/__init__.py (or the new lookup)",
             _check_serialization_utils),
    Internal("P4", "accelerator stream bindings", "torchneuron_ext/neuron/streams.py, neuron/device.py",
             "torch._C._accelerator_getStream / _accelerator_setStream / _accelerator_synchronizeDevice",
             "neuron/streams.py and neuron/device.py (torch.accelerator may offer them publicly)",
             _check_accelerator_bindings),
    # -- torch.compile
    Internal("P5", "post-import hook", "torchneuron_ext/compiler/_hooks.py",
             "a sys.meta_path finder that wraps the loader's exec_module of torch._dynamo.device_interface and "
             "torch._inductor.compile_fx (their module paths)", "_TRIGGERS in compiler/_hooks.py",
             _check_import_hook),
    Internal("P6", "Dynamo device interface", "torchneuron_ext/compiler/registration.py, device_interface.py",
             "torch._dynamo.device_interface.register_interface_for_device(device, device_interface), "
             "DeviceInterface", "compiler/device_interface.py", _check_dynamo_registration),
    Internal("P7", "Inductor backend registration", "torchneuron_ext/compiler/registration.py (inductor_classes)",
             "register_backend_for_device / register_device_op_overrides, CppScheduling, CppWrapperCpu and "
             "CpuDeviceOpOverrides from torch._inductor.codegen (private modules), and Inductor asking "
             "torch.neuron for Scheduling / PythonWrapperCodegen / CppWrapperCodegen",
             "compiler/registration.py and neuron/__init__.py's __getattr__", _check_inductor_registration),
    Internal("P8", "wrapper-codegen override", "torchneuron_ext/compiler/wrapper_codegen.py",
             "PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures), the "
             "private _generate_kernel_call_helper(kernel_name, call_args, *, device, triton), "
             "make_allocation(..., allocation_shape, is_pinned), define_kernel(kernel_name, kernel_body, metadata, "
             "gpu, cpp_definition) with C++ kernels' parameters named in_ptr/out_ptr/in_out_ptr (which buffers a "
             "kernel reads and writes), config.test_configs.track_memory_lifecycle",
             "NeuronWrapperCodegen's overrides (match the new signatures)", _check_wrapper_codegen),
    Internal("P9", "Inductor CPU-parity literal rewrites", "torchneuron_ext/compiler/cpu_parity.py (CPU_LITERAL_SITES)",
             "each listed Inductor/decomposition/meta function being a plain Python function whose code "
             "constants hold the 'cpu' device-type literal (its co_consts are replaced)",
             "CPU_LITERAL_SITES (audit the new torch's 'cpu' tests against LEFT_AS_CPU)", _check_cpu_literals),
    Internal("P10", "Inductor CPU-parity predicates", "torchneuron_ext/compiler/cpu_parity.py (PREDICATE_SITES)",
             "torch._inductor.utils.is_cpu_device, rebound in torch._inductor.fx_passes.pre_grad; "
             "torch._inductor.fx_passes.post_grad._is_nondeterministic_seeded_node(node), looked up as a "
             "module global by _chain_random_ops_for_ordering",
             "PREDICATE_SITES", _check_cpu_predicates),
    Internal("P11", "fake convolution impls", "torchneuron_ext/compiler/cpu_parity.py (_install_fake_conv)",
             "torch._subclasses.fake_impls.op_implementations_dict entries for the convolution ops, "
             "impl(fake_mode, func, *args, **kwargs), FakeTensor(fake_mode, meta, device), "
             "in_kernel_invocation_manager", "_fake_conv_as_cpu in cpu_parity.py", _check_fake_conv),
    Internal("P12", "compile_fx wrapper (eager random ops)",
             "torchneuron_ext/compiler/cpu_parity.py (_install_eager_random)",
             "torch._inductor.compile_fx.compile_fx(model_, example_inputs_, ..., config_patches=) as a module "
             "attribute, config.fallback_random", "_compile_fx_with_eager_random in cpu_parity.py",
             _check_compile_fx),
    Internal("P13", "compile metrics and boxed calls", "torchneuron_ext/compiler/backend.py",
             "torch._dynamo.utils.counters['inductor'] / compilation_time_metrics, "
             "torch._inductor.metrics.generated_kernel_count, list_mode_options, torch.compiler.config."
             "cache_key_tag, AOTAutograd reading `_boxed_call` on a backend's result",
             "neuron_backend in compiler/backend.py", _check_compile_metrics),
    # -- NKI
    Internal("P14", "Dynamo's constant marker", "torchneuron_ext/nki/torch_ops.py (`_kernel_key`)",
             "Dynamo treating a function with `_dynamo_marked_constant = True` as assume_constant_result "
             "(set directly: importing Dynamo costs seconds)",
             "use torch._dynamo.assume_constant_result lazily, or the new marker", _check_dynamo_constant_marker),
    Internal("P15", "schema inference", "torchneuron_ext/nki/torch_ops.py",
             "torch._library.infer_schema.infer_schema(prototype_function, mutates_args=)",
             "nki/torch_ops.py (torch.library.infer_schema is the public alias)", _check_infer_schema),
    Internal("P16", "Python dispatcher internals", "torchneuron_ext/nki/aten_routing.py (route_aten)",
             "torch.library.Library._destroy, Library.impl(..., with_keyset=True), OpOverload._schema / "
             "_overloadname / _dispatch_cache (the Python dispatcher's per-key cache), "
             "torch._C._dispatch_has_kernel_for_dispatch_key", "AtenRoute in nki/aten_routing.py",
             _check_dispatcher_python),
    Internal("P17", "dispatch TLS queries", "torchneuron_ext/nki/kernel.py, nki/aten_routing.py",
             "torch._C._len_torch_dispatch_stack, _dispatch_tls_is_dispatch_key_excluded("
             "DispatchKey.AutogradFunctionality), torch._subclasses.FakeTensor",
             "_tracing / _warn_without_autograd", _check_dispatch_tls),
    Internal("P18", "fast record function", "torchneuron_ext/nki/kernel.py (_profiler_scope)",
             "torch._C._profiler._RecordFunctionFast (a FUNCTION-scope op that gets Kineto's correlation id)",
             "_profiler_scope in nki/kernel.py", _check_record_function_fast),
    # -- profiler, distributed, custom ops
    Internal("P19", "Kineto experimental config", "torchneuron_ext/profiler/config.py (NeuronConfig)",
             "subclassing torch._C._profiler._ExperimentalConfig(custom_profiler_config=...), which Kineto "
             "parses as KEY=value lines", "NeuronConfig in profiler/config.py", _check_experimental_config),
    Internal("P20", "c10d backend registration", "torchneuron_ext/distributed/backend.py",
             "dist.Backend._plugins, Backend.default_device_backend_map, register_backend(extended_api=, "
             "devices=), ProcessGroupGloo._set_sequence_number_for_group",
             "register() and _create_backend in distributed/backend.py", _check_c10d_registration),
    Internal("P21", "schema and registration lookups",
             "torchneuron_ext/custom_op/library.py, torch_neuronx/utils.py",
             "torch._C._get_schema, torch._C._dispatch_get_registrations_for_dispatch_key",
             "custom_op/library.py and torch_neuronx/utils.py", _check_schema_lookup),
    Internal("P22", "pytree", "torchneuron_ext/nki/aten_routing.py, compiler/cpu_parity.py",
             "torch.utils._pytree.tree_flatten / tree_map", "the imports in nki/aten_routing.py and "
             "compiler/cpu_parity.py", _check_pytree),
    # -- C++ (and the header patch)
    Internal("C1", "process-wide CPU allocator", "csrc/backend/allocator.cpp (KernelOutputAllocator)",
             "c10::SetAllocator(CPU, ..., priority 1): replaces the CPU allocator of the whole process so that "
             "host kernels' outputs come from HBM (a thread-local check per CPU allocation; breaks with other "
             "libraries that set the CPU allocator)", "allocator.cpp", _check_cpu_allocator),
    Internal("C2", "device-RNG redirect", "csrc/backend/generator.cpp (DeviceRngScope)",
             "the dispatch key TESTING_ONLY_GenericMode (reserved by PyTorch for tests; a mode key in no "
             "composite alias set) included in a thread's dispatch keys for a random kernel's duration, and "
             "CPU kernels taking a missing generator from get_generator_or_default",
             "generator.cpp: another unregistered mode key", _check_device_rng_redirect),
    Internal("C3", "Conjugate/Negative copy fallthrough", "csrc/aten/minimal.cpp",
             "fallthrough registrations of _copy_from / _copy_from_and_resize under the backend-agnostic "
             "Conjugate and Negative keys", "minimal.cpp", _check_conj_neg_fallthrough),
    Internal("C4", "TensorBody.h patch for custom ops", "torchneuron_ext/custom_op/headers.py",
             "the text of the installed ATen/core/TensorBody.h: the anchors '#include <ATen/MethodOperators.h>' "
             "and 'class TORCH_API Tensor: public TensorBase {' (custom-op libraries then see an at::Tensor "
             "with extra non-virtual methods)", "_NAMESPACE_ANCHOR / _CLASS_ANCHOR in custom_op/headers.py",
             _check_tensor_body),
    Internal("C5", "composite re-registrations", "csrc/aten/host_kernel_routing.cpp",
             "walking the dispatcher (getAllOpNamesForDispatchKey, hasKernelForDispatchKey) to register the "
             "generic path at PrivateUse1 for ~230 composite operators", "host_kernel_routing.cpp",
             _check_composite_routing),
    Internal("C6", "fused-SDP choice stub", "csrc/aten/native_attention.cpp",
             "REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, ...)", "native_attention.cpp", _check_sdp_stub),
    Internal("C7", "backward on the calling thread", "csrc/backend/autograd_thread.cpp",
             "c10::AutogradState's thread-local multithreading flag, which the autograd Engine's ready_queue "
             "reads to run a device's backward on the calling thread instead of the device's worker thread",
             "autograd_thread.cpp (TORCHNEURON_EXT_AUTOGRAD_THREADS=device meanwhile keeps torch's threads)",
             _check_autograd_thread),
)

_BY_KEY = {i.key: i for i in INTERNALS}
_verified: set[str] = set()


def internal(key: str) -> Internal:
    return _BY_KEY[key]


def message(entry: Internal, detail: str) -> str:
    """The one wording of a broken internal: which, what it relied on, what to update."""
    return (f"torchneuron_ext relies on a PyTorch internal that torch {_torch().__version__} does not provide "
            f"(verified on {VERIFIED_ON}): {entry.key} {entry.name}, used by {entry.where}. It relies on "
            f"{entry.relies_on}. What failed: {detail}. Update: {entry.update}. "
            f"See torchneuron_ext/_torch_internals.py.")


def failure(key: str) -> Optional[str]:
    """The message for `key` if its check fails in this torch, else None."""
    entry = _BY_KEY[key]
    try:
        entry.check()
    except (_Broken, AttributeError, ImportError, TypeError, ValueError, KeyError, OSError) as e:
        detail = str(e) if isinstance(e, _Broken) else f"{type(e).__name__}: {e}"
        return message(entry, detail)
    return None


def require(key: str) -> None:
    """Check `key` once per process; raise TorchInternalError if this torch breaks it."""
    if key in _verified:
        return
    text = failure(key)
    if text is not None:
        raise TorchInternalError(text)
    _verified.add(key)


def check_all() -> dict[str, Optional[str]]:
    """Every entry's failure message (None when it holds), by key."""
    return {entry.key: failure(entry.key) for entry in INTERNALS}


# -- installed patch sites (the CPU-parity bookkeeping) -----------------------------------------------

@dataclasses.dataclass
class SiteStatus:
    """One installed patch site: how many literals (or wrappers) it changed, or why it was not."""
    site: str
    literals: int = 0
    error: Optional[str] = None


_sites: dict[str, SiteStatus] = {}


def record_site(status: SiteStatus) -> None:
    _sites[status.site] = status


def site_status() -> list[SiteStatus]:
    """The sites recorded so far, in installation order."""
    return list(_sites.values())


def site_error(name: str) -> Optional[str]:
    """None when site `name` was installed without error; a reason otherwise (also when never tried)."""
    status = _sites.get(name)
    return "not installed" if status is None else status.error


__all__ = ["INTERNALS", "Internal", "SiteStatus", "TorchInternalError", "check_all", "failure", "internal",
           "message", "require", "site_status"]
