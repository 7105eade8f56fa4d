"""LLM decode latency per output token at tensor-parallel degrees 24-64: AWS's published tables.

Each row is one decode step (one output token, batch 1) of a Llama-family model, projected by a dry run of the
model built from its config (examples/tp_decode_llama.py: transformers' LlamaForCausalLM with the real hidden
size, heads, layers and vocabulary, random bf16 weights, DTensor tensor parallelism over a fake world of the
table's degree, a static KV cache of the step's attention length). The projection is the compiled step: the
kernels' work back to back plus one launch, as transformers-neuronx and NxD Inference run a token-generation
step as one NEFF.

What the measurements are:
- ``about-neuron/benchmarks/{trn1,inf2}/latency_data_decoder.csv`` (aws-neuron-sdk, Neuron 2.18, the "Latency
  optimized" tab of the Decoder Models section that the 2.18-era trn1-inference-performance.rst and
  inf2-performance.rst rendered, e.g. commit 78169c6c): "TPOT Latency P50 (ms)", time per output token, batch 1
  ("Real Time"), Transformers NeuronX, bf16 matmuls. TPOT is averaged over the output tokens, generated at
  positions input .. input + output - 1; transformers-neuronx attends over a token-generation bucket, "powers of
  2 starting from 128 tokens ... up to sequence length" (archive/transformers-neuronx/
  transformers-neuronx-developer-guide.rst, "Bucketing"), so each row's attention length is the mean bucket
  over its output positions.
- ``libraries/nxd-inference/tutorials/trn2-llama3.3-70b-tutorial.rst`` and
  ``trn2-llama3.1-405b-speculative-tutorial.rst``: LLMPerf's inter_token_latency_s p50 through vLLM and NxD
  Inference on trn2.48xlarge, TP 64 at LNC=2, batch 1, 10000 input tokens, one token-generation bucket of
  12800 (the 405B baseline's only bucket; the 70B's largest, which positions 10000-11500 use). LLMPerf as patched
  by libraries/nxd-inference/developer_guides/llm-inference-benchmarking-guide.rst ("updated TPOT metric"):
  TTFT is excluded from the inter-token latency.
All are SDK figures (a framework's timing around the device's step: host-side sampling or streaming included).

Rows are chosen per (model, degree, instance) family with the shortest and the longest attention length the
tables give; one trn1 row is left out because it is inconsistent (Llama-3-70B 256/128/128 on trn1: P50 26.48 ms
above its P99 24.22 ms), and so are Mistral-7B (sliding-window attention, another architecture) and
CodeLlama-13b (Llama-2-13b's shapes: its rows repeat those).
"""
from __future__ import annotations

import functools
import math
import os
import sys

from . import SDK, Row

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")

CSV = "aws-neuron-sdk about-neuron/benchmarks/{}/latency_data_decoder.csv @81ce03ae (Neuron 2.18, TNx), H"
TUT = "aws-neuron-sdk libraries/nxd-inference/tutorials/{} @81ce03ae (LLMPerf ITL p50, vLLM+NxDI), H"


def tnx_attention_length(inp: int, out: int, seq: int) -> int:
    """The mean token-generation bucket over the output positions: powers of 2 from 128, the last one the
    sequence length (transformers-neuronx developer guide, "Bucketing")."""
    buckets = []
    b = 128
    while b < seq:
        buckets.append(b)
        b *= 2
    buckets.append(seq)
    total = 0
    for position in range(inp, inp + out):  # the token at `position` attends over position + 1 entries
        total += next(x for x in buckets if x >= position + 1)
    return round(total / out)


@functools.lru_cache(maxsize=None)
def decode_s(model: str, tp: int, target: str, context: int) -> float:
    sys.path.insert(0, EXAMPLES)
    import tp_decode_llama as ex  # examples/tp_decode_llama.py

    result, b = ex.project_decode(model, tp, target, context)
    # The split behind the row (docs/cost_model.md, Validation, LLM decode), on stderr beside the table.
    print(f"llm row {model} TP {tp} {target} attention {context}: compiled step {b.compiled_us / 1e3:.2f} ms = "
          f"matmuls {b.matmul_us / 1e3:.2f} + collectives {b.collective_us / 1e3:.2f} + the rest "
          f"{b.other_us / 1e3:.2f} + one launch; {result.kernels} kernels dry-run in {result.seconds:.0f} s",
          file=sys.stderr)
    return b.compiled_us * 1e-6


def row(model: str, instance: str, target: str, tp: int, seq: int, inp: int, out: int, tpot_ms: float,
        source: str, weights: str = "bf16", context: int | None = None, reason: str = "") -> Row:
    ctx = context or tnx_attention_length(inp, out, seq)
    shape = f"{model}, TP {tp}, batch 1, in {inp} + out {out} (attention {ctx})"
    kernel = f"decode, time per output token P50 ({instance})"
    if weights != "bf16":
        kernel += f", weights stored {weights} (projected bf16)"
    return Row("llm", kernel, shape, "bf16", target, tpot_ms * 1e-3, SDK, source,
               lambda: decode_s(model.lower(), tp, target, ctx), reason=reason)


INT8 = ("weights stored int8 and dequantized on the device (transformers-neuronx int8 weight storage): the dry "
        "run reads bf16 weights, twice the weight bytes")

ROWS = [
    # trn1.32xlarge, TP 32 (Transformers NeuronX, Neuron 2.18)
    row("Llama-2-7b", "trn1.32xlarge", "trn1", 32, 8192, 128, 8064, 6.69956207, CSV.format("trn1")),
    row("Llama-2-13b", "trn1.32xlarge", "trn1", 32, 8192, 4096, 4096, 9.84406471, CSV.format("trn1")),
    row("Llama-2-13b", "trn1.32xlarge", "trn1", 32, 16384, 8192, 8192, 13.40842247, CSV.format("trn1")),
    row("Llama-2-70b", "trn1.32xlarge", "trn1", 32, 256, 128, 128, 25.18129, CSV.format("trn1")),
    row("Llama-2-70b", "trn1.32xlarge", "trn1", 32, 4096, 2048, 2048, 26.85046, CSV.format("trn1")),
    row("Llama-3-70B", "trn1.32xlarge", "trn1", 32, 1152, 128, 1024, 24.48, CSV.format("trn1")),
    row("Llama-3-8B", "trn1.32xlarge", "trn1", 32, 4096, 128, 3968, 5.86, CSV.format("trn1"), weights="int8",
        reason=INT8),
    # inf2.48xlarge, TP 24 (NeuronCore-v2 as trn1's; Transformers NeuronX, Neuron 2.18)
    row("Llama-2-7b", "inf2.48xlarge", "inf2", 24, 4096, 128, 3968, 6.46972656, CSV.format("inf2")),
    row("Llama-2-13b", "inf2.48xlarge", "inf2", 24, 4096, 128, 3968, 9.16552544, CSV.format("inf2")),
    row("Llama-2-13b", "inf2.48xlarge", "inf2", 24, 16384, 8192, 8192, 13.49759102, CSV.format("inf2")),
    row("Llama-2-70b", "inf2.48xlarge", "inf2", 24, 256, 128, 128, 32.89557, CSV.format("inf2")),
    row("Llama-2-70b", "inf2.48xlarge", "inf2", 24, 4096, 2048, 2048, 34.90329, CSV.format("inf2")),
    row("Llama-3-8B", "inf2.48xlarge", "inf2", 24, 4096, 128, 3968, 6.42, CSV.format("inf2"), weights="int8",
        reason=INT8),
    # trn2.48xlarge, TP 64 at LNC=2 (vLLM + NxD Inference, LLMPerf)
    row("Llama-3.3-70B", "trn2.48xlarge", "trn2", 64, 12800, 10000, 1500, 19.65969146,
        TUT.format("trn2-llama3.3-70b-tutorial.rst"), context=12800),
    row("Llama-3.1-405B", "trn2.48xlarge", "trn2", 64, 12800, 10000, 1500, 37.92915463,
        TUT.format("trn2-llama3.1-405b-speculative-tutorial.rst"), context=12800),
]
