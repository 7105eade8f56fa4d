"""Custom C++ operators against torch.relu on neuron, measured side by side in one run.

    python bench/custom_op.py

ReLU as a custom op written the four ways of Neuron's custom-op performance tutorial (element
accessors, stream accessors, TCM blocks on one GPSIMD core, TCM blocks on all 8), on one element
(the cost of a call), the MLP's activation size and a large hidden layer, against torch.relu on the
same neuron tensor; and what
building a library costs, from scratch and when it is up to date. Times are medians of repeated
calls; the emulated cores are host threads, so the ratios say what the emulation costs, not what
Trainium does.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

import torch

from torchneuron_ext import custom_op

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "custom_op_src")
# The TCM kernel is the test suite's (mc_relu), so the bench times the kernel the tests check.
TCM_KERNEL = os.path.normpath(os.path.join(os.path.dirname(SRC), os.pardir, "tests", "custom_op", "csrc",
                                           "multicore.cpp"))


def median_us(fn, x: torch.Tensor, number: int, repeat: int = 7) -> float:
    fn(x)
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn(x)
        runs.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(runs)


def build(build_root: str) -> dict[str, float]:
    """Builds the two libraries (from scratch, then again up to date) and loads them; seconds per step."""
    kernels = os.path.join(SRC, "kernels.cpp")
    args = {"bench_relu": dict(compute_srcs=[kernels, TCM_KERNEL], shape_srcs=[os.path.join(SRC, "shapes.cpp")]),
            "bench_relu_mc": dict(compute_srcs=[TCM_KERNEL], shape_srcs=[os.path.join(SRC, "shapes_multicore.cpp")],
                                  multicore=True)}
    seconds = {}
    for name, kw in args.items():
        start = time.perf_counter()
        custom_op.build(name, build_directory=os.path.join(build_root, name), **kw)
        seconds[f"build {name} from scratch"] = time.perf_counter() - start
        start = time.perf_counter()
        custom_op.load(name, build_directory=os.path.join(build_root, name), **kw)
        seconds[f"load {name} (up to date)"] = time.perf_counter() - start
    return seconds


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        for step, s in build(root).items():
            print(f"{step:<40} {s:8.2f} s")
    variants = {
        "torch.relu": torch.relu,
        "custom op, element accessors": torch.ops.bench_relu.element,
        "custom op, stream accessors": torch.ops.bench_relu.stream,
        "custom op, TCM, 1 core": torch.ops.bench_relu.tcm,
        "custom op, TCM, 8 cores": torch.ops.bench_relu_mc.tcm,
    }
    print()
    print(f"{'input':<14} {'ReLU':<30} {'us/call':>10} {'vs torch.relu':>14}")
    for shape, number in (((1, 1), 3000), ((64, 120), 2000), ((4096, 2048), 5)):
        x = torch.randn(*shape, device="neuron")
        reference = torch.relu(x).cpu()
        base = None
        for name, fn in variants.items():
            assert torch.equal(fn(x).cpu(), reference), name
            us = median_us(fn, x, number)
            base = base or us
            print(f"{str(list(shape)):<14} {name:<30} {us:>10.1f} {us / base:>13.2f}x")


if __name__ == "__main__":
    main()
