"""Inputs CUDA's kernels accept and the CPU kernels refuse: on neuron they work as on CUDA, because
libraries branch on "is this the CPU?" and give neuron the CUDA path."""
import pytest
import torch


def cuda_histc(values: list[int], bins: int, lo: int, hi: int) -> list[int]:
    """CUDA's integer histc, in Python integers: bounds from the data when equal, widened when
    still equal, bin = (x - lo) * bins // (hi - lo), the top edge in the last bin."""
    if lo == hi and values:
        lo, hi = min(values), max(values)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    counts = [0] * bins
    for x in values:
        if lo <= x <= hi:
            counts[min((x - lo) * bins // (hi - lo), bins - 1)] += 1
    return counts


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8])
@pytest.mark.parametrize("bins,lo,hi", [(4, 0, 3), (8, 0, 3), (3, 1, 7), (5, 0, 0), (2, 6, 6), (7, -3, 9)])
def test_integer_histc_counts_as_cuda(dtype, bins, lo, hi):
    values = [0, 3, 3, 1, 2, 2, 2, 7, 9, 5, 0, 1]
    if dtype.is_signed:
        values += [-3, -1]
    t = torch.tensor(values, dtype=dtype, device="neuron").view(2, -1)  # any shape: counted flat
    if dtype == torch.uint8 and lo < 0:
        pytest.skip("a negative bound is not a uint8")
    out = torch.histc(t, bins=bins, min=lo, max=hi)
    assert out.device.type == "neuron" and out.dtype == dtype and out.shape == (bins,)
    assert out.cpu().tolist() == cuda_histc(values, bins, lo, hi)


def test_moe_routing_counts_tokens_per_expert():
    """Hugging Face's mixture-of-experts layers count routed tokens per expert this way."""
    experts = 6
    ids = torch.randint(0, experts, (32, 2), generator=torch.Generator().manual_seed(0)).int()
    counts = torch.histc(ids.to("neuron"), bins=experts, min=0, max=experts - 1)
    assert counts.cpu().tolist() == torch.bincount(ids.flatten(), minlength=experts).int().tolist()


def test_integer_histc_edge_cases():
    empty = torch.histc(torch.tensor([], dtype=torch.int32, device="neuron"), bins=3)
    assert empty.cpu().tolist() == [0, 0, 0]
    same = torch.histc(torch.full((5,), 4, dtype=torch.int64, device="neuron"), bins=2)
    assert same.cpu().tolist() == cuda_histc([4] * 5, 2, 0, 0) == [0, 5]
    # Float bounds are cast to the input's type, as CUDA does.
    t = torch.tensor([0, 1, 2, 3], dtype=torch.int32, device="neuron")
    assert torch.histc(t, bins=2, min=0.7, max=3.9).cpu().tolist() == cuda_histc([0, 1, 2, 3], 2, 0, 3)


def test_integer_histc_of_strided_inputs():
    """The counting pass reads any layout: a transposed view, a strided slice and a broadcast column count
    their own elements."""
    g = torch.Generator().manual_seed(3)
    base = torch.randint(-2, 12, (24, 10), generator=g, dtype=torch.int32)
    for view in (lambda t: t.t(), lambda t: t[::3, 1::2], lambda t: t[:, :1].expand(24, 4)):
        dev = view(base.to("neuron"))
        assert not dev.is_contiguous()
        out = torch.histc(dev, bins=5, min=0, max=9)
        assert out.cpu().tolist() == cuda_histc(view(base).flatten().tolist(), 5, 0, 9)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_histc_matches_bincount_for_routing_sizes(dtype):
    """Expert ids with one bin per expert: the counts are bincount's, whatever the sizes (out-of-range ids,
    as expert parallelism's sentinels, are left out)."""
    g = torch.Generator().manual_seed(4)
    for experts, tokens in ((4, 512), (8, 4096), (64, 1000), (3, 1)):
        ids = torch.randint(0, experts + 2, (tokens,), generator=g).to(dtype)
        counts = torch.histc(ids.to("neuron"), bins=experts, min=0, max=experts - 1)
        expect = torch.bincount(ids[ids < experts], minlength=experts).to(dtype)
        assert counts.dtype == dtype and torch.equal(counts.cpu(), expect)


def test_float_histc_as_cpu():
    x = torch.randn(300, generator=torch.Generator().manual_seed(5)).mul_(3)
    for bins, lo, hi in ((10, -2.0, 2.0), (7, 0.0, 0.0), (1, -9.0, 9.0)):
        out = torch.histc(x.to("neuron"), bins=bins, min=lo, max=hi)
        assert out.dtype == torch.float32 and torch.equal(out.cpu(), torch.histc(x, bins=bins, min=lo, max=hi))


def test_histc_refuses_bad_arguments():
    t = torch.tensor([1, 2, 3], dtype=torch.int32, device="neuron")
    with pytest.raises(RuntimeError, match="bins must be > 0, but got 0"):
        torch.histc(t, bins=0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(t, bins=3, min=5, max=1)


def test_integer_histc_out():
    t = torch.tensor([1, 2, 2, 5], dtype=torch.int32, device="neuron")
    out = torch.empty(0, dtype=torch.int32, device="neuron")
    r = torch.histc(t, bins=5, min=1, max=5, out=out)
    assert r is out
    assert out.cpu().tolist() == cuda_histc([1, 2, 2, 5], 5, 1, 5)
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.histc(t, bins=5, out=torch.empty(5, device="neuron"))
    with pytest.raises(RuntimeError, match="device"):
        torch.histc(t, bins=5, out=torch.empty(5, dtype=torch.int32))


def test_integer_histc_errors_leave_the_process_usable():
    t = torch.tensor([1, 2], dtype=torch.int32, device="neuron")
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(t, bins=0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(t, bins=2, min=3, max=1)
    assert torch.histc(t, bins=2).cpu().tolist() == [1, 1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_floating_histc_is_the_cpu_kernel(dtype):
    x = torch.randn(1000, generator=torch.Generator().manual_seed(0)).to(dtype)
    for kwargs in ({"bins": 10}, {"bins": 7, "min": -1, "max": 1}):
        torch.testing.assert_close(torch.histc(x.to("neuron"), **kwargs).cpu(), torch.histc(x, **kwargs),
                                   rtol=0, atol=0)


# ---- Half / BFloat16 kernels CUDA has and the CPU lacks (OpInfo dtypesIfCUDA minus dtypes) ----------
import torch.nn.functional as F  # noqa: E402

REDUCED = [torch.bfloat16, torch.float16]


def _reduced_cases():
    g = torch.Generator().manual_seed(0)
    video = torch.randn(2, 3, 4, 6, 6, generator=g)
    image = torch.randn(2, 3, 9, 9, generator=g)
    scores = torch.randn(4, 5, generator=g)
    target = torch.tensor([0, 3, 1, 4])
    multilabel = torch.tensor([[0, 3, -1, 0, 0], [1, -1, 0, 0, 0], [4, 2, 1, -1, 0], [2, -1, 0, 0, 0]])
    return {
        "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, stride=1, padding=1, count_include_pad=False), video),
        "interpolate_bilinear_antialias": (
            lambda x: F.interpolate(x, size=(4, 5), mode="bilinear", antialias=True), image),
        "multi_margin_loss": (lambda x: F.multi_margin_loss(x, target.to(x.device)), scores),
        "multilabel_margin_loss": (lambda x: F.multilabel_margin_loss(x, multilabel.to(x.device)), scores),
    }


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
@pytest.mark.parametrize("name", list(_reduced_cases()))
def test_reduced_precision_kernels_cuda_has(name, dtype):
    """As CUDA: computed in float32, rounded once to the input's dtype; the CPU raises "not
    implemented for 'BFloat16'"; forward and backward on neuron match float32 on CPU, rounded."""
    fn, x = _reduced_cases()[name]
    with pytest.raises(RuntimeError, match="not implemented for"):
        fn(x.to(dtype))
    xr = x.to(dtype)
    ref_in = xr.float().requires_grad_()
    ref = fn(ref_in)
    ref.sum().backward()
    dev_in = xr.to("neuron").requires_grad_()
    out = fn(dev_in)
    assert out.dtype == dtype and out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), ref.detach().to(dtype), rtol=0, atol=0)
    out.sum().backward()
    assert dev_in.grad.dtype == dtype
    torch.testing.assert_close(dev_in.grad.cpu().float(), ref_in.grad, rtol=1e-2, atol=1e-2)
    # float32 is the CPU kernel itself
    torch.testing.assert_close(fn(x.to("neuron")).cpu(), fn(x))
