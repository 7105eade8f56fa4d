"""Calling nki.jit kernels with numpy arrays, CPU tensors and neuron tensors (issue 6, point 4)."""
import numpy as np
import pytest
import torch
from expecttest import TestCase

from tests.nki.torch.kernels import add_into, add_kernel, axpy_, copy_new, scale_


def _pair(rows=256, cols=64, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return torch.randn(rows, cols, generator=g).to(dtype), torch.randn(rows, cols, generator=g).to(dtype)


def test_numpy_in_numpy_out():
    a, b = (t.numpy() for t in _pair())
    out = add_kernel[2](a, b)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, a + b)


def test_cpu_tensors_in_cpu_tensor_out():
    a, b = _pair()
    out = add_kernel[2](a, b)
    assert isinstance(out, torch.Tensor) and out.device.type == "cpu"
    torch.testing.assert_close(out, a + b, rtol=0, atol=0)


def test_neuron_tensors_in_neuron_tensor_out():
    a, b = _pair()
    na, nb = a.to("neuron"), b.to("neuron")
    before = torch.neuron.memory_allocated()
    out = add_kernel[2](na, nb)
    assert out.device == torch.device("neuron:0")
    # The output was allocated in device memory by the kernel, not copied there afterwards.
    assert torch.neuron.memory_allocated() - before == out.numel() * out.element_size()
    torch.testing.assert_close(out.cpu(), a + b, rtol=0, atol=0)


def test_neuron_bfloat16():
    a, b = _pair(dtype=torch.bfloat16)
    out = add_kernel[2](a.to("neuron"), b.to("neuron"))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), a + b)


def test_new_dialect_kernel_on_neuron():
    a, _ = _pair()
    out = copy_new(a.to("neuron"))
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), a, rtol=0, atol=0)


def test_outputs_passed_in_are_written_in_place_on_neuron():
    a, b = _pair()
    c = torch.zeros(256, 64, device="neuron")
    ptr = c.data_ptr()
    assert add_into(a.to("neuron"), b.to("neuron"), c) is None
    assert c.data_ptr() == ptr
    torch.testing.assert_close(c.cpu(), a + b, rtol=0, atol=0)


def test_outputs_passed_in_numpy_and_cpu():
    a, b = _pair()
    c = torch.zeros(256, 64)
    add_into(a, b, c)
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)
    cn = np.zeros((256, 64), dtype=np.float32)
    add_into(a.numpy(), b.numpy(), cn)
    np.testing.assert_array_equal(cn, (a + b).numpy())


def test_neuron_views_are_viewed_not_copied():
    """A strided view of a neuron tensor, passed as the output, writes into its base tensor."""
    a, b = _pair(rows=128, cols=32)
    base = torch.zeros(128, 96, device="neuron")
    view = base[:, 32:64]
    assert not view.is_contiguous()
    add_into(a.to("neuron"), b.to("neuron"), view)
    expected = torch.zeros(128, 96)
    expected[:, 32:64] = a + b
    torch.testing.assert_close(base.cpu(), expected, rtol=0, atol=0)
    # A transposed input is read through its strides.
    at = a.t().contiguous().to("neuron").t()
    out = add_kernel[1](at, b.to("neuron"))
    torch.testing.assert_close(out.cpu(), a + b, rtol=0, atol=0)


def test_returned_argument_is_the_callers_tensor():
    a, _ = _pair()
    na = a.to("neuron")
    out = scale_(na, 3.0)
    assert out is na
    torch.testing.assert_close(na.cpu(), a * 3.0)


def test_mutated_argument_and_new_output():
    y, x = _pair()
    ny = y.to("neuron")
    out_y, ax = axpy_(ny, x.to("neuron"), 2.0)
    assert out_y is ny and ax.device.type == "neuron"
    torch.testing.assert_close(ny.cpu(), y + 2.0 * x)
    torch.testing.assert_close(ax.cpu(), 2.0 * x)


def test_second_device():
    if torch.neuron.device_count() < 2:
        pytest.skip("needs two neuron devices")
    a, b = _pair()
    out = add_kernel[2](a.to("neuron:1"), b.to("neuron:1"))
    assert out.device == torch.device("neuron:1")
    torch.testing.assert_close(out.cpu(), a + b, rtol=0, atol=0)


def test_requires_grad_tensors_warn_once_that_no_gradient_flows():
    from torchneuron_ext.nki.torch import launch as kernel_module
    kernel_module._warned_autograd.discard("add_kernel")
    a, b = _pair()
    na = a.to("neuron").requires_grad_()
    with pytest.warns(UserWarning, match="NKI kernel add_kernel was called on tensors that require grad"):
        out = add_kernel[2](na, b.to("neuron"))
    assert not out.requires_grad
    torch.testing.assert_close(out.cpu(), a + b, rtol=0, atol=0)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        add_kernel[2](na, b.to("neuron"))          # once per kernel
        kernel_module._warned_autograd.discard("add_kernel")
        with torch.no_grad():
            add_kernel[2](na, b.to("neuron"))      # no gradient expected here: no warning


class TestErrors(TestCase):
    def test_mixed_devices(self):
        a, b = _pair()
        with self.assertRaises(ValueError) as cm:
            add_kernel[2](a.to("neuron"), b)
        self.assertExpectedInline(str(cm.exception), """\
all tensor arguments of an NKI kernel must be on one device, got neuron:0 and cpu: move them with .to('neuron')""")

    def test_unsupported_dtype(self):
        a = torch.zeros(128, 4, dtype=torch.complex64, device="neuron")
        with self.assertRaises(TypeError) as cm:
            add_kernel[1](a, a)
        self.assertExpectedInline(str(cm.exception), """NKI kernels cannot take tensors of dtype torch.complex64""")

    def test_wrong_arguments(self):
        a, _ = _pair()
        with self.assertRaises(TypeError) as cm:
            add_kernel[2](a.to("neuron"))
        self.assertExpectedInline(str(cm.exception), """NKI kernel add_kernel: missing a required argument: 'b'""")
