"""The legacy-dialect (neuronxcc.nki) example kernels against CPU PyTorch: shapes, dtypes, argument kinds.
What the new dialect's kernels pass alike is in test_kernels_dialects.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import attention
import layernorm
import matmul
import softmax
import transpose2d
import vector_add
from torchneuron_ext.nki import NKIError

from .conftest import assert_result, to_kind


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


# -- LayerNorm -----------------------------------------------------------------------------------------

def test_layernorm_bn_uses_bn_stats_per_512_columns() -> None:
    x, gamma, beta = torch.randn(256, 1100), torch.ones(1100), torch.zeros(1100)
    layernorm.layernorm_legacy_bn(x, gamma, beta)
    counts = layernorm.layernorm_legacy_bn.last_result.costs.instructions
    assert counts["bn_stats"] == 2 * 3 and counts["bn_aggr"] == 2


# -- tiled matmul --------------------------------------------------------------------------------------

def test_matmul_rejects_untiled_shapes() -> None:
    with pytest.raises(AssertionError, match="multiples of 128"):
        matmul.matmul_legacy(np.zeros((100, 128), np.float32), np.zeros((100, 128), np.float32))


# -- softmax -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, d", [(128, 128), (200, 333), (1, 2)])
def test_softmax(rows: int, d: int) -> None:
    x = torch.randn(rows, d) * 4
    assert_result(softmax.softmax_legacy(x), softmax.reference(x), "cpu", atol=1e-6, rtol=1e-5)


# -- 2-D transpose -------------------------------------------------------------------------------------

def test_transpose_bf16_is_exact() -> None:
    x = torch.randn(140, 130).bfloat16()
    assert torch.equal(transpose2d.transpose_legacy(x), x.T)


# -- fused attention -----------------------------------------------------------------------------------

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
