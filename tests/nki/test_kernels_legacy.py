"""The legacy-dialect (neuronxcc.nki) example kernels against CPU PyTorch: shapes, dtypes, argument kinds."""
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
from torchneuron_ext.nki import NKIError

from .conftest import assert_result, to_kind

FP32 = dict(atol=1e-5, rtol=1e-5)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


# -- SPMD vector add -----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, grid", [((128, 512), (1, 1)), ((300, 700), (3, 2)), ((1, 3), (1, 1))])
def test_vector_add_grid(shape: tuple, grid: tuple, kind: str) -> None:
    a, b = torch.randn(shape), torch.randn(shape)
    out = vector_add.add_legacy(to_kind(a, kind), to_kind(b, kind))
    assert_result(out, a + b, kind, atol=0, rtol=0)
    result = vector_add.add_kernel_legacy.last_result
    assert result.grid == grid
    # Every instance loads two tiles, adds and stores: four instructions each.
    assert result.instructions == 4 * grid[0] * grid[1]
    assert dict(result.costs.instructions) == {"load": 2 * grid[0] * grid[1], "add": grid[0] * grid[1],
                                               "store": grid[0] * grid[1]}


def test_vector_add_instances_fill_one_shared_output() -> None:
    """Each instance writes only its own tile: with a grid too small, the rest stays unwritten (NaN)."""
    a, b = np.ones((256, 64), np.float32), np.ones((256, 64), np.float32)
    out = vector_add.add_kernel_legacy[1, 1](a, b, 64)
    assert (out[:128] == 2).all() and np.isnan(out[128:]).all()
    out = vector_add.add_kernel_legacy[2, 1](a, b, 64)
    assert (out == 2).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32])
def test_vector_add_dtypes(dtype: torch.dtype) -> None:
    a = (torch.randn(200, 100) * 100).to(dtype)
    b = (torch.randn(200, 100) * 100).to(dtype)
    assert_result(vector_add.add_legacy(a, b), a + b, "cpu", atol=0, rtol=0)


# -- RMSNorm -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows", [1, 127, 128, 250])
def test_rmsnorm_rows_not_multiple_of_128(rows: int) -> None:
    x, g = torch.randn(rows, 96), torch.rand(96) + 0.5
    assert_result(rmsnorm.rmsnorm_legacy(x, g), rmsnorm.reference(x, g), "cpu", **FP32)


def test_rmsnorm_kinds_and_eps(kind: str) -> None:
    x, g = torch.randn(130, 64) * 1e-3, torch.rand(64)
    out = rmsnorm.rmsnorm_legacy(to_kind(x, kind), to_kind(g, kind), 1e-2)
    assert_result(out, rmsnorm.reference(x, g, 1e-2), kind, **FP32)


def test_rmsnorm_bf16() -> None:
    x, g = torch.randn(250, 256).bfloat16(), (torch.rand(256) + 0.5).bfloat16()
    assert_result(rmsnorm.rmsnorm_legacy(x, g), rmsnorm.reference(x, g), "cpu", atol=3e-2, rtol=2e-2)


def test_rmsnorm_rejects_a_weight_of_the_wrong_length() -> None:
    with pytest.raises(AssertionError, match=r"the weight must have shape \(96,\)"):
        rmsnorm.rmsnorm_legacy(np.ones((250, 96), np.float32), np.ones(64, np.float32))


# -- LayerNorm -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["legacy_mean_var", "legacy_bn"])
@pytest.mark.parametrize("rows, d", [(128, 64), (200, 512), (131, 1100), (5, 7)])
def test_layernorm(name: str, rows: int, d: int) -> None:
    x = torch.randn(rows, d) * 2 + 3
    gamma, beta = torch.randn(d), torch.randn(d)
    out = layernorm.KERNELS[name](x, gamma, beta)
    assert_result(out, layernorm.reference(x, gamma, beta), "cpu", atol=1e-4, rtol=1e-4)


def test_layernorm_bn_uses_bn_stats_per_512_columns() -> None:
    x, gamma, beta = torch.randn(256, 1100), torch.ones(1100), torch.zeros(1100)
    layernorm.layernorm_legacy_bn(x, gamma, beta)
    counts = layernorm.layernorm_legacy_bn.last_result.costs.instructions
    assert counts["bn_stats"] == 2 * 3 and counts["bn_aggr"] == 2


@pytest.mark.parametrize("name", ["legacy_mean_var", "legacy_bn"])
def test_layernorm_rejects_parameters_of_the_wrong_length(name: str) -> None:
    x = np.ones((8, 16), np.float32)
    with pytest.raises(AssertionError, match="gamma and beta must have shape"):
        layernorm.KERNELS[name](x, np.ones(16, np.float32), np.ones(8, np.float32))


# -- tiled matmul --------------------------------------------------------------------------------------

@pytest.mark.parametrize("k, m, n", [(128, 128, 128), (384, 256, 1024), (256, 128, 512)])
def test_matmul(k: int, m: int, n: int, kind: str) -> None:
    lhsT, rhs = torch.randn(k, m), torch.randn(k, n)
    out = matmul.matmul_legacy(to_kind(lhsT, kind), to_kind(rhs, kind))
    assert_result(out, matmul.reference(lhsT, rhs), kind, atol=1e-4, rtol=1e-4)


def test_matmul_accumulates_in_fp32_psum() -> None:
    # bf16 operands, K = 512: 256 + 511 ones. Summed in bf16 every +1 would round away (256 + 1 is not a
    # bf16); PSUM sums in fp32 (767) and only the final copy rounds to bf16 (768).
    lhsT = torch.ones(512, 128, dtype=torch.bfloat16)
    rhs = torch.ones(512, 512, dtype=torch.bfloat16)
    rhs[0] = 256
    out = matmul.matmul_legacy(lhsT, rhs)
    assert torch.equal(out, torch.full((128, 512), 768.0, dtype=torch.bfloat16))
    costs = matmul.matmul_legacy.last_result.costs
    assert costs.instructions["nc_matmul"] == 4 and costs.flops == 2 * 512 * 128 * 512


def test_matmul_rejects_untiled_shapes() -> None:
    with pytest.raises(AssertionError, match="multiples of 128"):
        matmul.matmul_legacy(np.zeros((100, 128), np.float32), np.zeros((100, 128), np.float32))


# -- softmax -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, d", [(128, 128), (200, 333), (1, 2)])
def test_softmax(rows: int, d: int) -> None:
    x = torch.randn(rows, d) * 4
    assert_result(softmax.softmax_legacy(x), softmax.reference(x), "cpu", atol=1e-6, rtol=1e-5)


def test_softmax_is_stable_for_large_logits() -> None:
    x = torch.randn(130, 64) * 1000  # exp overflows fp32 unless the row max is subtracted
    out = softmax.softmax_legacy(x)
    assert torch.isfinite(out).all()
    assert_result(out, softmax.reference(x), "cpu", atol=1e-6, rtol=1e-5)


# -- 2-D transpose -------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(128, 128), (300, 200), (1, 129), (257, 3)])
def test_transpose(shape: tuple, kind: str) -> None:
    x = torch.randn(shape)
    assert_result(transpose2d.transpose_legacy(to_kind(x, kind)), x.T.contiguous(), kind, atol=0, rtol=0)


def test_transpose_bf16_is_exact() -> None:
    x = torch.randn(140, 130).bfloat16()
    assert torch.equal(transpose2d.transpose_legacy(x), x.T)


# -- fused attention -----------------------------------------------------------------------------------

@pytest.mark.parametrize("sq, sk, d", [(128, 128, 32), (256, 384, 64), (128, 512, 128)])
def test_attention(sq: int, sk: int, d: int) -> None:
    q, k, v = torch.randn(sq, d), torch.randn(sk, d), torch.randn(sk, d)
    assert_result(attention.attention_legacy(q, k, v), attention.reference(q, k, v), "cpu", atol=1e-5, rtol=1e-4)


def test_attention_scale_and_kinds(kind: str) -> None:
    q, k, v = torch.randn(128, 16), torch.randn(256, 16), torch.randn(256, 16)
    out = attention.attention_legacy(to_kind(q, kind), to_kind(k, kind), to_kind(v, kind), 0.5)
    assert_result(out, attention.reference(q, k, v, scale=0.5), kind, atol=1e-5, rtol=1e-4)


def test_attention_bf16() -> None:
    q, k, v = (torch.randn(128, 64).bfloat16() for _ in range(3))
    out = attention.attention_legacy(q, k, v)
    assert_result(out, attention.reference(q, k, v), "cpu", atol=2e-2, rtol=2e-2)


def test_attention_rejects_too_many_keys() -> None:
    q, k = np.zeros((128, 64), np.float32), np.zeros((640, 64), np.float32)
    with pytest.raises(AssertionError, match="Sk in"):
        attention.attention_legacy(q, k, k)


def test_unmasked_ragged_tile_is_an_error() -> None:
    """Without the examples' masks, the last tile of 250 rows reads past the tensor: the simulator says so."""
    import torchneuron_ext.nki.legacy as nki
    import torchneuron_ext.nki.legacy.language as nl

    @nki.jit
    def copy_rows(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:x.shape[1]]
        for i in nl.affine_range(2):
            nl.store(out[i * 128 + i_p, i_f], value=nl.load(x[i * 128 + i_p, i_f]))
        return out

    with pytest.raises(NKIError) as info:
        copy_rows(np.zeros((250, 8), np.float32))
    assert info.value.code == "err_tensor_access_out_of_bound"
    assert "index range [128, 255] exceed dimension size of 250" in str(info.value)
