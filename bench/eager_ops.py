"""Eager execution on neuron against plain CPU PyTorch, side by side in one process.

    python bench/eager_ops.py [--quick]

Each case runs the same code on CPU tensors and on neuron tensors, alternating
rounds so both see the same machine state, with the same thread count. The
ratio is neuron time / CPU time (1.00 = host speed). Targets from the eager
execution issue are printed beside each group.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch

import torchneuron_ext  # noqa: F401


def _time(fn: Callable[[], object], inner: int) -> float:
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def compare(make: Callable[[str], Callable[[], object]], inner: int, rounds: int) -> tuple[float, float]:
    """Median seconds per call on cpu and neuron."""
    fns = {d: make(d) for d in ("cpu", "neuron")}
    for fn in fns.values():  # warm up
        _time(fn, max(1, inner // 10))
    samples: dict[str, list[float]] = {"cpu": [], "neuron": []}
    for _ in range(rounds):
        for d in ("cpu", "neuron"):
            samples[d].append(_time(fns[d], inner))
    return statistics.median(samples["cpu"]), statistics.median(samples["neuron"])


def tiny(op: Callable[..., object], *shapes: tuple[int, ...], dtype=torch.float32):
    def make(device: str):
        args = [torch.randn(s, dtype=dtype, device=device) for s in shapes]
        return lambda: op(*args)
    return make


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def mlp_step(device: str) -> Callable[[], object]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    x = torch.randn(128, 784, device=device)
    y = torch.randint(0, 10, (128,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


class Block(torch.nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class TinyGPT(torch.nn.Module):
    def __init__(self, vocab: int = 256, d: int = 128, heads: int = 4, layers: int = 2, ctx: int = 64):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(ctx, d)
        self.blocks = torch.nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln, self.head = torch.nn.LayerNorm(d), torch.nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(pos))))


def gpt_step(device: str) -> Callable[[], object]:
    torch.manual_seed(0)
    model = TinyGPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    idx = torch.randint(0, 256, (8, 64), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(idx[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), idx[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss
    return step


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer rounds (noisier)")
    args = parser.parse_args()
    rounds = 5 if args.quick else 11
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; ratio = neuron / cpu")
    groups = [
        ("per-op latency, tiny tensors (native tier: goal <= 1.5x)", 2000, [
            ("add 4x4", tiny(torch.add, (4, 4), (4, 4))),
            ("mul 4x4", tiny(torch.mul, (4, 4), (4, 4))),
            ("relu 4x4", tiny(torch.relu, (4, 4))),
            ("sum 4x4", tiny(torch.sum, (4, 4))),
            ("mm 4x4", tiny(torch.mm, (4, 4), (4, 4))),
            ("softmax 4x4", tiny(lambda x: torch.softmax(x, -1), (4, 4))),
            ("add_ in place 4x4", tiny(lambda a, b: a.add_(b), (4, 4), (4, 4))),
            ("view+t 4x4", tiny(lambda a: a.view(16).view(4, 4).t(), (4, 4))),
        ]),
        ("allocation, factories, copies, tiny tensors (each recorded in op tracking)", 2000, [
            ("empty 4x4", lambda d: lambda: torch.empty(4, 4, device=d)),
            ("ones 4x4", lambda d: lambda: torch.ones(4, 4, device=d)),
            ("zeros_like 4x4", tiny(torch.zeros_like, (4, 4))),
            ("clone 4x4", tiny(torch.clone, (4, 4))),
            ("copy_ 4x4", tiny(lambda a, b: a.copy_(b), (4, 4), (4, 4))),
            ("new_empty 4x4", tiny(lambda a: a.new_empty((4, 4)), (4, 4))),
        ]),
        ("per-op latency, tiny tensors (generic tier: goal <= 3x)", 2000, [
            ("atan2 4x4", tiny(torch.atan2, (4, 4), (4, 4))),
            ("cumsum 4x4", tiny(lambda x: torch.cumsum(x, 0), (4, 4))),
            ("flip 4x4", tiny(lambda x: torch.flip(x, (0,)), (4, 4))),
            ("lerp 4x4", tiny(lambda a, b: torch.lerp(a, b, 0.5), (4, 4), (4, 4))),
        ]),
        ("large tensors (goal <= 1.05x)", 5, [
            ("add 16M", tiny(torch.add, (4096, 4096), (4096, 4096))),
            ("mm 2048", tiny(torch.mm, (2048, 2048), (2048, 2048))),
            ("naive RMSNorm 4096x4096", tiny(rmsnorm, (4096, 4096), (4096,))),
        ]),
        ("training step (goal <= 1.15x)", 5, [
            ("MLP 784-512-512-10, batch 128, AdamW", mlp_step),
            ("TinyGPT 2x128, batch 8x63, AdamW", gpt_step),
        ]),
    ]
    for title, inner, cases in groups:
        print(f"\n{title}")
        print(f"  {'case':<40}{'cpu':>12}{'neuron':>12}{'ratio':>9}")
        for name, make in cases:
            cpu, neuron = compare(make, inner, rounds)
            unit, scale = ("us", 1e6) if cpu < 1e-3 else ("ms", 1e3)
            print(f"  {name:<40}{cpu * scale:>9.2f} {unit}{neuron * scale:>9.2f} {unit}{neuron / cpu:>8.2f}x")


if __name__ == "__main__":
    main()
