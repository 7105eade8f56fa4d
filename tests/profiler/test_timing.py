"""Built-in per-op timing without torch.profiler."""
import pytest
import torch

import torchneuron_ext
from torchneuron_ext.profiler import op_stats, reset_timing, timing, timing_enabled, timing_table
from tests.conftest import run_python


def _stat(name):
    return next(s for s in op_stats() if s.name == name)


def test_timing_records_host_device_bytes_and_flops():
    a = torch.randn(64, 32, device="neuron")
    b = torch.randn(32, 16, device="neuron")
    with timing():
        for _ in range(3):
            torch.mm(a, b)
        torch.special.bessel_j0(a)
    mm = _stat("aten::mm")
    assert mm.tier == "native" and mm.calls_timed == 3
    assert mm.device_total_us > 0 and mm.host_total_us >= mm.device_total_us
    assert mm.flops == 3 * 2 * 64 * 32 * 16
    assert mm.bytes_read == 3 * (64 * 32 + 32 * 16) * 4 and mm.bytes_written == 3 * 64 * 16 * 4
    assert _stat("aten::special_bessel_j0").tier == "generic"
    assert not timing_enabled()


def test_attention_flops_are_its_products():
    """QK^T and PV forward (2 FLOPs per multiply-add each), twice that backward (dV, dP, dQ, dK), so the
    cost model runs attention on the Tensor Engine."""
    q = torch.randn(2, 3, 5, 4, device="neuron", requires_grad=True)
    k = torch.randn(2, 3, 7, 4, device="neuron", requires_grad=True)
    v = torch.randn(2, 3, 7, 4, device="neuron", requires_grad=True)
    reset_timing()
    with timing():
        torch.nn.functional.scaled_dot_product_attention(q, k, v).sum().backward()
    forward = 4 * 2 * 3 * 5 * 7 * 4
    assert _stat("aten::_scaled_dot_product_fused_attention_overrideable").flops == forward
    assert _stat("aten::_scaled_dot_product_fused_attention_overrideable_backward").flops == 2 * forward


def test_tensor_engine_flops_of_bmm_linear_and_convolution():
    """The other Tensor Engine kernels (issue 14: matmul, bmm, linear, convolution): 2 FLOPs per
    multiply-add, so the cost model runs them at the Tensor Engine's rate, not as Vector work."""
    from torchneuron_ext import costmodel

    a, b = torch.randn(2, 4, 8, device="neuron"), torch.randn(2, 8, 5, device="neuron")
    x, w, bias = torch.randn(4, 32, device="neuron"), torch.randn(16, 32, device="neuron"), torch.randn(16, device="neuron")
    img, filt = torch.randn(2, 3, 16, 16, device="neuron"), torch.randn(8, 3, 3, 3, device="neuron")
    reset_timing()
    with timing():
        torch.bmm(a, b)
        torch.nn.functional.linear(x, w, bias)  # addmm on neuron
        torch.nn.functional.conv2d(img, filt, padding=1)
    assert _stat("aten::bmm").flops == 2 * 2 * 4 * 5 * 8
    assert _stat("aten::addmm").flops == 2 * 4 * 16 * 32
    conv = _stat("aten::convolution_overrideable")
    assert conv.flops == 2 * (2 * 8 * 16 * 16) * (3 * 3 * 3)  # output elements x (in channels x kernel)
    # ... which the cost model runs on the Tensor Engine.
    big = costmodel.eager_kernel(conv.name, 0, 0, 10 ** 12, conv.elements, conv.dtype, "trn2")
    assert big.engine == "tensor"


def test_convolution_backward_and_transposed_flops():
    """Each gradient a convolution's backward computes is the forward's multiply-adds again; a
    transposed convolution's are counted from its (larger) input."""
    from torchneuron_ext import costmodel

    img = torch.randn(2, 3, 16, 16, device="neuron", requires_grad=True)
    filt = torch.randn(8, 3, 3, 3, device="neuron", requires_grad=True)
    forward = 2 * (2 * 8 * 16 * 16) * (3 * 3 * 3)
    reset_timing()
    with timing():
        torch.nn.functional.conv2d(img, filt, padding=1).sum().backward()  # both gradients
    backward = _stat("aten::convolution_backward_overrideable")
    assert backward.flops == 2 * forward
    assert costmodel.eager_kernel(backward.name, 0, 0, 10 ** 12, backward.elements, backward.dtype,
                                  "trn2").engine == "tensor"
    reset_timing()
    with timing():
        torch.nn.functional.conv2d(img.detach(), filt, padding=1).sum().backward()  # the weight's only
    assert _stat("aten::convolution_backward_overrideable").flops == forward
    small, up = torch.randn(1, 8, 5, 5, device="neuron"), torch.randn(8, 4, 2, 2, device="neuron")
    reset_timing()
    with timing():
        out = torch.nn.functional.conv_transpose2d(small, up, stride=2)  # (1, 4, 10, 10)
    assert out.shape == (1, 4, 10, 10)
    assert _stat("aten::convolution_overrideable").flops == 2 * (8 * 5 * 5) * (4 * 2 * 2)


def test_timing_off_records_nothing_but_counts():
    reset_timing()
    torchneuron_ext.clear_op_tracking()
    x = torch.randn(8, device="neuron")
    x.exp()
    s = _stat("aten::exp")
    assert s.calls == 1 and s.calls_timed == 0 and s.device_total_us == 0


def test_copies_are_timed():
    with timing():
        torch.ones(1000).to("neuron").cpu()
    s = _stat("aten::_copy_from")
    assert s.calls_timed == 2 and s.bytes_written == 2 * 4000


def test_timing_table_is_readable():
    with timing():
        torch.randn(16, 16, device="neuron").relu()
    table = timing_table()
    header = table.splitlines()[0]
    assert header.split() == ["Operator", "Tier", "Calls", "Host", "total", "Host", "mean", "Device", "total",
                              "Device", "mean", "Projected", "Proj", "mean", "Bytes", "GFLOP/s"]
    assert "Projected: cost model for" in table.splitlines()[-1]
    assert "aten::relu" in table
    reset_timing()
    assert "no timed operators" in timing_table()
    with pytest.raises(ValueError, match="cannot sort by"):
        op_stats(sort_by="nonsense")


def test_environment_switch():
    r = run_python("""
        import torch, torchneuron_ext
        from torchneuron_ext.profiler import op_stats, timing_enabled
        torch.ones(4, device="neuron").add_(1)
        print(timing_enabled(), [s.calls_timed for s in op_stats() if s.name == "aten::add_.Tensor" or s.name == "aten::add_.Scalar"])
    """, env={"TORCHNEURON_EXT_TIMING": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True [1]"


@pytest.mark.parametrize("value, on", [("false", False), ("off", False), ("0", False), ("true", True), ("Yes", True)])
def test_environment_switch_grammar(value, on):
    # Read at import: before the switch used _env.flag, "false" and "off" turned timing on.
    r = run_python("""
        import torch
        from torchneuron_ext.profiler import timing_enabled
        print(timing_enabled())
    """, env={"TORCHNEURON_EXT_TIMING": value})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(on)


def test_environment_switch_not_understood_warns_and_stays_off():
    r = run_python("""
        import warnings
        warnings.simplefilter("always")
        import torch
        from torchneuron_ext.profiler import timing_enabled
        print(timing_enabled())
    """, env={"TORCHNEURON_EXT_TIMING": "maybe"})
    assert r.returncode == 0, r.stderr  # `import torch` must not fail on it
    assert r.stdout.strip() == "False"
    assert "TORCHNEURON_EXT_TIMING='maybe' is not understood" in r.stderr
