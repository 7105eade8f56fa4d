"""The ops the device provides itself: factories, views, resize, set_, item, printing, and
_copy_from_and_resize / set_ with TorchNeuron's semantics and messages (its suite's test_copy_from_and_resize.py
and test_set_.py)."""
import pytest
import torch
from expecttest import TestCase


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


def test_copy_from_and_resize_follows_torchneuron():
    """TorchNeuron's _copy_from_and_resize: a CPU source into a neuron destination, resized only when empty."""
    src = torch.randn(3, 4)
    empty = torch.empty(0, device="neuron")
    assert torch._copy_from_and_resize(src, empty) is empty and empty.shape == (3, 4)
    torch.testing.assert_close(empty.cpu(), src)
    same = torch.empty(3, 4, device="neuron")
    torch._copy_from_and_resize(src, same)
    torch.testing.assert_close(same.cpu(), src)
    zero = torch.empty(0, 4)
    dst = torch.empty(0, device="neuron")
    torch._copy_from_and_resize(zero, dst)
    assert dst.shape == (0, 4)


class TestCopyFromAndResizeErrors(TestCase):
    def test_non_empty_destination_of_another_size(self):
        dst = torch.empty(5, 5, device="neuron")
        with self.assertRaises(RuntimeError) as cm:
            torch._copy_from_and_resize(torch.randn(10, 20), dst)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """_copy_from_and_resize now only support copy with same size, or dst.numel() == 0! Got src size [10, 20] and dst size [5, 5]: resize dst first (dst.resize_(src.shape)) or pass an empty dst""")
        assert dst.shape == (5, 5)  # not resized

    def test_sources_and_destinations_other_than_cpu_to_neuron(self):
        n = torch.empty(2, 2, device="neuron")
        for src, dst in [(n, torch.empty(0, device="neuron")), (n, torch.empty(0))]:
            with self.assertRaises(RuntimeError) as cm:
                torch._copy_from_and_resize(src, dst)
            assert "only support copy from cpu tensor to neuron tensor" in str(cm.exception)
        with self.assertRaises(RuntimeError) as cm:
            torch._copy_from_and_resize(n, torch.empty(0))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """_copy_from_and_resize now only support copy from cpu tensor to neuron tensor, but got src tensor device is neuron:0 and dst device is cpu: use dst.copy_(src) (after dst.resize_(src.shape) if needed) for other copies""")


class TestSetErrors(TestCase):
    def test_set_onto_cpu_memory(self):
        t = torch.empty(0, device="neuron")
        with self.assertRaises(RuntimeError) as cm:
            t.set_(torch.randn(3))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """set_: expected neuron source tensor, but got source tensor on device cpu: a neuron tensor can only be set to neuron memory; move the source to neuron first (source.to("neuron"))""")
        for call in (lambda: t.set_(torch.randn(3).untyped_storage()),
                     lambda: t.set_(torch.randn(3).untyped_storage(), 0, (3,), (1,))):
            with self.assertRaises(RuntimeError) as cm:
                call()
            self.assertExpectedInline(str(cm.exception).splitlines()[0], """set_: expected neuron storage, but got storage on device cpu: a neuron tensor can only be set to neuron memory; move the source to neuron first (source.to("neuron"))""")
        assert t.numel() == 0 and t.device.type == "neuron"

    def test_negative_offset_keeps_pytorchs_message(self):
        with self.assertRaises(RuntimeError) as cm:
            torch.empty(0, device="neuron").set_(torch.randn(5, device="neuron").untyped_storage(), -1, (3,))
        assert "invalid storage offset -1" in str(cm.exception)
