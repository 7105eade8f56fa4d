"""The ops the device provides itself: factories, views, resize, set_, item, printing."""
import pytest
import torch


def test_empty_and_empty_strided():
    x = torch.empty(2, 3, device="neuron")
    assert x.shape == (2, 3) and x.device.type == "neuron" and x.is_contiguous()
    y = torch.empty_strided((2, 3), (1, 2), device="neuron")
    assert y.stride() == (1, 2)
    z = torch.empty(2, 3, 4, 5, device="neuron", memory_format=torch.channels_last)
    assert z.is_contiguous(memory_format=torch.channels_last)
    assert torch.empty(0, device="neuron").numel() == 0
    with pytest.raises(RuntimeError, match="pinned"):
        torch.empty(2, device="neuron", pin_memory=True)


def test_views_share_storage():
    x = torch.arange(12.0, device="neuron")
    v = x.view(3, 4)
    assert v.data_ptr() == x.data_ptr() and v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    r = v.t().reshape(-1)  # needs a copy: new memory
    assert r.data_ptr() != x.data_ptr()
    s = x.as_strided((2, 2), (4, 1), 1)
    assert torch.equal(s.cpu(), torch.arange(12.0).as_strided((2, 2), (4, 1), 1))
    v[1, 1] = 100.0
    assert x[5].item() == 100.0
    e = x.expand(2, 12)
    assert e.data_ptr() == x.data_ptr() and e.stride() == (0, 1)
    assert torch.equal(x.unsqueeze(0).squeeze(0).cpu(), x.cpu())


def test_resize_and_set():
    x = torch.ones(2, device="neuron")
    x.resize_(3, 3)
    assert x.shape == (3, 3)
    assert torch.equal(x.view(-1)[:2].cpu(), torch.ones(2))
    x.resize_(2, 3, 4, 5, memory_format=torch.channels_last)
    assert x.is_contiguous(memory_format=torch.channels_last)
    src = torch.arange(6.0, device="neuron")
    y = torch.empty(0, device="neuron")
    y.set_(src.untyped_storage(), 2, (2, 2), (2, 1))
    assert torch.equal(y.cpu(), torch.tensor([[2.0, 3.0], [4.0, 5.0]]))
    z = torch.empty(0, device="neuron").set_(src)
    assert z.data_ptr() == src.data_ptr()
    z.set_()
    assert z.numel() == 0
    w = torch.empty(0, device="neuron").set_(src.untyped_storage())
    assert torch.equal(w.cpu(), torch.arange(6.0))


def test_fill_item_and_print():
    x = torch.empty(3, device="neuron").fill_(2.5)
    assert x.sum().item() == 7.5
    assert torch.tensor(3, device="neuron").item() == 3
    assert repr(torch.tensor([1.0, 2.0], device="neuron:1")) == "tensor([1., 2.], device='neuron:1')"
    assert "device='neuron:0'" in str(torch.randn(100, 100, device="neuron"))
    assert repr(torch.tensor([True], device="neuron")) == "tensor([True], device='neuron:0')"
