"""Copies between CPU and neuron cores, with conversions and strides."""
import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool, torch.complex64])
def test_round_trip(dtype):
    x = (torch.randn(5, 7) * 10).to(dtype)
    assert torch.equal(x.to("neuron").cpu(), x)


def test_cross_device_and_conversion():
    x = torch.arange(12.0).reshape(3, 4)
    a = x.to("neuron:0")
    b = a.to("neuron:1")
    assert b.device.index == 1 and b.data_ptr() != a.data_ptr()
    assert torch.equal(b.cpu(), x)
    assert torch.equal(a.to(torch.int32).cpu(), x.to(torch.int32))
    assert torch.equal(x.to("neuron", torch.float16).cpu(), x.half())
    c = torch.empty(3, 4, device="neuron:1", dtype=torch.float64)
    c.copy_(a)
    assert torch.equal(c.cpu(), x.double())


def test_non_contiguous_sources_and_destinations():
    x = torch.arange(24.0).reshape(2, 3, 4)
    src = x.permute(2, 0, 1)
    assert torch.equal(src.to("neuron").cpu(), src)
    n = x.to("neuron")
    assert torch.equal(n.permute(2, 0, 1).cpu(), src)
    assert torch.equal(n[:, 1:, ::2].cpu(), x[:, 1:, ::2])
    dst = torch.zeros(4, 2, 3, device="neuron")
    dst.transpose(0, 2).copy_(torch.ones(3, 2, 4))
    assert torch.equal(dst.cpu(), torch.ones(4, 2, 3))
    cpu_dst = torch.zeros(4, 3).t()
    cpu_dst.copy_(torch.arange(12.0).reshape(3, 4).to("neuron"))
    assert torch.equal(cpu_dst, torch.arange(12.0).reshape(3, 4))
    # broadcasting copy
    b = torch.zeros(3, 4, device="neuron")
    b.copy_(torch.arange(4.0))
    assert torch.equal(b.cpu(), torch.arange(4.0).expand(3, 4))


def test_non_blocking_and_pinned():
    x = torch.randn(1000).pin_memory()
    n = x.to("neuron", non_blocking=True)
    back = n.to("cpu", non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(back, x)


def test_storage_copies():
    s = torch.arange(4.0).untyped_storage()
    d = s.to(device="neuron")
    assert d.device.type == "neuron"
    assert torch.equal(torch.tensor([], dtype=torch.float32).set_(d.cpu()), torch.arange(4.0))
