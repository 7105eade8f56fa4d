"""The "neuron" torch.compile backend: Inductor with the neuron registrations, compile metrics,
and each compiled-graph call timed and traced as a device kernel."""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

import torch

from .. import _C
from . import metrics


def _generated_kernels() -> int:
    from torch._inductor import metrics as inductor_metrics

    return int(inductor_metrics.generated_kernel_count)


def _config_patches(mode: Optional[str], options: Optional[dict[str, Any]]) -> dict[str, Any]:
    """Inductor config for torch.compile's `mode=` and `options=`. Modes: "default",
    "reduce-overhead" (CUDA graphs have no neuron counterpart here; it compiles as default),
    "max-autotune" and "max-autotune-no-cudagraphs" (autotuning of the C++ kernels)."""
    from torch._inductor import list_mode_options

    patches: dict[str, Any] = {}
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
    from torch._dynamo.utils import counters
    from torch._inductor.compile_fx import compile_fx

    from .registration import register_all

    register_all()
    nodes = sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))
    record = metrics._new_graph(f"graph_{len(metrics.get_metrics())}", nodes, len(example_inputs))
    kernels_before = _generated_kernels()
    hits_before = int(counters["inductor"].get("fxgraph_cache_hit", 0))
    misses_before = int(counters["inductor"].get("fxgraph_cache_miss", 0))
    t0 = time.perf_counter()
    compiled = compile_fx(gm, example_inputs, config_patches=_config_patches(mode, options), **kwargs)
    record.compile_seconds = time.perf_counter() - t0
    record.phases_seconds["inductor"] = record.compile_seconds
    record.kernels_generated = _generated_kernels() - kernels_before
    record.cache_hits = int(counters["inductor"].get("fxgraph_cache_hit", 0)) - hits_before
    record.cache_misses = int(counters["inductor"].get("fxgraph_cache_miss", 0)) - misses_before
    name = f"compiled::{record.name}"
    device = next((t.device.index or 0 for t in example_inputs
                   if isinstance(t, torch.Tensor) and t.device.type == "neuron"), 0)
    timing_mode, now, record_kernel = _C._timing_mode, _C._now_ns, _C._record_kernel

    def run(*args: Any) -> Any:
        record.calls += 1
        if not timing_mode():
            return compiled(*args)
        start = now()
        out = compiled(*args)
        record_kernel(name, "compiled", device, start, now(), 0, 0, 0)
        return out

    # AOTAutograd looks for this attribute on what a backend returns.
    run._boxed_call = getattr(compiled, "_boxed_call", False)  # type: ignore[attr-defined]
    return run
