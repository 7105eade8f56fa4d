"""Op tracking names the operator the user called (issue 19): allocation, resize and copy kernels of
the device itself (aten::empty, resize_, _copy_from_and_resize, set_, _has_compatible_shallow_copy_type)
and factories / composites that run PyTorch's composite kernel (aten::ones, zeros, full, clone, copy_,
*_like, new_*) are recorded, as TorchNeuron's get_executed_ops() records them, and so are a few
CompositeImplicit ops that decompose above the backend (linear, pad, cross_entropy_loss, isfinite, one_hot),
in training, no_grad and inference mode, with autograd through their parts unchanged; their results are the
CPU's. Views are deliberately not recorded (metadata only), nor ops traced by torch.compile."""
import pytest
import torch

import torchneuron_ext
from torchneuron_ext import ops

DEV = "neuron"


def executed_during(fn):
    ops.clear_op_tracking()
    result = fn()
    return result, torchneuron_ext.get_executed_ops()


CASES = {
    "aten::ones": lambda d: torch.ones(2, 3, device=d),
    "aten::zeros": lambda d: torch.zeros(2, 3, device=d, dtype=torch.int32),
    "aten::full": lambda d: torch.full((2, 3), 7.5, device=d),
    "aten::scalar_tensor": lambda d: torch.scalar_tensor(3, device=d),
    "aten::empty_like": lambda d: torch.empty_like(torch.ones(2, 3, device=d)).fill_(1),
    "aten::ones_like": lambda d: torch.ones_like(torch.zeros(2, 3, device=d), dtype=torch.float64),
    "aten::zeros_like": lambda d: torch.zeros_like(torch.ones(4, device=d)),
    "aten::full_like": lambda d: torch.full_like(torch.ones(4, device=d), 2),
    "aten::new_empty": lambda d: torch.ones(2, device=d).new_empty((3, 4)).fill_(0),
    "aten::new_zeros": lambda d: torch.ones(2, device=d).new_zeros((3,)),
    "aten::new_ones": lambda d: torch.ones(2, device=d).new_ones((3,), dtype=torch.int64),
    "aten::new_full": lambda d: torch.ones(2, device=d).new_full((3,), 4.0),
    "aten::clone": lambda d: torch.arange(6.0, device=d).view(2, 3).t().clone(),
    "aten::copy_": lambda d: torch.zeros(2, 3, device=d).copy_(torch.arange(6.0).view(2, 3)),
    "aten::empty.memory_format": lambda d: torch.empty(3, device=d).fill_(2),
    "aten::empty_strided": lambda d: torch.empty_strided((2, 2), (1, 2), device=d).fill_(1),
    "aten::resize_": lambda d: torch.arange(4.0, device=d).resize_(2, 2),
    "aten::set_": lambda d: torch.empty(0, device=d).set_(torch.arange(3.0, device=d)),
}


@pytest.mark.parametrize("op", list(CASES))
def test_recorded_under_the_called_name_and_matches_cpu(op):
    result, executed = executed_during(lambda: CASES[op](DEV))
    assert op in executed, executed
    expected = CASES[op]("cpu")
    assert result.dtype == expected.dtype and result.shape == expected.shape
    assert result.stride() == expected.stride()
    torch.testing.assert_close(result.cpu(), expected)


def test_copy_from_and_resize_is_recorded():
    src = torch.randn(4, 5)
    dst = torch.empty(0, device=DEV)
    r, executed = executed_during(lambda: torch._copy_from_and_resize(src, dst))
    assert r is dst and dst.shape == (4, 5)
    torch.testing.assert_close(dst.cpu(), src)
    # it resizes dst (the device's resize_) and copies (_copy_from)
    assert {"aten::_copy_from_and_resize", "aten::resize_", "aten::_copy_from"} <= set(executed), executed


def test_has_compatible_shallow_copy_type_is_recorded():
    _, executed = executed_during(lambda: torch.nn.Linear(2, 2).to(DEV))
    assert "aten::_has_compatible_shallow_copy_type" in executed


def test_a_like_factory_asked_for_the_cpu_is_not_recorded_as_neuron():
    x = torch.ones(3, device=DEV)
    r, executed = executed_during(lambda: torch.zeros_like(x, device="cpu"))
    assert r.device.type == "cpu"
    assert "aten::zeros_like" not in executed


def test_cpu_factories_are_not_recorded():
    _, executed = executed_during(lambda: (torch.ones(3), torch.zeros(2).clone()))
    assert executed == []


def test_views_are_not_recorded():
    x = torch.ones(4, 4, device=DEV)
    _, executed = executed_during(lambda: (x.view(16), x.t(), x[1:]))
    assert executed == []


def test_clone_keeps_autograd_and_memory_format():
    x = torch.randn(2, 3, 4, 5, device=DEV).requires_grad_()
    y = x.clone(memory_format=torch.channels_last)
    assert y.is_contiguous(memory_format=torch.channels_last)
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.ones(2, 3, 4, 5))


def test_factory_errors_are_the_cpus():
    with pytest.raises(RuntimeError, match="negative dimension -1") as dev:
        torch.ones(-1, device=DEV)
    with pytest.raises(RuntimeError) as cpu:
        torch.ones(-1)
    assert str(dev.value) == str(cpu.value)


IMPLICIT = {
    "aten::linear": lambda x, t: torch.nn.functional.linear(x, torch.ones(3, 4, device=x.device), t.float()[:3]),
    "aten::pad": lambda x, t: torch.nn.functional.pad(x, (1, 2), mode="constant", value=0.5),
    "aten::cross_entropy_loss": lambda x, t: torch.nn.functional.cross_entropy(x, t, label_smoothing=0.1),
    "aten::isfinite": lambda x, t: torch.isfinite(x / 0),
    "aten::one_hot": lambda x, t: torch.nn.functional.one_hot(t, 4),
}


@pytest.mark.parametrize("mode", ["grad", "no_grad", "inference"])
@pytest.mark.parametrize("op", list(IMPLICIT))
def test_composite_implicit_recorded_and_matches_cpu(op, mode):
    torch.manual_seed(0)
    x, t = torch.randn(5, 4), torch.tensor([0, 3, 1, 2, 1])
    ctx = {"grad": torch.enable_grad, "no_grad": torch.no_grad, "inference": torch.inference_mode}[mode]
    with ctx():
        xd = x.to(DEV).requires_grad_(mode == "grad")
        r, executed = executed_during(lambda: IMPLICIT[op](xd, t.to(DEV)))
        expected = IMPLICIT[op](x.clone().requires_grad_(mode == "grad"), t)
    assert op in executed, executed
    torch.testing.assert_close(r.detach().cpu(), expected.detach())
    if mode == "grad" and r.requires_grad:
        # autograd through the decomposition, as on the CPU
        r.float().sum().backward()
        xc = x.clone().requires_grad_()
        IMPLICIT[op](xc, t).float().sum().backward()
        torch.testing.assert_close(xd.grad.cpu(), xc.grad)


def test_compiled_tracing_is_not_recorded_as_a_run():
    lin = torch.nn.Linear(4, 3).to(DEV)
    f = torch.compile(lin, backend="neuron")
    x = torch.randn(2, 4, device=DEV)
    ops.clear_op_tracking()
    out = f(x)
    assert "aten::linear" not in torchneuron_ext.get_executed_ops()
    torch.testing.assert_close(out.cpu(), lin(x).detach().cpu())
