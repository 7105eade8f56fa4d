"""aten::linear_backward on neuron (csrc/aten/native_fused.cpp): PyTorch has kernels for it only with
oneDNN tensors, so the generic path could not run it; TorchNeuron's suite calls it directly. Its
gradients against CPU autograd of linear, per output mask, shape and dtype, and its errors."""
import itertools

import pytest
import torch

import torchneuron_ext

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("input_shape", [(5, 8), (2, 3, 8), (8,)])
@pytest.mark.parametrize("mask", [m for m in itertools.product([True, False], repeat=3) if any(m)])
def test_gradients_match_cpu_autograd(dtype, input_shape, mask):
    torch.manual_seed(0)
    x = torch.randn(input_shape, dtype=dtype, requires_grad=True)
    w = torch.randn(6, 8, dtype=dtype, requires_grad=True)
    b = torch.randn(6, dtype=dtype, requires_grad=True)
    out = torch.nn.functional.linear(x, w, b)
    grad = torch.randn_like(out)
    out.backward(grad)
    got = torch.ops.aten.linear_backward(x.detach().to("neuron"), grad.to("neuron"), w.detach().to("neuron"),
                                         list(mask))
    for asked, result, expected in zip(mask, got, (x.grad, w.grad, b.grad)):
        if not asked:
            assert result is None
            continue
        assert result.device.type == "neuron" and result.dtype == dtype and result.shape == expected.shape
        torch.testing.assert_close(result.cpu(), expected, **TOL[dtype])


def test_one_device_kernel():
    x, g, w = torch.randn(4, 8, device="neuron"), torch.randn(4, 6, device="neuron"), torch.randn(6, 8, device="neuron")
    torchneuron_ext.clear_op_tracking()
    torch.ops.aten.linear_backward(x, g, w, [True, True, True])
    assert torchneuron_ext.get_op_counts() == {"aten::linear_backward": {"native": 1}}  # products inside


@pytest.mark.parametrize("shapes,message", [
    (((4, 8), (4, 6), (6, 8, 1)), "expected weight of shape"),
    (((4, 7), (4, 6), (6, 8)), "its last dimension must be in_features"),
    (((4, 8), (3, 6), (6, 8)), "is not the shape of the output"),
])
def test_bad_shapes_are_clear_errors(shapes, message):
    x, g, w = (torch.randn(s, device="neuron") for s in shapes)
    with pytest.raises(RuntimeError, match=message):
        torch.ops.aten.linear_backward(x, g, w, [True, True, True])
    assert (torch.ones(2, device="neuron") * 2).cpu().tolist() == [2.0, 2.0]
