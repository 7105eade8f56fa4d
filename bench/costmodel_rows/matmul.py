"""Matmul measurements: AWS's NKI matmul tutorial's four kernels on trn1 and a single-core GEMM sweep.

The tutorial's kernels (examples/nki/matmul_tutorial.py, written again in AWS's style) run through the
simulator's ``nki.benchmark`` on trn1. The full shape (lhsT [8192, 4096], rhs [8192, 8192], bf16: 32,768
matmul instructions) is simulated on a slice whose loop is the full kernel's repeated exactly: each kernel's
outermost independent loop runs its iterations on disjoint tiles with the same instructions and sizes, so
the estimate is the slice's (the makespan of its schedule) times the number of slices (each slice's pipeline
fill and drain is counted again: a slight overestimate, under 1% at these slices).
The slice runs in 1-8 s here (the full shape would take 1-2 min per kernel and ~1 GiB).

The sweep's GEMMs (trntensor's benchmark: CPU fp32 tensors in, the result back) are the host<->device copies
of their operands and result plus one eager ``aten::mm``/``aten::bmm``, dry-run (``costmodel.dry_run``: fake
tensors, the kernel the emulator would run, with its launch).
"""
from __future__ import annotations

import os
import sys

import numpy as np

from torchneuron_ext import costmodel

from . import DEVICE, SDK, Row

EXAMPLES_NKI = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "nki")

# AWS's NKI matrix multiplication tutorial, "Testing Correctness and Benchmarking": nki.benchmark latency of
# [4096, 8192] @ [8192, 8192] bf16 on trn1.32xlarge, and its hardware FLOPs utilisation. The device's time:
# the 256 MiB of operands and result would take 16.8 ms over the host link, more than the 6.97 ms measured.
TUTORIAL = ("NKI matmul tutorial, Neuron 2.20-2.23 (aws-neuron-sdk 72825d50..4eba310f, "
            "general/nki/tutorials/matrix_multiplication.rst) (H)")
K_FULL, M_FULL, N_FULL = 8192, 4096, 8192

# kernel -> (its slice: K, M, N; how many slices make the full shape)
SLICES = {
    "tiled": ((K_FULL, 128, N_FULL), M_FULL // 128),        # every M tile: the same loads and matmuls
    "hoist_load": ((K_FULL, 128, N_FULL), M_FULL // 128),   # every M tile: its lhsT loaded once, all of N
    "block_free": ((K_FULL, 256, N_FULL), M_FULL // 256),   # every block of 2 M tiles
    "block_all": ((K_FULL, M_FULL, 1024), N_FULL // 1024),  # every N block of 2 x 512: all of M and K
}


def tutorial_trn1_s(name: str) -> float:
    """The kernel's nki.benchmark estimate on trn1 (device latency, no launch: nki.benchmark's own figure)."""
    import ml_dtypes

    import torchneuron_ext.nki.legacy as nki

    sys.path.insert(0, EXAMPLES_NKI)
    from matmul_tutorial import KERNELS  # examples/nki

    (k, m, n), slices = SLICES[name]
    lhsT = np.ones((k, m), ml_dtypes.bfloat16)
    rhs = np.ones((k, n), ml_dtypes.bfloat16)
    bench = nki.benchmark(warmup=0, iters=1, platform_target="trn1")(KERNELS[name])
    bench(lhsT, rhs)
    return bench.benchmark_result.nc_latency.get_latency_percentile(50) * 1e-6 * slices


def eager_gemm_s(m: int, k: int, n: int, dtype: str, target: str, batch: int = 0) -> float:
    """One eager matmul (aten::mm, or aten::bmm of `batch` products), dry-run on the target: its launch and
    the kernel's projection (the operands' shapes are seen where the cost model reads them)."""
    import torch

    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]

    def step():
        if batch:
            a = torch.empty(batch, m, k, dtype=dt, device="neuron")
            b = torch.empty(batch, k, n, dtype=dt, device="neuron")
            return torch.bmm(a, b)
        a = torch.empty(m, k, dtype=dt, device="neuron")
        b = torch.empty(k, n, dtype=dt, device="neuron")
        return a @ b

    result = costmodel.dry_run(step, target=target)
    return result.projection.busy_us * 1e-6


def host_gemm_s(m: int, k: int, n: int, dtype: str, target: str, batch: int = 0) -> float:
    """A GEMM called on CPU tensors (trntensor's benchmark): its operands copied to the device, the eager
    matmul, its result copied back (what the per-call time holds besides the framework's dispatch)."""
    es = {"bf16": 2, "fp32": 4}[dtype]
    b = max(batch, 1)
    t = costmodel.get_target(target)
    copies = sum(costmodel.copy(d, nb, nb, t).duration_s for d, nb in
                 (("HtoD", b * m * k * es), ("HtoD", b * k * n * es), ("DtoH", b * m * n * es)))
    return copies + eager_gemm_s(m, k, n, dtype, target, batch)


_T = "trn1"
_TUTORIAL_SHAPE = "[4096,8192]@[8192,8192]"
TRNTENSOR = ("trnsci.dev/trntensor/benchmarks, NKI einsum on CPU fp32 tensors (trnsci/trntensor "
             "benchmarks/bench_einsum.py @36564cd5), trn1.2xlarge, neuronxcc 2.24, warm, mean of 5 (L)")
_DISPATCH = ("the per-call PyTorch/XLA + NKI dispatch (the same site quotes a 15-40 ms NKI dispatch floor), "
             "which the eager launch does not model; the host copies are projected")

ROWS = [
    Row("matmul", "NKI tutorial: tiled (2 loads per matmul), nki.benchmark", _TUTORIAL_SHAPE, "bf16", _T,
        51.80e-3, DEVICE, TUTORIAL + "; HFU 10.98%", lambda: tutorial_trn1_s("tiled")),
    Row("matmul", "NKI tutorial: opt. 1 hoisted loads, nki.benchmark", _TUTORIAL_SHAPE, "bf16", _T,
        42.96e-3, DEVICE, TUTORIAL + "; HFU 13.24%", lambda: tutorial_trn1_s("hoist_load")),
    Row("matmul", "NKI tutorial: opt. 2 M, N blocked, nki.benchmark", _TUTORIAL_SHAPE, "bf16", _T,
        22.07e-3, DEVICE, TUTORIAL + "; HFU 26.51%", lambda: tutorial_trn1_s("block_free")),
    Row("matmul", "NKI tutorial: opt. 3 M, N, K blocked, nki.benchmark", _TUTORIAL_SHAPE, "bf16", _T,
        6.97e-3, DEVICE, TUTORIAL + "; HFU 85.24%: a large matmul's 70-90%", lambda: tutorial_trn1_s("block_all")),
    Row("matmul", "GEMM (einsum ij,jk->ik), per call", "512^3", "fp32", _T, 1452e-6, SDK, TRNTENSOR,
        lambda: host_gemm_s(512, 512, 512, "fp32", _T), reason=_DISPATCH),
    Row("matmul", "GEMM (einsum ij,jk->ik), per call", "1024^3", "fp32", _T, 4022e-6, SDK, TRNTENSOR,
        lambda: host_gemm_s(1024, 1024, 1024, "fp32", _T), reason=_DISPATCH),
    Row("matmul", "GEMM (einsum ij,jk->ik), per call", "2048^3", "fp32", _T, 16.9e-3, SDK, TRNTENSOR,
        lambda: host_gemm_s(2048, 2048, 2048, "fp32", _T), reason=_DISPATCH),
    Row("matmul", "batched GEMM (einsum bij,bjk->bik), per call", "16x256^3", "fp32", _T, 2162e-6, SDK, TRNTENSOR,
        lambda: host_gemm_s(256, 256, 256, "fp32", _T, batch=16), reason=_DISPATCH),
    Row("matmul", "batched GEMM (einsum bij,bjk->bik), per call", "32x1024^3", "fp32", _T, 190.8e-3, SDK,
        TRNTENSOR, lambda: host_gemm_s(1024, 1024, 1024, "fp32", _T, batch=32), reason=_DISPATCH),
]
