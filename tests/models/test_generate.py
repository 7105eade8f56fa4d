"""Greedy generation, token for token against CPU, with the default dynamic cache and a static cache."""
import pytest
import torch

from .conftest import cpu_reference, family, fresh
from .zoo import GENERATIVE, on_neuron


def _generate(model: torch.nn.Module, batch: dict, cache: str | None) -> torch.Tensor:
    batch = {k: v for k, v in batch.items() if k != "labels"}
    extra = {"cache_implementation": cache} if cache else {}
    return model.generate(**batch, max_new_tokens=6, min_new_tokens=6, do_sample=False, **extra)


@pytest.mark.parametrize("cache", [None, "static"], ids=["dynamic-cache", "static-cache"])
@pytest.mark.parametrize("name", GENERATIVE)
def test_greedy_generate_matches_cpu(name, cache):
    f = family(name)
    model = fresh(name)
    expected = cpu_reference(lambda: _generate(model, f.batch("cpu"), cache), f"{name} generate ({cache or 'dynamic'})")
    actual = _generate(on_neuron(model), f.batch("neuron"), cache)
    assert actual.device.type == "neuron"
    assert actual.cpu().tolist() == expected.tolist()
