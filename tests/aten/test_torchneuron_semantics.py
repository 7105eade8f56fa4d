"""Behaviour TorchNeuron (and, where it has it, CUDA) has where CPU PyTorch lacks it (issue 19):
_softmax / _log_softmax with half_to_float (float32 result of a float16 input, as CUDA), and their
backwards; contiguous(memory_format=torch.preserve_format) as contiguous(); sparse tensors, which
neuron does not have, refused where they would be created with what to do instead."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import torchneuron_ext  # noqa: F401

DEV = "neuron"


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_half_to_float_matches_float32(log, dim):
    torch.manual_seed(0)
    x = torch.randn(4, 5, 6, dtype=torch.half)
    op = torch.ops.aten._log_softmax if log else torch.ops.aten._softmax
    r = op(x.to(DEV), dim, True)
    assert r.device.type == "neuron" and r.dtype == torch.float32
    expected = (F.log_softmax if log else F.softmax)(x.float(), dim)
    torch.testing.assert_close(r.cpu(), expected)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_half_to_float_backward_gives_a_half_gradient(log):
    torch.manual_seed(1)
    x = torch.randn(3, 7, dtype=torch.half)
    op = torch.ops.aten._log_softmax if log else torch.ops.aten._softmax
    xd = x.to(DEV).requires_grad_()
    out = op(xd, 1, True)
    g = torch.randn(3, 7)
    out.backward(g.to(DEV))
    assert xd.grad.dtype == torch.half
    xf = x.float().requires_grad_()
    (F.log_softmax if log else F.softmax)(xf, 1).backward(g)
    torch.testing.assert_close(xd.grad.cpu().float(), xf.grad, rtol=2e-3, atol=2e-3)


def test_softmax_without_half_to_float_is_the_cpus():
    x = torch.randn(4, 6, dtype=torch.bfloat16)
    torch.testing.assert_close(torch.softmax(x.to(DEV), 1).cpu(), torch.softmax(x, 1), rtol=0, atol=0)
    xd = x.to(DEV).requires_grad_()
    torch.log_softmax(xd, 0).sum().backward()
    xc = x.clone().requires_grad_()
    torch.log_softmax(xc, 0).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=0, atol=0)


def test_contiguous_preserve_format_is_contiguous():
    x = torch.randn(3, 4, device=DEV).t()
    y = x.contiguous(memory_format=torch.preserve_format)
    assert y.is_contiguous()
    torch.testing.assert_close(y.cpu(), x.cpu().contiguous())
    # differentiable, like contiguous()
    a = torch.randn(3, 4, device=DEV, requires_grad=True)
    a.t().contiguous(memory_format=torch.preserve_format).mul(2).sum().backward()
    torch.testing.assert_close(a.grad.cpu(), torch.full((3, 4), 2.0))
    # a tensor already contiguous is returned as it is
    z = torch.randn(2, 2, device=DEV)
    assert z.contiguous(memory_format=torch.preserve_format) is z


def test_contiguous_other_formats_unchanged():
    x = torch.randn(2, 3, 4, 5)
    y = x.to(DEV).contiguous(memory_format=torch.channels_last)
    assert y.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(y.cpu(), x)
    with torch.inference_mode():
        assert x.to(DEV).transpose(0, 1).contiguous(memory_format=torch.preserve_format).is_contiguous()


class TestErrors(TestCase):
    def test_half_to_float_needs_half(self):
        with self.assertRaises(RuntimeError) as cm:
            torch.ops.aten._softmax(torch.randn(2, 3, device=DEV), 1, True)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """conversion is supported for Half type only (half_to_float=True needs a float16 input, got Float)""")

    def test_backward_dtypes_must_pair(self):
        g = torch.randn(2, 3, device=DEV, dtype=torch.float64)
        with self.assertRaises(RuntimeError) as cm:
            torch.ops.aten._softmax_backward_data(g, g.half(), 1, torch.half)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """expected input and grad types to match, or input to be at::Half and grad to be at::Float (got grad Double, input Half)""")

    def test_sparse_coo_tensor_on_neuron(self):
        i, v = torch.tensor([[0, 1], [1, 0]]), torch.tensor([1.0, 2.0])
        with self.assertRaises(NotImplementedError) as cm:
            torch.sparse_coo_tensor(i, v, (2, 2), device=DEV)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """aten::_sparse_coo_tensor_with_dims_and_tensors: sparse tensors are not supported on neuron (it has dense strided tensors only). Keep sparse tensors on the CPU, or use dense tensors on neuron: to_dense() before moving, gather(..., sparse_grad=False), nn.Embedding(sparse=False).""")
        # moving a CPU sparse tensor fails the same way; its dense form moves
        s = torch.sparse_coo_tensor(i, v, (2, 2))
        with self.assertRaises(NotImplementedError):
            s.to(DEV)
        torch.testing.assert_close(s.to_dense().to(DEV).cpu(), s.to_dense())

    def test_sparse_csr_on_neuron(self):
        # PyTorch builds compressed-layout tensors without asking the backend, so the refusal comes at
        # the first operator on one (here to_dense), with the same message
        s = torch.eye(3).to_sparse_csr().to(DEV)
        with self.assertRaises(NotImplementedError) as cm:
            s.to_dense()
        self.assertIn("sparse tensors are not supported on neuron", str(cm.exception))

    def test_gather_sparse_grad(self):
        x = torch.randn(3, 4, device=DEV, requires_grad=True)
        idx = torch.tensor([[0, 1], [2, 3], [1, 1]], device=DEV)
        y = torch.gather(x, 1, idx, sparse_grad=True)
        with self.assertRaises(NotImplementedError) as cm:
            y.sum().backward()
        self.assertIn("sparse tensors are not supported on neuron", str(cm.exception))
        # the dense gradient works and is the CPU's
        x.grad = None
        torch.gather(x, 1, idx).sum().backward()
        xc = x.detach().cpu().requires_grad_()
        torch.gather(xc, 1, idx.cpu()).sum().backward()
        torch.testing.assert_close(x.grad.cpu(), xc.grad)
