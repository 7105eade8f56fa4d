"""The new-dialect (NKI 0.2+, ``import nki``) example kernels against CPU PyTorch. What the legacy dialect's
kernels pass alike is in test_kernels_dialects.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import attention
import layernorm
import rmsnorm
import softmax
import transpose2d
import vector_add
import torchneuron_ext.nki as nki

from .conftest import assert_result, to_kind


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


# -- vector add on one or two logical cores ------------------------------------------------------------

@pytest.mark.parametrize("lnc", [1, 2])
@pytest.mark.parametrize("shape", [(128, 512), (300, 700), (3, 1)])
def test_vector_add(lnc: int, shape: tuple, kind: str) -> None:
    a, b = torch.randn(shape), torch.randn(shape)
    out = vector_add.add_kernel_new[lnc](to_kind(a, kind), to_kind(b, kind))
    assert_result(out, a + b, kind, atol=0, rtol=0)
    assert vector_add.add_kernel_new.last_result.grid == (lnc,)


def test_vector_add_lnc2_splits_rows_between_cores() -> None:
    # 300 rows: core 0 takes rows 0-149 (two tiles), core 1 rows 150-299 (two tiles).
    a = np.ones((300, 64), np.float32)
    vector_add.add_kernel_new[2](a, a)
    assert vector_add.add_kernel_new.last_result.costs.instructions["tensor_tensor"] == 4
    vector_add.add_kernel_new(a, a)
    assert vector_add.add_kernel_new.last_result.costs.instructions["tensor_tensor"] == 3


def test_vector_add_called_without_grid_and_through_simulate() -> None:
    a, b = torch.randn(130, 20), torch.randn(130, 20)
    assert_result(nki.simulate(vector_add.add_kernel_new)(a, b), a + b, "cpu", atol=0, rtol=0)
    assert_result(nki.simulate(vector_add.add_kernel_new[2])(a, b), a + b, "cpu", atol=0, rtol=0)


def test_lnc_degree_must_be_1_or_2() -> None:
    with pytest.raises(ValueError, match="must be 1 or 2"):
        vector_add.add_kernel_new[4]
    with pytest.raises(ValueError, match="legacy-dialect"):
        vector_add.add_kernel_new[2, 2]


# -- RMSNorm -------------------------------------------------------------------------------------------

def test_rmsnorm_squares_and_sums_in_one_instruction() -> None:
    rmsnorm.rmsnorm_new(np.ones((256, 32), np.float32), np.ones(32, np.float32))
    counts = rmsnorm.rmsnorm_new.last_result.costs.instructions
    assert counts["activation_reduce"] == 2 and "tensor_reduce" not in counts


# -- LayerNorm -----------------------------------------------------------------------------------------

def test_layernorm_dialects_agree_bf16() -> None:
    x = (torch.randn(150, 600) * 2).bfloat16()
    gamma, beta = torch.randn(600).bfloat16(), torch.randn(600).bfloat16()
    ref = layernorm.reference(x, gamma, beta)
    for name, kernel in layernorm.KERNELS.items():
        assert_result(kernel(x, gamma, beta), ref, "cpu", atol=6e-2, rtol=2e-2)


# -- softmax -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, d", [(128, 128), (200, 333), (1, 2)])
def test_softmax(rows: int, d: int, kind: str) -> None:
    x = torch.randn(rows, d) * 4
    assert_result(softmax.softmax_new(to_kind(x, kind)), softmax.reference(x), kind, atol=1e-6, rtol=1e-5)


# -- 2-D transpose -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_transpose_low_precision_is_exact(dtype: torch.dtype) -> None:
    x = torch.randn(140, 130).to(dtype)
    assert torch.equal(transpose2d.transpose_new(x), x.T)


# -- fused attention -----------------------------------------------------------------------------------

def test_attention_dialects_agree_bf16() -> None:
    q, k, v = (torch.randn(128, 64).bfloat16() for _ in range(3))
    new, legacy = attention.attention_new(q, k, v), attention.attention_legacy(q, k, v)
    assert torch.equal(new, legacy)
    assert_result(new, attention.reference(q, k, v), "cpu", atol=2e-2, rtol=2e-2)


def test_attention_on_the_neuron_device_is_one_recorded_kernel() -> None:
    from torch.profiler import ProfilerActivity, profile
    q, k, v = (torch.randn(128, 32, device="neuron") for _ in range(3))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        out = attention.attention_new(q, k, v)
    assert out.device.type == "neuron"
    names = [e.name for e in prof.events()]
    assert "nki::attention_new" in names
