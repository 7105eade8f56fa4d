"""Module.to and Tensor.data keep Parameter and buffer objects across devices, as on CUDA.

PyTorch keeps them only when `torch._has_compatible_shallow_copy_type(old, new)` is true, which
neuron answers through its own kernel of that operator (csrc/aten/minimal.cpp).
"""
import pytest
import torch
import torch.nn as nn


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 4)
        self.norm = nn.BatchNorm1d(4)
        self.head = nn.Linear(4, 11, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.norm(self.embed(ids).transpose(1, 2)).transpose(1, 2))


def _objects(m: nn.Module) -> list[int]:
    # Parameters only: Module._apply replaces buffers on every device, CUDA included.
    return [id(t) for t in m.parameters()]


@pytest.mark.parametrize("move", [
    lambda m: m.to("neuron"),
    lambda m: m.neuron(),
    lambda m: m.to(torch.device("neuron", 0)),
    lambda m: m.to("neuron", torch.float64),
    lambda m: m.to(device="neuron", dtype=torch.bfloat16),
], ids=["to", "neuron", "to-device", "to-dtype", "to-kwargs"])
def test_move_keeps_parameters_and_buffers(move):
    m = Tied()
    before = _objects(m)
    names = [n for n, _ in m.named_parameters()]
    assert move(m) is m
    assert _objects(m) == before
    assert [n for n, _ in m.named_parameters()] == names
    assert m.head.weight is m.embed.weight
    assert all(t.device.type == "neuron" for t in m.state_dict().values())
    assert isinstance(m.embed.weight, nn.Parameter) and m.embed.weight.is_leaf


def test_swap_tensors_conversion_works_too():
    m = Tied()
    before = _objects(m)
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        m.to("neuron")
    finally:
        torch.__future__.set_swap_module_params_on_conversion(False)
    assert _objects(m) == before
    assert m.head.weight is m.embed.weight and m.head.weight.device.type == "neuron"


def test_move_back_to_cpu_keeps_objects_and_values():
    m = Tied()
    ref = {k: v.clone() for k, v in m.state_dict().items()}
    before = _objects(m)
    m.neuron().cpu()
    assert _objects(m) == before
    for k, v in m.state_dict().items():
        assert v.device.type == "cpu"
        torch.testing.assert_close(v, ref[k], rtol=0, atol=0)


def test_optimizer_built_before_the_move_trains_the_model():
    torch.manual_seed(0)
    ref = Tied()
    m = Tied()
    m.load_state_dict(ref.state_dict())
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=0.1)
    opt = torch.optim.AdamW(m.parameters(), lr=0.1)
    m.to("neuron")
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    for model, o, x in ((ref, ref_opt, ids), (m, opt, ids.to("neuron"))):
        for _ in range(2):
            o.zero_grad()
            model(x).sum().backward()
            o.step()
    assert opt.state[m.embed.weight]["exp_avg"].device.type == "neuron"
    for (name, a), b in zip(m.state_dict().items(), ref.state_dict().values()):
        torch.testing.assert_close(a.cpu(), b, msg=lambda msg: f"{name}: {msg}")


def test_gradients_move_with_their_parameters():
    m = nn.Linear(3, 2)
    m(torch.randn(4, 3)).sum().backward()
    grad = m.weight.grad
    expected = grad.clone()
    m.to("neuron")
    assert m.weight.grad is grad
    assert grad.device.type == "neuron"
    torch.testing.assert_close(grad.cpu(), expected)


def test_hooks_survive_the_move():
    m = nn.Linear(3, 2)
    seen = []
    m.weight.register_hook(lambda g: seen.append(g.device.type))
    m.to("neuron")
    m(torch.randn(4, 3, device="neuron")).sum().backward()
    assert seen == ["neuron"]


def test_load_state_dict_keeps_objects_across_devices():
    m = Tied().to("neuron")
    before = _objects(m)
    src = Tied()
    m.load_state_dict(src.state_dict())
    assert _objects(m) == before
    torch.testing.assert_close(m.head.weight.cpu(), src.embed.weight, rtol=0, atol=0)
    assert m.head.weight.device.type == "neuron"


@pytest.mark.parametrize("src,dst", [("cpu", "neuron"), ("neuron", "cpu"), ("neuron", "neuron")])
def test_tensor_data_assignment_across_devices(src, dst):
    t = torch.arange(6.0, device=src).requires_grad_()
    new = torch.full((2, 3), 7.0, device=dst, dtype=torch.float64)
    t.data = new
    assert t.device.type == dst and t.dtype == torch.float64 and t.shape == (2, 3)
    assert t.requires_grad and t.is_leaf
    assert t.data_ptr() == new.data_ptr()
    (t * 2).sum().backward()
    assert t.grad.device.type == dst
    torch.testing.assert_close(t.grad.cpu(), torch.full((2, 3), 2.0, dtype=torch.float64))


def test_compatibility_answer_follows_layouts():
    dense_cpu, dense_neuron = torch.zeros(2), torch.zeros(2, device="neuron")
    assert torch._has_compatible_shallow_copy_type(dense_cpu, dense_neuron)
    assert torch._has_compatible_shallow_copy_type(dense_neuron, dense_cpu)
    assert torch._has_compatible_shallow_copy_type(dense_neuron, dense_neuron)
    assert not torch._has_compatible_shallow_copy_type(dense_neuron, torch.zeros(2, device="meta"))
    assert not torch._has_compatible_shallow_copy_type(dense_neuron, torch.zeros(2, 2).to_sparse())


def test_incompatible_data_assignment_is_a_clear_error():
    t = torch.zeros(2, device="neuron")
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        t.data = torch.zeros(2, 2).to_sparse()
    assert t.device.type == "neuron"  # unchanged, and the process goes on
    torch.testing.assert_close((t + 1).cpu(), torch.ones(2))
