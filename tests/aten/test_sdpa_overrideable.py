"""scaled_dot_product_attention on neuron as TorchNeuron runs it (issue 16): 4-D query/key/value take the
overrideable backend, so SDPA is one device operation, aten::_scaled_dot_product_fused_attention_overrideable,
with its own backward (csrc/aten/native_attention.cpp). Results and gradients against CPU, masks, causal,
dropout, grouped-query attention, the backend switch, the op's outputs against its meta kernel, and
torch.compile."""
import math

import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase
from torch.nn.attention import SDPBackend, sdpa_kernel

import torchneuron_ext  # noqa: F401
from torchneuron_ext import ops

FWD = "aten::_scaled_dot_product_fused_attention_overrideable"
BWD = "aten::_scaled_dot_product_fused_attention_overrideable_backward"
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-9, atol=1e-9),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2), torch.float16: dict(rtol=2e-3, atol=2e-3)}


def leaf(t, device="cpu"):
    return t.detach().to(device).requires_grad_()


def qkv(b=2, hq=4, hk=4, lq=6, lk=6, e=8, ev=8, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, hq, lq, e, generator=g).to(dtype), torch.randn(b, hk, lk, e, generator=g).to(dtype),
            torch.randn(b, hk, lk, ev, generator=g).to(dtype))


def run_both(q, k, v, grad=None, mask=None, mask_grad=False, **kw):
    """SDPA forward and backward on CPU and neuron; the neuron op counts of each direction."""
    cpu = [leaf(t) for t in (q, k, v)]
    dev = [leaf(t, "neuron") for t in (q, k, v)]
    mc = md = None
    if mask is not None:
        mc, md = (leaf(mask), leaf(mask, "neuron")) if mask_grad else (mask, mask.to("neuron"))
    ops.clear_op_tracking()
    out_d = F.scaled_dot_product_attention(*dev, attn_mask=md, **kw)
    fwd_counts = ops.get_op_counts()
    out_c = F.scaled_dot_product_attention(*cpu, attn_mask=mc, **kw)
    grad = torch.randn_like(out_c) if grad is None else grad
    grad_d = grad.to("neuron")
    ops.clear_op_tracking()
    out_d.backward(grad_d)
    bwd_counts = ops.get_op_counts()
    out_c.backward(grad)
    leaves = list(zip(dev, cpu)) + ([(md, mc)] if mask_grad else [])
    return out_d, out_c, leaves, fwd_counts, bwd_counts


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("case", ["plain", "causal", "float_mask", "bool_mask", "scale", "cross", "value_dim"])
def test_one_kernel_each_way_matching_cpu(dtype, case):
    kw, mask = {}, None
    shapes = dict(lk=9) if case in ("cross", "bool_mask") else {}
    if case == "value_dim":
        shapes = dict(ev=5)
    q, k, v = qkv(dtype=dtype, **shapes)
    if case == "causal":
        kw["is_causal"] = True
    elif case == "float_mask":
        mask = torch.randn(6, 6).to(dtype)
    elif case == "bool_mask":
        mask = torch.rand(2, 1, 6, 9, generator=torch.Generator().manual_seed(1)) > 0.3
    elif case == "scale":
        kw["scale"] = 0.3
    out_d, out_c, leaves, fwd, bwd = run_both(q, k, v, mask=mask, **kw)
    # A boolean mask becomes a float one (where(mask, 0, -inf)) in SDPA's composite, before the choice.
    conversion = {"aten::where.self", "aten::scalar_tensor", "aten::fill_.Scalar", "aten::empty.memory_format"}
    assert fwd.pop(FWD) == {"native": 1} and set(fwd) <= (conversion if case == "bool_mask" else set())
    assert bwd == {BWD: {"native": 1}}
    assert out_d.dtype == dtype and out_d.shape == out_c.shape
    torch.testing.assert_close(out_d.detach().cpu(), out_c.detach(), **TOL[dtype])
    for d, c in leaves:
        assert d.grad.dtype == c.grad.dtype and d.grad.stride() == d.stride()
        torch.testing.assert_close(d.grad.cpu(), c.grad, **TOL[dtype])


def test_forward_equals_the_cpu_kernel_cpu_would_run():
    """The kernel runs the CPU's own kernel (flash here) on host views: the numbers are the CPU's exactly."""
    q, k, v = qkv(lq=33, lk=17, e=16, ev=16)
    for kw in ({}, {"is_causal": True}):
        out = F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"), **kw)
        torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, **kw), rtol=0, atol=0)


def test_the_kept_cpu_choice_follows_what_it_depends_on():
    """The CPU's choice is kept per thread for the last few inputs' shapes, strides, dtypes, gradients and
    the sdpa_kernel switches: for the same shapes, a mask that needs its gradient (no CPU flash) or the
    flash backend switched off (no flash) get the CPU's math kernel, and flash again after, also when the
    inputs alternate and when more inputs than are kept came in between."""
    q, k, v = qkv(lq=8, lk=8, e=4, ev=4)
    mask = torch.randn(8, 8)
    dev = [t.to("neuron") for t in (q, k, v, mask)]
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=mask)[0]
    with sdpa_kernel([SDPBackend.MATH]):
        math_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert not torch.equal(flash, math_out)  # the two kernels round differently here: the check can tell them apart

    def run(*args):
        return torch.ops.aten._scaled_dot_product_fused_attention_overrideable(*args)[0].detach().cpu()

    assert torch.equal(run(*dev), flash)
    assert torch.equal(run(*dev[:3], dev[3].clone().requires_grad_()), math_out)
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.OVERRIDEABLE]):
        assert torch.equal(run(*dev), math_out)
    assert torch.equal(run(*dev), flash)
    grad_mask = dev[3].clone().requires_grad_()
    for _ in range(3):  # both answers kept side by side
        assert torch.equal(run(*dev[:3], grad_mask), math_out)
        assert torch.equal(run(*dev), flash)
    for lq in range(9, 21):  # more inputs than the kept answers, then the first ones again
        others = [t.to("neuron") for t in qkv(lq=lq, lk=8, e=4, ev=4)]
        run(*others, torch.randn(lq, 8, device="neuron"))
    assert torch.equal(run(*dev[:3], grad_mask), math_out)
    assert torch.equal(run(*dev), flash)


def test_a_mask_that_requires_grad_gets_its_gradient():
    q, k, v = qkv()
    for mask in (torch.randn(6, 6), torch.randn(2, 1, 6, 6), torch.randn(2, 4, 6, 6)):
        out_d, out_c, leaves, fwd, bwd = run_both(q, k, v, mask=mask, mask_grad=True)
        assert fwd == {FWD: {"native": 1}} and bwd == {BWD: {"native": 1}}
        torch.testing.assert_close(out_d.detach().cpu(), out_c.detach())
        for d, c in leaves:
            assert d.grad.shape == c.grad.shape
            torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("hk", [1, 2])
def test_grouped_query_attention(hk):
    q, k, v = qkv(hq=4, hk=hk)
    out_d, out_c, leaves, fwd, bwd = run_both(q, k, v, enable_gqa=True, is_causal=True)
    assert fwd == {FWD: {"native": 1}} and bwd == {BWD: {"native": 1}}
    torch.testing.assert_close(out_d.detach().cpu(), out_c.detach())
    for d, c in leaves:
        assert d.grad.shape == c.grad.shape
        torch.testing.assert_close(d.grad.cpu(), c.grad)


def test_unequal_heads_without_enable_gqa_fail_as_on_cpu():
    q, k, v = qkv(hq=4, hk=2)
    with pytest.raises(RuntimeError) as cpu_err:
        F.scaled_dot_product_attention(q, k, v)
    with pytest.raises(RuntimeError) as dev_err:
        F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"))
    assert str(dev_err.value) == str(cpu_err.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"enable_gqa": True}])
def test_dropout_draws_the_cpus_mask_from_the_device_generator(dtype, kw):
    """For one seed the neuron generator draws the CPU's numbers: the dropped output equals the CPU's, and the
    backward applies that same mask (gradients match the CPU's)."""
    q, k, v = qkv(hk=2 if kw.get("enable_gqa") else 4, dtype=dtype)
    cpu = [leaf(t) for t in (q, k, v)]
    dev = [leaf(t, "neuron") for t in (q, k, v)]
    torch.manual_seed(5)
    out_c = F.scaled_dot_product_attention(*cpu, dropout_p=0.3, **kw)
    torch.manual_seed(5)
    ops.clear_op_tracking()
    out_d = F.scaled_dot_product_attention(*dev, dropout_p=0.3, **kw)
    assert ops.get_op_counts() == {FWD: {"native": 1}}
    torch.testing.assert_close(out_d.detach().cpu(), out_c.detach(), rtol=0, atol=0)
    grad = torch.randn_like(out_c)
    grad_d = grad.to("neuron")
    ops.clear_op_tracking()
    out_d.backward(grad_d)
    assert ops.get_op_counts() == {BWD: {"native": 1}}
    out_c.backward(grad)
    for d, c in zip(dev, cpu):
        torch.testing.assert_close(d.grad.cpu(), c.grad, **TOL[dtype])


def test_dropout_advances_the_generator_and_gradchecks():
    q, k, v = qkv(b=1, hq=2, hk=2, lq=4, lk=5, e=3, ev=3, dtype=torch.float64)
    dev = [t.to("neuron") for t in (q, k, v)]

    def f(a, b, c):
        torch.neuron.manual_seed(123)
        return F.scaled_dot_product_attention(a, b, c, dropout_p=0.4)
    torch.testing.assert_close(f(*dev).cpu(), f(*dev).cpu(), rtol=0, atol=0)  # same seed, same mask
    torch.neuron.manual_seed(1)
    a = F.scaled_dot_product_attention(*dev, dropout_p=0.4)
    b = F.scaled_dot_product_attention(*dev, dropout_p=0.4)
    assert not torch.equal(a.cpu(), b.cpu())  # the generator advanced
    assert torch.autograd.gradcheck(f, [leaf(t, "neuron") for t in dev])  # the backward applies the same mask


class TestDropoutState(TestCase):
    def test_a_philox_seed_without_the_forwards_state(self):
        q, k, v = (t.to("neuron") for t in qkv())
        res = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, v, dropout_p=0.5)
        assert res[6].shape == () and res[6].dtype == torch.int64 and res[7].item() == 0
        copy = res[6].clone()
        with self.assertRaises(RuntimeError) as cm:
            torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(
                torch.ones_like(res[0]), q, k, v, None, [True, True, True, False], res[0], res[1], None, None,
                res[4], res[5], 0.5, False, copy, res[7])
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """_scaled_dot_product_fused_attention_overrideable_backward: philox_seed does not carry the generator state of a dropout forward (it is not the philox_seed the forward returned, or a copy of it): pass the forward's philox_seed tensor itself""")
        grads = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(
            torch.ones_like(res[0]), q, k, v, None, [True, True, True, False], res[0], res[1], None, None,
            res[4], res[5], 0.5, False, res[6], res[7])
        assert all(g.shape == t.shape for g, t in zip(grads[:3], (q, k, v)))


def test_dropout_keeps_the_cpus_attention_weights_scaled():
    """With value = identity, the output is the attention weights: each is dropped (0) or the CPU's weight
    divided by 1 - p; about p of them are dropped."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 64, 16), torch.randn(2, 4, 64, 16)
    v = torch.eye(64).expand(2, 4, 64, 64)
    p = 0.25
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(16), -1)
    out = F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"), dropout_p=p).cpu()
    kept = out != 0
    assert abs(1 - kept.float().mean().item() - p) < 0.02
    torch.testing.assert_close(out[kept], (weights / (1 - p))[kept])
    zero = F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"), dropout_p=1.0)
    assert torch.equal(zero.cpu(), torch.zeros(2, 4, 64, 64))


def test_outputs_match_the_meta_kernel():
    """Shapes, dtypes and strides of every output as the operator's meta kernel gives them (compiled graphs
    check them), for a query laid out (batch, seq, heads, dim) as attention modules make it."""
    q = torch.randn(2, 6, 4, 8).transpose(1, 2)
    k, v = torch.randn(2, 4, 9, 8), torch.randn(2, 4, 9, 5)
    op = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    for args in ((q, k, v), (q, k, k)):
        dev = op(*[t.to("neuron") for t in args])
        meta = op(*[t.to("meta") for t in args])
        for d, m in zip(dev, meta):
            if isinstance(m, torch.Tensor):
                assert (d.shape, d.dtype, d.stride()) == (m.shape, m.dtype, m.stride())
            elif m is None:
                assert d is None
            else:
                assert d == m
        gd = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(
            torch.ones_like(dev[0]), *[t.to("neuron") for t in args], None, [True, True, True, False], dev[0],
            dev[1], None, None, dev[4], dev[5], 0.0, False, dev[6], dev[7])
        for g, t in zip(gd, args):
            assert (g.shape, g.stride()) == (t.shape, t.stride())
        assert gd[3] is None


def test_three_dimensional_inputs_called_directly():
    q, k, v = (t[0] for t in qkv())
    out, lse = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        q.to("neuron"), k.to("neuron"), v.to("neuron"))[:2]
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v))
    assert lse.shape == (1, 4, 6) and lse.dtype == torch.float32
    torch.testing.assert_close(lse.cpu()[0], torch.logsumexp(q @ k.transpose(-2, -1) / math.sqrt(8), -1))


def test_other_backends_and_layouts_keep_the_cpus_choice():
    q, k, v = qkv()
    dev = [t.to("neuron") for t in (q, k, v)]
    with sdpa_kernel([SDPBackend.MATH]):
        ops.clear_op_tracking()
        out = F.scaled_dot_product_attention(*dev)
        assert FWD not in ops.get_executed_ops()  # the math path's matmuls and softmax
        assert "aten::_safe_softmax" in ops.get_executed_ops()
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v))
    with sdpa_kernel([SDPBackend.OVERRIDEABLE]):
        ops.clear_op_tracking()
        F.scaled_dot_product_attention(*dev)
        assert FWD in ops.get_executed_ops()
    q3, k3, v3 = (t[0] for t in (q, k, v))  # 3-D: TorchNeuron's choice is math; here the CPU's, as before
    ops.clear_op_tracking()
    out3 = F.scaled_dot_product_attention(q3.to("neuron"), k3.to("neuron"), v3.to("neuron"))
    assert FWD not in ops.get_executed_ops()
    torch.testing.assert_close(out3.cpu(), F.scaled_dot_product_attention(q3, k3, v3))


def test_autocast_and_inference_mode():
    q, k, v = qkv()
    dev = [t.to("neuron") for t in (q, k, v)]
    with torch.autocast("neuron", dtype=torch.bfloat16):
        out = F.scaled_dot_product_attention(*dev)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float().cpu(), F.scaled_dot_product_attention(q, k, v), rtol=3e-2, atol=3e-2)
    with torch.inference_mode():
        ops.clear_op_tracking()
        out = F.scaled_dot_product_attention(*dev, is_causal=True)
        assert ops.get_op_counts() == {FWD: {"native": 1}}
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, is_causal=True))


@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"enable_gqa": True}])
def test_compiled_matches_eager_cpu(kw):
    torch._dynamo.reset()
    q, k, v = qkv(hk=2 if kw.get("enable_gqa") else 4)

    def f(a, b, c):
        return F.scaled_dot_product_attention(a.transpose(1, 2).transpose(1, 2), b, c, **kw).sin()
    dev = [leaf(t, "neuron") for t in (q, k, v)]
    cpu = [leaf(t) for t in (q, k, v)]
    out_d = torch.compile(f, backend="neuron", fullgraph=True)(*dev)
    out_c = f(*cpu)
    torch.testing.assert_close(out_d.detach().cpu(), out_c.detach())
    out_d.sum().backward()
    out_c.sum().backward()
    for d, c in zip(dev, cpu):
        torch.testing.assert_close(d.grad.cpu(), c.grad)
    torch._dynamo.reset()


class TestErrors(TestCase):
    def test_direct_call_with_heads_that_do_not_divide(self):
        q, k, v = qkv(hq=3, hk=2)
        with self.assertRaises(RuntimeError) as cm:
            torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q.to("neuron"), k.to("neuron"),
                                                                           v.to("neuron"))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """_scaled_dot_product_fused_attention_overrideable: key and value need one head count that divides the query's (grouped-query attention), got 3 query heads and 2 key and 2 value heads""")

    def test_direct_call_with_mixed_dtypes(self):
        q, k, v = qkv()
        with self.assertRaises(RuntimeError) as cm:
            torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q.to("neuron"), k.to("neuron").half(),
                                                                           v.to("neuron"))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """_scaled_dot_product_fused_attention_overrideable: query, key and value must have one dtype, got Float, Half and Float: cast them to one dtype""")

    def test_mask_with_causal_as_the_cpu_takes_it(self):
        """The CPU's flash kernel applies both; its math kernel (here: with dropout) refuses the pair."""
        q, k, v = qkv()
        mask = torch.randn(6, 6)
        out = F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"),
                                             attn_mask=mask.to("neuron"), is_causal=True)
        torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True))
        with self.assertRaises(RuntimeError) as cm:
            F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"),
                                           attn_mask=mask.to("neuron"), is_causal=True, dropout_p=0.5)
        with self.assertRaises(RuntimeError) as cpu:
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True, dropout_p=0.5)
        self.assertEqual(str(cm.exception).splitlines()[0], str(cpu.exception).splitlines()[0])
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True""")


@pytest.mark.parametrize("dropout_p", [0.0, 0.3])
def test_math_backward_uses_the_forwards_weights_under_autograd(dropout_p):
    """Under autograd the math path returns its softmax weights and dropout noise in cum_seq_q / cum_seq_k
    (the CPU decomposition's saved tensors) for the backward; without grad it returns none. The backward
    from them equals the one that recomputes the weights and redraws the noise (what a compiled graph,
    whose forward runs without grad, gets)."""
    q, k, v = qkv(lq=5, lk=7)
    bias = torch.randn(2, 1, 5, 7)
    op = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    bwd = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward
    dq, dk, dv, db = (leaf(t, "neuron") for t in (q, k, v, bias))
    torch.neuron.manual_seed(3)
    res = op(dq, dk, dv, db, dropout_p)
    weights, noise = res[2], res[3]
    assert weights is not None and weights.shape == (2, 4, 5, 7)
    assert (noise is not None) == (dropout_p > 0)
    if dropout_p == 0:
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(8) + bias
        torch.testing.assert_close(weights.cpu(), scores.softmax(-1))
    g = torch.randn(2, 4, 5, 8).to("neuron")
    args = (g, dq.detach(), dk.detach(), dv.detach(), db.detach(), [True, True, True, True], res[0].detach(),
            res[1])
    tail = (res[4], res[5], dropout_p, False, res[6], res[7])
    kept = bwd(*args, weights, noise, *tail)
    recomputed = bwd(*args, None, None, *tail)
    for a, b in zip(kept, recomputed):
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        plain = op(dq, dk, dv, db, dropout_p)
    assert plain[2] is None and plain[3] is None
