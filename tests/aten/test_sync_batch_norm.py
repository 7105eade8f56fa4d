"""The operators of nn.SyncBatchNorm on neuron (issue 19): batch_norm_stats, batch_norm_elemt,
batch_norm_gather_stats(_with_counts), batch_norm_backward_reduce, batch_norm_backward_elemt. The CPU has
no kernel for them; each is checked against a float64 reference written from CUDA's kernels
(aten/src/ATen/native/cuda/Normalization.cuh), for its values, its dtypes (float statistics for
half / bfloat16 inputs) and its layout, and for its error paths. The two-rank DDP check is
tests/distributed/test_sync_batch_norm.py."""
import pytest
import torch
from expecttest import TestCase

import torchneuron_ext  # noqa: F401
from torchneuron_ext import ops

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-10),
       torch.float16: dict(rtol=2e-3, atol=2e-3), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}
ACC = {torch.float16: torch.float32, torch.bfloat16: torch.float32}


# ---- the reference: CUDA's per-plane math in float64 ----------------------------------------------

def per_channel(v, x):
    return v.double().view([1, -1] + [1] * (x.dim() - 2))


def dims_of(x):
    return [0] + list(range(2, x.dim()))


def ref_stats(x, eps):
    x = x.double()
    mean = x.mean(dims_of(x))
    var = (x - per_channel(mean, x)).square().mean(dims_of(x))
    invstd = torch.where((var == 0) & (eps == 0), torch.zeros_like(var), 1 / torch.sqrt(var + eps))
    return mean, invstd


def ref_elemt(x, w, b, mean, invstd):
    y = (x.double() - per_channel(mean, x)) * per_channel(invstd, x)
    if w is not None:
        y = y * per_channel(w, x)
    if b is not None:
        y = y + per_channel(b, x)
    return y


def ref_gather(mean, invstd, running_mean, running_var, momentum, eps, counts):
    """batch_norm_reduce_statistics_kernel: ranks combined one after another (Chan et al.)."""
    avg = torch.zeros(mean.shape[1], dtype=torch.float64)
    var_n = torch.zeros_like(avg)
    n = 0
    for j in range(mean.shape[0]):
        count = float(counts[j])
        m = mean[j].double()
        v = ((1 / invstd[j].double()) ** 2 - eps) * count
        factor = 1 / (n + count)
        var_n = var_n + v + (avg - m) ** 2 * n * count * factor
        avg = n * factor * avg + count * factor * m
        n += int(count)
    new_rm = new_rv = None
    if running_mean is not None:
        new_rm = (1 - momentum) * running_mean.double() + momentum * avg
        new_rv = (1 - momentum) * running_var.double() + momentum * var_n / (n - 1)
    return avg, 1 / torch.sqrt(var_n / n + eps), new_rm, new_rv


def ref_backward_reduce(dy, x, mean, invstd):
    dy = dy.double()
    sum_dy = dy.sum(dims_of(x))
    sum_dy_xmu = (dy * (x.double() - per_channel(mean, x))).sum(dims_of(x))
    return sum_dy, sum_dy_xmu, sum_dy_xmu * invstd.double(), sum_dy


def ref_backward_elemt(dy, x, mean, invstd, w, sum_dy, sum_dy_xmu, count):
    norm = 1.0 / int(count.sum())
    inv = per_channel(invstd, x)
    scale = inv * (per_channel(w, x) if w is not None else 1)
    return (dy.double() - per_channel(sum_dy, x) * norm
            - (x.double() - per_channel(mean, x)) * inv ** 2 * per_channel(sum_dy_xmu, x) * norm) * scale


def close(actual, expected, dtype):
    torch.testing.assert_close(actual.cpu().double(), expected.double(), **TOL[dtype])


def neuron(*ts):
    return [t.to("neuron") if isinstance(t, torch.Tensor) else t for t in ts]


# ---- values and dtypes -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 4, 3, 5), (2, 3, 2, 2, 3)])
def test_stats_and_elemt(dtype, shape):
    torch.manual_seed(0)
    x = (torch.randn(shape) * 3 + 1).to(dtype)
    w, b = torch.randn(shape[1]).to(dtype), torch.randn(shape[1]).to(dtype)
    mean, invstd = torch.batch_norm_stats(x.to("neuron"), 1e-5)
    acc = ACC.get(dtype, dtype)
    assert mean.device.type == "neuron" and mean.dtype == invstd.dtype == acc
    rmean, rinvstd = ref_stats(x, 1e-5)
    close(mean, rmean, acc)
    close(invstd, rinvstd, acc)
    y = torch.batch_norm_elemt(*neuron(x, w, b, mean, invstd), 1e-5)
    assert y.dtype == dtype and y.shape == x.shape
    close(y, ref_elemt(x, w, b, mean.cpu(), invstd.cpu()), dtype)
    # without affine parameters
    close(torch.batch_norm_elemt(*neuron(x, None, None, mean, invstd), 1e-5),
          ref_elemt(x, None, None, mean.cpu(), invstd.cpu()), dtype)


def test_stats_zero_variance_and_zero_eps():
    # CUDA's InvStd gives 0, not infinity, when variance and epsilon are both 0
    x = torch.ones(4, 2, 3)
    x[:, 1] = torch.arange(12.0).view(4, 3)
    mean, invstd = torch.batch_norm_stats(x.to("neuron"), 0.0)
    assert invstd[0].item() == 0
    close(invstd, ref_stats(x, 0.0)[1], torch.float32)


def test_channels_last_layout_kept():
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    mean, invstd = torch.batch_norm_stats(x.to("neuron"), 1e-5)
    y = torch.batch_norm_elemt(x.to("neuron"), None, None, mean, invstd, 1e-5)
    assert y.is_contiguous(memory_format=torch.channels_last)
    close(y, ref_elemt(x, None, None, mean.cpu(), invstd.cpu()), torch.float32)


def test_elemt_out():
    x, w, b = torch.randn(4, 3, 5), torch.randn(3), torch.randn(3)
    mean, invstd = ref_stats(x, 1e-5)
    mean, invstd = mean.float(), invstd.float()
    out = torch.empty(0, device="neuron")
    r = torch.batch_norm_elemt(*neuron(x, w, b, mean, invstd), 1e-5, out=out)
    assert r is out and out.shape == x.shape
    close(out, ref_elemt(x, w, b, mean, invstd), torch.float32)


@pytest.mark.parametrize("running", [True, False])
@pytest.mark.parametrize("counts", [[12.0, 12.0], [5.0, 20.0, 7.0], [9.0]])
def test_gather_stats_with_counts(running, counts):
    torch.manual_seed(1)
    world, c = len(counts), 4
    xs = [torch.randn(int(n), c) * (j + 1) + j for j, n in enumerate(counts)]
    stats = [ref_stats(x, 1e-5) for x in xs]
    mean_all = torch.stack([s[0] for s in stats]).float()
    invstd_all = torch.stack([s[1] for s in stats]).float()
    rm, rv = (torch.randn(c), torch.rand(c) + 0.5) if running else (None, None)
    rm_d, rv_d = (rm.to("neuron"), rv.to("neuron")) if running else (None, None)
    mean, invstd = torch.batch_norm_gather_stats_with_counts(
        torch.empty(1, c, device="neuron"), mean_all.to("neuron"), invstd_all.to("neuron"), rm_d, rv_d, 0.1, 1e-5,
        torch.tensor(counts, device="neuron"))
    emean, einvstd, erm, erv = ref_gather(mean_all, invstd_all, rm, rv, 0.1, 1e-5, counts)
    close(mean, emean, torch.float32)
    close(invstd, einvstd, torch.float32)
    # the combination is the statistics of all ranks' data together
    close(mean, torch.cat(xs).double().mean(0), torch.float32)
    if running:
        close(rm_d, erm, torch.float32)
        close(rv_d, erv, torch.float32)
    # one count for every rank
    if len(set(counts)) == 1:
        m2, s2 = torch.batch_norm_gather_stats(torch.empty(1, c, device="neuron"), mean_all.to("neuron"),
                                               invstd_all.to("neuron"), None, None, 0.1, 1e-5, int(counts[0]))
        close(m2, emean, torch.float32)
        close(s2, einvstd, torch.float32)


def test_gather_stats_half_running_stats():
    # half running statistics (a half model): statistics in float, running stats stay half
    mean_all, invstd_all = torch.randn(2, 3), torch.rand(2, 3) + 0.5
    rm, rv = torch.zeros(3, dtype=torch.half), torch.ones(3, dtype=torch.half)
    rm_d, rv_d = rm.to("neuron"), rv.to("neuron")
    mean, invstd = torch.batch_norm_gather_stats_with_counts(
        torch.empty(1, 3, device="neuron", dtype=torch.half), *neuron(mean_all, invstd_all), rm_d, rv_d, 0.1, 1e-5,
        torch.tensor([4.0, 6.0], dtype=torch.half, device="neuron"))
    assert mean.dtype == torch.float32 and rm_d.dtype == torch.half
    emean, einvstd, erm, erv = ref_gather(mean_all, invstd_all, rm, rv, 0.1, 1e-5, [4, 6])
    close(mean, emean, torch.float32)
    close(rm_d, erm, torch.float16)
    close(rv_d, erv, torch.float16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("affine", [True, False])
def test_backward_reduce_and_elemt(dtype, affine):
    torch.manual_seed(2)
    x = torch.randn(4, 3, 6).to(dtype)
    dy = torch.randn(4, 3, 6).to(dtype)
    w = torch.randn(3).to(dtype) if affine else None
    mean, invstd = (t.to(ACC.get(dtype, dtype)) for t in ref_stats(x, 1e-5))
    sum_dy, sum_dy_xmu, gw, gb = torch.batch_norm_backward_reduce(*neuron(dy, x, mean, invstd, w), True, affine,
                                                                  affine)
    e = ref_backward_reduce(dy, x, mean, invstd)
    acc = ACC.get(dtype, dtype)
    assert sum_dy.dtype == sum_dy_xmu.dtype == acc
    close(sum_dy, e[0], acc)
    close(sum_dy_xmu, e[1], acc)
    if affine:
        assert gw.dtype == gb.dtype == dtype
        close(gw, e[2], dtype)
        close(gb, e[3], dtype)
    else:
        assert gw is None and gb is None
    # two ranks of 4 samples each: the per-channel count is 2 * 4 * 6
    count = torch.tensor([24, 24], dtype=torch.int32)
    w_acc = w.to(acc) if affine else None
    gi = torch.batch_norm_backward_elemt(*neuron(dy, x, mean, invstd, w_acc, sum_dy, sum_dy_xmu, count))
    assert gi.dtype == dtype and gi.shape == x.shape
    close(gi, ref_backward_elemt(dy, x, mean, invstd, w, sum_dy.cpu(), sum_dy_xmu.cpu(), count), dtype)


def test_backward_reduce_flags():
    x, dy = torch.randn(4, 3, 2), torch.randn(4, 3, 2)
    mean, invstd = (t.float() for t in ref_stats(x, 1e-5))
    w = torch.randn(3)
    r = torch.batch_norm_backward_reduce(*neuron(dy, x, mean, invstd, w), False, True, False)
    assert r[0] is None and r[1] is None and r[3] is None
    close(r[2], ref_backward_reduce(dy, x, mean, invstd)[2], torch.float32)


def test_backward_reduce_out_form():
    # the generated out= form reaches neuron's functional kernel (host_kernel_routing.cpp)
    x, dy = torch.randn(4, 3, 2), torch.randn(4, 3, 2)
    mean, invstd = (t.float() for t in ref_stats(x, 1e-5))
    outs = [torch.empty(3, device="neuron") for _ in range(4)]
    torch.ops.aten.batch_norm_backward_reduce.out(*neuron(dy, x, mean, invstd, torch.ones(3)), True, True, True,
                                                  out0=outs[0], out1=outs[1], out2=outs[2], out3=outs[3])
    e = ref_backward_reduce(dy, x, mean, invstd)
    for o, r in zip(outs, e):
        close(o, r, torch.float32)


def test_ops_are_recorded():
    ops.clear_op_tracking()
    x = torch.randn(4, 3, device="neuron")
    mean, invstd = torch.batch_norm_stats(x, 1e-5)
    torch.batch_norm_elemt(x, None, None, mean, invstd, 1e-5)
    executed = ops.get_executed_ops()
    assert "aten::batch_norm_stats" in executed and "aten::batch_norm_elemt" in executed
    assert "aten::batch_norm_stats" not in ops.get_fallback_ops()


# ---- error paths -------------------------------------------------------------------------------

class TestErrors(TestCase):
    def test_integer_input(self):
        with self.assertRaises(NotImplementedError) as cm:
            torch.batch_norm_stats(torch.ones(2, 3, dtype=torch.long, device="neuron"), 1e-5)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """"batch_norm_stats" not implemented for 'Long'""")

    def test_one_dimensional_input(self):
        with self.assertRaises(RuntimeError) as cm:
            torch.batch_norm_stats(torch.ones(5, device="neuron"), 1e-5)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """batch_norm_stats: expected an input of shape (N, C, ...) with at least 2 dimensions, got 1 (shape [5])""")

    def test_wrong_channel_count(self):
        x = torch.randn(4, 3, device="neuron")
        with self.assertRaises(RuntimeError) as cm:
            torch.batch_norm_elemt(x, None, None, torch.zeros(2, device="neuron"), torch.ones(3, device="neuron"), 1e-5)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """batch_norm_elemt: expected mean to hold one value per channel (shape [3]), got shape [2]""")

    def test_mixed_stat_dtypes(self):
        x = torch.randn(4, 3, device="neuron")
        with self.assertRaises(RuntimeError) as cm:
            torch.batch_norm_backward_reduce(x, x, torch.zeros(3, device="neuron"),
                                             torch.ones(3, dtype=torch.double, device="neuron"), None, True, False,
                                             False)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mean and invstd need to have the same data types""")

    def test_counts_per_rank(self):
        with self.assertRaises(RuntimeError) as cm:
            torch.batch_norm_gather_stats_with_counts(
                torch.empty(1, 3, device="neuron"), torch.zeros(2, 3, device="neuron"),
                torch.ones(2, 3, device="neuron"), None, None, 0.1, 1e-5, torch.ones(3, device="neuron"))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """batch_norm_gather_stats_with_counts: expected counts to hold one count per rank (shape [2]), got shape [3]""")

    def test_float_count(self):
        x = torch.randn(4, 3, device="neuron")
        s = torch.zeros(3, device="neuron")
        with self.assertRaises(RuntimeError) as cm:
            torch.batch_norm_backward_elemt(x, x, s, s + 1, None, s, s, torch.tensor([4.0], device="neuron"))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """batch_norm_backward_elemt: expected count to be an integer tensor of per-rank element counts (SyncBatchNorm passes int32), got Float""")

    def test_cpu_statistics(self):
        x = torch.randn(4, 3, device="neuron")
        with self.assertRaises(RuntimeError) as cm:
            torch.batch_norm_elemt(x, None, None, torch.zeros(3), torch.ones(3), 1e-5)
        self.assertIn("Expected all tensors to be on the same device", str(cm.exception))
