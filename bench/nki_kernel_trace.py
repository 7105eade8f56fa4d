"""What the NKI instruction-level profile costs, side by side in one process (issue 32, item 2).

    python bench/nki_kernel_trace.py [--rounds N] [--size S]

Three comparisons, each in alternating rounds (medians printed, with their ratio to the plain case):

1. ``nki.benchmark`` of examples/nki's tiled matmul (legacy dialect, S x S x S fp32) without a trace, against
   ``nki.benchmark(save_trace_name=...)``: the launch keeping every instruction's record plus writing the
   Chrome trace;
2. the HTML report's payload of that trace (``profile_payload``: classification, timeline columns, kernel view,
   findings) against the launch itself, and the trace's size;
3. the same kernel launched on neuron tensors under torch.profiler, with the instructions off and on
   (``profiler.nki_instructions()``), per launch, then the export with ``add_kernel_lanes``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Callable

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples", "nki"))

import matmul  # noqa: E402

import torchneuron_ext  # noqa: E402,F401
import torchneuron_ext.nki.legacy as lnki  # noqa: E402
from torchneuron_ext.nki.trace import CAT_INSTRUCTION  # noqa: E402
from torchneuron_ext.profiler import add_kernel_lanes, kernel_trace, nki_instructions  # noqa: E402
from torchneuron_ext.profiler.html.page import profile_payload  # noqa: E402


def timed(f: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=512)
    a = ap.parse_args()
    n = a.size
    g = torch.Generator().manual_seed(0)
    lhsT, rhs = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    lhsT_np, rhs_np = lhsT.numpy(), rhs.numpy()
    tmp = tempfile.mkdtemp(prefix="nki-kernel-trace-")
    path = os.path.join(tmp, "mm.json")
    plain = lnki.benchmark(warmup=1, iters=1)(matmul.matmul_legacy)
    traced = lnki.benchmark(warmup=1, iters=1, save_trace_name=path)(matmul.matmul_legacy)
    plain(lhsT_np, rhs_np)
    traced(lhsT_np, rhs_np)
    instructions = plain.benchmark_result.launch.costs.total_instructions

    times: dict = {"benchmark": [], "benchmark + trace": [], "report payload": []}
    for _ in range(a.rounds):
        times["benchmark"].append(timed(lambda: plain(lhsT_np, rhs_np)))
        times["benchmark + trace"].append(timed(lambda: traced(lhsT_np, rhs_np)))
        times["report payload"].append(timed(lambda: profile_payload(path)))
    with open(path) as f:
        events = sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == CAT_INSTRUCTION)
    size = os.path.getsize(path)

    dev_l, dev_r = lhsT.to("neuron"), rhs.to("neuron")
    matmul.matmul_legacy(dev_l, dev_r)
    launches = 3
    for name in ("torch.profiler, instructions off", "torch.profiler, instructions on", "export with add_kernel_lanes"):
        times[name] = []
    for _ in range(a.rounds):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.PrivateUse1]):
            times["torch.profiler, instructions off"].append(
                timed(lambda: [matmul.matmul_legacy(dev_l, dev_r) for _ in range(launches)]) / launches)
        with nki_instructions(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                                    torch.profiler.ProfilerActivity.PrivateUse1]) as p:
            times["torch.profiler, instructions on"].append(
                timed(lambda: [matmul.matmul_legacy(dev_l, dev_r) for _ in range(launches)]) / launches)
        out = os.path.join(tmp, "torch.json")
        p.export_chrome_trace(out)
        with open(out) as f:
            trace = json.load(f)
        times["export with add_kernel_lanes"].append(timed(lambda: add_kernel_lanes(trace)))
        kernel_trace.clear()

    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"tiled matmul {n}x{n}x{n} fp32 (legacy dialect), {instructions} instructions, {a.rounds} rounds, medians")
    print(f"trace: {events} instruction events, {size / 2**20:.2f} MiB")
    base = med["benchmark"]
    for k in ("benchmark", "benchmark + trace", "report payload"):
        print(f"  {k:<36} {med[k] * 1e3:9.1f} ms  {med[k] / base:5.2f}x the benchmark")
    base = med["torch.profiler, instructions off"]
    for k in ("torch.profiler, instructions off", "torch.profiler, instructions on", "export with add_kernel_lanes"):
        print(f"  {k:<36} {med[k] * 1e3:9.1f} ms  {med[k] / base:5.2f}x a launch with instructions off"
              + (f" ({launches} launches)" if k.startswith("export") else " per launch"))


if __name__ == "__main__":
    main()
