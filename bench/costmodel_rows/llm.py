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

Every row of the two transformers-neuronx tables is here (Mistral-7B-Instruct-v0.2 is a Llama-shaped decoder
with grouped K/V heads, CodeLlama-13b Llama-2-13b's shapes with its own vocabulary and RoPE base); the rows with
int8 weights and the one whose P50 is above its P99 say why the model does not cover them.
"""
from __future__ import annotations

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


# Every (model, degree, target) is one dry run: the model built once, one decode step per attention length its
# rows need (examples/tp_decode_llama.py, project_decode_contexts).
_CONTEXTS: dict[tuple[str, int, str], set[int]] = {}
_PROJECTED: dict[tuple[str, int, str, int], float] = {}


def decode_s(model: str, tp: int, target: str, context: int) -> float:
    key = (model, tp, target)
    if key + (context,) not in _PROJECTED:
        sys.path.insert(0, EXAMPLES)
        try:
            import tp_decode_llama as ex  # examples/tp_decode_llama.py
        finally:
            sys.path.remove(EXAMPLES)  # examples/nki must not stand for AWS's nki in the process

        contexts = sorted(_CONTEXTS.get(key, set()) | {context})
        for c, b in ex.project_decode_contexts(model, tp, target, contexts).items():
            _PROJECTED[key + (c,)] = b.compiled_us * 1e-6
            # The split behind the row (docs/cost_model.md, Validation, LLM decode), on stderr beside the table.
            print(f"llm row {model} TP {tp} {target} attention {c}: compiled step {b.compiled_us / 1e3:.2f} ms = "
                  f"matmuls {b.matmul_us / 1e3:.2f} + collectives {b.collective_us / 1e3:.2f} + the rest "
                  f"{b.other_us / 1e3:.2f} + one launch", file=sys.stderr)
    return _PROJECTED[key + (context,)]


def row(model: str, instance: str, target: str, tp: int, seq: int, inp: int, out: int, tpot_ms: float,
        source: str, weights: str = "bf16", context: int | None = None, reason: str = "") -> Row:
    ctx = context or tnx_attention_length(inp, out, seq)
    _CONTEXTS.setdefault((model.lower(), tp, target), set()).add(ctx)
    shape = f"{model}, TP {tp}, batch 1, in {inp} + out {out} (attention {ctx})"
    kernel = f"decode, time per output token P50 ({instance})"
    if weights != "bf16":
        kernel += f", weights stored {weights} (projected bf16)"
    return Row("llm", kernel, shape, "bf16", target, tpot_ms * 1e-3, SDK, source,
               lambda: decode_s(model.lower(), tp, target, ctx), reason=reason)


INT8 = ("weights stored int8 and dequantized on the device (transformers-neuronx int8 weight storage): the dry "
        "run reads bf16 weights, twice the weight bytes")
P50_ABOVE_P99 = "the table's P50 (26.48 ms) is above its P99 (24.22 ms): a transcription error is likely"

# Every row of the two tables, as published (aws-neuron-sdk @81ce03ae).
TNX = [
    # trn1.32xlarge, TP 32 (Transformers NeuronX, Neuron 2.18): model, sequence, input, output, TPOT P50 and P99 (ms), weights
    ("trn1", "Llama-3-8B", 8192, 128, 8064, 7.03, 7.16, "int8"),
    ("trn1", "Llama-3-8B", 8192, 4096, 4096, 7.04, 7.13, "int8"),
    ("trn1", "Llama-3-8B", 4096, 128, 3968, 5.86, 6, "int8"),
    ("trn1", "Llama-3-70B", 4096, 2048, 2048, 26.2, 26.79, "bf16"),
    ("trn1", "Llama-3-70B", 1152, 128, 1024, 24.48, 26.17, "bf16"),
    ("trn1", "Llama-3-70B", 256, 128, 128, 26.48, 24.22, "bf16"),
    ("trn1", "Llama-2-7b", 8192, 128, 8064, 6.69956207, 6.84595108, "bf16"),
    ("trn1", "Llama-2-13b", 8192, 4096, 4096, 9.84406471, 10.14947891, "bf16"),
    ("trn1", "Llama-2-13b", 16384, 8192, 8192, 13.40842247, 15.76948166, "bf16"),
    ("trn1", "Llama-2-70b", 256, 128, 128, 25.18129, 26.58272, "bf16"),
    ("trn1", "Llama-2-70b", 512, 256, 256, 25.26712, 25.7585, "bf16"),
    ("trn1", "Llama-2-70b", 1152, 128, 1024, 25.44856, 26.1333, "bf16"),
    ("trn1", "Llama-2-70b", 2048, 1024, 1024, 26.03793, 26.17574, "bf16"),
    ("trn1", "Llama-2-70b", 3072, 1024, 2048, 26.62468, 27.02999, "bf16"),
    ("trn1", "Llama-2-70b", 4096, 2048, 2048, 26.85046, 27.04263, "bf16"),
    ("trn1", "Mistral-7B-Instruct-v0.2", 16384, 8192, 8192, 9.89246368, 10.18333435, "bf16"),
    ("trn1", "CodeLlama-13b-hf", 8192, 4096, 4096, 9.86456871, 10.24436951, "bf16"),
    ("trn1", "CodeLlama-13b-hf", 16384, 8192, 8192, 13.3998394, 13.79013062, "bf16"),
    # inf2.48xlarge, TP 24 (Transformers NeuronX, Neuron 2.18): model, sequence, input, output, TPOT P50 and P99 (ms), weights
    ("inf2", "Llama-3-8B", 8192, 128, 8064, 7.41, 7.68, "int8"),
    ("inf2", "Llama-3-8B", 8192, 4096, 4096, 7.47, 7.57, "int8"),
    ("inf2", "Llama-3-8B", 4096, 128, 3968, 6.42, 6.58, "int8"),
    ("inf2", "Llama-3-8B", 4096, 2048, 2048, 6.5, 6.6, "int8"),
    ("inf2", "Llama-3-70B", 4096, 2048, 2048, 34.67, 35.06, "bf16"),
    ("inf2", "Llama-3-70B", 3072, 1024, 2048, 33.81, 34.13, "bf16"),
    ("inf2", "Llama-3-70B", 2048, 1024, 1024, 33.14, 34.29, "bf16"),
    ("inf2", "Llama-3-70B", 1152, 128, 1024, 32.47, 33.03, "bf16"),
    ("inf2", "Llama-3-70B", 512, 256, 256, 32.48, 32.86, "bf16"),
    ("inf2", "Llama-3-70B", 256, 128, 128, 32.2, 33.02, "bf16"),
    ("inf2", "Llama-2-7b", 4096, 128, 3968, 6.46972656, 7.07960129, "bf16"),
    ("inf2", "Llama-2-7b", 8192, 128, 8064, 7.34019279, 7.80153275, "bf16"),
    ("inf2", "Llama-2-13b", 4096, 128, 3968, 9.16552544, 9.33074951, "bf16"),
    ("inf2", "Llama-2-13b", 8192, 4096, 4096, 10.17355919, 10.37788391, "bf16"),
    ("inf2", "Llama-2-13b", 16384, 8192, 8192, 13.49759102, 13.97609711, "bf16"),
    ("inf2", "Llama-2-70b", 256, 128, 128, 32.89557, 33.42032, "bf16"),
    ("inf2", "Llama-2-70b", 512, 256, 256, 33.13422, 33.45966, "bf16"),
    ("inf2", "Llama-2-70b", 1152, 128, 1024, 33.15115, 34.0786, "bf16"),
    ("inf2", "Llama-2-70b", 2048, 1024, 1024, 33.73241, 34.01256, "bf16"),
    ("inf2", "Llama-2-70b", 3072, 1024, 2048, 34.81936, 35.43973, "bf16"),
    ("inf2", "Llama-2-70b", 4096, 2048, 2048, 34.90329, 35.14242, "bf16"),
    ("inf2", "Mistral-7B-Instruct-v0.2", 4096, 128, 3968, 6.86240196, 7.07960129, "bf16"),
    ("inf2", "Mistral-7B-Instruct-v0.2", 8192, 4096, 4096, 7.86566734, 11.64746284, "bf16"),
    ("inf2", "Mistral-7B-Instruct-v0.2", 16384, 8192, 8192, 10.32972336, 10.61367989, "bf16"),
    ("inf2", "CodeLlama-13b-hf", 4096, 128, 3968, 9.12380219, 9.38177109, "bf16"),
    ("inf2", "CodeLlama-13b-hf", 8192, 4096, 4096, 10.15138626, 10.55026054, "bf16"),
    ("inf2", "CodeLlama-13b-hf", 16384, 8192, 8192, 13.43631744, 13.85569572, "bf16"),
]
INSTANCES = {"trn1": ("trn1.32xlarge", 32), "inf2": ("inf2.48xlarge", 24)}


def _tnx_row(target, model, seq, inp, out, p50, p99, weights) -> Row:
    instance, tp = INSTANCES[target]
    reason = INT8 if weights == "int8" else (P50_ABOVE_P99 if p50 > p99 else "")
    return row(model, instance, target, tp, seq, inp, out, p50, CSV.format(target), weights=weights, reason=reason)


ROWS = [_tnx_row(*r) for r in TNX] + [
    # trn2.48xlarge, TP 64 at LNC=2 (vLLM + NxD Inference, LLMPerf)
    row("Llama-3.3-70B", "trn2.48xlarge", "trn2", 64, 12800, 10000, 1500, 19.65969146,
        TUT.format("trn2-llama3.3-70b-tutorial.rst"), context=12800),
    row("Llama-3.1-405B", "trn2.48xlarge", "trn2", 64, 12800, 10000, 1500, 37.92915463,
        TUT.format("trn2-llama3.1-405b-speculative-tutorial.rst"), context=12800),
]
