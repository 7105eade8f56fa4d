"""The mixture-of-experts routing path, op by op, on neuron against plain CPU PyTorch, side by side.

    python bench/moe_routing.py                       # mixtral's bench/models.py "small" shapes
    python bench/moe_routing.py --tokens 1024 --experts 8 --threads 1

The operators Hugging Face's grouped_mm experts (the default experts implementation of Mixtral, Qwen-MoE,
...) run per layer: router softmax and top-k, the sort by expert, the per-expert gathers, histc of expert
ids (integers on neuron, as on CUDA; floats on CPU, which refuses integers), the grouped matmuls, the
un-permutation (index_put of arange, gather) and the sum over the top-k, then the whole block forward
and backward. Each row: median microseconds per call of each side and neuron / CPU; both sides are
called alternately, in rounds, in this process. With --threads 1 the clock is the calling thread's CPU
time, which other processes' load does not stretch.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torchneuron_ext  # noqa: E402,F401

Case = Callable[[dict[str, Any]], Any]


def routing_inputs(device: str, tokens: int, experts: int, top_k: int, hidden: int, inter: int) -> dict[str, Any]:
    """The tensors one MoE layer routes, the same numbers on both devices."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, hidden, generator=g)
    logits = torch.randn(tokens, experts, generator=g)
    w_up = torch.randn(experts, 2 * inter, hidden, generator=g) / hidden ** 0.5
    w_down = torch.randn(experts, hidden, inter, generator=g) / inter ** 0.5
    probs = logits.softmax(-1)
    ids = probs.topk(top_k, -1).indices.reshape(-1)
    ids_sorted, perm = torch.sort(ids)
    counts = torch.bincount(ids_sorted, minlength=experts)
    v = dict(x=x, logits=logits, probs=probs, ids=ids, ids_sorted=ids_sorted, perm=perm,
             offs=torch.cumsum(counts, 0, dtype=torch.int32), gathered=x[perm // top_k],
             up=torch.randn(tokens * top_k, 2 * inter, generator=g),
             out=torch.randn(tokens * top_k, hidden, generator=g),
             w_up=w_up, w_down=w_down)
    v = {k: t.to(device) for k, t in v.items()}
    v.update(device=device, tokens=tokens, experts=experts, top_k=top_k, hidden=hidden,
             x_grad=v["x"].clone().requires_grad_(), logits_grad=v["logits"].clone().requires_grad_(),
             w_up_grad=v["w_up"].clone().requires_grad_(), w_down_grad=v["w_down"].clone().requires_grad_())
    return v


def expert_ids_for_histc(ids: torch.Tensor) -> torch.Tensor:
    # What transformers' grouped_mm_experts_forward hands histc: floats on CPU, integers elsewhere.
    return ids.float() if ids.device.type == "cpu" else ids.int()


def moe_block(v: dict[str, Any]) -> None:
    """transformers.integrations.moe.grouped_mm_experts_forward with its router, forward and backward."""
    k, e = v["top_k"], v["experts"]
    weights, ids = torch.topk(F.softmax(v["logits_grad"].float(), -1), k, -1)
    weights = weights / weights.sum(-1, keepdim=True)
    ids_sorted, perm = torch.sort(ids.reshape(-1))
    hidden = v["x_grad"][perm // k]
    counts = torch.histc(expert_ids_for_histc(ids_sorted), bins=e, min=0, max=e - 1)
    offs = torch.cumsum(counts, 0, dtype=torch.int32)
    gate, up = F.grouped_mm(hidden, v["w_up_grad"].transpose(-2, -1), offs=offs).chunk(2, -1)
    out = F.grouped_mm(F.silu(gate) * up, v["w_down_grad"].transpose(-2, -1), offs=offs)
    out = out * weights.reshape(-1)[perm].unsqueeze(-1)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.size(0), device=perm.device)
    out[inv].view(v["tokens"], k, v["hidden"]).sum(1).sum().backward()


CASES: dict[str, Case] = {
    "router softmax": lambda v: F.softmax(v["logits"].float(), -1),
    "topk": lambda v: torch.topk(v["probs"], v["top_k"], -1),
    "sort expert ids": lambda v: torch.sort(v["ids"]),
    "perm // top_k": lambda v: v["perm"] // v["top_k"],
    "gather rows": lambda v: v["x"][v["perm"] // v["top_k"]],
    "gather weights": lambda v: v["ids"][v["perm"]],
    "histc expert ids": lambda v: torch.histc(expert_ids_for_histc(v["ids_sorted"]), bins=v["experts"], min=0,
                                              max=v["experts"] - 1),
    "cumsum counts": lambda v: torch.cumsum(v["offs"], 0, dtype=torch.int32),
    "grouped_mm up": lambda v: F.grouped_mm(v["gathered"], v["w_up"].transpose(-2, -1), offs=v["offs"]),
    "silu(gate) * up": lambda v: (lambda a: F.silu(a[0]) * a[1])(v["up"].chunk(2, -1)),
    "index_put arange": lambda v: torch.empty_like(v["perm"]).index_put_(
        (v["perm"],), torch.arange(v["perm"].size(0), device=v["perm"].device)),
    "index_add rows": lambda v: torch.zeros(v["tokens"], v["hidden"], device=v["device"]).index_add_(
        0, v["perm"] // v["top_k"], v["out"]),
    "sum over top_k": lambda v: v["out"].view(v["tokens"], v["top_k"], -1).sum(1),
    "moe block fwd+bwd": moe_block,
}


def _sync(device: str) -> None:
    if device == "neuron":
        torch.neuron.synchronize()


def per_call(f: Case, v: dict[str, Any], calls: int, clock: Callable[[], float]) -> float:
    f(v)
    _sync(v["device"])
    start = clock()
    for _ in range(calls):
        f(v)
    _sync(v["device"])
    return (clock() - start) / calls


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=256, help="tokens routed per layer (batch x sequence)")
    p.add_argument("--experts", type=int, default=4)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads for both sides (1: CPU-time clock)")
    args = p.parse_args()
    if not 0 < args.top_k <= args.experts:
        p.error(f"--top-k must be in 1..--experts ({args.experts}), got {args.top_k}")
    torch.set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    inputs = {d: routing_inputs(d, args.tokens, args.experts, args.top_k, args.hidden, 2 * args.hidden)
              for d in ("cpu", "neuron")}
    print(f"torch {torch.__version__}, {args.threads} threads ({'CPU' if args.threads == 1 else 'wall'} clock), "
          f"{args.tokens} tokens, {args.experts} experts, top-{args.top_k}, hidden {args.hidden}")
    print(f"{'operation':<20} {'cpu us':>9} {'neuron us':>10} {'ratio':>6}")
    for name, f in CASES.items():
        heavy = "grouped_mm" in name or "block" in name
        calls = 20 if heavy else 300
        times: dict[str, list[float]] = {"cpu": [], "neuron": []}
        for r in range(args.rounds):
            for d in ("cpu", "neuron") if r % 2 else ("neuron", "cpu"):
                times[d].append(per_call(f, inputs[d], calls, clock))
        c, n = (statistics.median(times[d]) * 1e6 for d in ("cpu", "neuron"))
        print(f"{name:<20} {c:9.1f} {n:10.1f} {n / c:6.2f}", flush=True)


if __name__ == "__main__":
    main()
