"""What the PyTorch integration of NKI costs, measured side by side in one run (medians of interleaved
rounds):

- a kernel launched with numpy arrays, CPU tensors, neuron tensors, through ``wrap_nki`` and as an
  ``nki_op`` (the launch overhead of each entry point over the numpy launch);
- the fake-tensor run that torch.compile needs per call: uncached (the kernel runs in the simulator on
  zeros) against a cached launch plan;
- ``torch.rms_norm`` on neuron routed to an NKI kernel against its normal neuron kernel.

    python bench/nki_torch.py
"""
import statistics
import time

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import torchneuron_ext  # noqa: F401
import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.language as nl
from torchneuron_ext.nki import torch_ops
from torchneuron_ext.nki.aten_routing import route_aten
from torchneuron_ext.nki.torch_ops import nki_op, wrap_nki

ROUNDS = 7


@nki.jit
def copy_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(a))
    return out


@nki.jit
def rms_norm_kernel(x, w, eps):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, d = x.shape
    wt = nl.load(w.reshape((1, d))).broadcast_to((128, d))
    for i in nl.affine_range(n // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        r = nl.rsqrt(nl.mean(nl.square(t), axis=[1]) + eps)
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.multiply(nl.multiply(t, r), wt))
    return out


@nki_op("nki_bench::copy", mutates_args=())
def copy_op(x: torch.Tensor) -> torch.Tensor:
    return copy_kernel(x)


@nki_op("nki_bench::rms_norm", mutates_args=())
def rms_norm_op(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return rms_norm_kernel(x, w, eps)


def per_call_us(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def measure(cases: dict, n: int) -> dict:
    for fn in cases.values():
        per_call_us(fn, max(1, n // 10))
    samples = {k: [] for k in cases}
    for _ in range(ROUNDS):
        for k, fn in cases.items():
            samples[k].append(per_call_us(fn, n))
    return {k: statistics.median(v) for k, v in samples.items()}


def report(title: str, med: dict, base: str) -> None:
    print(f"\n{title}")
    for k, v in med.items():
        print(f"  {k:<44} {v:10.1f} us   {v / med[base]:6.2f}x")


def main() -> None:
    x_cpu = torch.randn(128, 64)
    x_np, x_neuron = x_cpu.numpy(), x_cpu.to("neuron")
    launch = measure({
        "numpy arrays": lambda: copy_kernel(x_np),
        "CPU tensors": lambda: copy_kernel(x_cpu),
        "neuron tensors": lambda: copy_kernel(x_neuron),
        "neuron tensors, wrap_nki(kernel)": lambda: wrap_nki(copy_kernel)(x_neuron),
        "neuron tensors, nki_op": lambda: copy_op(x_neuron),
    }, n=200)
    report("Launch of a 128x64 copy kernel (simulated execution included)", launch, "numpy arrays")

    mode = FakeTensorMode()
    fake = mode.from_tensor(torch.randn(1024, 512, device="neuron"))
    w_fake = mode.from_tensor(torch.randn(512, device="neuron"))

    def uncached():
        torch_ops.clear_plan_cache()
        with mode:
            rms_norm_op(fake, w_fake, 1e-6)

    def cached():
        with mode:
            rms_norm_op(fake, w_fake, 1e-6)
    with mode:
        rms_norm_op(fake, w_fake, 1e-6)
    plans = measure({"cached launch plan": cached, "no cache (simulate on zeros)": uncached}, n=20)
    report("Fake-tensor call of an nki_op (what torch.compile does per traced call), 1024x512 RMSNorm",
           plans, "cached launch plan")

    x = torch.randn(1024, 512, device="neuron")
    w = torch.randn(512, device="neuron")

    def route(inp, normalized_shape, weight=None, eps=None):
        if inp.dim() != 2 or inp.shape[0] % 128 or weight is None:
            return NotImplemented
        return rms_norm_op(inp, weight, 1e-6 if eps is None else eps)

    normal = lambda: torch.rms_norm(x, (512,), w, 1e-6)  # noqa: E731
    ref = normal().cpu()
    rounds = {"normal neuron kernel": [], "routed to the NKI kernel": []}
    for _ in range(ROUNDS):
        rounds["normal neuron kernel"].append(per_call_us(normal, 20))
        with route_aten("aten::rms_norm", route):
            rounds["routed to the NKI kernel"].append(per_call_us(normal, 20))
    with route_aten("aten::rms_norm", route):
        np.testing.assert_allclose(normal().cpu().numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
    report("torch.rms_norm on neuron, 1024x512", {k: statistics.median(v) for k, v in rounds.items()},
           "normal neuron kernel")


if __name__ == "__main__":
    main()
