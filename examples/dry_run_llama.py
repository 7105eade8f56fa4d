"""Dry run of a Llama-class decoder's training step on one Trainium core, then the tensor-parallel degree that fits.

    python examples/dry_run_llama.py                 # 8B-class: 32 layers, hidden 4096, 128k vocabulary
    python examples/dry_run_llama.py --tiny          # a 2-layer toy, seconds
    torchneuron-ext project --target trn2 -- python examples/dry_run_llama.py --tiny --step

Nothing is allocated and nothing is computed: the model is built under fake tensors on the neuron device
(torchneuron_ext.costmodel.dry_run), so the 8B model's 16 GB of bf16 weights never exist. The report is
the projected trace (kernels, launches, verdict) and the peak HBM per core against the target's capacity.
The tensor-parallel degree that fits is then searched: the sharded program is dry-run itself as one rank of a
fake world of N ranks (DTensor's parallelize_module, with its all-reduces), N = 2, 4, 8, ... from the smallest
degree that could fit (the one-core run's weights, gradients and optimizer state divided by N under the
capacity, activations left out) until a rank's peak HBM fits. Each projection is split into matmuls (the Tensor
Engine's kernels), collectives, the rest of the kernels' work and the launches. docs/cost_model.md, "Worked
examples", shows the output.
"""
from __future__ import annotations

import argparse
import os
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


def _sibling(name: str):
    """Another script of examples/ (not a package), imported by its path: examples/ must not go on sys.path,
    where its nki/ folder would stand for AWS's nki package for the rest of the process."""
    import importlib.util

    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                         name + ".py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def build(config, dtype: torch.dtype = torch.bfloat16):
    """The model and its optimizer, on the neuron device (under a dry run: fake, nothing allocated)."""
    model = _sibling("tp_decode_llama").llama_on_neuron(config, dtype)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)


def build_tensor_parallel(config, degree: int, dtype: torch.dtype = torch.bfloat16):
    """The model with Megatron-style tensor parallelism over `degree` ranks (DTensor): attention's q/k/v and
    the MLP's gate/up split by columns (heads and the intermediate dimension), o_proj and down_proj by rows
    (an all-reduce each); embeddings, norms and the LM head replicated."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    import copy

    tp_heads = _sibling("tp_decode_llama").tp_heads

    # Each rank holds whole heads: heads padded to a multiple of the degree, K/V heads replicated up to it
    # (examples/tp_decode_llama.py; no change for Llama-3-8B up to TP 8).
    config = copy.deepcopy(config)
    config.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    config.num_attention_heads, config.num_key_value_heads = tp_heads(config.num_attention_heads,
                                                                      config.num_key_value_heads, degree)
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


DEGREES = (1, 2, 4, 8, 16, 32, 64)


def tp_degree_that_fits(memory: costmodel.MemoryReport, max_degree: int = 64) -> int | None:
    """By arithmetic: weights, gradients and optimizer state divided by the degree, activations kept whole."""
    by = memory.by_category
    sharded = by["parameters"] + by["gradients"] + by["optimizer state"]
    for tp in DEGREES:
        if tp <= max_degree and sharded / tp + by["activations and other"] <= memory.capacity_bytes:
            return tp
    return None


def tp_degree_lower_bound(memory: costmodel.MemoryReport) -> int | None:
    """The smallest degree that could fit: weights, gradients and optimizer state alone, divided by it."""
    by = memory.by_category
    sharded = by["parameters"] + by["gradients"] + by["optimizer state"]
    return next((tp for tp in DEGREES if sharded / tp <= memory.capacity_bytes), None)


def breakdown(result):
    """Matmuls, collectives, the rest (examples/tp_decode_llama.py's Breakdown)."""
    split = _sibling("tp_decode_llama").breakdown

    return split(result)


def describe_step(result) -> str:
    b = breakdown(result)
    return (f"projected step {b.eager_us / 1e3:.1f} ms on {result.memory.target.label} (eager: a NEFF per kernel): "
            f"matmuls {b.matmul_us / 1e3:.1f} + collectives {b.collective_us / 1e3:.1f} + the rest "
            f"{b.other_us / 1e3:.1f} + {b.launches} launches {b.launches * b.launch_us / 1e3:.1f} ms")


def tp_dry_run(config, degree: int, batch: int, seq: int, target: str):
    """One rank of the Megatron-style tensor-parallel training step over `degree` ranks."""
    return costmodel.dry_run(train_step, batch, seq, setup=lambda: build_tensor_parallel(config, degree),
                             target=target, world_size=degree)


def search_tp(config, memory: costmodel.MemoryReport, batch: int, seq: int, target: str, max_degree: int = 64,
              log=print):
    """The smallest degree whose rank's peak HBM fits, by dry-running each candidate from the lower bound up.
    Returns (degree, its dry run), or (None, None)."""
    first = tp_degree_lower_bound(memory)
    if first is None:
        return None, None
    for degree in (d for d in DEGREES if first <= d <= max_degree and d > 1):
        start = time.perf_counter()
        sharded = tp_dry_run(config, degree, batch, seq, target)
        log(f"TP={degree}: {sharded.memory.verdict().splitlines()[0]} ({sharded.kernels} kernels dry-run in "
            f"{time.perf_counter() - start:.1f} s)")
        if sharded.memory.fits:
            return degree, sharded
    return None, None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="a 2-layer toy instead of the 8B-class model")
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=None, help="sequence length (default 2048; --tiny: 16)")
    p.add_argument("--target", default="trn2")
    p.add_argument("--tp", type=int, default=None,
                   help="dry-run the tensor-parallel program at this degree (default: search the smallest degree "
                        "that fits when one core does not; 0: skip)")
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
    print(describe_step(result))
    print(f"dry run: {result.kernels} kernels in {seconds:.1f} s, peak host RSS {peak_rss:.2f} GiB")
    if args.out:
        print(f"written to {result.write(args.out, title='dry run of a Llama training step')}")
    if args.tp == 0 or result.memory.fits:
        return 0
    if args.tp:
        degree, sharded = args.tp, tp_dry_run(config, args.tp, args.batch, seq, args.target)
    else:
        print(f"\nsmallest tensor-parallel degree that fits, searched by dry runs from "
              f"{tp_degree_lower_bound(result.memory)} (weights, gradients and optimizer state alone; with the "
              f"activations kept whole the arithmetic would say {tp_degree_that_fits(result.memory)}):")
        degree, sharded = search_tp(config, result.memory, args.batch, seq, args.target)
    if sharded is None:
        print("no tensor-parallel degree up to 64 fits")
        return 0
    print(f"\ntensor parallel over {degree} ranks (DTensor), one rank:")
    print(sharded.memory.verdict())
    print(describe_step(sharded))
    print(f"peak host RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
