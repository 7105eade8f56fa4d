"""The cost model beside every public Trainium measurement in the reference notes: the validation
table of docs/cost_model.md. `python bench/costmodel_validation.py` prints it (Markdown)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "nki"))

import numpy as np  # noqa: E402

from torchneuron_ext import costmodel  # noqa: E402
from torchneuron_ext.nki.cost_model import Costs  # noqa: E402


def nki_dma_s(target: str, nbytes: int) -> float:
    c = Costs(target)
    c.dma("dma_copy", nbytes, False, True)
    return c.estimated_latency_s


def nki_scalar_chain_s(target: str, n: int) -> float:
    c = Costs(target)
    for _ in range(n):
        c.compute("scalar", "activation", 1)
    return c.estimated_latency_s / n


def layernorm_trn1_s() -> float:
    """AWS's layernorm tutorial shape on trn1 through nki.benchmark: the kernel's estimate, plus the
    host<->device transfers of its input and output and one launch (what neuron-bench's latency holds)."""
    os.environ["NKI_TARGET"] = "trn1"
    import torchneuron_ext.nki as nki
    from layernorm import layernorm_new_bn  # examples/nki

    x = np.random.rand(300, 1000).astype(np.float32)
    g, b = np.ones(1000, np.float32), np.zeros(1000, np.float32)
    k = nki.benchmark(warmup=1, iters=1)(layernorm_new_bn)
    k(x, g, b)
    t = costmodel.get_target("trn1")
    transfers = sum(costmodel.copy(d, n, n, t).duration_s for d, n in
                    (("HtoD", x.nbytes), ("HtoD", g.nbytes), ("HtoD", b.nbytes), ("DtoH", x.nbytes)))
    return k.benchmark_result.nc_latency.get_latency_percentile(50) * 1e-6 + transfers + t.launch_s


def gemm_trn1_s(n: int) -> float:
    t = costmodel.get_target("trn1")
    es = 4
    return costmodel.eager_kernel("aten::mm", 2 * n * n * es, n * n * es, 2 * n ** 3, n * n, "Float", t).duration_s


ROWS = [
    # kernel, shape, dtype, target, measured seconds, source, projection
    ("DMA HBM->SBUF, one transfer", "32 KiB", "-", "trn2", 1.416e-6, "DMA page, profile figure (M)",
     lambda: nki_dma_s("trn2", 32 * 1024)),
    ("DMA, 2 KiB per engine", "2 KiB", "-", "trn2", 97e-9, "DMA page (M)", lambda: nki_dma_s("trn2", 2048)),
    ("DMA load, 16 engines", "128x128", "bf16", "trn2", 1e-6, "DMA page, trigger to completion (M)",
     lambda: nki_dma_s("trn2", 128 * 128 * 2)),
    ("dependent 1-element Scalar instructions (II)", "1 element", "fp32", "trn1", 189e-9, "perf guide (H)",
     lambda: nki_scalar_chain_s("trn1", 100)),
    ("NKI layernorm tutorial, nki.benchmark p50 (v2)", "300x1000", "fp32", "trn1", 1.97e-3,
     "layernorm tutorial, Neuron 2.26 (M)", layernorm_trn1_s),
    ("GEMM via PyTorch/XLA, warm", "512^3", "fp32", "trn1", 1.3e-3, "trnsci.dev (L)", lambda: gemm_trn1_s(512)),
    ("GEMM via PyTorch/XLA, warm", "1024^3", "fp32", "trn1", 2.3e-3, "trnsci.dev (L)", lambda: gemm_trn1_s(1024)),
    ("gap between executions, async", "tiny", "-", "inf2 (trn1 table)", 11.5e-6, "aws-neuron-sdk#1370 (L)",
     lambda: costmodel.eager_kernel("aten::add", 8, 4, 0, 1, "Float", "trn1").duration_s),
]


def fmt(s: float) -> str:
    return f"{s * 1e3:.3g} ms" if s >= 1e-3 else f"{s * 1e6:.3g} us"


def main() -> None:
    print("| kernel | shape | dtype | target | measured | projected | projected/measured | source |")
    print("|---|---|---|---|---|---|---|---|")
    for kernel, shape, dtype, target, measured, source, fn in ROWS:
        projected = fn()
        print(f"| {kernel} | {shape} | {dtype} | {target} | {fmt(measured)} | {fmt(projected)} | "
              f"{projected / measured:.2f} | {source} |")


if __name__ == "__main__":
    main()
