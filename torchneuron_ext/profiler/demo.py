"""The profiling demo: RMSNorm on neuron three ways, naive (six separate ops), `torch.rms_norm`
and `torch.compile(backend="neuron")`, profiled side by side, with a report for each and a
comparison."""
from __future__ import annotations

import os
import textwrap
import time
from typing import Any

import torch
from torch.profiler import ProfilerActivity

from .config import NeuronConfig, NeuronProfiler
from ._format import format_bytes, format_us
from .kineto_markers import profiling
from .report import TraceSummary, format_report, summarize_trace
from .trace_events import ClassifiedTrace, classify


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


def comparison(results: dict[str, tuple[float, TraceSummary, str]], iters: int) -> str:
    """The variants side by side in both clocks, what each saves against the naive one, and a
    reading of the projected verdict."""
    any_summary = next(iter(results.values()))[1]
    target = any_summary.projected.target if any_summary.projected else "the target"
    lines = [f"== comparison per call: measured on this host | projected on {target} (cost model, "
             "docs/cost_model.md) ==",
             f"{'variant':<16}{'kernels':>8}{'launches':>9}{'bytes':>11}{'host ms':>9}{'device ms':>10}"
             f"{'wall ms':>9} |{'device ms':>10}{'wall ms':>9}  verdict"]
    per: dict[str, dict[str, float]] = {}
    for name, (wall, s, path) in results.items():
        p = s.projected
        row = per[name] = {
            "kernels": s.kernels / iters, "launches": (p.launches if p else 0) / iters,
            "bytes": sum(r.bytes for r in s.ops) / iters, "device": s.device_busy_us / iters,
            "wall": wall * 1e6, "p_device": (p.device_busy_us if p else 0.0) / iters,
            "p_wall": (p.wall_us if p else 0.0) / iters, "p_launch": (p.launch_us if p else 0.0) / iters,
        }
        lines.append(f"{name:<16}{row['kernels']:>8.1f}{row['launches']:>9.1f}{format_bytes(row['bytes']):>11}"
                     f"{s.host_dispatch_us / iters / 1e3:>9.2f}{row['device'] / 1e3:>10.2f}{row['wall'] / 1e3:>9.2f} |"
                     f"{row['p_device'] / 1e3:>10.3f}{row['p_wall'] / 1e3:>9.3f}  {p.verdict if p else '-'}")
        lines.append(f"{'':<16}trace: {path}/trace.json")
    base = per.get("naive")
    if base and "torch.compile" in per and per["torch.compile"]["kernels"]:
        n = per["torch.compile"]["kernels"]
        lines.append("")
        lines.append(f"torch.compile fuses the naive version into {n:.0f} device {_plural(n, 'kernel')} per call (one "
                     f"launch of the compiled graph; its generated C++ kernels run inside it) instead of "
                     f"{base['kernels']:.0f}.")
    if base:
        lines.append("")
        lines.append("against naive, per call (device time: projected on the target, measured on this host):")
        for name, row in per.items():
            if name == "naive":
                continue
            lines.append(f"  {name:<16}saves {base['kernels'] - row['kernels']:.0f} kernels, "
                         f"{base['launches'] - row['launches']:.0f} launches, "
                         f"{format_bytes(max(base['bytes'] - row['bytes'], 0))} of traffic; device time projected "
                         f"{format_us(base['p_device'])} -> {format_us(row['p_device'])} "
                         f"({_ratio(base['p_device'], row['p_device'])}), measured {format_us(base['device'])} -> "
                         f"{format_us(row['device'])} ({_ratio(base['device'], row['device'])})")
        lines.append("")
        lines.append(_reading(per, results, target))
    return "\n".join(lines)


def _plural(n: float, word: str) -> str:
    return word if round(n) == 1 else word + "s"


def _ratio(before: float, after: float) -> str:
    """4.0x less, 1.08x more, or the same: the change from `before` to `after` in words."""
    if before <= 0 or after <= 0:
        return "-"
    r = before / after
    if abs(r - 1) < 0.005:
        return "the same"
    return f"{r:.2f}x less" if r > 1 else f"{1 / r:.2f}x more"


def _reading(per: dict[str, dict[str, float]], results: dict[str, tuple[float, TraceSummary, str]],
             target: str) -> str:
    naive = per["naive"]
    verdicts = {name: (s.projected.verdict if s.projected else "-") for name, (_, s, _) in results.items()}
    launch_share = naive["p_launch"] / naive["p_device"] if naive["p_device"] else 0.0

    def busy(row: dict[str, float]) -> str:
        return f"{100 * row['p_device'] / row['p_wall']:.0f}%" if row["p_wall"] else "-"

    explained: list[bool] = []

    def host_bound(row: dict[str, float]) -> str:
        text = f": the device would be busy only {busy(row)} of its {row['p_wall']:.0f} us projected wall per call"
        if explained:
            return text + ", waiting for the host"
        explained.append(True)
        return text + (", waiting for the host's own work (Python, dispatch, the framework: measured here, "
                       "profiler on, with the emulated kernels taken out)")

    text = (f"Reading the projection: on this host every variant is dominated by the host computing the "
            f"kernels, so the measured verdicts mostly describe the emulator. On {target} the naive version "
            f"would be {verdicts['naive']}: its {naive['kernels']:.0f} kernels move "
            f"{format_bytes(naive['bytes'])} per call, {naive['p_device']:.0f} us of device time of which "
            f"{100 * launch_share:.0f}% is launch overhead")
    text += host_bound(naive) if verdicts["naive"] == "host-bound" else f" (busy {busy(naive)} of its projected wall)"
    text += ". "
    for name in ("torch.rms_norm", "torch.compile"):
        if name not in per:
            continue
        row = per[name]
        kernels = f"{row['kernels']:.0f} {_plural(row['kernels'], 'kernel')}"
        how = f"runs {kernels} (one launch for the whole graph)" if name == "torch.compile" else f"needs {kernels}"
        text += (f"{name} {how} and {format_bytes(row['bytes'])}: {row['p_device']:.0f} us of device time, so it "
                 f"would be {verdicts[name]}")
        text += (host_bound(row) if verdicts[name] == "host-bound" else f" (busy {busy(row)} of its projected wall)")
        text += ". "
    best = min(per, key=lambda n: per[n]["p_wall"])
    text += (f"Fastest projected wall: {best} ({per[best]['p_wall']:.0f} us against naive's {naive['p_wall']:.0f} us). "
             "On the device the cost is bytes through HBM and launches, so fewer kernels and fewer passes over "
             "memory are what count there; once a variant is host-bound, what is left to save is the host's work "
             "per call.")
    return textwrap.fill(text, width=110)


def run_demo(out_dir: str, size: int = 2048, iters: int = 5) -> int:
    torch.manual_seed(0)
    x = torch.randn(size, size, device="neuron")
    w = torch.randn(size, device="neuron")
    ref = naive_rmsnorm(x.cpu(), w.cpu())
    results = {}
    classified: dict[str, ClassifiedTrace] = {}
    for step, (name, fn) in enumerate(VARIANTS.items(), start=1):
        what = "compiling (about 10 s the first time), " if name == "torch.compile" else ""
        print(f"[{step}/{len(VARIANTS)}] {name}: {what}checking against CPU, warming up, profiling {iters} "
              "iterations ...", flush=True)
        torch.testing.assert_close(fn(x, w).cpu(), ref, rtol=1e-4, atol=1e-4)
        for _ in range(3):  # warm up outside the capture
            fn(x, w)
        cfg = NeuronConfig(profile_output_dir=os.path.join(out_dir, name.replace(".", "_")))
        exporter = NeuronProfiler(cfg)
        with profiling(torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                              experimental_config=cfg, on_trace_ready=exporter.export_trace)) as prof:
            # The iterations only: starting the capture and writing the trace are not the program's time.
            t0 = time.perf_counter()
            for _ in range(iters):
                fn(x, w)
            torch.neuron.synchronize()
            wall = (time.perf_counter() - t0) / iters
        # Classified once: the text report here and the HTML report below read the same classification.
        classified[name] = classify(os.path.join(exporter.last_export_dir, "trace.json"))
        summary = summarize_trace(classified[name])
        results[name] = (wall, summary, exporter.last_export_dir)
        print(f"== {name} ({size}x{size}, {iters} iterations) ==")
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=8))
        print(format_report(summary, top=8))
    print(comparison(results, iters))
    from .html import write_html_report

    report = write_html_report([classified[name] for name in results],
                               os.path.join(out_dir, "report.html"), names=list(results),
                               title=f"RMSNorm on neuron ({size}x{size}, {iters} iterations)")
    print(f"\nHTML report (summary, timeline with framework, runtime, hardware, transfer and memory lanes, ops, HBM, "
          f"naive against torch.compile side by side): {report}\nOpen it in a browser (it needs no network), or "
          f"serve it with `torchneuron-ext view {report}`.")
    return 0
