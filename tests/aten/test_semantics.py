"""Tensor semantics on neuron as on CPU/CUDA: views, in-place, out=, layouts, promotion, device rules."""
import copy

import pytest
import torch
from expecttest import TestCase

import torchneuron_ext


def n(t):
    return t.to("neuron")


def test_views_share_storage_and_see_writes():
    base = n(torch.arange(12.0))
    v = base.view(3, 4)
    t = v.t()
    d = v.diagonal()
    s = base[2:8:2]
    for view in (v, t, d, s, base.unflatten(0, (2, 6)), base.narrow(0, 1, 3), base.unsqueeze(0)):
        assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    t[1, 0] = -1.0  # v[0, 1]
    d.mul_(10)
    assert base[1].item() == -1.0 and base[5].item() == 50.0
    parts = base.split(4)
    parts[1].zero_()
    assert base[4:8].abs().sum().item() == 0
    u = base.unfold(0, 4, 4)
    assert u.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert torch.view_as_real(n(torch.ones(2, dtype=torch.complex64))).shape == (2, 2)


def test_in_place_ops_keep_the_tensor():
    x = n(torch.randn(4, 4))
    ptr = x.data_ptr()
    y = x.add_(1).mul_(2).clamp_(min=0).sqrt_()
    assert y is x and x.data_ptr() == ptr
    ref = torch.randn(4, 4)
    a = n(ref.clone())
    a.exp_()
    torch.testing.assert_close(a.cpu(), ref.exp())
    m = n(torch.zeros(3, 3))
    m.masked_fill_(n(torch.eye(3, dtype=torch.bool)), 5.0)
    assert m.trace().item() == 15.0


def test_out_with_resizing():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    out = n(torch.empty(0))
    r = torch.add(n(a), n(b), out=out)
    assert r is out and out.shape == (3, 4)
    torch.testing.assert_close(out.cpu(), a + b)
    small = n(torch.empty(2))
    with pytest.warns(UserWarning, match="resized"):
        torch.mul(n(a), n(b), out=small)
    torch.testing.assert_close(small.cpu(), a * b)
    vals, idx = n(torch.empty(0)), n(torch.empty(0, dtype=torch.long))
    torch.max(n(a), 1, out=(vals, idx))
    torch.testing.assert_close(vals.cpu(), a.max(1).values)
    assert torch.equal(idx.cpu(), a.max(1).indices)
    mm_out = n(torch.empty(3, 3))
    torch.mm(n(a), n(b).t(), out=mm_out)
    torch.testing.assert_close(mm_out.cpu(), a @ b.t())


def test_non_contiguous_and_channels_last():
    x = torch.randn(2, 3, 8, 8)
    xn = n(x)
    cl = xn.to(memory_format=torch.channels_last)
    assert cl.is_contiguous(memory_format=torch.channels_last)
    conv = torch.nn.Conv2d(3, 4, 3)
    y = copy.deepcopy(conv).neuron()(cl)
    torch.testing.assert_close(y.cpu(), conv(x), rtol=1e-4, atol=1e-5)
    assert (torch.relu(cl)).is_contiguous(memory_format=torch.channels_last)
    t = xn.transpose(1, 3)
    torch.testing.assert_close((t * 2 + 1).cpu(), x.transpose(1, 3) * 2 + 1)
    torch.testing.assert_close(t.sum(dim=(0, 2)).cpu(), x.transpose(1, 3).sum(dim=(0, 2)))
    torch.testing.assert_close(xn[:, ::2, 1::3].exp().cpu(), x[:, ::2, 1::3].exp())


def test_zero_dim_and_empty():
    s = n(torch.tensor(3.5))
    assert s.dim() == 0 and (s * 2).item() == 7.0
    e = n(torch.empty(0, 4))
    assert e.sum().item() == 0 and e.shape == (0, 4)
    assert (e + 1).shape == (0, 4)
    assert torch.cat([e, n(torch.ones(1, 4))]).shape == (1, 4)
    assert n(torch.ones(3)).max().dim() == 0


def test_type_promotion():
    i = n(torch.tensor([1, 2, 3]))
    f = n(torch.tensor([0.5, 0.5, 0.5]))
    assert (i + f).dtype == torch.float32
    assert (i * 2.5).dtype == torch.float32
    assert (i / 2).dtype == torch.float32
    assert (i + True).dtype == torch.int64
    assert (n(torch.ones(2, dtype=torch.bfloat16)) + n(torch.ones(2, dtype=torch.float16))).dtype == torch.float32
    torch.testing.assert_close((i // 2).cpu(), torch.tensor([0, 1, 1]))


def test_cpu_scalar_tensors_mix_in_as_on_cuda():
    x = n(torch.arange(4.0))
    assert torch.equal((x + torch.tensor(1.0)).cpu(), torch.arange(4.0) + 1)
    assert torch.equal((torch.tensor(2.0) * x).cpu(), torch.arange(4.0) * 2)
    assert torch.equal(torch.where(x > 1, x, torch.tensor(0.0)).cpu(), torch.tensor([0.0, 0.0, 2.0, 3.0]))
    assert (x + torch.tensor(1.0)).device.type == "neuron"


def test_indexing_with_cpu_indices_as_on_cuda():
    x = n(torch.arange(10.0))
    assert torch.equal(x[torch.tensor([1, 3])].cpu(), torch.tensor([1.0, 3.0]))
    assert torch.equal(x[n(torch.tensor([2, 4]))].cpu(), torch.tensor([2.0, 4.0]))
    x[torch.tensor([0])] = 7.0
    assert x[0].item() == 7.0


class TestDeviceMixing(TestCase):
    def test_neuron_and_cpu(self):
        with self.assertRaises(RuntimeError) as cm:
            n(torch.ones(3)) + torch.ones(3)
        self.assertExpectedInline(str(cm.exception), """Expected all tensors to be on the same device, but found at least two devices, neuron:0 and cpu! (when checking arguments for aten::add.Tensor: a non-scalar tensor is on cpu device, expected neuron). Move them to one device first, e.g. with .to("neuron:0").""")
        with self.assertRaises(RuntimeError):
            torch.mm(n(torch.ones(2, 2)), torch.ones(2, 2))
        with self.assertRaises(RuntimeError):
            torch.cat([n(torch.ones(2)), torch.ones(2)])
        self.assertEqual((n(torch.ones(3)) + 1).sum().item(), 6.0)

    def test_two_cores(self):
        with self.assertRaises(RuntimeError) as cm:
            torch.ones(3, device="neuron:0") * torch.ones(3, device="neuron:1")
        self.assertExpectedInline(str(cm.exception), """Expected all tensors to be on the same device, but found at least two devices, neuron:0 and neuron:1! (when checking arguments for aten::mul.Tensor: a tensor is on neuron:1 device, expected neuron:0). Move them to one device first, e.g. with .to("neuron:0").""")
        with self.assertRaises(RuntimeError):
            torch.atan2(torch.ones(3, device="neuron:1"), torch.ones(3, device="neuron:0"))

    def test_results_stay_on_the_inputs_core(self):
        a = torch.ones(3, device="neuron:1")
        self.assertEqual((a + a).device, torch.device("neuron:1"))
        self.assertEqual(torch.atan2(a, a).device, torch.device("neuron:1"))
        self.assertEqual(a.sum().device, torch.device("neuron:1"))
        before = torch.neuron.memory_allocated(1)
        keep = a.repeat(1000)
        self.assertGreater(torch.neuron.memory_allocated(1), before)
        del keep


def test_results_are_accounted_and_freed():
    torch.neuron.empty_cache()
    start = torch.neuron.memory_allocated()
    x = n(torch.randn(256, 256))
    y = torch.atan2(x, x)  # generic path
    z = x @ x  # native path
    assert torch.neuron.memory_allocated() >= start + 3 * 256 * 256 * 4
    del x, y, z
    assert torch.neuron.memory_allocated() == start


def test_op_tracking():
    torchneuron_ext.clear_op_tracking()
    x = n(torch.randn(4, 4))
    torch.mm(x, x)
    torch.special.bessel_j0(x)
    executed = torchneuron_ext.get_executed_ops()
    fallback = torchneuron_ext.get_fallback_ops()
    assert "aten::mm" in executed and "aten::special_bessel_j0" in executed
    assert "aten::special_bessel_j0" in fallback and "aten::mm" not in fallback
    assert torchneuron_ext.get_op_counts()["aten::mm"] == {"native": 1}
    torchneuron_ext.clear_op_tracking()
    assert torchneuron_ext.get_executed_ops() == []


def test_warn_once_per_generic_op():
    torchneuron_ext.clear_op_tracking()
    torchneuron_ext.warn_on_generic_path(True)
    try:
        x = n(torch.randn(3))
        with pytest.warns(UserWarning, match="aten::special_bessel_y0.*generic path"):
            torch.special.bessel_y0(x)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.special.bessel_y0(x)  # second time: silent
    finally:
        torchneuron_ext.warn_on_generic_path(False)


# Regressions for bugs the OpInfo sweep found (each crashed or raised before its fix).
def test_conj_and_neg_views_copy_without_recursion():
    x = n(torch.randn(4, dtype=torch.complex64))
    assert torch.equal(x.conj().cpu(), x.cpu().conj())
    assert torch.equal(x.conj().clone().cpu(), x.cpu().conj())
    r = n(torch.randn(8))
    torch.testing.assert_close(torch.fft.ifft(r).cpu(), torch.fft.ifft(r.cpu()))
    torch.testing.assert_close(torch.fft.hfft(r.to(torch.complex64)).cpu(), torch.fft.hfft(r.cpu().to(torch.complex64)))


def test_zero_tensor_results_stay_zero_tensors():
    a = n(torch.randn(5)).requires_grad_()
    (g,) = torch.autograd.grad(torch.sgn(a).sum(), a)
    assert g.device.type == "neuron" and torch.equal(g.cpu(), torch.zeros(5))


def test_sdpa_with_a_mask_that_requires_grad():
    q = n(torch.randn(1, 2, 4, 8))
    m = n(torch.randn(4, 4)).requires_grad_()
    torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=m).sum().backward()
    mc = m.detach().cpu().requires_grad_()
    qc = q.cpu()
    torch.nn.functional.scaled_dot_product_attention(qc, qc, qc, attn_mask=mc).sum().backward()
    torch.testing.assert_close(m.grad.cpu(), mc.grad, rtol=1e-4, atol=1e-5)


def test_mode_with_out():
    vals, idx = n(torch.empty(0)), n(torch.empty(0, dtype=torch.long))
    torch.mode(n(torch.tensor([[1.0, 2, 2], [3, 3, 1]])), 1, out=(vals, idx))
    assert torch.equal(vals.cpu(), torch.tensor([2.0, 3.0])) and torch.equal(idx.cpu(), torch.tensor([2, 1]))
