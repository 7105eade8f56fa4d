"""The new-dialect (NKI 0.2+, ``import nki``) example kernels against CPU PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import attention
import layernorm
import matmul
import rmsnorm
import softmax
import transpose2d
import vector_add
import torchneuron_ext.nki as nki

from .conftest import assert_result, to_kind

FP32 = dict(atol=1e-5, rtol=1e-5)


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

@pytest.mark.parametrize("rows", [1, 127, 128, 250])
def test_rmsnorm_rows_not_multiple_of_128(rows: int) -> None:
    x, g = torch.randn(rows, 96), torch.rand(96) + 0.5
    assert_result(rmsnorm.rmsnorm_new(x, g), rmsnorm.reference(x, g), "cpu", **FP32)


def test_rmsnorm_kinds_and_eps(kind: str) -> None:
    x, g = torch.randn(130, 64) * 1e-3, torch.rand(64)
    out = rmsnorm.rmsnorm_new(to_kind(x, kind), to_kind(g, kind), 1e-2)
    assert_result(out, rmsnorm.reference(x, g, 1e-2), kind, **FP32)


def test_rmsnorm_bf16_matches_legacy() -> None:
    x, g = torch.randn(250, 256).bfloat16(), (torch.rand(256) + 0.5).bfloat16()
    out = rmsnorm.rmsnorm_new(x, g)
    assert_result(out, rmsnorm.reference(x, g), "cpu", atol=3e-2, rtol=2e-2)


def test_rmsnorm_squares_and_sums_in_one_instruction() -> None:
    rmsnorm.rmsnorm_new(np.ones((256, 32), np.float32), np.ones(32, np.float32))
    counts = rmsnorm.rmsnorm_new.last_result.costs.instructions
    assert counts["activation_reduce"] == 2 and "tensor_reduce" not in counts


def test_rmsnorm_rejects_a_weight_of_the_wrong_length() -> None:
    with pytest.raises(AssertionError, match=r"the weight must have shape \(96,\)"):
        rmsnorm.rmsnorm_new(np.ones((250, 96), np.float32), np.ones(64, np.float32))


# -- LayerNorm -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["new_mean_var", "new_bn"])
@pytest.mark.parametrize("rows, d", [(128, 64), (200, 512), (131, 1100), (5, 7)])
def test_layernorm(name: str, rows: int, d: int) -> None:
    x = torch.randn(rows, d) * 2 + 3
    gamma, beta = torch.randn(d), torch.randn(d)
    out = layernorm.KERNELS[name](x, gamma, beta)
    assert_result(out, layernorm.reference(x, gamma, beta), "cpu", atol=1e-4, rtol=1e-4)


def test_layernorm_dialects_agree_bf16() -> None:
    x = (torch.randn(150, 600) * 2).bfloat16()
    gamma, beta = torch.randn(600).bfloat16(), torch.randn(600).bfloat16()
    ref = layernorm.reference(x, gamma, beta)
    for name, kernel in layernorm.KERNELS.items():
        assert_result(kernel(x, gamma, beta), ref, "cpu", atol=6e-2, rtol=2e-2)


@pytest.mark.parametrize("name", ["new_mean_var", "new_bn"])
def test_layernorm_rejects_parameters_of_the_wrong_length(name: str) -> None:
    x = np.ones((8, 16), np.float32)
    with pytest.raises(AssertionError, match="gamma and beta must have shape"):
        layernorm.KERNELS[name](x, np.ones(16, np.float32), np.ones(8, np.float32))


# -- tiled matmul --------------------------------------------------------------------------------------

@pytest.mark.parametrize("k, m, n", [(128, 128, 128), (384, 256, 1024), (256, 128, 512)])
def test_matmul(k: int, m: int, n: int, kind: str) -> None:
    lhsT, rhs = torch.randn(k, m), torch.randn(k, n)
    out = matmul.matmul_new(to_kind(lhsT, kind), to_kind(rhs, kind))
    assert_result(out, matmul.reference(lhsT, rhs), kind, atol=1e-4, rtol=1e-4)


def test_matmul_first_write_overwrites_uninitialised_psum() -> None:
    # The PSUM tile is never zeroed (fresh tiles hold NaN): the first nc_matmul must overwrite it.
    lhsT = torch.ones(512, 128, dtype=torch.bfloat16)
    rhs = torch.ones(512, 512, dtype=torch.bfloat16)
    rhs[0] = 256
    out = matmul.matmul_new(lhsT, rhs)
    assert torch.equal(out, torch.full((128, 512), 768.0, dtype=torch.bfloat16))


# -- softmax -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, d", [(128, 128), (200, 333), (1, 2)])
def test_softmax(rows: int, d: int, kind: str) -> None:
    x = torch.randn(rows, d) * 4
    assert_result(softmax.softmax_new(to_kind(x, kind)), softmax.reference(x), kind, atol=1e-6, rtol=1e-5)


def test_softmax_is_stable_for_large_logits() -> None:
    x = torch.randn(130, 64) * 1000
    out = softmax.softmax_new(x)
    assert torch.isfinite(out).all()
    assert_result(out, softmax.reference(x), "cpu", atol=1e-6, rtol=1e-5)


# -- 2-D transpose -------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(128, 128), (300, 200), (1, 129), (257, 3)])
def test_transpose(shape: tuple, kind: str) -> None:
    x = torch.randn(shape)
    assert_result(transpose2d.transpose_new(to_kind(x, kind)), x.T.contiguous(), kind, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_transpose_low_precision_is_exact(dtype: torch.dtype) -> None:
    x = torch.randn(140, 130).to(dtype)
    assert torch.equal(transpose2d.transpose_new(x), x.T)


# -- fused attention -----------------------------------------------------------------------------------

@pytest.mark.parametrize("sq, sk, d", [(128, 128, 32), (256, 384, 64), (128, 512, 128)])
def test_attention(sq: int, sk: int, d: int) -> None:
    q, k, v = torch.randn(sq, d), torch.randn(sk, d), torch.randn(sk, d)
    assert_result(attention.attention_new(q, k, v), attention.reference(q, k, v), "cpu", atol=1e-5, rtol=1e-4)


def test_attention_scale_and_kinds(kind: str) -> None:
    q, k, v = torch.randn(128, 16), torch.randn(256, 16), torch.randn(256, 16)
    out = attention.attention_new(to_kind(q, kind), to_kind(k, kind), to_kind(v, kind), 0.5)
    assert_result(out, attention.reference(q, k, v, scale=0.5), kind, atol=1e-5, rtol=1e-4)


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
