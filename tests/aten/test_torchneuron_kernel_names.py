"""Operators TorchNeuron runs as kernels of its own where PyTorch decomposes them (issue 19; its suite asserts
them with get_executed_ops()): index_select_backward and value_selecting_reduction_backward are one device
kernel each (csrc/aten/native_fused.cpp), with autograd through them (double backward, forward AD) as on the
CPU; torch.arange runs as PyTorch's composite down to aten::arange.start_out; tril_ / triu_ write through
tril.out / triu.out; the out= factories zeros / ones / full are recorded under their names
(csrc/aten/tracked_composites.cpp). Every result is the CPU's."""
from typing import Callable

import pytest
import torch
from torch.autograd import forward_ad

import torchneuron_ext
from torchneuron_ext import ops

DEV = "neuron"


def executed_during(fn):
    ops.clear_op_tracking()
    result = fn()
    return result, torchneuron_ext.get_executed_ops()


def assert_double_backward_matches_cpu(kernel: str, shape: tuple[int, ...],
                                       select: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """In float64, x's gradient of (select(x) ** 3).sum() and the gradient of that gradient's squared sum are
    the CPU's on neuron, where `kernel` ran, and the second one is not all zeros."""
    def grads(device):
        torch.manual_seed(0)
        x = torch.randn(shape, dtype=torch.float64).to(device).requires_grad_()
        (gx,) = torch.autograd.grad((select(x) ** 3).sum(), x, create_graph=True)
        (ggx,) = torch.autograd.grad((gx ** 2).sum(), x)
        return gx.detach().cpu(), ggx.cpu()

    (g_cpu, gg_cpu), ((g_dev, gg_dev), executed) = grads("cpu"), executed_during(lambda: grads(DEV))
    assert kernel in executed
    torch.testing.assert_close(g_dev, g_cpu)
    torch.testing.assert_close(gg_dev, gg_cpu)
    assert gg_dev.abs().sum() > 0


# ----------------------------------------------------------------------------- index_select_backward


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("sizes,dim,index", [((10, 5), 0, [0, 2, 4]), ((8, 6, 4), -2, [1, 4, 1]),
                                             ((4, 8, 6, 3), 3, [0, 2]), ((3, 4), 0, [])])
def test_index_select_backward_is_one_kernel_with_the_cpus_result(dtype, sizes, dim, index):
    torch.manual_seed(0)
    gshape = list(sizes)
    gshape[dim] = len(index)
    grad, idx = torch.randn(gshape, dtype=dtype), torch.tensor(index, dtype=torch.long)
    got, executed = executed_during(
        lambda: torch.ops.aten.index_select_backward(grad.to(DEV), sizes, dim, idx.to(DEV)))
    assert "aten::index_select_backward" in executed
    assert "aten::index_add_" not in executed and "aten::zeros" not in executed  # the kernel's internals
    expected = torch.ops.aten.index_select_backward(grad, sizes, dim, idx)
    assert got.device.type == DEV and got.dtype == expected.dtype and got.stride() == expected.stride()
    assert torch.equal(got.cpu(), expected)


def test_index_select_backward_errors_are_the_cpus():
    grad = torch.randn(4, 4)
    idx = torch.ones(2, 2, dtype=torch.long)
    with pytest.raises(IndexError) as cpu:
        torch.ops.aten.index_select_backward(grad, (3, 4), 0, idx)
    with pytest.raises(IndexError) as dev:
        torch.ops.aten.index_select_backward(grad.to(DEV), (3, 4), 0, idx.to(DEV))
    assert str(dev.value) == str(cpu.value)


def test_index_select_double_backward_matches_cpu():
    assert_double_backward_matches_cpu("aten::index_select_backward", (6, 4),
                                       lambda x: x.index_select(0, torch.tensor([0, 3, 3, 5]).to(x.device)))


def test_index_select_gradgradcheck():
    x = torch.randn(5, 3, dtype=torch.float64, device=DEV, requires_grad=True)
    idx = torch.tensor([4, 0, 4], device=DEV)
    assert torch.autograd.gradgradcheck(lambda t: t.index_select(0, idx) ** 2, (x,))


def test_index_select_backward_forward_ad_matches_cpu():
    def run(device):
        g, t = torch.randn(2, 4, generator=torch.Generator().manual_seed(1)), torch.ones(2, 4)
        with forward_ad.dual_level():
            dual = forward_ad.make_dual(g.to(device), t.to(device))
            out = torch.ops.aten.index_select_backward(dual, (5, 4), 0, torch.tensor([1, 3], device=device))
            primal, tangent = forward_ad.unpack_dual(out)
        return primal.cpu(), tangent.cpu()

    for a, b in zip(run(DEV), run("cpu")):
        assert torch.equal(a, b)


# ----------------------------------------------------------------------------- value_selecting_reduction_backward

REDUCTIONS = {
    "max": lambda x, dim, keepdim: torch.max(x, dim, keepdim)[0],
    "min": lambda x, dim, keepdim: torch.min(x, dim, keepdim)[0],
    "median": lambda x, dim, keepdim: torch.median(x, dim, keepdim)[0],
    "kthvalue": lambda x, dim, keepdim: torch.kthvalue(x, 2, dim, keepdim)[0],
    "mode": lambda x, dim, keepdim: torch.mode(x, dim, keepdim)[0],
}


@pytest.mark.parametrize("keepdim", [True, False])
@pytest.mark.parametrize("dim", [0, 2, -1])
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_value_selecting_backward_is_one_kernel_with_the_cpus_gradient(name, dim, keepdim):
    torch.manual_seed(0)
    x = torch.randn(3, 4, 5)
    xc, xd = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    yc = REDUCTIONS[name](xc, dim, keepdim)
    g = torch.randn(yc.shape)
    yc.backward(g)
    _, executed = executed_during(lambda: REDUCTIONS[name](xd, dim, keepdim).backward(g.to(DEV)))
    assert "aten::value_selecting_reduction_backward" in executed
    assert "aten::scatter_.src" not in executed  # the kernel's internals
    assert torch.equal(xd.grad.cpu(), xc.grad)


def test_value_selecting_backward_direct_call_matches_cpu():
    grad, idx = torch.randn(3, 5), torch.randint(0, 4, (3, 5))
    got = torch.ops.aten.value_selecting_reduction_backward(grad.to(DEV), 1, idx.to(DEV), (3, 4, 5), False)
    assert torch.equal(got.cpu(), torch.ops.aten.value_selecting_reduction_backward(grad, 1, idx, (3, 4, 5), False))


def test_max_dim_double_backward_matches_cpu():
    assert_double_backward_matches_cpu("aten::value_selecting_reduction_backward", (4, 6), lambda x: x.max(1)[0])


def test_max_dim_gradgradcheck():
    x = torch.randn(4, 5, dtype=torch.float64, device=DEV, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda t: t.max(0).values ** 2, (x,))


def test_backward_kernels_in_inference_and_compiled_graphs():
    with torch.inference_mode():
        got = torch.ops.aten.index_select_backward(torch.ones(2, 3, device=DEV), (4, 3), 0,
                                                   torch.tensor([1, 1], device=DEV))
    assert torch.equal(got.cpu(), torch.ops.aten.index_select_backward(torch.ones(2, 3), (4, 3), 0,
                                                                       torch.tensor([1, 1])))

    def f(x, idx):
        return (x.index_select(0, idx).max(1).values ** 2).sum()

    torch.manual_seed(0)
    x, idx = torch.randn(6, 5), torch.tensor([5, 0, 2])
    xc, xd = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    f(xc, idx).backward()
    torch.compile(f, backend="neuron")(xd, idx.to(DEV)).backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)


# ----------------------------------------------------------------------------- arange, tril_ / triu_, out= factories

ARANGES = [
    lambda d: torch.arange(0, 5, 1, dtype=torch.float32, device=d),
    lambda d: torch.arange(5, device=d),
    lambda d: torch.arange(2, 11, device=d, dtype=torch.int32),
    lambda d: torch.arange(10, 0, -3, device=d),
    lambda d: torch.arange(0.0, 1.0, 0.15, device=d, dtype=torch.float64),
    lambda d: torch.arange(3, 3, device=d),
    lambda d: torch.arange(0, 4, device=d, dtype=torch.float16, requires_grad=True),
]


@pytest.mark.parametrize("i", range(len(ARANGES)))
def test_arange_runs_as_arange_start_out(i):
    got, executed = executed_during(lambda: ARANGES[i](DEV))
    assert "aten::arange.start_out" in executed, executed
    expected = ARANGES[i]("cpu")
    assert got.dtype == expected.dtype and got.requires_grad == expected.requires_grad
    assert torch.equal(got.detach().cpu(), expected.detach())


def test_arange_errors_are_the_cpus():
    for args in [(0, 5, 0), (5, 0, 1)]:
        with pytest.raises(RuntimeError) as cpu:
            torch.arange(*args)
        with pytest.raises(RuntimeError) as dev:
            torch.arange(*args, device=DEV)
        assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("op", ["tril", "triu"])
@pytest.mark.parametrize("diagonal", [0, 1, -2])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "batched"])
def test_inplace_triangle_writes_through_the_out_kernel(op, diagonal, layout):
    torch.manual_seed(0)
    data, view = {"contiguous": (torch.randn(4, 5), lambda t: t),
                  "transposed": (torch.randn(5, 4), lambda t: t.t()),
                  "batched": (torch.randn(2, 3, 4, 5), lambda t: t[:, 1])}[layout]  # a non-contiguous batch
    base, dev = view(data.clone()), view(data.to(DEV))
    assert dev.stride() == base.stride()
    r, executed = executed_during(lambda: getattr(dev, op + "_")(diagonal))
    assert r is dev
    assert f"aten::{op}.out" in executed, executed
    expected = getattr(base.clone(), op + "_")(diagonal)
    assert torch.equal(dev.cpu(), expected)


def test_inplace_triangle_autograd_and_errors():
    x = torch.randn(3, 3, requires_grad=True)
    xd = x.detach().to(DEV).requires_grad_()
    (x * 2).tril_().sum().backward()
    (xd * 2).tril_().sum().backward()
    assert torch.equal(xd.grad.cpu(), x.grad)
    with pytest.raises(RuntimeError) as cpu:
        torch.ones(3).triu_()
    with pytest.raises(RuntimeError) as dev:
        torch.ones(3, device=DEV).triu_()
    assert str(dev.value) == str(cpu.value)


OUT_FACTORIES = {
    "aten::zeros.out": lambda out: torch.zeros((2, 3), out=out),
    "aten::ones.out": lambda out: torch.ones((2, 3), out=out),
    "aten::full.out": lambda out: torch.full((2, 3), 5.0, out=out),
}


@pytest.mark.parametrize("op", list(OUT_FACTORIES))
@pytest.mark.parametrize("start", [(1,), (2, 3), (0,)])
def test_out_factories_are_recorded_and_resize_out(op, start):
    out = torch.empty(start, device=DEV)
    r, executed = executed_during(lambda: OUT_FACTORIES[op](out))
    assert r is out and out.shape == (2, 3)
    assert op in executed, executed
    assert torch.equal(out.cpu(), OUT_FACTORIES[op](torch.empty(start)))


TO_COPIES = {
    "cpu_to_neuron": (lambda x: x, lambda x: x.to(DEV)),
    "cpu_to_neuron_bf16": (lambda x: x, lambda x: x.to(DEV, torch.bfloat16, non_blocking=True)),
    "neuron_cast": (lambda x: x.to(DEV), lambda x: x.to(torch.float16)),
    "neuron_channels_last": (lambda x: x.to(DEV), lambda x: x.to(memory_format=torch.channels_last)),
    "neuron_to_neuron1": (lambda x: x.to(DEV), lambda x: x.to("neuron:1")),
}


@pytest.mark.parametrize("case", list(TO_COPIES))
def test_to_copy_onto_neuron_is_recorded(case):
    if case == "neuron_to_neuron1" and torch.neuron.device_count() < 2:
        pytest.skip("one core")
    src, move = TO_COPIES[case]
    x = src(torch.randn(2, 3, 4, 5))
    r, executed = executed_during(lambda: move(x))
    assert "aten::_to_copy" in executed and "aten::copy_" in executed, executed
    assert r.device.type == DEV
    expected = move(x.cpu()) if case != "cpu_to_neuron" else x
    expected = expected.cpu() if expected.device.type != "cpu" else expected
    assert r.dtype == expected.dtype and r.stride() == expected.stride()
    assert torch.equal(r.cpu(), expected)


def test_to_copy_off_the_device_is_not_recorded_and_keeps_autograd():
    x = torch.randn(3, 4, device=DEV, requires_grad=True)
    r, executed = executed_during(lambda: x.to("cpu", torch.float64))
    assert "aten::_to_copy" not in executed and r.device.type == "cpu" and r.dtype == torch.float64
    (r * 2).sum().backward()
    assert torch.equal(x.grad.cpu(), torch.full((3, 4), 2.0))
