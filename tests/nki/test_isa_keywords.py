"""The default dialect's instruction surface: every keyword an instruction takes is honoured or refused by
name, as in the legacy dialect, and both dialects' ``nki.isa`` answer feature detection truthfully."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy.isa as legacy_isa
from torchneuron_ext.nki import NKIError, NKIUnsupportedError


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _copy_kernel(**keywords):
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t, **keywords)
        nisa.dma_copy(dst=out, src=u)
        return out
    return k


def test_a_keyword_no_instruction_takes_is_refused_by_name() -> None:
    a = f32(8, 8)
    np.testing.assert_array_equal(_copy_kernel(name="copy0")(a), a)  # AWS's instruction label is accepted
    with pytest.raises(TypeError, match="enigne"):
        _copy_kernel(enigne=nisa.vector_engine)(a)
    with pytest.raises(TypeError, match="dtype"):  # the legacy dialect's keyword: here dst's dtype decides
        _copy_kernel(dtype=nl.bfloat16)(a)


def _matmul_kernel(**hints):
    @nki.jit
    def k(a, b):
        out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a)
        nisa.dma_copy(dst=tb, src=b)
        acc = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, ta, tb, **hints)
        res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out, src=res)
        return out
    return k


def test_matmul_hints_are_held_to_their_promise() -> None:
    a, eye = f32(32, 16), np.eye(32, dtype=np.float32)
    np.testing.assert_allclose(_matmul_kernel(is_moving_onezero=True, is_transpose=True)(a, eye), a.T, rtol=1e-6)
    with pytest.raises(NKIError) as info:
        _matmul_kernel(is_moving_onezero=True)(a, f32(32, 8))
    assert info.value.code == "err_onezero_hint_violated"
    with pytest.raises(NKIError) as info:
        _matmul_kernel(is_transpose=True)(a, 2 * eye)
    assert info.value.code == "err_is_transpose_needs_identity"
    with pytest.raises(NKIError) as info:
        _matmul_kernel(tile_position=(16, 0), tile_size=(32, 32))(a, eye)
    assert info.value.code == "err_invalid_pe_tiling"


def test_an_option_aws_takes_that_is_not_modelled_is_refused_by_name() -> None:
    @nki.jit
    def k(a, reduce_op):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        e = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=e, data=t, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=t,
                                  reduce_op=reduce_op)
        nisa.dma_copy(dst=out, src=e)
        return out

    a = f32(8, 8)
    np.testing.assert_allclose(k(a, None), 3 * a, rtol=1e-6)
    with pytest.raises(NKIUnsupportedError, match=r"nki.isa.scalar_tensor_tensor\(reduce_op=...\)"):
        k(a, nl.add)


@pytest.mark.parametrize("isa", [nisa, legacy_isa], ids=["new", "legacy"])
def test_feature_detection_sees_aws_names_only(isa) -> None:
    assert not hasattr(isa, "no_such_instruction")
    with pytest.raises(AttributeError, match="no_such_instruction"):
        isa.no_such_instruction  # noqa: B018
    # An AWS instruction the dialect does not define: present, and calling it says it is not modelled.
    from torchneuron_ext.nki._isa_common import AWS_INSTRUCTIONS
    name = next(n for n in sorted(AWS_INSTRUCTIONS) if n not in vars(isa))
    assert hasattr(isa, name)
    with pytest.raises(NKIUnsupportedError, match=f"nki.isa.{name} is not modelled"):
        getattr(isa, name)()


def _bf16_transpose(x, target: str):
    @nki.jit(platform_target=target)
    def k(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        eye = nl.shared_identity_matrix(x.shape[0], dtype=x.dtype)
        p = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=t, moving=eye, is_transpose=True)
        s = nl.ndarray(p.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        out = nl.ndarray(p.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=s)
        return out
    return k(x)


@pytest.mark.parametrize("target,ok", [("trn2", True), ("trn1", False)])
def test_transpose_mode_keeps_the_dtype_in_psum_from_neuroncore_v3(target: str, ok: bool) -> None:
    # AWS: from NeuronCore-v3, is_transpose=True is a bit-accurate transpose (the library moves bf16 through
    # PSUM this way); on v2 the Tensor engine still writes fp32 only.
    x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16).astype(ml_dtypes.bfloat16)
    if ok:
        np.testing.assert_array_equal(_bf16_transpose(x, target), x.T)
    else:
        with pytest.raises(NKIError) as info:
            _bf16_transpose(x, target)
        assert info.value.code == "err_unsupported_dtype"
