"""Greedy generation, token for token against CPU, with the default dynamic cache and a static cache.

With a static cache transformers compiles the decoder step with plain torch.compile on neuron (it
lists neuron among its auto-compile devices, beside CUDA), so the static-cache cases also check
Inductor on neuron against CPU eager, token for token."""
import pytest
import torch
from torch._dynamo.utils import counters

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
    expected = cpu_reference(lambda: _generate(model, f.batch("cpu"), cache),
                             f"{name} generate ({cache or 'dynamic'})", name)
    compiled_before = counters["stats"]["unique_graphs"]
    actual = _generate(on_neuron(model), f.batch("neuron"), cache)
    assert actual.device.type == "neuron"
    if cache == "static":  # transformers compiles the decoder step on neuron (plain torch.compile)
        assert counters["stats"]["unique_graphs"] > compiled_before
    assert actual.cpu().tolist() == expected.tolist()
