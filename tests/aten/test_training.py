"""Training on neuron reaches the same losses as on CPU, step by step."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.blocks import Block


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(), nn.Dropout(0.1),
                                 nn.Linear(64, 5))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
        self.bn2 = nn.BatchNorm2d(16)
        self.head = nn.Linear(16 * 3 * 3, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return self.head(x.flatten(1))


class GPT(nn.Module):
    def __init__(self, vocab=50, d=32, heads=4, layers=2, ctx=16):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(pos))))


def _data(kind, device):
    g = torch.Generator().manual_seed(0)
    if kind == "mlp":
        x, y = torch.randn(32, 20, generator=g), torch.randint(0, 5, (32,), generator=g)
    elif kind == "cnn":
        x, y = torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
    else:
        idx = torch.randint(0, 50, (4, 17), generator=g)
        x, y = idx[:, :-1], idx[:, 1:]
    return x.to(device), y.to(device)


MODELS = {"mlp": MLP, "cnn": CNN, "gpt": GPT}


def _train(kind, device, make_opt, steps=4, clip=None, autocast=False):
    torch.manual_seed(0)
    model = MODELS[kind]().to(device)
    opt = make_opt(model.parameters())
    x, y = _data(kind, device)
    losses = []
    torch.manual_seed(1)  # dropout masks
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
        loss.backward()
        if clip is not None:
            total = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            assert total.device.type == device
        opt.step()
        losses.append(loss.item())
    return model, losses


OPTIMIZERS = {
    "sgd": lambda impl: (lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, **impl)),
    "adam": lambda impl: (lambda p: torch.optim.Adam(p, lr=1e-2, **impl)),
    "adamw": lambda impl: (lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, **impl)),
}
IMPLS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_mlp_optimizers_match_cpu(opt, impl):
    make = OPTIMIZERS[opt](IMPLS[impl])
    model_n, losses_n = _train("mlp", "neuron", make)
    _, losses_c = _train("mlp", "cpu", make)
    torch.testing.assert_close(losses_n, losses_c, rtol=1e-5, atol=1e-6)
    assert losses_n[-1] < losses_n[0]
    for p in model_n.parameters():
        assert p.device.type == "neuron" and p.grad is not None and p.grad.device.type == "neuron"


@pytest.mark.parametrize("kind", ["cnn", "gpt"])
def test_models_train_like_on_cpu(kind):
    make = OPTIMIZERS["adamw"](IMPLS["foreach"])
    model_n, losses_n = _train(kind, "neuron", make, steps=5, clip=1.0)
    model_c, losses_c = _train(kind, "cpu", make, steps=5, clip=1.0)
    torch.testing.assert_close(losses_n, losses_c, rtol=1e-4, atol=1e-5)
    assert losses_n[-1] < losses_n[0]
    for (name, pn), pc in zip(model_n.named_parameters(), model_c.parameters()):
        torch.testing.assert_close(pn.detach().cpu(), pc.detach(), rtol=1e-4, atol=1e-5, msg=name)
    if kind == "cnn":  # batch-norm running statistics are buffers on the device too
        torch.testing.assert_close(model_n.bn1.running_mean.cpu(), model_c.bn1.running_mean, rtol=1e-5, atol=1e-6)


def test_autocast_training_matches_cpu_autocast():
    make = OPTIMIZERS["adam"](IMPLS["foreach"])
    _, losses_n = _train("gpt", "neuron", make, steps=3, autocast=True)
    _, losses_c = _train("gpt", "cpu", make, steps=3, autocast=True)
    torch.testing.assert_close(losses_n, losses_c, rtol=2e-2, atol=2e-2)


def test_eval_mode_and_no_grad():
    torch.manual_seed(0)
    model = CNN().eval()
    model_n = copy.deepcopy(model).neuron()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        torch.testing.assert_close(model_n(x.neuron()).cpu(), model(x))
