"""Matmul measurements: AWS's NKI matmul tutorial's four kernels on trn1, a single-core BF16 GEMM sweep on trn2
and trntensor's per-call GEMMs on trn1.

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

The trn2 sweep (awslabs/nki-autotune) is autotuned NKI GEMMs on one physical NeuronCore (compiled with
``--lnc=1``), the best configuration of each square shape: the eager matmul's projection on trn2 at LNC=1 is
the comparison (the instruction model at the shape, the operands' DMA beside it), with its launch for the
host-timed sweep and without it for the device-timed 2048^3 kernels.
"""
from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from torchneuron_ext import costmodel

from . import DEVICE, HOST, SDK, Row

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


def _gemm_dry_run(m: int, k: int, n: int, dtype: str, target: str, batch: int = 0) -> Any:
    """One eager matmul (aten::mm, or aten::bmm of `batch` products), dry-run on the target (the operands'
    shapes are seen where the cost model reads them)."""
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

    return costmodel.dry_run(step, target=target)


def eager_gemm_s(m: int, k: int, n: int, dtype: str, target: str, batch: int = 0) -> float:
    """One eager matmul's projected time: its launch and the kernel's projection."""
    return _gemm_dry_run(m, k, n, dtype, target, batch).projection.busy_us * 1e-6


def device_gemm_s(m: int, k: int, n: int, dtype: str, target: str) -> float:
    """The eager matmul's device time: its dry-run projection without the launch (a device-timed kernel)."""
    kernels = _gemm_dry_run(m, k, n, dtype, target).projection.kernels
    return sum(kern.projection.work_s for kern in kernels)


def trn2_mfu_s(m: int, k: int, n: int, mfu_percent: float) -> float:
    """The time a trn2 MFU stands for under nki-autotune's definition: 2 M K N FLOPs over one physical core's
    BF16 peak, 2 x 128 x 128 x 2.4 GHz (autotune/src/autotune/runner/types.py calculate_mfu)."""
    return 2 * m * k * n / (mfu_percent / 100 * 2 * 128 * 128 * 2.4e9)


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

# awslabs/nki-autotune, autotune/gemm/trn2-scoreboard.md (2025-11-19), "LHS_T x RHS": the best autotuned
# configuration of each square shape, its "Min (ms)" (SpikeExecutor.benchmark, 10 warm-up and 100 timed
# iterations; examples/gemm.py compiles with --lnc=1). What the time holds: those calls passed no timing mode
# until commit 43db071 (2026-02-26) "switch to device-mode timing" added mode="device"; nrtpy, the public
# runtime with the same benchmark API, documents the other mode, "host": "Host wall-clock time including
# host-device overhead". The dtype is not stated (the example script at that commit names float32): the PE
# ran at the 16-bit rate, since the MFU column (97.4% at 5120^3 of the BF16 peak) is beyond FP32's quarter rate.
SCOREBOARD = ("awslabs/nki-autotune autotune/gemm/trn2-scoreboard.md @616e222b (2025-11-19), LHS_T x RHS, "
              "best autotuned NKI GEMM per shape, min of 100, one physical core (M; host timing and the "
              "16-bit dtype inferred: L)")
SCOREBOARD_MS = {512: 0.054, 1024: 0.076, 1536: 0.141, 2048: 0.269, 2560: 0.483, 3072: 0.795, 3584: 1.247,
                 4096: 1.823, 4608: 2.573, 5120: 3.504}
_T2 = "trn2:lnc=1"
_HOST_FIXED = ("the host-timed execution's fixed cost: measured minus projected is 36-38 us at every shape up to "
               "2048^3 (44-78 us above it), where the model's launch is the 12 us gap between asynchronous "
               "executions; nrtpy documents host mode as 'including host-device overhead', with no figure")

# The same repository's kernel_library/README.md @0b6f309 (2026-04-25): 2048^3 bf16 lhsT @ rhs on trn2 at
# --lnc 1, MFU of the fastest device-timed iteration (autotune/src/autotune/runner/benchmark.py _run_timing,
# mode="device"): its hand-written NKI kernel 90.92%, and the compiler's own matmul 86.65% (nkipy: the numpy
# function lhs_T.T @ rhs -> HLO -> neuronx-cc, examples/matmul_lhsT_rhs.py). The time is the MFU's
# (trn2_mfu_s); the README's one quoted pair, 89.47% at 0.2442 ms (its lhs @ rhs kernel), is that definition.
LIBRARY = ("awslabs/nki-autotune kernel_library/README.md @0b6f309 (2026-04-25), device-mode timing, "
           "LNC=1, time from the quoted MFU (M)")

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
] + [
    Row("matmul", "autotuned NKI GEMM lhsT@rhs, best of its sweep, host-timed", f"{n}^3", "bf16", _T2, ms * 1e-3,
        HOST, SCOREBOARD, (lambda n=n: eager_gemm_s(n, n, n, "bf16", _T2)),
        reason=_HOST_FIXED if n <= 1024 else "")
    for n, ms in sorted(SCOREBOARD_MS.items())
] + [
    Row("matmul", "hand-written NKI GEMM lhsT@rhs (90.92% MFU), device-timed", "2048^3", "bf16", _T2,
        trn2_mfu_s(2048, 2048, 2048, 90.92), DEVICE, LIBRARY, lambda: device_gemm_s(2048, 2048, 2048, "bf16", _T2)),
    Row("matmul", "neuronx-cc's matmul of lhsT.T@rhs (86.65% MFU), device-timed", "2048^3", "bf16", _T2,
        trn2_mfu_s(2048, 2048, 2048, 86.65), DEVICE, LIBRARY, lambda: device_gemm_s(2048, 2048, 2048, "bf16", _T2)),
]
