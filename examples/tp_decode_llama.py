"""Dry run of one decode step of a Llama-style model with tensor parallelism, as LLM serving runs it.

    python examples/tp_decode_llama.py                  # one Llama-3-70B decoder layer, TP=32 on trn1, TP=64 on trn2
    python examples/tp_decode_llama.py --model llama-2-7b --tp 32 --target trn1 --context 4096   # the whole model
    python examples/tp_decode_llama.py --tiny           # a toy's layer, seconds

One rank of a fake world of `tp` ranks decodes one token (batch 1 by default) with a KV cache of `context`
positions, on fake tensors (torchneuron_ext.costmodel.dry_run): nothing is allocated and nothing is computed.
The model is transformers' LlamaForCausalLM built from the model's config (real hidden size, heads, layers,
vocabulary; random weights; bf16), sharded Megatron-style with DTensor's parallelize_module:

- q/k/v and gate/up split by columns (heads, the intermediate dimension), o_proj and down_proj by rows, each
  row-split layer followed by an all-reduce of the hidden state (2 per layer);
- the embedding split by vocabulary rows (an all-reduce), the LM head by vocabulary columns (an all-gather of
  the logits), the norms replicated;
- the intermediate size and the vocabulary rounded up to a multiple of the degree (even shards, as Megatron-style
  parallel layers divide them);
- attention heads padded up to a multiple of the degree (NeuronX Distributed's ``pad_model``, "pads the number
  of attention heads" so that any degree divides them) and K/V heads replicated up to the degree when there
  are fewer (transformers-neuronx's ``GQA.REPLICATED_HEADS``: "useful for low-latency small-batch
  inference"): each rank then holds whole heads, as on Neuron;
- a static KV cache (transformers' StaticCache, filled in setup: it is the served model's resident state), so
  the step writes its one new position in place and attends over the cache's `context` positions, as a
  token-generation bucket of that length does.

The projection is printed two ways: as eager kernels (the dry run's own timeline: every kernel a NEFF with its
launch) and as one compiled step (the kernels' work back to back plus one launch), which is how
transformers-neuronx and NxD Inference run a decode step: the whole token-generation model is one NEFF per
token. Both split into matmuls (the Tensor Engine's kernels), collectives and the rest.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import resource
import sys
import time
from typing import Optional

import torch

import torchneuron_ext  # noqa: F401  (registers the neuron device)
from torchneuron_ext import costmodel

# Published configs (the models' config.json on the Hugging Face Hub), the fields a LlamaConfig needs.
MODELS = {
    "llama-2-7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=32, vocab_size=32000),
    "llama-2-13b": dict(hidden_size=5120, intermediate_size=13824, num_hidden_layers=40, num_attention_heads=40,
                        num_key_value_heads=40, vocab_size=32000),
    "llama-2-70b": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                        num_key_value_heads=8, vocab_size=32000),
    "llama-3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0),
    "llama-3-70b": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                        num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0),
    "llama-3.1-405b": dict(hidden_size=16384, intermediate_size=53248, num_hidden_layers=126,
                           num_attention_heads=128, num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0),
    # Mistral-7B-Instruct-v0.2 (no sliding window in v0.2: a Llama-shaped decoder with grouped K/V heads).
    "mistral-7b-instruct-v0.2": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                     num_attention_heads=32, num_key_value_heads=8, vocab_size=32000,
                                     rope_theta=1000000.0),
    "codellama-13b-hf": dict(hidden_size=5120, intermediate_size=13824, num_hidden_layers=40, num_attention_heads=40,
                             num_key_value_heads=40, vocab_size=32016, rope_theta=1000000.0),
    "tiny": dict(hidden_size=60, intermediate_size=96, num_hidden_layers=2, num_attention_heads=6,
                 num_key_value_heads=2, vocab_size=256),
}
MODELS["llama-3.3-70b"] = MODELS["llama-3-70b"]


def tp_heads(heads: int, kv_heads: int, tp: int) -> tuple[int, int]:
    """Attention and K/V heads once sharded over `tp` ranks: heads padded up to a multiple of `tp`
    (NxD's pad_model); K/V heads replicated up to `tp` when fewer (GQA.REPLICATED_HEADS), else padded like the
    query heads (multi-head attention: as many K/V heads as heads)."""
    padded = math.ceil(heads / tp) * tp
    if kv_heads == heads:
        return padded, padded
    kv = tp if kv_heads < tp else math.ceil(kv_heads / tp) * tp
    while padded % kv:  # each K/V head serves a whole number of query heads
        padded += tp
    return padded, kv


def llama_config(model: str, tp: int = 1, layers: int | None = None, context: int = 4096):
    """transformers' LlamaConfig of `model` (a key of MODELS), with its heads as `tp` ranks hold them."""
    from transformers import LlamaConfig

    fields = dict(MODELS[model])
    head_dim = fields["hidden_size"] // fields["num_attention_heads"]
    heads, kv = tp_heads(fields["num_attention_heads"], fields["num_key_value_heads"], tp)
    if layers:
        fields["num_hidden_layers"] = layers
    # The other sharded dimensions rounded up to a multiple of the degree: Megatron-style parallel layers
    # (NxD's ColumnParallelLinear/RowParallelLinear, ParallelEmbedding) divide them evenly, and DTensor's
    # sharding propagation assumes even shards (11008 / 24 would not be).
    for key in ("intermediate_size", "vocab_size"):
        fields[key] = math.ceil(fields[key] / tp) * tp
    config = LlamaConfig(max_position_embeddings=max(context + 1, 2048), tie_word_embeddings=False,
                         head_dim=head_dim, **fields)
    # Padded heads no longer divide the hidden size, which LlamaConfig's constructor checks: set them after.
    config.num_attention_heads, config.num_key_value_heads = heads, kv
    return config


@dataclasses.dataclass
class Decoder:
    model: torch.nn.Module
    cache: object
    context: int
    batch: int
    layer: Optional[tuple] = None  # one decoder layer alone: its input hidden state and rotary embeddings


def llama_on_neuron(config, dtype: torch.dtype = torch.bfloat16):
    """transformers' LlamaForCausalLM built on the neuron device in `dtype` (under a dry run: fake, nothing
    allocated), attention through SDPA."""
    from transformers import LlamaForCausalLM

    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # Module.to(dtype) cannot convert fake parameters: build in the dtype
    try:
        with torch.device("neuron"):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.config._attn_implementation = "sdpa"
    return model


def build_decoder(config, tp: int, context: int, batch: int = 1, dtype: torch.dtype = torch.bfloat16,
                  layer_only: bool = False) -> Decoder:
    """The model on the neuron device, sharded over `tp` ranks of the (fake) world, and its KV cache filled to
    `context` positions. Meant for a dry run's setup: under it nothing is allocated."""
    from transformers import StaticCache

    model = llama_on_neuron(config, dtype)
    model.eval()
    if tp > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        mesh = init_device_mesh("neuron", (tp,))
        plan = {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
                "lm_head": ColwiseParallel(output_layouts=Replicate())}
        for i in range(len(model.model.layers)):
            for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj",
                         "mlp.up_proj"):
                plan[f"model.layers.{i}.{name}"] = ColwiseParallel()
            for name in ("self_attn.o_proj", "mlp.down_proj"):
                plan[f"model.layers.{i}.{name}"] = RowwiseParallel()
        # src_data_rank=None: each rank cuts its own shard, no scatter from rank 0 (the weights are random).
        parallelize_module(model, mesh, plan, src_data_rank=None)
    # The cache holds each rank's own K/V heads for `context` positions.
    cache = StaticCache(config=config, max_cache_len=context)
    cache.early_initialization(batch, config.num_key_value_heads // tp, config.head_dim, dtype, torch.device("neuron"))
    layer = None
    if layer_only:  # the layer's input as the model before it would hand it over (made here, not recorded)
        hidden = torch.zeros(batch, 1, config.hidden_size, dtype=dtype, device="neuron")
        position = torch.full((batch, 1), context - 1, dtype=torch.long, device="neuron")
        layer = (hidden, position, model.model.rotary_emb(hidden, position))
    return Decoder(model, cache, context, batch, layer)


def decode_step(d: Decoder) -> torch.Tensor:
    """One token per sequence at position context - 1: the new K/V written into the cache in place, attention
    over the cache's `context` positions, the logits of the new token and its greedy choice."""
    with torch.no_grad():
        if d.layer is not None:  # one decoder layer: attention over the cache, its all-reduces, the MLP
            hidden, position, rotary = d.layer
            return d.model.model.layers[0](hidden, attention_mask=None, position_ids=position, cache=d.cache,
                                           use_cache=True, position_embeddings=rotary)
        ids = torch.zeros(d.batch, 1, dtype=torch.long, device="neuron")
        position = torch.tensor([d.context - 1], device="neuron")
        logits = d.model(input_ids=ids, cache=d.cache, use_cache=True, cache_position=position,
                         position_ids=position.unsqueeze(0).expand(d.batch, 1)).logits
        return logits[:, -1].argmax(-1)


@dataclasses.dataclass
class Breakdown:
    """A projected step: eager (each kernel its own NEFF and launch) and compiled (one launch, the kernels'
    work back to back), each split into matmuls, collectives and the rest."""
    matmul_us: float
    collective_us: float
    other_us: float
    launches: int         # kernels that pay a launch when eager (collectives and copies do not)
    launch_us: float      # the target's launch of one NEFF
    eager_us: float       # the dry run's own timeline

    @property
    def compiled_us(self) -> float:
        return self.matmul_us + self.collective_us + self.other_us + self.launch_us


# The Tensor Engine's kernels (profiler/dry_run.py's FLOP rules), by the op's name after its namespace.
MATMUL_OPS = {"mm", "addmm", "addmm_", "bmm", "baddbmm", "baddbmm_", "addbmm", "mv", "addmv", "addmv_", "dot"}
MATMUL_PREFIXES = ("_scaled_dot_product", "convolution")


def is_matmul(kernel_name: str) -> bool:
    op = kernel_name.split("::", 1)[-1].split(".")[0]
    return op in MATMUL_OPS or op.startswith(MATMUL_PREFIXES)


def breakdown(result) -> Breakdown:
    timeline = result.projection
    return breakdown_of(timeline.kernels, timeline.target, timeline.wall_us)


def breakdown_of(kernels, target, eager_us: float) -> Breakdown:
    matmul = collective = other = 0.0
    for k in kernels:
        work = k.projection.work_s * 1e6
        if k.tier == "collective":
            collective += work
        elif k.projection.engine == "tensor" or is_matmul(k.name):
            matmul += work
        else:
            other += work
    launches = sum(1 for k in kernels if k.projection.launch_s > 0)
    return Breakdown(matmul, collective, other, launches, target.launch_s * 1e6, eager_us)


def project_decode(model: str, tp: int, target: str, context: int, batch: int = 1, layers: int | None = None,
                   layer_only: bool = False):
    """The dry run of one decode step of `model` as one rank of `tp` (or of its first decoder layer alone), and
    its breakdown."""
    config = llama_config(model, tp, 1 if layer_only else layers, context)
    result = costmodel.dry_run(decode_step, setup=lambda: build_decoder(config, tp, context, batch,
                                                                        layer_only=layer_only),
                               target=target, world_size=tp)
    return result, breakdown(result)


def project_decode_contexts(model: str, tp: int, target: str, contexts, batch: int = 1) -> dict[int, Breakdown]:
    """One decode step of `model` per context length, as one rank of `tp`, in one dry run: the model is built
    once and each step has its own KV cache. The steps record the same kernels (only their sizes differ), so the
    projected kernels split into equal consecutive parts, one per step (checked; else one dry run per context)."""
    contexts = sorted(set(contexts))
    config = llama_config(model, tp, None, max(contexts))

    def setup():
        first = build_decoder(config, tp, contexts[0], batch)
        rest = []
        for context in contexts[1:]:
            cache = type(first.cache)(config=config, max_cache_len=context)
            cache.early_initialization(batch, config.num_key_value_heads // tp, config.head_dim,
                                       first.model.dtype, torch.device("neuron"))
            rest.append(Decoder(first.model, cache, context, batch))
        return [first] + rest

    def steps(decoders):
        for d in decoders:
            decode_step(d)

    result = costmodel.dry_run(steps, setup=setup, target=target, world_size=tp)
    timeline = result.projection
    kernels, n = timeline.kernels, len(contexts)
    size = len(kernels) // n
    parts = [kernels[i * size:(i + 1) * size] for i in range(n)]
    if len(kernels) % n or any([k.name for k in part] != [k.name for k in parts[0]] for part in parts):
        return {c: project_decode(model, tp, target, c, batch)[1] for c in contexts}
    return {c: breakdown_of(part, timeline.target, sum(k.duration_us for k in part))
            for c, part in zip(contexts, parts)}


def describe(label: str, result, b: Breakdown) -> str:
    ms = 1e-3
    return "\n".join([
        f"{label}: {result.kernels} kernels recorded in {result.seconds:.1f} s",
        f"  {result.memory.verdict().splitlines()[0]}",
        f"  compiled step (one NEFF): {b.compiled_us * ms:.3f} ms = matmuls {b.matmul_us * ms:.3f} + collectives "
        f"{b.collective_us * ms:.3f} + the rest {b.other_us * ms:.3f} + one launch {b.launch_us * ms:.3f}",
        f"  eager (a NEFF per kernel): {b.eager_us * ms:.3f} ms ({b.launches} launches)",
    ])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, choices=sorted(MODELS))
    p.add_argument("--tp", type=int, default=None)
    p.add_argument("--target", default=None)
    p.add_argument("--context", type=int, default=4096, help="KV cache positions attended over (default 4096)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--layers", type=int, default=None, help="default: the model's")
    p.add_argument("--layer", action="store_true", help="one decoder layer alone (the default without --model)")
    p.add_argument("--tiny", action="store_true", help="a toy's decoder layer at TP=4 on trn1 and TP=8 on trn2")
    args = p.parse_args(argv)
    if args.model or args.tp or args.target:
        cases = [(args.model or "llama-3-70b", args.tp or 32, args.target or "trn1", args.layer)]
    else:  # the worked example: one Llama-3-70B decoder layer at TP=32 on trn1 and TP=64 on trn2 (LNC=2)
        model = "tiny" if args.tiny else "llama-3-70b"
        cases = [(model, 4 if args.tiny else 32, "trn1", True), (model, 8 if args.tiny else 64, "trn2", True)]
    for model, tp, target, layer_only in cases:
        result, b = project_decode(model, tp, target, args.context, args.batch, args.layers, layer_only)
        what = "one decoder layer" if layer_only else f"{args.layers or MODELS[model]['num_hidden_layers']} layers"
        heads, kv = tp_heads(MODELS[model]["num_attention_heads"], MODELS[model]["num_key_value_heads"], tp)
        print(describe(f"{model}, {what}, TP={tp} on {result.memory.target.label} ({heads // tp} query and "
                       f"{kv // tp} K/V heads per rank), batch {args.batch}, context {args.context}", result, b))
    print(f"peak host RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
