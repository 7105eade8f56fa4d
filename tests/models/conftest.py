"""Shared pieces of the models tier: one CPU prototype per family, comparisons, skips.

Each prototype is built once per session (building a model costs more than running it at these
sizes) and every test takes deep copies, so no test sees another's training.
"""
from __future__ import annotations

import copy
import functools
import os
from typing import Any, Callable

import pytest
import torch

pytest.importorskip("transformers")

from .zoo import FAMILIES, Family  # noqa: E402


@functools.lru_cache(maxsize=None)
def _prototype(name: str) -> torch.nn.Module:
    return FAMILIES[name].model()


def fresh(name: str) -> torch.nn.Module:
    """A private CPU copy of the family's model (eval mode, seeded weights)."""
    return copy.deepcopy(_prototype(name))


def family(name: str) -> Family:
    return FAMILIES[name]


def cpu_reference(fn: Callable[[], Any], what: str, name: str) -> Any:
    """Run the CPU side of family `name`. A failure the family expects (Family.cpu_failures) skips the
    test: the model cannot run for a reason outside this project. Any other fails it, so a
    transformers upgrade that breaks the reference does not skip the tier silently."""
    expected = family(name).cpu_failures
    try:
        return fn()
    except expected as e:
        pytest.skip(f"{what} fails on CPU too ({type(e).__name__}: {str(e).splitlines()[0][:200]})")


def tensors_of(output: Any) -> dict[str, torch.Tensor]:
    """The tensor fields of a model output (ModelOutput, tuple or tensor), by name."""
    if isinstance(output, torch.Tensor):
        return {"output": output}
    items = output.items() if hasattr(output, "items") else enumerate(output)
    return {str(k): v for k, v in items if isinstance(v, torch.Tensor)}


def assert_outputs_close(actual: Any, expected: Any, **tolerances: Any) -> None:
    a, e = tensors_of(actual), tensors_of(expected)
    assert a.keys() == e.keys(), f"output fields differ: {sorted(a)} vs {sorted(e)}"
    assert a, "the model returned no tensors"
    for key in e:
        assert a[key].device.type == "neuron", f"{key} is on {a[key].device}, not neuron"
        torch.testing.assert_close(a[key].cpu(), e[key], msg=lambda m, k=key: f"{k}: {m}", **tolerances)


def tied_pairs(model: torch.nn.Module) -> list[tuple[str, str]]:
    """Parameters registered under two names (tied weights), found by object identity."""
    seen: dict[int, str] = {}
    pairs = []
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            pairs.append((seen[id(p)], name))
        else:
            seen[id(p)] = name
    return pairs


@pytest.fixture(params=sorted(FAMILIES))
def name(request: pytest.FixtureRequest) -> str:
    return request.param


# Compiling a model costs 10-60 s of gcc on two cores, so the default run compiles the families whose
# graphs differ in kind (embedding + tied head, MoE routing, depthwise convolutions with layer norm
# over channels, conv1d encoder-decoder); TORCHNEURON_EXT_MODELS=full compiles every family.
# Static-cache generation compiles the decoder of every generative family in both modes
# (transformers auto-compiles it on neuron, as on CUDA).
FULL = os.environ.get("TORCHNEURON_EXT_MODELS", "") == "full"
COMPILED_TRAINING = {"gpt2", "mixtral", "convnext", "whisper"}
PLAIN_COMPILE = {"resnet", "bert"}


def compile_or_skip(name: str, chosen: set[str]) -> None:
    if not FULL and name not in chosen:
        pytest.skip("compiled in the full run only (TORCHNEURON_EXT_MODELS=full): compile time budget")
