"""torch.compile on neuron against Inductor on CPU, side by side in one run, plus the speed-up of
compiled over eager on neuron.

    python bench/compile.py [--quick]

Cases: naive RMSNorm 4096x4096 (forward) and a transformer block (forward and backward).
Goal from the compile issue: compiled neuron / compiled CPU <= 1.05.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable

import torch

import torchneuron_ext  # noqa: F401

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from eager_ops import Block  # noqa: E402


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def rms_case(device: str, compiled: bool) -> Callable[[], object]:
    torch.manual_seed(0)
    x, w = torch.randn(4096, 4096, device=device), torch.randn(4096, device=device)
    fn = torch.compile(rmsnorm, backend="neuron" if device == "neuron" else "inductor") if compiled else rmsnorm
    return lambda: fn(x, w)


def block_case(device: str, compiled: bool) -> Callable[[], object]:
    torch.manual_seed(0)
    block = Block(256, 8).to(device)
    model = torch.compile(block, backend="neuron" if device == "neuron" else "inductor") if compiled else block
    x = torch.randn(8, 128, 256, device=device, requires_grad=True)

    def step():
        out = model(x)
        out.sum().backward()
        return out
    return step


def median_seconds(fn: Callable[[], object], inner: int, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        out.append((time.perf_counter() - t0) / inner)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds = 5 if args.quick else 9
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'case':<34}{'inductor cpu':>14}{'neuron compiled':>17}{'ratio':>8}{'neuron eager':>14}{'speed-up':>10}")
    for name, make, inner in (("RMSNorm 4096x4096 fwd", rms_case, 5), ("transformer block fwd+bwd", block_case, 3)):
        fns = {(d, c): make(d, c) for d in ("cpu", "neuron") for c in (True, False)}
        for fn in fns.values():  # compile and warm up
            for _ in range(3):
                fn()
        samples: dict = {k: [] for k in fns}
        for _ in range(rounds):  # interleave the four so drift hits all equally
            for k, fn in fns.items():
                samples[k] += median_seconds(fn, inner, 1)
        med = {k: statistics.median(v) for k, v in samples.items()}
        cpu_c, neu_c, neu_e = med[("cpu", True)], med[("neuron", True)], med[("neuron", False)]
        print(f"{name:<34}{cpu_c * 1e3:>11.2f} ms{neu_c * 1e3:>14.2f} ms{neu_c / cpu_c:>7.2f}x"
              f"{neu_e * 1e3:>11.2f} ms{neu_e / neu_c:>9.2f}x")


if __name__ == "__main__":
    main()
