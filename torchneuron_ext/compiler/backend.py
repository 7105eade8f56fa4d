"""The "neuron" torch.compile backend: Inductor with the neuron registrations, compile metrics,
and each compiled-graph call timed and traced as a device kernel."""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Optional

import torch

from .. import _C, _torch_internals
from ..instrumentation.activity import DeviceActivity
from . import metrics


def _check_compile_metrics() -> None:
    counters = _torch_internals.attribute("torch._dynamo.utils", "counters")
    _torch_internals.attribute("torch._dynamo.utils", "compilation_time_metrics")
    _torch_internals.attribute("torch._inductor.metrics", "generated_kernel_count")
    _torch_internals.attribute("torch._inductor", "list_mode_options")
    _torch_internals.attribute("torch.compiler", "config.cache_key_tag")
    if not hasattr(counters, "__getitem__"):
        raise _torch_internals.Broken("torch._dynamo.utils.counters is not a mapping")
    _torch_internals.source_mentions(os.path.join("_functorch", "aot_autograd.py"), "_boxed_call")


_torch_internals.register(
    "P13", "compile metrics and boxed calls", "torchneuron_ext/compiler/backend.py",
    "torch._dynamo.utils.counters['inductor'] / compilation_time_metrics, "
    "torch._inductor.metrics.generated_kernel_count, list_mode_options, torch.compiler.config."
    "cache_key_tag, AOTAutograd reading `_boxed_call` on a backend's result",
    "neuron_backend in compiler/backend.py", _check_compile_metrics)


# Bump when the generated code changes (wrapper_codegen.py, kernel_bytes.py, runtime.py, cpu_parity.py).
_CODEGEN_VERSION = 7  # 7: generated kernel calls carry their bytes per argument (kernel_bytes.py)
_CACHE_TAG = f"torchneuron_ext-codegen-{_CODEGEN_VERSION}"


# Phases of a compile, as PyTorch's own timers name them.
_PHASES = {
    "aot_autograd": "create_aot_dispatcher_function",
    "inductor_lowering": "GraphLowering.run",
    "inductor_codegen": "GraphLowering.codegen",
    "cpp_compile": "compile_file",
    "inductor_total": "compile_fx_inner",
}


def _routing_tag() -> str:
    """ATen operators routed to NKI kernels change what a graph traces to, so they are part of the key."""
    routing = sys.modules.get("torchneuron_ext.nki.torch.aten_routing")  # imported by either of its paths
    return routing.cache_tag() if routing is not None else ""


def _phase_seconds(timers: dict[str, list[float]], before: dict[str, int]) -> dict[str, float]:
    out = {}
    for phase, timer in _PHASES.items():
        new = timers.get(timer, [])[before.get(timer, 0):]
        out[phase] = round(float(sum(new)), 6)
    return out


def _generated_kernels() -> int:
    from torch._inductor import metrics as inductor_metrics

    return int(inductor_metrics.generated_kernel_count)


def _config_patches(mode: Optional[str], options: Optional[dict[str, Any]]) -> dict[str, Any]:
    """Inductor config for torch.compile's `mode=` and `options=`. Modes: "default",
    "reduce-overhead" (CUDA graphs have no neuron counterpart here; it compiles as default),
    "max-autotune" and "max-autotune-no-cudagraphs" (autotuning of the C++ kernels)."""
    from torch._inductor import list_mode_options

    # Random ops call the eager kernels, so a compiled graph draws what eager draws for the same
    # seed, on neuron and on CPU tensors alike (TorchNeuron's random-op legalization guarantees the
    # same); `options={"fallback_random": False}` restores Inductor's own generator.
    patches: dict[str, Any] = {"fallback_random": True}
    if mode is not None:
        if mode not in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
            raise ValueError(f"Unknown mode {mode!r} for backend='neuron'; use default, reduce-overhead, "
                             "max-autotune or max-autotune-no-cudagraphs")
        patches.update({k: v for k, v in list_mode_options(mode).items() if "cudagraph" not in k})
    patches.update(options or {})
    return patches


def neuron_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], mode: Optional[str] = None,
                   options: Optional[dict[str, Any]] = None, **kwargs: Any) -> Callable[..., Any]:
    """torch.compile(..., backend="neuron"). Accepts torch.compile's `mode=` and Inductor `options=`."""
    _torch_internals.require("P13")
    from torch._dynamo.utils import counters
    from torch._inductor.compile_fx import compile_fx

    from .registration import register_all

    register_all()
    nodes = sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))
    record = metrics._new_graph(f"graph_{len(metrics.get_metrics())}", nodes, len(example_inputs))
    kernels_before = _generated_kernels()
    hits_before = int(counters["inductor"].get("fxgraph_cache_hit", 0))
    misses_before = int(counters["inductor"].get("fxgraph_cache_miss", 0))
    from torch._dynamo.utils import compilation_time_metrics

    before = {k: len(v) for k, v in compilation_time_metrics.items()}
    t0 = time.perf_counter()
    # Salt Inductor's FX-graph cache key with our code generation's identity, so that code
    # generated by another version of this package is never reused.
    with torch.compiler.config.patch(cache_key_tag=_CACHE_TAG + _routing_tag()):
        compiled = compile_fx(gm, example_inputs, config_patches=_config_patches(mode, options), **kwargs)
    record.compile_seconds = time.perf_counter() - t0
    record.phases_seconds = _phase_seconds(compilation_time_metrics, before)
    record.kernels_generated = _generated_kernels() - kernels_before
    record.cache_hits = int(counters["inductor"].get("fxgraph_cache_hit", 0)) - hits_before
    record.cache_misses = int(counters["inductor"].get("fxgraph_cache_miss", 0)) - misses_before
    name = f"compiled::{record.name}"
    device = next((t.device.index or 0 for t in example_inputs
                   if isinstance(t, torch.Tensor) and t.device.type == "neuron"), 0)
    timing_mode, region_enter, region_exit = _C._timing_mode, _C._region_enter, _C._region_exit

    def run(*args: Any) -> Any:
        record.calls += 1
        if not timing_mode():
            return compiled(*args)
        # One launch of the graph is one device kernel (one NEFF execution on Trainium): the
        # kernels it runs are recorded as its children, and their bytes and FLOPs as its own.
        with DeviceActivity(name, "compiled", device) as act:
            region_enter()
            try:
                out = compiled(*args)
            finally:
                act.bytes_read, act.bytes_written, act.flops, act.elements, act.dtype = region_exit()
        return out

    # AOTAutograd looks for this attribute on what a backend returns.
    run._boxed_call = getattr(compiled, "_boxed_call", False)  # type: ignore[attr-defined]
    return run
