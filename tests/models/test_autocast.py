"""torch.autocast("neuron") in bfloat16 against CPU autocast in bfloat16.

The op lists differ (neuron follows CUDA's, as TorchNeuron does), so results agree to bfloat16's
precision, not bit for bit: PyTorch's own bf16 tolerance (rtol 1.6e-2) with an absolute floor for
values near zero after several low-precision layers.
"""
import torch

from .conftest import cpu_reference, family, fresh, tensors_of
from .zoo import on_neuron


def test_autocast_bf16_forward_matches_cpu_autocast(name):
    f = family(name)
    model = fresh(name)
    with torch.no_grad():
        def cpu():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return model(**f.batch("cpu"))
        expected = tensors_of(cpu_reference(cpu, f"{name} under CPU autocast", name))
        with torch.autocast("neuron", dtype=torch.bfloat16):
            actual = tensors_of(on_neuron(model)(**f.batch("neuron")))
    assert actual.keys() == expected.keys()
    for key, e in expected.items():
        a = actual[key]
        assert a.device.type == "neuron"
        torch.testing.assert_close(a.cpu().float(), e.float(), rtol=1.6e-2, atol=5e-2, msg=lambda m: f"{key}: {m}")
