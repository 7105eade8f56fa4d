"""Dry run of a Llama-class decoder's training step on one Trainium core, then the tensor-parallel degree that fits.

    python examples/dry_run_llama.py                 # 8B-class: 32 layers, hidden 4096, 128k vocabulary
    python examples/dry_run_llama.py --tiny          # a 2-layer toy, seconds
    torchneuron-ext project --target trn2 -- python examples/dry_run_llama.py --tiny --step

Nothing is allocated and nothing is computed: the model is built under fake tensors on the neuron device
(torchneuron_ext.costmodel.dry_run), so the 8B model's 16 GB of bf16 weights never exist. The report is
the projected trace (kernels, launches, verdict) and the peak HBM per core against the target's capacity.
The tensor-parallel degree that fits is first estimated from the one-core run's memory by category
(weights, gradients and optimizer state divide by the degree; activations are kept whole, an upper bound:
Megatron-style TP shards most of them too), then that sharded program is dry-run itself as one rank of a
fake world of that many ranks (DTensor's parallelize_module), with its all-reduces. docs/cost_model.md,
"Dry run", shows the output.
"""
from __future__ import annotations

import argparse
import resource
import sys
import time

import torch

import torchneuron_ext  # noqa: F401  (registers the neuron device)
from torchneuron_ext import costmodel


def llama_config(tiny: bool, layers: int | None = None):
    from transformers import LlamaConfig

    if tiny:
        return LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=layers or 2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    # Llama-3-8B's shapes.
    return LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers or 32,
                       num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                       rope_theta=500000.0)


def build(config, dtype: torch.dtype = torch.bfloat16):
    """The model and its optimizer, on the neuron device (under a dry run: fake, nothing allocated)."""
    from transformers import LlamaForCausalLM

    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # Module.to(dtype) cannot convert fake parameters: build in the dtype
    try:
        with torch.device("neuron"):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.config._attn_implementation = "sdpa"
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)


def build_tensor_parallel(config, degree: int, dtype: torch.dtype = torch.bfloat16):
    """The model with Megatron-style tensor parallelism over `degree` ranks (DTensor): attention's q/k/v and
    the MLP's gate/up split by columns (heads and the intermediate dimension), o_proj and down_proj by rows
    (an all-reduce each); embeddings, norms and the LM head replicated."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    model, _ = build(config, dtype)
    mesh = init_device_mesh("neuron", (degree,))
    plan = {}
    for i in range(len(model.model.layers)):
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
            plan[f"model.layers.{i}.{name}"] = ColwiseParallel()
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            plan[f"model.layers.{i}.{name}"] = RowwiseParallel()
    parallelize_module(model, mesh, plan)
    params = list(model.parameters())
    # A foreach kernel takes DTensors or plain tensors, not both: a parameter group each.
    groups = [{"params": [p for p in params if isinstance(p, DTensor)]},
              {"params": [p for p in params if not isinstance(p, DTensor)]}]
    return model, torch.optim.AdamW(groups, lr=1e-4, foreach=True)


def train_step(model_and_optimizer, batch: int, seq: int) -> None:
    model, optimizer = model_and_optimizer
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (batch, seq), device="neuron")
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def tp_degree_that_fits(memory: costmodel.MemoryReport, max_degree: int = 64) -> int | None:
    by = memory.by_category
    sharded = by["parameters"] + by["gradients"] + by["optimizer state"]
    for tp in (1, 2, 4, 8, 16, 32, 64):
        if tp <= max_degree and sharded / tp + by["activations and other"] <= memory.capacity_bytes:
            return tp
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="a 2-layer toy instead of the 8B-class model")
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=None, help="sequence length (default 2048; --tiny: 16)")
    p.add_argument("--target", default="trn2")
    p.add_argument("--tp", type=int, default=None,
                   help="dry-run the tensor-parallel program at this degree (default: the degree the one-core "
                        "run's memory says fits; 0: skip)")
    p.add_argument("--out", default=None, help="write trace.json, summary.txt and report.html here")
    p.add_argument("--step", action="store_true", help="run one step as a plain program (for `torchneuron-ext project`)")
    args = p.parse_args(argv)
    config = llama_config(args.tiny, args.layers)
    seq = args.seq or (16 if args.tiny else 2048)
    if args.step:  # under `torchneuron-ext project` (or on the emulator for real, --tiny)
        train_step(build(config), args.batch, seq)
        return 0
    start = time.perf_counter()
    result = costmodel.dry_run(train_step, args.batch, seq, setup=lambda: build(config), target=args.target)
    seconds = time.perf_counter() - start
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(result.report(top=10))
    tp = tp_degree_that_fits(result.memory)
    print(f"tensor-parallel degree that fits by arithmetic (weights, gradients and optimizer state sharded, "
          f"activations whole): {tp if tp else 'none up to 64'}")
    print(f"dry run: {result.kernels} kernels in {seconds:.1f} s, peak host RSS {peak_rss:.2f} GiB")
    if args.out:
        print(f"written to {result.write(args.out, title='dry run of a Llama training step')}")
    degree = tp if args.tp is None else args.tp
    if degree and degree > 1:
        # The sharded program itself, one rank of `degree` with its all-reduces: does it fit?
        start = time.perf_counter()
        sharded = costmodel.dry_run(train_step, args.batch, seq, setup=lambda: build_tensor_parallel(config, degree),
                                    target=args.target, world_size=degree)
        seconds = time.perf_counter() - start
        timeline = sharded.projection
        print(f"\ntensor parallel over {degree} ranks (DTensor), one rank:")
        print(sharded.memory.verdict())
        collectives = sum(k.duration_us for k in timeline.kernels if k.tier == "collective")
        print(f"projected step {timeline.wall_us / 1e3:.1f} ms on {timeline.target.label}, of which collectives "
              f"{collectives / 1e3:.1f} ms; {sharded.kernels} kernels in {seconds:.1f} s, peak host RSS "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
