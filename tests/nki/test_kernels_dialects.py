"""The checks the example kernels pass alike in both dialects (legacy: neuronxcc.nki, new: NKI 0.2+), once
per dialect. What only one dialect's kernels do or promise stays in test_kernels_legacy.py and
test_kernels_new.py."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import attention
import layernorm
import matmul
import rmsnorm
import softmax
import transpose2d

from .conftest import assert_result, to_kind

FP32 = dict(atol=1e-5, rtol=1e-5)

# Each dialect's version of every example kernel the shared checks call.
KERNELS = {
    "legacy": SimpleNamespace(rmsnorm=rmsnorm.rmsnorm_legacy, matmul=matmul.matmul_legacy,
                              softmax=softmax.softmax_legacy, transpose=transpose2d.transpose_legacy,
                              attention=attention.attention_legacy),
    "new": SimpleNamespace(rmsnorm=rmsnorm.rmsnorm_new, matmul=matmul.matmul_new, softmax=softmax.softmax_new,
                           transpose=transpose2d.transpose_new, attention=attention.attention_new),
}
# layernorm.KERNELS names its two variants per dialect.
LAYERNORMS = ["legacy_mean_var", "legacy_bn", "new_mean_var", "new_bn"]


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(params=list(KERNELS))
def kernels(request: pytest.FixtureRequest) -> SimpleNamespace:
    return KERNELS[request.param]


# -- RMSNorm -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows", [1, 127, 128, 250])
def test_rmsnorm_rows_not_multiple_of_128(kernels: SimpleNamespace, rows: int) -> None:
    x, g = torch.randn(rows, 96), torch.rand(96) + 0.5
    assert_result(kernels.rmsnorm(x, g), rmsnorm.reference(x, g), "cpu", **FP32)


def test_rmsnorm_kinds_and_eps(kernels: SimpleNamespace, kind: str) -> None:
    x, g = torch.randn(130, 64) * 1e-3, torch.rand(64)
    out = kernels.rmsnorm(to_kind(x, kind), to_kind(g, kind), 1e-2)
    assert_result(out, rmsnorm.reference(x, g, 1e-2), kind, **FP32)


def test_rmsnorm_bf16(kernels: SimpleNamespace) -> None:
    x, g = torch.randn(250, 256).bfloat16(), (torch.rand(256) + 0.5).bfloat16()
    assert_result(kernels.rmsnorm(x, g), rmsnorm.reference(x, g), "cpu", atol=3e-2, rtol=2e-2)


def test_rmsnorm_rejects_a_weight_of_the_wrong_length(kernels: SimpleNamespace) -> None:
    with pytest.raises(AssertionError, match=r"the weight must have shape \(96,\)"):
        kernels.rmsnorm(np.ones((250, 96), np.float32), np.ones(64, np.float32))


# -- LayerNorm -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", LAYERNORMS)
@pytest.mark.parametrize("rows, d", [(128, 64), (200, 512), (131, 1100), (5, 7)])
def test_layernorm(name: str, rows: int, d: int) -> None:
    x = torch.randn(rows, d) * 2 + 3
    gamma, beta = torch.randn(d), torch.randn(d)
    out = layernorm.KERNELS[name](x, gamma, beta)
    assert_result(out, layernorm.reference(x, gamma, beta), "cpu", atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", LAYERNORMS)
def test_layernorm_rejects_parameters_of_the_wrong_length(name: str) -> None:
    x = np.ones((8, 16), np.float32)
    with pytest.raises(AssertionError, match="gamma and beta must have shape"):
        layernorm.KERNELS[name](x, np.ones(16, np.float32), np.ones(8, np.float32))


# -- tiled matmul --------------------------------------------------------------------------------------

@pytest.mark.parametrize("k, m, n", [(128, 128, 128), (384, 256, 1024), (256, 128, 512)])
def test_matmul(kernels: SimpleNamespace, k: int, m: int, n: int, kind: str) -> None:
    lhsT, rhs = torch.randn(k, m), torch.randn(k, n)
    out = kernels.matmul(to_kind(lhsT, kind), to_kind(rhs, kind))
    assert_result(out, matmul.reference(lhsT, rhs), kind, atol=1e-4, rtol=1e-4)


def test_matmul_accumulates_in_fp32_psum(kernels: SimpleNamespace) -> None:
    # bf16 operands, K = 512: 256 + 511 ones. Summed in bf16 every +1 would round away (256 + 1 is not a
    # bf16); PSUM sums in fp32 (767) and only the final copy rounds to bf16 (768). The PSUM tile is never
    # zeroed (fresh tiles hold NaN): the first nc_matmul must overwrite it.
    lhsT = torch.ones(512, 128, dtype=torch.bfloat16)
    rhs = torch.ones(512, 512, dtype=torch.bfloat16)
    rhs[0] = 256
    out = kernels.matmul(lhsT, rhs)
    assert torch.equal(out, torch.full((128, 512), 768.0, dtype=torch.bfloat16))
    costs = kernels.matmul.last_result.costs
    assert costs.instructions["nc_matmul"] == 4 and costs.flops == 2 * 512 * 128 * 512


# -- softmax -------------------------------------------------------------------------------------------

def test_softmax_is_stable_for_large_logits(kernels: SimpleNamespace) -> None:
    x = torch.randn(130, 64) * 1000  # exp overflows fp32 unless the row max is subtracted
    out = kernels.softmax(x)
    assert torch.isfinite(out).all()
    assert_result(out, softmax.reference(x), "cpu", atol=1e-6, rtol=1e-5)


# -- 2-D transpose -------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(128, 128), (300, 200), (1, 129), (257, 3)])
def test_transpose(kernels: SimpleNamespace, shape: tuple, kind: str) -> None:
    x = torch.randn(shape)
    assert_result(kernels.transpose(to_kind(x, kind)), x.T.contiguous(), kind, atol=0, rtol=0)


# -- fused attention -----------------------------------------------------------------------------------

@pytest.mark.parametrize("sq, sk, d", [(128, 128, 32), (256, 384, 64), (128, 512, 128)])
def test_attention(kernels: SimpleNamespace, sq: int, sk: int, d: int) -> None:
    q, k, v = torch.randn(sq, d), torch.randn(sk, d), torch.randn(sk, d)
    assert_result(kernels.attention(q, k, v), attention.reference(q, k, v), "cpu", atol=1e-5, rtol=1e-4)


def test_attention_scale_and_kinds(kernels: SimpleNamespace, kind: str) -> None:
    q, k, v = torch.randn(128, 16), torch.randn(256, 16), torch.randn(256, 16)
    out = kernels.attention(to_kind(q, kind), to_kind(k, kind), to_kind(v, kind), 0.5)
    assert_result(out, attention.reference(q, k, v, scale=0.5), kind, atol=1e-5, rtol=1e-4)
