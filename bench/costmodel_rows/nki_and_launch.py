"""DMA, NKI instruction, launch and early third-party GEMM measurements (the table's first rows)."""
from __future__ import annotations

import os
import sys

import numpy as np

from torchneuron_ext import costmodel
from torchneuron_ext.nki.cost_model import Costs

from . import DEVICE, HOST, SDK, Row

EXAMPLES_NKI = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "nki")


def nki_dma_s(target: str, nbytes: int) -> float:
    c = Costs(target)
    c.dma("dma_copy", nbytes, False, True)
    return c.estimated_latency_s


def nki_dma_data_phase_s(target: str, shape: tuple) -> float:
    """One HBM -> SBUF transfer of a bf16 ``shape`` through the simulator: its data phase in the schedule (its
    time on the queue after the fixed cost), the counterpart of the time one DMA engine's read lasts in AWS's
    profile (the transfer spans the 16 engines by partition: a 128-partition tile gives each 8 rows)."""
    import torchneuron_ext.nki as nki
    import torchneuron_ext.nki.isa as nisa
    import torchneuron_ext.nki.language as nl
    from torchneuron_ext.nki import schedule

    @nki.jit(platform_target=target)
    def load(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        return a

    with schedule.recording():
        load(np.ones(shape, dtype=nl.bfloat16))
    s = load.last_result.schedule
    (dma,) = s.instructions
    return dma.end_s - dma.start_s - s.latencies.dma_fixed_s


def nki_scalar_chain_s(target: str, n: int) -> float:
    """``n`` one-element Scalar instructions, each reading the tile the one before wrote (the perf guide's
    profile), through the simulator: the schedule's interval between consecutive ones."""
    import torchneuron_ext.nki as nki
    import torchneuron_ext.nki.isa as nisa
    import torchneuron_ext.nki.language as nl
    from torchneuron_ext.nki import schedule

    @nki.jit(platform_target=target)
    def chain(a):
        t = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        for _ in range(n):
            nisa.activation(dst=t, op=nl.copy, data=t, scale=1.0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    with schedule.recording():
        chain(np.ones((128, 1), np.float32))
    acts = [i for i in chain.last_result.schedule.instructions if i.opcode == "activation"]
    return (acts[-1].start_s - acts[0].start_s) / (len(acts) - 1)


def layernorm_trn1_s() -> float:
    """AWS's layernorm tutorial shape on trn1 through nki.benchmark: the kernel's estimate, plus the
    host<->device transfers of its input and output and one launch (what neuron-bench's latency holds)."""
    import torchneuron_ext.nki as nki

    sys.path.insert(0, EXAMPLES_NKI)
    from layernorm import layernorm_new_bn  # examples/nki

    x = np.random.rand(300, 1000).astype(np.float32)
    g, b = np.ones(1000, np.float32), np.zeros(1000, np.float32)
    saved = os.environ.get("NKI_TARGET")
    os.environ["NKI_TARGET"] = "trn1"  # the tutorial's figure is Trn1's
    try:
        bench = nki.benchmark(warmup=1, iters=1)(layernorm_new_bn)
        bench(x, g, b)
    finally:
        if saved is None:
            os.environ.pop("NKI_TARGET", None)
        else:
            os.environ["NKI_TARGET"] = saved
    t = costmodel.get_target("trn1")
    transfers = sum(costmodel.copy(d, n, n, t).duration_s for d, n in
                    (("HtoD", x.nbytes), ("HtoD", g.nbytes), ("HtoD", b.nbytes), ("DtoH", x.nbytes)))
    return bench.benchmark_result.nc_latency.get_latency_percentile(50) * 1e-6 + transfers + t.launch_s


def gemm_trn1_s(n: int) -> float:
    t = costmodel.get_target("trn1")
    es = 4
    return costmodel.eager_kernel("aten::mm", 2 * n * n * es, n * n * es, 2 * n ** 3, n * n, "Float", t).duration_s


ROWS = [
    Row("nki", "DMA HBM->SBUF, one transfer", "32 KiB", "-", "trn2", 1.416e-6, DEVICE,
        "DMA page, profile figure (M)", lambda: nki_dma_s("trn2", 32 * 1024)),
    Row("nki", "DMA, 2 KiB per engine (a 128x128 load's data phase)", "128x128", "bf16", "trn2", 97e-9, DEVICE,
        "DMA page, one engine's 2 KiB read (M)", lambda: nki_dma_data_phase_s("trn2", (128, 128)),
        former_key="nki | DMA, 2 KiB per engine | 2 KiB | - | trn2"),
    Row("nki", "DMA load, 16 engines", "128x128", "bf16", "trn2", 1e-6, DEVICE,
        "DMA page, trigger to completion (M)", lambda: nki_dma_s("trn2", 128 * 128 * 2)),
    Row("nki", "dependent 1-element Scalar instructions (II)", "1 element", "fp32", "trn1", 189e-9, DEVICE,
        "perf guide (H)", lambda: nki_scalar_chain_s("trn1", 100)),
    Row("nki", "NKI layernorm tutorial, nki.benchmark p50 (v2)", "300x1000", "fp32", "trn1", 1.97e-3, HOST,
        "layernorm tutorial, Neuron 2.26 (M)", layernorm_trn1_s,
        reason="neuron-bench latency includes the host's NEFF execution path, which is not modelled"),
    Row("launch", "GEMM via PyTorch/XLA, warm", "512^3", "fp32", "trn1", 1.3e-3, SDK, "trnsci.dev (L)",
        lambda: gemm_trn1_s(512), reason="PyTorch/XLA's own dispatch (the same site quotes a 15-40 ms floor)"),
    Row("launch", "GEMM via PyTorch/XLA, warm", "1024^3", "fp32", "trn1", 2.3e-3, SDK, "trnsci.dev (L)",
        lambda: gemm_trn1_s(1024), reason="PyTorch/XLA's own dispatch (the same site quotes a 15-40 ms floor)"),
    Row("launch", "gap between executions, async", "tiny", "-", "trn1", 11.5e-6, HOST,
        "aws-neuron-sdk#1370, measured on inf2 (L)",
        lambda: costmodel.eager_kernel("aten::add", 8, 4, 0, 1, "Float", "trn1").duration_s),
]
