"""torch.compile on neuron: the "neuron" backend's forward and backward, and plain torch.compile
(Inductor's default backend) on a neuron model, each against the same model in CPU eager.

Inductor fuses and reorders reductions, so results agree to float32 rounding of the reordering,
as Inductor's own CPU tests accept.
"""
import torch

from .conftest import (COMPILED_TRAINING, PLAIN_COMPILE, assert_outputs_close, compile_or_skip, cpu_reference,
                       family, fresh)
from .zoo import on_neuron

TOL = dict(rtol=1e-4, atol=1e-4)


def test_compiled_training_step_matches_cpu(name):
    """One compile serves forward and backward (grad mode on): outputs, loss and every gradient."""
    compile_or_skip(name, COMPILED_TRAINING)
    f = family(name)
    cpu_model = fresh(name)
    expected = cpu_reference(lambda: cpu_model(**f.batch("cpu")), f"{name} forward", name)
    expected.loss.backward()

    torch._dynamo.reset()
    model = on_neuron(fresh(name))
    actual = torch.compile(model, backend="neuron")(**f.batch("neuron"))
    actual.loss.backward()
    assert_outputs_close(actual, expected, **TOL)
    params = dict(model.named_parameters())
    for pname, p in cpu_model.named_parameters():
        if p.grad is None:
            continue
        assert params[pname].grad is not None, f"{pname} has no gradient from the compiled backward"
        torch.testing.assert_close(params[pname].grad.cpu(), p.grad, rtol=1e-3, atol=1e-4,
                                   msg=lambda m: f"grad {pname}: {m}")


def test_plain_torch_compile_forward_matches_cpu(name):
    compile_or_skip(name, PLAIN_COMPILE)
    f = family(name)
    model = fresh(name)
    with torch.no_grad():
        expected = cpu_reference(lambda: model(**f.batch("cpu")), f"{name} forward", name)
        torch._dynamo.reset()
        actual = torch.compile(on_neuron(model))(**f.batch("neuron"))
    assert_outputs_close(actual, expected, **TOL)
