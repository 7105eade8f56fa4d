"""Train the MLP with the ReLU custom ops on neuron, beside the same MLP with torch.relu.

    python examples/custom_op_relu/train.py [--steps 200] [--compile]

Synthetic MNIST-shaped data (10 classes of 28x28 images: a fixed random prototype per class plus
noise) stands in for MNIST, so the example needs no download. Both models start from the same
weights and see the same batches; the custom ops compute exactly what torch.relu does, so the
two loss curves agree. With --compile, the custom-op model also trains under
torch.compile(backend="neuron"), where the ops are opaque nodes planned with their shape functions.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import sys
import time

import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import my_ops  # noqa: E402
from model import MLP  # noqa: E402


def synthetic_mnist(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """n flattened 28x28 images in 10 learnable classes, and their labels."""
    g = torch.Generator().manual_seed(seed)
    prototypes = torch.rand(10, 28 * 28, generator=g)
    labels = torch.randint(0, 10, (n,), generator=g)
    images = prototypes[labels] + 0.5 * torch.randn(n, 28 * 28, generator=g)
    return images, labels


@dataclasses.dataclass
class Run:
    losses: list[float]
    step_seconds: list[float]

    @property
    def steps_per_second(self) -> float:
        """After the first 5 steps (warm-up, and compilation under torch.compile)."""
        steady = self.step_seconds[5:] or self.step_seconds
        return len(steady) / sum(steady)


def train(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, steps: int, batch_size: int = 32,
          lr: float = 0.05) -> Run:
    """SGD on consecutive batches; images and labels already on the model's device."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses, seconds = [], []
    for step in range(steps):
        start = time.perf_counter()
        i = (step * batch_size) % (images.shape[0] - batch_size + 1)
        x, y = images[i:i + batch_size], labels[i:i + batch_size]
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        seconds.append(time.perf_counter() - start)
    return Run(losses, seconds)


def compare(steps: int = 200, compile: bool = False, device: str = "neuron",
            build_directory: str = my_ops.DEFAULT_BUILD_DIRECTORY) -> dict[str, Run]:
    """Trains the custom-op MLP, the torch.relu MLP and (compile=True) the compiled custom-op MLP."""
    my_ops.load(build_directory)
    torch.manual_seed(0)
    custom = MLP(relu=my_ops.Relu.apply)
    reference = MLP(relu=torch.relu)
    reference.load_state_dict(custom.state_dict())
    compiled = copy.deepcopy(custom) if compile else None
    images, labels = synthetic_mnist(4096)
    images, labels = images.to(device), labels.to(device)
    runs = {"custom ops": train(custom.to(device), images, labels, steps),
            "torch.relu": train(reference.to(device), images, labels, steps)}
    if compiled is not None:
        runs["custom ops, compiled"] = train(torch.compile(compiled.to(device), backend="neuron"), images, labels,
                                             steps)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--compile", action="store_true", help="also train under torch.compile(backend='neuron')")
    args = parser.parse_args()
    runs = compare(args.steps, args.compile)
    reference = runs["torch.relu"].losses
    print(f"{'model':<22} {'first loss':>10} {'last loss':>10} {'max |diff| vs torch.relu':>25} {'steps/s':>8}")
    for name, run in runs.items():
        diff = max(abs(a - b) for a, b in zip(run.losses, reference))
        print(f"{name:<22} {run.losses[0]:>10.4f} {run.losses[-1]:>10.4f} {diff:>25.2e} {run.steps_per_second:>8.1f}")


if __name__ == "__main__":
    main()
