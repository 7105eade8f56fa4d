"""Forward passes of third-party models on neuron against the same model on CPU."""
import torch

from .conftest import assert_outputs_close, cpu_reference, family, fresh, tied_pairs
from .zoo import on_neuron


def test_forward_matches_cpu(name):
    f = family(name)
    model = fresh(name)
    with torch.no_grad():
        expected = cpu_reference(lambda: model(**f.batch("cpu")), f"{name} forward", name)
        actual = on_neuron(model)(**f.batch("neuron"))
    # The same host kernels run on both sides: only summation order may differ.
    assert_outputs_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_move_keeps_tied_weights_tied(name):
    model = fresh(name)
    pairs = tied_pairs(model)
    moved = model.to("neuron")
    assert moved is model
    assert tied_pairs(model) == pairs
    assert all(p.device.type == "neuron" for p in model.parameters())
    assert all(b.device.type == "neuron" for b in model.buffers())
