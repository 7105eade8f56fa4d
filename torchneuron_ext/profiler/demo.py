"""The profiling demo: RMSNorm on neuron three ways, naive (six separate ops), `torch.rms_norm`
and `torch.compile(backend="neuron")`, profiled side by side, with a report for each and a
comparison."""
from __future__ import annotations

import os
import time
from typing import Any

import torch
from torch.profiler import ProfilerActivity

from .config import NeuronConfig, NeuronProfiler
from .report import format_report, summarize_trace


def naive_rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def fused_rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return torch.rms_norm(x, (x.shape[-1],), w, eps)


_compiled: dict[str, Any] = {}


def compiled_rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    if "fn" not in _compiled:
        _compiled["fn"] = torch.compile(naive_rmsnorm, backend="neuron", fullgraph=True)
    return _compiled["fn"](x, w, eps)


VARIANTS = {"naive": naive_rmsnorm, "torch.rms_norm": fused_rmsnorm, "torch.compile": compiled_rmsnorm}


def run_demo(out_dir: str, size: int = 2048, iters: int = 5) -> int:
    torch.manual_seed(0)
    x = torch.randn(size, size, device="neuron")
    w = torch.randn(size, device="neuron")
    ref = naive_rmsnorm(x.cpu(), w.cpu())
    results = {}
    for step, (name, fn) in enumerate(VARIANTS.items(), start=1):
        what = "compiling (about 10 s the first time), " if name == "torch.compile" else ""
        print(f"[{step}/{len(VARIANTS)}] {name}: {what}checking against CPU, warming up, profiling {iters} "
              "iterations ...", flush=True)
        torch.testing.assert_close(fn(x, w).cpu(), ref, rtol=1e-4, atol=1e-4)
        for _ in range(3):  # warm up outside the capture
            fn(x, w)
        cfg = NeuronConfig(profile_output_dir=os.path.join(out_dir, name.replace(".", "_")))
        exporter = NeuronProfiler(cfg)
        t0 = time.perf_counter()
        with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                    experimental_config=cfg, on_trace_ready=exporter.export_trace) as prof:
            for _ in range(iters):
                fn(x, w)
            torch.neuron.synchronize()
        wall = (time.perf_counter() - t0) / iters
        summary = summarize_trace(os.path.join(exporter.last_export_dir, "trace.json"))
        results[name] = (wall, summary, exporter.last_export_dir)
        print(f"== {name} ({size}x{size}, {iters} iterations) ==")
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=8))
        print(format_report(summary, top=8))
    print("== comparison (per call) ==")
    print(f"{'variant':<18}{'ops dispatched':>15}{'host ms':>10}{'device ms':>11}{'wall ms':>10}  trace")
    for name, (wall, s, path) in results.items():
        print(f"{name:<18}{s.kernels / iters:>15.1f}{s.host_dispatch_us / iters / 1e3:>10.2f}"
              f"{s.device_busy_us / iters / 1e3:>11.2f}{wall * 1e3:>10.2f}  {path}/trace.json")
    naive, fused = results["naive"][1], results["torch.rms_norm"][1]
    compiled = results["torch.compile"][1]
    if compiled.device_busy_us > 0:
        print(f"\ntorch.compile fuses the naive version into {compiled.kernels / iters:.0f} device kernel(s) per call "
              f"(a compiled graph and its generated C++ kernels) instead of {naive.kernels / iters:.0f}.")
    if fused.device_busy_us > 0:
        print(f"\nper iteration: naive {naive.kernels / iters:.0f} kernels, {naive.device_busy_us / iters / 1e3:.2f} ms "
              f"device; torch.rms_norm {fused.kernels / iters:.0f} kernels, "
              f"{fused.device_busy_us / iters / 1e3:.2f} ms device "
              f"({naive.device_busy_us / fused.device_busy_us:.2f}x less device time).")
        if fused.kernels >= naive.kernels:
            print("torch 2.13 decomposes torch.rms_norm into the same elementwise ops (it is CompositeImplicit),")
            print("so the gain comes from fewer passes over memory, not fewer kernels; torch.compile fuses them.")
    from .html import write_html_report

    report = write_html_report([os.path.join(path, "trace.json") for _, _, path in results.values()],
                               os.path.join(out_dir, "report.html"), names=list(results),
                               title=f"RMSNorm on neuron ({size}x{size}, {iters} iterations)")
    print(f"\nHTML report (summary, timeline with framework, runtime, hardware, transfer and memory lanes, ops, HBM, "
          f"naive against torch.compile side by side): {report}\nOpen it in a browser (it needs no network), or "
          f"serve it with `torchneuron-ext view {report}`.")
    return 0
