"""The MLP of Neuron's custom-op tutorial: 784 -> 120 -> 84 -> 10 on flattened 28x28 images."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F


class MLP(nn.Module):
    def __init__(self, relu: Callable[[torch.Tensor], torch.Tensor], hidden: tuple[int, int] = (120, 84)) -> None:
        super().__init__()
        self.relu = relu
        self.fc1 = nn.Linear(28 * 28, hidden[0])
        self.fc2 = nn.Linear(hidden[0], hidden[1])
        self.fc3 = nn.Linear(hidden[1], 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return F.log_softmax(self.fc3(x), dim=1)
