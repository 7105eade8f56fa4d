"""Normalizations TorchNeuron runs as one device operation (issue 16 item 1): torch.rms_norm /
nn.RMSNorm as aten::_fused_rms_norm and aten::_fused_rms_norm_backward, one device kernel each
(csrc/aten/native_fused.cpp); layer_norm and group_norm as native_layer_norm / native_group_norm
and their backwards. Results and gradients against CPU, op tracking, torch.profiler, autocast and
torch.compile."""
import warnings

import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

import torchneuron_ext
from torchneuron_ext import ops

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
       torch.float16: dict(rtol=2e-3, atol=2e-3)}


def leaf(t: torch.Tensor, device: str = "cpu") -> torch.Tensor:
    return t.detach().to(device).requires_grad_()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("with_weight", [True, False])
@pytest.mark.parametrize("shape,normalized_shape", [((3, 8), (8,)), ((2, 3, 4, 8), (4, 8)),
                                                    ((5, 2, 3, 7), (2, 3, 7)), ((6, 1), (1,))])
def test_rms_norm_matches_cpu_forward_and_backward(dtype, with_weight, shape, normalized_shape):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype)
    w = torch.randn(normalized_shape, dtype=dtype) if with_weight else None
    grad = torch.randn(shape, dtype=dtype)
    xc, xd = leaf(x), leaf(x, "neuron")
    wc, wd = (leaf(w), leaf(w, "neuron")) if with_weight else (None, None)
    out_c = torch.rms_norm(xc, normalized_shape, wc, 1e-5)
    out_d = torch.rms_norm(xd, normalized_shape, wd, 1e-5)
    assert out_d.dtype == dtype and out_d.device.type == "neuron"
    torch.testing.assert_close(out_d.cpu(), out_c, **TOL[dtype])
    out_c.backward(grad)
    out_d.backward(grad.to("neuron"))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **TOL[dtype])
    if with_weight:
        assert wd.grad.dtype == dtype
        torch.testing.assert_close(wd.grad.cpu(), wc.grad, **TOL[dtype])


def test_rms_norm_is_one_kernel_forward_and_one_backward():
    x = torch.randn(4, 16, 32, device="neuron", requires_grad=True)
    w = torch.randn(32, device="neuron", requires_grad=True)
    grad = torch.randn(4, 16, 32, device="neuron")
    ops.clear_op_tracking()
    out = torch.rms_norm(x, (32,), w, 1e-6)
    assert ops.get_op_counts() == {"aten::_fused_rms_norm": {"native": 1}}
    ops.clear_op_tracking()
    out.backward(grad)
    assert ops.get_op_counts() == {"aten::_fused_rms_norm_backward": {"native": 1}}
    x.grad = w.grad = None  # a second backward would accumulate (aten::add_)
    ops.clear_op_tracking()
    torch.rms_norm(x, (32,), w).backward(grad)
    assert ops.get_executed_ops() == ["aten::_fused_rms_norm", "aten::_fused_rms_norm_backward"]


def test_rms_norm_in_torch_profiler_is_one_device_kernel_each_way():
    x = torch.randn(8, 64, device="neuron", requires_grad=True)
    w = torch.randn(64, device="neuron", requires_grad=True)
    grad = torch.randn(8, 64, device="neuron")
    torch.rms_norm(x, (64,), w).backward(grad)  # warm up
    x.grad = w.grad = None
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch.rms_norm(x, (64,), w).backward(grad)
    rows = {e.key: e for e in prof.key_averages()}
    kernels = sorted(k for k in rows if k.startswith("neuron::"))
    assert kernels == ["neuron::_fused_rms_norm", "neuron::_fused_rms_norm_backward"]
    assert all(rows[k].count == 1 and rows[k].self_device_time_total > 0 for k in kernels)
    assert rows["aten::_fused_rms_norm"].device_time_total > 0
    # The kernel's host computation is its internals, not operators the program dispatched.
    assert not {"aten::pow", "aten::mean", "aten::rsqrt"} & set(rows)


def test_nn_rmsnorm_module_trains_like_cpu():
    torch.manual_seed(1)
    cpu = nn.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        cpu.weight.uniform_(0.5, 1.5)
    dev = nn.RMSNorm(16, eps=1e-6).to("neuron")
    dev.load_state_dict(cpu.state_dict())
    x = torch.randn(3, 5, 16)
    xc, xd = leaf(x), leaf(x, "neuron")
    ops.clear_op_tracking()
    out_d = dev(xd)
    assert "aten::_fused_rms_norm" in ops.get_executed_ops()
    out_c = cpu(xc)
    torch.testing.assert_close(out_d.cpu(), out_c)
    out_c.pow(2).sum().backward()
    out_d.pow(2).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)
    torch.testing.assert_close(dev.weight.grad.cpu(), cpu.weight.grad)


@pytest.mark.parametrize("eps", [None, 1e-2])
def test_rms_norm_eps_default_and_mixed_weight_dtype(eps):
    torch.manual_seed(2)
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    w = torch.randn(8)  # float32 weight, bfloat16 input: computed in float32, result in bfloat16
    out_c = torch.rms_norm(x, (8,), w, eps)
    out_d = torch.rms_norm(x.to("neuron"), (8,), w.to("neuron"), eps)
    assert out_d.dtype == out_c.dtype
    torch.testing.assert_close(out_d.cpu(), out_c, rtol=0, atol=0)
    o, rstd = torch.ops.aten._fused_rms_norm(x.to("neuron"), [8], w.to("neuron"), eps)
    o_c, rstd_c = torch.ops.aten._fused_rms_norm(x, [8], w, eps)
    assert rstd.dtype == torch.float32 and rstd.shape == (4, 1)
    torch.testing.assert_close(rstd.cpu(), rstd_c, rtol=0, atol=0)


def test_rms_norm_backward_output_mask_and_empty_input():
    torch.manual_seed(3)
    x = torch.randn(3, 8, device="neuron")
    w = torch.randn(8, device="neuron")
    g = torch.randn(3, 8, device="neuron")
    _, rstd = torch.ops.aten._fused_rms_norm(x, [8], w, 1e-5)
    dx, dw = torch.ops.aten._fused_rms_norm_backward(g, x, [8], rstd, w, [True, False])
    assert dx is not None and dw is None
    dx2, dw2 = torch.ops.aten._fused_rms_norm_backward(g, x, [8], rstd, w, [False, True])
    assert dx2 is None
    torch.testing.assert_close(dw2.cpu(), (g * x * rstd).sum(0).cpu())
    e = torch.randn(0, 8, device="neuron", requires_grad=True)
    out = torch.rms_norm(e, (8,), w.requires_grad_())
    out.sum().backward()
    assert out.shape == (0, 8) and e.grad.shape == (0, 8)
    torch.testing.assert_close(w.grad.cpu(), torch.zeros(8))


def test_rms_norm_shape_error_matches_cpu():
    x = torch.randn(3, 8)
    with pytest.raises(RuntimeError) as cpu_err:
        torch.rms_norm(x, (7,))
    with pytest.raises(RuntimeError) as dev_err:
        torch.rms_norm(x.to("neuron"), (7,))
    assert str(dev_err.value) == str(cpu_err.value)
    with pytest.raises(RuntimeError, match="does not end the input's shape"):
        torch.ops.aten._fused_rms_norm_backward(x.to("neuron"), x.to("neuron"), [7], x.to("neuron")[:, :1], None,
                                                [True, False])


def test_rms_norm_under_autocast_runs_in_float32_as_one_kernel():
    torch.manual_seed(4)
    x = torch.randn(4, 32, dtype=torch.bfloat16)
    w = torch.randn(32)
    xd, wd = leaf(x, "neuron"), leaf(w, "neuron")
    ops.clear_op_tracking()
    with torch.autocast("neuron"):
        out = torch.rms_norm(xd, (32,), wd, 1e-5)
    # CUDA's autocast lists put rms_norm in float32: the input is upcast, the result stays float32.
    assert out.dtype == torch.float32
    assert ops.get_op_counts()["aten::_fused_rms_norm"] == {"native": 1}
    torch.testing.assert_close(out.cpu(), torch.rms_norm(x.float(), (32,), w, 1e-5))
    out.sum().backward()
    assert xd.grad.dtype == torch.bfloat16 and wd.grad.shape == (32,)


def test_rms_norm_compiled_matches_eager_cpu():
    torch.manual_seed(5)

    def f(x, w):
        return torch.rms_norm(x, (x.shape[-1],), w, 1e-6) * 2

    x, w = torch.randn(4, 6, 32), torch.randn(32)
    xc, wc, xd, wd = leaf(x), leaf(w), leaf(x, "neuron"), leaf(w, "neuron")
    out_d = torch.compile(f, backend="neuron", fullgraph=True)(xd, wd)
    out_c = f(xc, wc)
    torch.testing.assert_close(out_d.cpu(), out_c)
    out_c.sum().backward()
    out_d.sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)
    torch.testing.assert_close(wd.grad.cpu(), wc.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_norm_and_group_norm_are_one_kernel_each_way(dtype):
    torch.manual_seed(6)
    x = torch.randn(2, 6, 5, 5, dtype=dtype)
    cases = [
        (lambda t, w, b: torch.nn.functional.layer_norm(t, (5, 5), w, b), (5, 5),
         "aten::native_layer_norm", "aten::native_layer_norm_backward"),
        (lambda t, w, b: torch.nn.functional.group_norm(t, 3, w, b), (6,),
         "aten::native_group_norm", "aten::native_group_norm_backward"),
    ]
    for fn, pshape, fwd, bwd in cases:
        w, b = torch.randn(pshape, dtype=dtype), torch.randn(pshape, dtype=dtype)
        grad = torch.randn_like(x)
        grad_d = grad.to("neuron")
        c = [leaf(t) for t in (x, w, b)]
        d = [leaf(t, "neuron") for t in (x, w, b)]
        ops.clear_op_tracking()
        out_d = fn(*d)
        assert ops.get_op_counts() == {fwd: {"native": 1}}
        ops.clear_op_tracking()
        out_d.backward(grad_d)
        assert ops.get_op_counts() == {bwd: {"native": 1}}
        out_c = fn(*c)
        out_c.backward(grad)
        torch.testing.assert_close(out_d.cpu(), out_c, **TOL[dtype])
        for td, tc in zip(d, c):
            torch.testing.assert_close(td.grad.cpu(), tc.grad, **TOL[dtype])


MIXED = [(torch.bfloat16, torch.float32), (torch.float16, torch.float32), (torch.float32, torch.bfloat16),
         (torch.float16, torch.bfloat16)]


@pytest.mark.parametrize("x_dtype,w_dtype", MIXED)
@pytest.mark.parametrize("shape,normalized_shape", [((4, 6, 32), (32,)), ((3, 4, 8), (4, 8))])
def test_rms_norm_mixed_dtypes_are_one_kernel_each_way_and_match_cpu(x_dtype, w_dtype, shape, normalized_shape):
    """PyTorch's composite decomposes a mixed-dtype rms_norm (with a "Cannot dispatch to fused implementation"
    warning); on neuron, as on TorchNeuron, it is _fused_rms_norm forward and _fused_rms_norm_backward."""
    torch.manual_seed(7)
    x, w = torch.randn(shape, dtype=x_dtype), torch.randn(normalized_shape, dtype=w_dtype)
    grad = torch.randn(shape, dtype=x_dtype)
    xc, wc, xd, wd = leaf(x), leaf(w), leaf(x, "neuron"), leaf(w, "neuron")
    ops.clear_op_tracking()
    out_d = torch.rms_norm(xd, normalized_shape, wd, 1e-6)
    assert ops.get_op_counts() == {"aten::_fused_rms_norm": {"native": 1}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Cannot dispatch to fused implementation" (once per process)
        out_c = torch.rms_norm(xc, normalized_shape, wc, 1e-6)
    assert out_d.dtype == out_c.dtype
    torch.testing.assert_close(out_d.cpu(), out_c, rtol=0, atol=0)  # the CPU's composite, on host views
    grad_d = grad.to("neuron")
    ops.clear_op_tracking()
    out_d.backward(grad_d)
    assert ops.get_op_counts() == {"aten::_fused_rms_norm_backward": {"native": 1}}
    out_c.backward(grad)
    assert xd.grad.dtype == xc.grad.dtype == x_dtype and wd.grad.dtype == wc.grad.dtype == w_dtype
    tol = TOL[x_dtype] if x_dtype != torch.float32 else TOL[w_dtype]
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **tol)
    torch.testing.assert_close(wd.grad.cpu(), wc.grad, **tol)


def test_rms_norm_mixed_weight_gradient_is_not_rounded_through_the_input_dtype():
    """bfloat16 activations, float32 weight: the weight's gradient is the CPU's float32 one, not a bfloat16
    value widened (the rounding the decomposition's cast to the input dtype would add)."""
    torch.manual_seed(8)
    x, w, g = torch.randn(64, 48, dtype=torch.bfloat16), torch.randn(48), torch.randn(64, 48, dtype=torch.bfloat16)
    xc, wc, xd, wd = leaf(x), leaf(w), leaf(x, "neuron"), leaf(w, "neuron")
    torch.rms_norm(xd, (48,), wd).backward(g.to("neuron"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.rms_norm(xc, (48,), wc).backward(g)
    torch.testing.assert_close(wd.grad.cpu(), wc.grad, rtol=1e-5, atol=1e-5)
    assert not torch.equal(wc.grad, wc.grad.bfloat16().float())  # the check can tell the two apart


def test_rms_norm_mixed_dtypes_under_no_grad_inference_and_compile():
    torch.manual_seed(9)
    x, w = torch.randn(2, 5, 16, dtype=torch.bfloat16), torch.randn(16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = torch.rms_norm(x, (16,), w, 1e-5)
    xd, wd = x.to("neuron"), w.to("neuron")
    for ctx in (torch.no_grad, torch.inference_mode):
        ops.clear_op_tracking()
        with ctx():
            out = torch.rms_norm(xd, (16,), wd, 1e-5)
        assert ops.get_op_counts() == {"aten::_fused_rms_norm": {"native": 1}}
        torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=0)
    torch._dynamo.reset()
    xl, wl = leaf(x, "neuron"), leaf(w, "neuron")
    compiled = torch.compile(lambda a, b: torch.rms_norm(a, (16,), b, 1e-5), backend="neuron", fullgraph=True)
    out = compiled(xl, wl)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), ref, **TOL[torch.bfloat16])
    out.float().sum().backward()
    assert xl.grad.dtype == torch.bfloat16 and wl.grad.dtype == torch.float32
    xc, wc = leaf(x), leaf(w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.rms_norm(xc, (16,), wc, 1e-5).float().sum().backward()
    torch.testing.assert_close(xl.grad.cpu(), xc.grad, **TOL[torch.bfloat16])
    torch.testing.assert_close(wl.grad.cpu(), wc.grad, **TOL[torch.bfloat16])
    torch._dynamo.reset()


def test_an_nki_route_for_rms_norm_still_takes_mixed_and_plain_calls():
    """route_aten installs above neuron's own rms_norm kernel at both autograd and backend keys: routed calls
    run the route (with its autograd), declined ones fall back to the one-kernel path."""
    from torchneuron_ext.nki.aten_routing import route_aten

    seen = []

    def route(x, normalized_shape, weight=None, eps=None):
        seen.append((x.dtype, None if weight is None else weight.dtype))
        if weight is not None and weight.dtype != x.dtype:
            return NotImplemented
        return torch.ops.aten._fused_rms_norm(x, list(normalized_shape), weight, eps)[0] + 0

    torch.manual_seed(10)
    xb, w = torch.randn(4, 16, dtype=torch.bfloat16), torch.randn(16)
    with route_aten("aten::rms_norm", route) as r:
        assert r.keys == ("AutogradPrivateUse1", "PrivateUse1")
        xd, wd = leaf(xb, "neuron"), leaf(w, "neuron")
        ops.clear_op_tracking()
        out = torch.rms_norm(xd, (16,), wd)
        assert r.fallbacks == 1 and ops.get_op_counts() == {"aten::_fused_rms_norm": {"native": 1}}
        out.float().sum().backward()
        assert wd.grad is not None
        x32 = leaf(xb.float(), "neuron")
        out32 = torch.rms_norm(x32, (16,), leaf(w, "neuron"))
        assert r.routed == 1 and "aten::add.Tensor" in ops.get_executed_ops()  # the route's own "+ 0"
        out32.sum().backward()
        assert x32.grad is not None
    assert seen == [(torch.bfloat16, torch.float32), (torch.float32, torch.float32)]
