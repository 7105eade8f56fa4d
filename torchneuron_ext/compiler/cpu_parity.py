"""torch.compile on neuron follows Inductor on CPU: the places where PyTorch's compiler stack
special-cases the "cpu" device type, and which of them neuron takes.

Neuron kernels are CPU code: eager ops run ATen's CPU kernels on host views, and Inductor compiles
neuron graphs with its CPU C++ backend (CppScheduling). Wherever Inductor, its decompositions, or
the meta/fake kernels that describe eager ops decide something by asking "is the device CPU?", the
answer for neuron must be the CPU's whenever the question is really "which kernels / which code
generator run this?" (dtype propagation, masked loads, bounds checks, fusion heuristics, numerics
of decompositions, output strides of eager kernels). It must stay "no" where the question is
"is this memory the host's *CPU device*?" (device copies, CPU scalars moved to the device, pinned
memory, mixed-device checks, the cpp wrapper's CPU-only paths).

Mechanisms, each installed once (idempotent) from registration.py:

1. `CPU_LITERAL_SITES`: functions in which every "cpu" device-type test holds for neuron too.
   Their code objects get the string constant "cpu" replaced by `HOST_DEVICE_TYPE`, a `str` equal
   to "cpu" and to "neuron" (`==`, `!=`, `in (...)`; Python tries a str subclass's comparison
   first). The function object itself is untouched, so every reference to it (lowering and
   decomposition tables, decorators' wrappers, names bound by `from ... import`) sees the change.
   Nested functions (code constants) are rewritten too. Each entry says why.
2. `PREDICATE_SITES`: predicates that compare `torch.device` objects, which a literal cannot
   change, or whose answer for a neuron graph's node is not the one its op's tags give; they are
   wrapped and rebound in the modules that imported them.
3. Fake kernels: the FakeTensor convolution impl asks C++ which convolution backend a tensor's
   device uses (cudnn/mkldnn/overrideable) to pick the output memory format; neuron gets the CPU's
   answer, because neuron's eager convolution is the CPU's.
4. Random ops: compiled random ops must draw what eager draws. Inductor's own RNG
   (`inductor_random`, also on CPU) draws other numbers than ATen's kernels; neuron graphs compile
   with `config.fallback_random = True`, so random ops call the eager kernels, which draw from the
   neuron generator (the CPU generator's engine).

`report()` lists what was installed; tests/compiler/test_cpu_parity.py checks that every site was
found in this torch version and rewrote at least one literal. The four mechanisms are entries P9-P12
of the inventory of PyTorch internals (torchneuron_ext/_torch_internals.py, which words the warning
about a site this torch lacks); they are declared at the end of this file, with their checks, which
need this file's site lists and code inspection.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import types
from typing import Any, Callable, Optional

from .. import _torch_internals

NEURON = "neuron"


@dataclasses.dataclass
class SiteStatus:
    """One installed patch site: how many literals (or wrappers) it changed, or why it was not."""
    site: str
    literals: int = 0
    error: Optional[str] = None


# Which site was installed, with how many literals, or why not; in installation order.
_site_status: dict[str, SiteStatus] = {}


def _site_error(name: str) -> Optional[str]:
    """None when site `name` was installed without error; a reason otherwise (also when never tried)."""
    status = _site_status.get(name)
    return "not installed" if status is None else status.error


class _HostDeviceType(str):
    """The literal "cpu" inside CPU_LITERAL_SITES: a device type equal to "cpu" and "neuron"."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return str.__eq__(other, "cpu") or str.__eq__(other, NEURON)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = str.__hash__

    def __repr__(self) -> str:
        return "'cpu'"

    def __reduce__(self) -> Any:  # pickles (e.g. into a cache) as the plain "cpu"
        return (str, ("cpu",))


HOST_DEVICE_TYPE = _HostDeviceType("cpu")


@dataclasses.dataclass(frozen=True)
class Site:
    module: str
    qualname: str
    why: str


# Every "cpu" device-type test in these functions means "compiled by the C++ backend / runs the
# CPU's kernels", so it holds for neuron too. Functions whose "cpu" tests mean the CPU device
# itself are listed in LEFT_AS_CPU below instead, with the reason.
CPU_LITERAL_SITES: tuple[Site, ...] = (
    # -- code generation: which backend's conventions the C++ kernels follow
    Site("torch._inductor.utils", "get_current_backend",
         "Unknown device types fall to config.cuda_backend ('triton'): dtype propagation, "
         "ops.masked, indirect_assert bounds checks and upcasts then take the Triton branch in the "
         "C++ code generator (AssertionError var.dtype is None, 'str' has no attribute dtype, "
         "KeyError: None). Neuron compiles with config.cpu_backend."),
    Site("torch._inductor.ir", "is_cpu",
         "Realization heuristics (realize_cpu_opcount_threshold, realize_cpu_acc_reads_threshold, "
         "realizing reused heavy pointwise ops) are the C++ backend's."),
    Site("torch._inductor.scheduler", "BaseSchedulerNode.is_cpu",
         "The scheduler gates C++-backend decisions on node.is_cpu() (loop reordering and "
         "reindexing, loop-index inversion are not done for C++ kernels)."),
    Site("torch._inductor.scheduler", "ForeachKernelSchedulerNode._default_group_nodes_for_combo_kernels",
         "Combo kernels are a Triton feature; C++ nodes are not grouped."),
    Site("torch._inductor.scheduler", "Scheduler.speedup_by_fusion",
         "Benchmark fusion is not supported for the C++ backend."),
    # -- lowerings: which IR a C++-compiled graph gets
    Site("torch._inductor.lowering", "cat",
         "C++ cat lowers to ConcatKernel (no pointwise_cat) and int8/uint8 cat falls back to ATen."),
    Site("torch._inductor.lowering", "_pad_as_cat",
         "pad-as-cat is skipped where cat is a ConcatKernel."),
    Site("torch._inductor.lowering", "div_prim",
         "Division by a constant is not turned into a multiplication by its reciprocal on the "
         "C++ backend (results would differ from eager in the last bit)."),
    Site("torch._inductor.lowering", "use_two_step_variance",
         "Welford vs two-step variance threshold of the C++ backend (numerics of var/std/norms)."),
    Site("torch._inductor.lowering", "_make_reduction_inner",
         "argmax/argmin over non-contiguous inputs compute logical indices on the C++ backend."),
    Site("torch._inductor.lowering", "quantized_decomposed_quantize_per_tensor_tensor",
         "Quantization rounds with fma + round_to_int as the CPU kernel does."),
    Site("torch._inductor.kernel.conv", "convolution",
         "The bias stays inside the convolution call (peeling it off is a cuDNN speed trick that "
         "changes rounding)."),
    Site("torch._inductor.kernel.bmm", "tuned_bmm",
         "Memory-bound bmm shapes decompose to pointwise+sum as on CPU."),
    Site("torch._inductor.kernel.flex.flex_attention", "flex_attention",
         "flex_attention lowers to the C++ template, not the Triton one."),
    Site("torch._inductor.decomposition", "mm",
         "mm decomposition rules of the CPU (which small shapes become mul/sum)."),
    Site("torch._inductor.decomposition", "addmm", "addmm decomposition rules of the CPU."),
    Site("torch._inductor.decomposition", "bmm", "bmm decomposition rules of the CPU."),
    Site("torch._inductor.fx_passes.decompose_mem_bound_mm", "should_decompose_bmm",
         "CPU thresholds of the (opt-in) memory-bound bmm decomposition."),
    Site("torch._inductor.fx_passes.decompose_mem_bound_mm", "should_decompose_mm",
         "CPU thresholds of the (opt-in) memory-bound mm decomposition."),
    Site("torch._inductor.choices", "InductorChoices.get_config_heuristics",
         "Template config heuristics of the CPU."),
    Site("torch._inductor.choices", "InductorChoices.should_use_cooperative_reduction",
         "Cooperative reductions are a Triton feature."),
    # -- autotuning (max-autotune): C++/extern choices are benchmarked on the host
    Site("torch._inductor.select_algorithm", "ExternKernelCaller.__init__",
         "Extern kernel choices are benchmarked as CPU requests (no device streams)."),
    Site("torch._inductor.select_algorithm", "AlgorithmSelectorCache.__call__",
         "No multi-template selection for the C++ backend."),
    Site("torch._inductor.codegen.subgraph", "SubgraphChoiceCaller._create_benchmark_request",
         "Subgraph choices are benchmarked as CPU requests."),
    # -- FX graph cache: generated C++ depends on the thread count
    Site("torch._inductor.codecache", "FxGraphHashDetails._contains_cpu_tensor",
         "Graphs that generate C++ kernels key the cache on the OpenMP thread count."),
    Site("torch._inductor.codecache", "FxGraphHashDetails._may_generate_cpu_cpp_code",
         "As above, for graphs whose only neuron tensors are created inside the graph."),
    # -- decompositions / references that describe what the CPU kernel returns
    Site("torch._decomp.decompositions", "native_batch_norm_helper",
         "save_mean/save_rstd shapes and dtypes as the CPU kernel returns them."),
    Site("torch._refs", "native_layer_norm",
         "mean/rstd in the input dtype, as the CPU kernel returns them."),
    Site("torch._refs", "native_group_norm",
         "The CPU kernel's order of operations (weight folded in before the normalization)."),
    # -- meta kernels (FakeTensor): output layouts and checks of the CPU kernels neuron runs
    Site("torch._meta_registrations", "meta_pixel_shuffle",
         "The CPU kernel keeps channels_last (pixel_shuffle / pixel_unshuffle output strides)."),
    Site("torch._meta_registrations", "nonzero_static", "Output layout of the CPU kernel."),
    Site("torch._meta_registrations", "meta_embedding_bag",
         "offset2bag/bag_size/max_indices sizes of the CPU kernel."),
    Site("torch._meta_registrations", "meta_embedding_bag_forward_only", "bag_size of the CPU kernel."),
    Site("torch._meta_registrations", "meta_fft_c2c", "The CPU kernel without MKL (pocketfft) layout."),
    Site("torch._meta_registrations", "_check_scaled_mm_sizes", "The CPU kernel's layout checks."),
    Site("torch._meta_registrations", "_check_scaled_mm_sizes_v2", "The CPU kernel's layout checks."),
)


# "cpu" tests deliberately not given to neuron: they mean the CPU device itself, or a path neuron
# never takes. Kept here so an audit of a new torch version can diff against this list.
LEFT_AS_CPU: tuple[Site, ...] = (
    Site("torch._inductor.lowering", "maybe_copy_cpu_scalar", "Copies real CPU scalars to the graph's device."),
    Site("torch._inductor.lowering", "bernoulli_ / bernoulli_p",
         "Assertions that hold under fallback_random, which neuron graphs use."),
    Site("torch._inductor.lowering", "unsupported_output_tensor", "config.disable_cpp_codegen: neuron needs C++ codegen."),
    Site("torch._inductor.ir", "is_triton", "Would look up config.neuron_backend; neuron's scheduling is CppScheduling, "
         "which the generic branch already reports as not Triton."),
    Site("torch._inductor.ir", "Layout.__init__ / DeviceCopy.create / FallbackKernel",
         "Pinned memory, device copies, CPU default device of torchbind/print outputs."),
    Site("torch._inductor.graph", "register_buffer / init_wrapper_code / is_unspec_arg / codegen",
         "Mixed-device accounting: CPU tensors in a neuron graph are CPU tensors."),
    Site("torch._inductor.graph", "decide_layout_opt (SUPPORTED_MKLDNN_DEVICES)",
         "Neuron gets the generic layout heuristic, not mkldnn's always-channels-last; internal "
         "layouts only (graph outputs keep eager strides)."),
    Site("torch._inductor.fx_passes", "mkldnn_fusion / quantization / freezing_patterns",
         "oneDNN fusions create mkldnn-packed weights and mkldnn ops that neuron does not run."),
    Site("torch._inductor.fx_passes.post_grad", "ConstructorMoverPass / index_put CPU scalar",
         "Moves CPU constructors to a GPU; neuron is not a target device."),
    Site("torch._inductor.fx_passes.memory_estimator", "device_filter", "Neuron memory is device memory."),
    Site("torch._inductor.codegen.wrapper", "allocation / kernel-call / pinned paths",
         "NeuronWrapperCodegen emits neuron kernel calls; empty_strided for neuron is generic."),
    Site("torch._inductor.codegen", "cpp_wrapper_cpu / cpp_wrapper_cpu_array_ref / output_code (AOTI)",
         "cpp_wrapper=True and AOTInductor are not supported for neuron."),
    Site("torch._inductor.codecache / cpp_builder", "headers, link flags, min_optimize of non-CPU wrappers",
         "Neuron kernels are loaded with device_type='cpu' already."),
    Site("torch._inductor", "cudagraph_utils / runtime.triton_heuristics / codegen.triton / halide / pallas",
         "GPU/Triton-only."),
    Site("torch._inductor.decomposition", "grid_sampler_2d",
         "Compares torch.device objects; only decides whether the grid is expanded (same values)."),
    Site("torch._decomp.decompositions", "_upsample_get_cubic_coefficients / select_one_layer_lstm_function / "
         "_to_copy", "torch.device comparisons (same values) / mkldnn LSTM / real device transfers."),
    Site("torch._meta_registrations", "meta_histc",
         "neuron's histc takes integer tensors as CUDA does (csrc/aten/native_special.cpp), the CPU "
         "kernel rejects them: the meta kernel must not apply the CPU's dtype check."),
    Site("torch._subclasses.fake_impls", "unique (dim=...)",
         "torch.device comparison; the CPU kernel's extra inverse/counts outputs are unused by graphs "
         "that did not ask for them."),
)


def _predicate_is_cpu_device(original: Callable[..., bool]) -> Callable[..., bool]:
    import torch

    @functools.wraps(original)
    def is_cpu_device(inputs: Any) -> bool:
        return all(item.device.type in ("cpu", NEURON) for item in inputs if isinstance(item, torch.Tensor))

    return is_cpu_device


def _dropout_p_is_zero(node: Any) -> bool:
    """The node's `dropout_p` argument (SDPA's fused kernels) is the literal 0."""
    schema = getattr(node.target, "_schema", None)
    for i, arg in enumerate(schema.arguments if schema is not None else ()):
        if arg.name == "dropout_p":
            value = node.args[i] if i < len(node.args) else node.kwargs.get("dropout_p", arg.default_value)
            return type(value) in (int, float) and value == 0
    return False


def _on_neuron(node: Any) -> bool:
    val = node.meta.get("val")
    first = val[0] if isinstance(val, (list, tuple)) and val else val
    return getattr(getattr(first, "device", None), "type", None) == NEURON


def _predicate_is_nondeterministic_seeded_node(original: Callable[..., bool]) -> Callable[..., bool]:
    @functools.wraps(original)
    def is_nondeterministic_seeded_node(node: Any) -> bool:
        # The fused SDPA kernels are tagged nondeterministic_seeded for their dropout. Without it
        # neuron's draw nothing (csrc/aten/native_attention.cpp), so they need no place in the chain
        # of random ops; chained, each call's inputs are realized apart from the others' (a shared
        # attention mask is recomputed per layer) where the CPU's graph, never chained, shares them.
        seeded = original(node)
        return seeded and not (_on_neuron(node) and _dropout_p_is_zero(node))

    return is_nondeterministic_seeded_node


@dataclasses.dataclass(frozen=True)
class PredicateSite:
    module: str
    name: str
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]]
    rebind_in: tuple[str, ...]  # modules that bound the name with `from ... import`
    why: str


PREDICATE_SITES: tuple[PredicateSite, ...] = (
    PredicateSite("torch._inductor.utils", "is_cpu_device", _predicate_is_cpu_device,
                  ("torch._inductor.fx_passes.pre_grad",),
                  "Pre-grad inference passes of the CPU (with config.freezing: identity removal, conv-bn "
                  "folding). Not rebound in aoti_eager (AOTI eager kernels are CPU/CUDA only)."),
    PredicateSite("torch._inductor.fx_passes.post_grad", "_is_nondeterministic_seeded_node",
                  _predicate_is_nondeterministic_seeded_node, (),
                  "Under fallback_random (neuron graphs) post-grad chains random ops in program order; "
                  "neuron's fused SDPA kernels with dropout_p=0 draw nothing and stay out of the chain, "
                  "so their inputs are shared and fused as in the CPU's graph."),
)


# -- 1. literal rewrite ---------------------------------------------------------------------------

def _rewrite_const(value: Any) -> tuple[Any, int]:
    if type(value) is str and value == "cpu":
        return HOST_DEVICE_TYPE, 1
    if isinstance(value, types.CodeType):
        code = _rewrite_code(value)
        return code, int(code is not value)
    if type(value) in (tuple, frozenset):
        items = [_rewrite_const(v) for v in value]
        n = sum(c for _, c in items)
        return (type(value)(v for v, _ in items) if n else value), n
    return value, 0


def _rewrite_code(code: types.CodeType) -> types.CodeType:
    consts, changed = [], 0
    for c in code.co_consts:
        new, n = _rewrite_const(c)
        consts.append(new)
        changed += n
    return code.replace(co_consts=tuple(consts)) if changed else code


def _count_host_literals(code: types.CodeType) -> int:
    n = 0
    for c in code.co_consts:
        if c is HOST_DEVICE_TYPE:
            n += 1
        elif isinstance(c, types.CodeType):
            n += _count_host_literals(c)
        elif type(c) in (tuple, frozenset):
            n += sum(1 for v in c if v is HOST_DEVICE_TYPE)
    return n


def _resolve(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    parts = qualname.split(".")
    for part in parts:
        owner = obj
        obj = owner.__dict__[part] if isinstance(owner, type) and part in owner.__dict__ else getattr(owner, part)
    if isinstance(obj, (classmethod, staticmethod)):
        obj = obj.__func__
    obj = inspect.unwrap(obj)
    if not isinstance(obj, types.FunctionType):
        raise TypeError(f"{module}.{qualname} is a {type(obj).__name__}, not a function")
    return obj


_installed = False


def _install_literal_site(site: Site) -> SiteStatus:
    status = SiteStatus(f"{site.module}.{site.qualname}")
    try:
        fn = _resolve(site.module, site.qualname)
        if not _count_host_literals(fn.__code__):
            fn.__code__ = _rewrite_code(fn.__code__)
        status.literals = _count_host_literals(fn.__code__)
        if not status.literals:
            status.error = "no 'cpu' literal (changed in this torch version?)"
    except Exception as e:  # a torch version without this site: report, do not break compiling
        status.error = f"{type(e).__name__}: {e}"
    return status


# -- 2. predicates ----------------------------------------------------------------------------------

def _install_predicate(site: PredicateSite) -> SiteStatus:
    status = SiteStatus(f"{site.module}.{site.name}")
    try:
        module = importlib.import_module(site.module)
        current = getattr(module, site.name)
        if not getattr(current, "_neuron_cpu_parity", False):
            patched = site.wrap(current)
            patched._neuron_cpu_parity = True  # type: ignore[attr-defined]
            setattr(module, site.name, patched)
            for name in site.rebind_in:
                importer = importlib.import_module(name)
                if getattr(importer, site.name, None) is current:
                    setattr(importer, site.name, patched)
        status.literals = 1
    except Exception as e:
        status.error = f"{type(e).__name__}: {e}"
    return status


# -- 3. fake convolution ----------------------------------------------------------------------------

_CONV_OPS = ("convolution.default", "_convolution.default", "_convolution.deprecated",
             "convolution_backward.default")


def _is_neuron_fake(t: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor) and t.fake_device.type == NEURON


def _fake_conv_as_cpu(original: Callable[..., Any]) -> Callable[..., Any]:
    """Run the FakeTensor convolution impl on CPU twins of neuron inputs (same sizes, strides,
    dtype), then give the results the neuron device: the memory format it picks comes from the
    convolution backend the CPU would use (mkldnn/slow_conv), which is what neuron's eager
    convolution runs."""
    import torch
    from torch.utils._pytree import tree_map

    @functools.wraps(original)
    def conv(fake_mode: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager

        leaves = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        if not any(_is_neuron_fake(a) for a in leaves):
            return original(fake_mode, func, *args, **kwargs)
        device = next(a.fake_device for a in leaves if _is_neuron_fake(a))

        def rebuild(t: Any, to: torch.device) -> Any:
            if not isinstance(t, FakeTensor):
                return t
            with in_kernel_invocation_manager(fake_mode):
                meta = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device="meta")
            return FakeTensor(fake_mode, meta, to)

        cpu = torch.device("cpu")
        cpu_args = tree_map(lambda t: rebuild(t, cpu) if _is_neuron_fake(t) else t, args)
        cpu_kwargs = tree_map(lambda t: rebuild(t, cpu) if _is_neuron_fake(t) else t, kwargs)
        out = original(fake_mode, func, *cpu_args, **cpu_kwargs)
        return tree_map(lambda t: rebuild(t, device), out)

    conv._neuron_cpu_parity = True  # type: ignore[attr-defined]
    return conv


def _install_fake_conv() -> SiteStatus:
    status = SiteStatus("torch._subclasses.fake_impls.conv")
    try:
        import torch
        from torch._subclasses import fake_impls

        for name in _CONV_OPS:
            packet, overload = name.split(".")
            op = getattr(getattr(torch.ops.aten, packet), overload)
            impl = fake_impls.op_implementations_dict[op]
            if not getattr(impl, "_neuron_cpu_parity", False):
                fake_impls.op_implementations_dict[op] = _fake_conv_as_cpu(impl)
            status.literals += 1
    except Exception as e:
        status.error = f"{type(e).__name__}: {e}"
    return status


# -- 4. random ops: eager kernels ---------------------------------------------------------------------

def _uses_neuron(gm: Any, example_inputs: Any) -> bool:
    import torch

    def on_neuron(v: Any) -> bool:
        return isinstance(v, torch.Tensor) and v.device.type == NEURON

    if any(on_neuron(t) for t in example_inputs or ()):
        return True
    graph = getattr(gm, "graph", None)
    for node in graph.nodes if graph is not None else ():
        for key in ("val", "example_value"):
            v = node.meta.get(key)
            if on_neuron(v) or (isinstance(v, (list, tuple)) and any(on_neuron(x) for x in v)):
                return True
        device = node.kwargs.get("device")
        if device is not None and torch.device(device).type == NEURON:
            return True
    return False


def _compile_fx_with_eager_random(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def compile_fx(model_: Any, example_inputs_: Any, *args: Any, **kwargs: Any) -> Any:
        from torch._inductor import config

        patches = kwargs.get("config_patches")
        if (not config.fallback_random and not (patches or {}).get("fallback_random")
                and _uses_neuron(model_, example_inputs_)):
            kwargs["config_patches"] = {**(patches or {}), "fallback_random": True}
        return original(model_, example_inputs_, *args, **kwargs)

    compile_fx._neuron_cpu_parity = True  # type: ignore[attr-defined]
    return compile_fx


def _install_eager_random() -> SiteStatus:
    status = SiteStatus("torch._inductor.compile_fx.compile_fx (fallback_random for neuron graphs)")
    try:
        from torch._inductor import compile_fx as module

        if not getattr(module.compile_fx, "_neuron_cpu_parity", False):
            module.compile_fx = _compile_fx_with_eager_random(module.compile_fx)
        status.literals = 1
    except Exception as e:
        status.error = f"{type(e).__name__}: {e}"
    return status


# -- install / report ---------------------------------------------------------------------------------

def _sites() -> list[tuple[str, str, str, Callable[[], SiteStatus]]]:
    """(name, module, inventory key, installer) for every site."""
    out: list[tuple[str, str, str, Callable[[], SiteStatus]]] = []
    for site in CPU_LITERAL_SITES:
        out.append((f"{site.module}.{site.qualname}", site.module, "P9",
                    functools.partial(_install_literal_site, site)))
    for psite in PREDICATE_SITES:
        out.append((f"{psite.module}.{psite.name}", psite.module, "P10",
                    functools.partial(_install_predicate, psite)))
    out.append(("torch._subclasses.fake_impls.conv", "torch._subclasses.fake_impls", "P11", _install_fake_conv))
    out.append(("torch._inductor.compile_fx.compile_fx", "torch._inductor.compile_fx", "P12", _install_eager_random))
    return out



def install(inductor: bool = True) -> None:
    """Install the sites (idempotent). `inductor=False` installs only those outside torch._inductor
    (meta and fake kernels, decompositions, refs), which Dynamo's tracing uses before Inductor is
    imported. A site missing from this torch version is reported by `report()` and warned about
    once, not raised: compiling must not break on a torch upgrade."""
    global _installed
    if _installed:
        return
    missing: dict[str, list[SiteStatus]] = {}
    for name, module, key, installer in _sites():
        if _site_error(name) is None:
            continue
        if not inductor and module.startswith("torch._inductor"):
            continue
        status = installer()
        status.site = name
        _site_status[status.site] = status
        if status.error:
            missing.setdefault(key, []).append(status)
    if inductor:
        _installed = True
    if missing:
        import warnings

        warnings.warn(" ".join(
            _torch_internals.message(_torch_internals.internal(key), "sites not found in this torch version: "
                                     + "; ".join(f"{s.site} ({s.error})" for s in statuses))
            for key, statuses in missing.items()), stacklevel=2)


def report() -> list[SiteStatus]:
    """The sites installed so far (or tried), in installation order."""
    names = {name for name, _, _, _ in _sites()}
    return [s for s in _site_status.values() if s.site in names]


# -- the inventory entries (torchneuron_ext/_torch_internals.py) ---------------------------------------

def _has_cpu_literal(code: types.CodeType) -> bool:
    for c in code.co_consts:
        if type(c) is str and c == "cpu":
            return True
        if isinstance(c, types.CodeType) and _has_cpu_literal(c):
            return True
        if type(c) in (tuple, frozenset) and any(type(v) is str and v == "cpu" for v in c):
            return True
    return False


def _check_cpu_literals() -> None:
    broken = []
    for site in CPU_LITERAL_SITES:
        try:
            fn = _resolve(site.module, site.qualname)
        except Exception as e:
            broken.append(f"{site.module}.{site.qualname} ({type(e).__name__}: {e})")
            continue
        if not _count_host_literals(fn.__code__) and not _has_cpu_literal(fn.__code__):
            broken.append(f"{site.module}.{site.qualname} (no 'cpu' literal)")
    if broken:
        raise _torch_internals.Broken("; ".join(broken))


def _check_cpu_predicates() -> None:
    for site in PREDICATE_SITES:
        if not callable(_torch_internals.attribute(site.module, site.name)):
            raise _torch_internals.Broken(f"{site.module}.{site.name} is not callable")
        for name in site.rebind_in:
            importlib.import_module(name)


def _check_fake_conv() -> None:
    import torch

    impls = _torch_internals.attribute("torch._subclasses.fake_impls", "op_implementations_dict")
    for name in _CONV_OPS:
        packet, overload = name.split(".")
        op = getattr(getattr(torch.ops.aten, packet), overload)
        if op not in impls:
            raise _torch_internals.Broken(f"fake_impls.op_implementations_dict has no entry for aten.{name}")
    _torch_internals.attribute("torch._subclasses.fake_tensor", "FakeTensor", "in_kernel_invocation_manager")


def _check_compile_fx() -> None:
    fn = _torch_internals.attribute("torch._inductor.compile_fx", "compile_fx")
    _torch_internals.parameters(inspect.unwrap(fn), "model_", "example_inputs_", "config_patches",
                                label="compile_fx")
    _torch_internals.attribute("torch._inductor.config", "fallback_random")


# A missing site is warned about (install()), not raised, so these are not require()d at install:
# compiling must not break on a torch upgrade. require("P9") & co. still raise (the canary test).
_torch_internals.register(
    "P9", "Inductor CPU-parity literal rewrites", "torchneuron_ext/compiler/cpu_parity.py (CPU_LITERAL_SITES)",
    "each listed Inductor/decomposition/meta function being a plain Python function whose code "
    "constants hold the 'cpu' device-type literal (its co_consts are replaced)",
    "CPU_LITERAL_SITES (audit the new torch's 'cpu' tests against LEFT_AS_CPU)", _check_cpu_literals)
_torch_internals.register(
    "P10", "Inductor CPU-parity predicates", "torchneuron_ext/compiler/cpu_parity.py (PREDICATE_SITES)",
    "torch._inductor.utils.is_cpu_device, rebound in torch._inductor.fx_passes.pre_grad; "
    "torch._inductor.fx_passes.post_grad._is_nondeterministic_seeded_node(node), looked up as a "
    "module global by _chain_random_ops_for_ordering", "PREDICATE_SITES", _check_cpu_predicates)
_torch_internals.register(
    "P11", "fake convolution impls", "torchneuron_ext/compiler/cpu_parity.py (_install_fake_conv)",
    "torch._subclasses.fake_impls.op_implementations_dict entries for the convolution ops (_CONV_OPS), "
    "impl(fake_mode, func, *args, **kwargs), FakeTensor(fake_mode, meta, device), "
    "in_kernel_invocation_manager", "_fake_conv_as_cpu in cpu_parity.py", _check_fake_conv)
_torch_internals.register(
    "P12", "compile_fx wrapper (eager random ops)", "torchneuron_ext/compiler/cpu_parity.py (_install_eager_random)",
    "torch._inductor.compile_fx.compile_fx(model_, example_inputs_, ..., config_patches=) as a module "
    "attribute, config.fallback_random", "_compile_fx_with_eager_random in cpu_parity.py", _check_compile_fx)
_torch_internals.register(
    "P22", "pytree", "torchneuron_ext/nki/torch/aten_routing.py, nki/torch/tracing.py, compiler/cpu_parity.py",
    "torch.utils._pytree.tree_flatten / tree_map", "the imports in nki/torch/aten_routing.py, nki/torch/tracing.py and "
    "compiler/cpu_parity.py", _torch_internals.has_attributes("torch.utils._pytree", "tree_flatten", "tree_map"))


__all__ = ["CPU_LITERAL_SITES", "HOST_DEVICE_TYPE", "LEFT_AS_CPU", "PREDICATE_SITES", "SiteStatus", "install",
           "report"]
