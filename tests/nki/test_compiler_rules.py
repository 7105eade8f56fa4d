"""The compiler's rules (docs/nki.md, "Compiler rules"): for each, a kernel that breaks it fails with the
toolchain's error code at the kernel line, and a legal twin still runs and computes the right values."""
from __future__ import annotations

import numpy as np
import pytest
from expecttest import TestCase

import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.isa as lisa
import torchneuron_ext.nki.legacy.language as lnl
import torchneuron_ext.nki.legacy.typing as nt
from torchneuron_ext.nki import NKIError


def f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def report(kernel, *args, **kwargs) -> str:
    """Run ``kernel``, which must fail with an NKIError: its code, the kernel line (numbered from the ``def``)
    and its message, for assertExpectedInline."""
    with pytest.raises(NKIError) as info:
        kernel(*args, **kwargs)
    err = info.value
    func = getattr(getattr(kernel, "kernel", kernel), "func", kernel)  # kernel, kernel[grid] or a function
    assert err.filename == __file__, str(err)
    line = err.lineno - func.__code__.co_firstlineno
    return f"{err.code} at def+{line}: {err.source_line.strip()}\n{err.message}"


class TestAffineRangeDependencies(TestCase):
    def test_write_after_write_across_iterations(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((128, 512), dtype=lnl.float32, buffer=lnl.shared_hbm)
            for i in lnl.affine_range(4):
                t = lnl.load(a)
                lnl.store(out, t)
            return out

        self.assertExpectedInline(report(k, f32(128, 512)), """\
err_unexpected_output_dependencies at def+5: lnl.store(out, t)
Unexpected output dependencies: iteration 1 of the nl.affine_range loop at line 37 writes a shared_hbm tensor of shape (128, 512) where iteration 0 wrote it; affine_range iterations must be independent (index the tensor with the loop variable, accumulate with '+=', or use nl.sequential_range)""")

    def test_the_legal_twins_index_by_iteration_or_run_sequentially(self):
        @lnki.jit
        def indexed(a):
            out = lnl.ndarray((128, 512), dtype=lnl.float32, buffer=lnl.shared_hbm)
            for i in lnl.affine_range(4):
                t = lnl.load(a[:, i * 128:(i + 1) * 128])
                lnl.store(out[:, i * 128:(i + 1) * 128], lnl.multiply(t, 2.0))
            return out

        @lnki.jit
        def sequential(a):
            out = lnl.ndarray((128, 128), dtype=lnl.float32, buffer=lnl.shared_hbm)
            for i in lnl.sequential_range(4):
                lnl.store(out, lnl.load(a[:, i * 128:(i + 1) * 128]))
            return out

        a = f32(128, 512)
        np.testing.assert_allclose(indexed(a), a * 2)
        np.testing.assert_allclose(sequential(a), a[:, 384:])

    def test_read_after_write_across_iterations(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((128, 128), dtype=lnl.float32, buffer=lnl.shared_hbm)
            carry = lnl.zeros((128, 128), dtype=lnl.float32, buffer=lnl.sbuf)
            for i in lnl.affine_range(2):
                t = lnl.load(a[:, i * 128:(i + 1) * 128])
                carry[...] = lnl.add(carry, t)
            lnl.store(out, carry)
            return out

        self.assertExpectedInline(report(k, f32(128, 256)), """\
err_unexpected_output_dependencies at def+6: carry[...] = lnl.add(carry, t)
Unexpected output dependencies: iteration 1 of the nl.affine_range loop at line 71 reads a sbuf tensor of shape (128, 128) where iteration 0 wrote it; affine_range iterations must be independent (index the tensor with the loop variable, accumulate with '+=', or use nl.sequential_range)""")

    def test_associative_reductions_are_not_dependencies(self):
        # AWS's matmul tutorial: `+=` into one tile and matmul accumulation into PSUM across an affine loop.
        @lnki.jit
        def k(a, b):
            out = lnl.ndarray((128, 128), dtype=lnl.float32, buffer=lnl.shared_hbm)
            total = lnl.ndarray((128, 1), dtype=lnl.float32, buffer=lnl.shared_hbm)
            acc = lnl.zeros((128, 128), dtype=lnl.float32, buffer=lnl.psum)
            s = lnl.zeros((128, 1), dtype=lnl.float32, buffer=lnl.sbuf)
            for i in lnl.affine_range(2):
                at = lnl.load(a[i * 128:(i + 1) * 128, :])
                bt = lnl.load(b[i * 128:(i + 1) * 128, :])
                acc += lisa.nc_matmul(at, bt)
                s += lnl.sum(at, axis=1, keepdims=True)
            lnl.store(out, lnl.copy(acc))
            lnl.store(total, s)
            return out, total

        a, b = f32(256, 128), f32(256, 128) + 1
        out, total = k(a, b)
        np.testing.assert_allclose(out, a.T @ b, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(total[:, 0], a.reshape(2, 128, 128).sum(axis=(0, 2)), rtol=1e-4, atol=1e-4)

    def test_spmd_instances_write_the_same_location(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((128, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            lnl.store(out, lnl.load(a[0:128, :]))
            return out

        self.assertExpectedInline(report(k[2], f32(256, 64)), """\
err_unexpected_output_dependencies at def+3: lnl.store(out, lnl.load(a[0:128, :]))
Unexpected output dependencies: instance 1 of the launch grid writes a shared_hbm tensor of shape (128, 64) where instance 0 wrote it; the instances of an SPMD grid must write different locations (index with nl.program_id)""")

    def test_legal_twin_instances_index_by_program_id(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((256, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            rows = slice(lnl.program_id(0) * 128, (lnl.program_id(0) + 1) * 128)
            lnl.store(out[rows, :], lnl.load(a[rows, :]))
            return out

        a = f32(256, 64)
        np.testing.assert_array_equal(k[2](a), a)

    def test_new_dialect_affine_range_is_range(self):
        # NKI 0.2 made affine_range an alias of range: the rule is the legacy front end's.
        import torchneuron_ext.nki as nki
        import torchneuron_ext.nki.language as nl

        @nki.jit
        def k(a):
            out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
            for i in nl.affine_range(2):
                nl.store(out, nl.load(a[:, i * 128:(i + 1) * 128]))
            return out

        a = f32(128, 256)
        np.testing.assert_allclose(k(a), a[:, 128:])


class TestDependenciesOnPsumMasksAndIndices(TestCase):
    """The dependency check judges every access AWS's rule covers: PSUM tiles, the positions a mask selects,
    the elements tile-valued indices name, loops longer than 16-bit stamps count."""

    def test_psum_tile_overwritten_by_every_iteration(self):
        @lnki.jit
        def k(a, b):
            out = lnl.ndarray((2, 128, 128), dtype=lnl.float32, buffer=lnl.shared_hbm)
            ps = lnl.ndarray((128, 128), dtype=lnl.float32, buffer=lnl.psum)
            for i in lnl.affine_range(2):
                ps[...] = lisa.nc_matmul(lnl.load(a[i]), lnl.load(b))
                lnl.store(out[i], lnl.copy(ps))
            return out

        self.assertExpectedInline(report(k, f32(2, 128, 128), f32(128, 128)), """\
err_unexpected_output_dependencies at def+5: ps[...] = lisa.nc_matmul(lnl.load(a[i]), lnl.load(b))
Unexpected output dependencies: iteration 1 of the nl.affine_range loop at line 150 writes a psum tensor of shape (128, 128) where iteration 0 wrote it; affine_range iterations must be independent (index the tensor with the loop variable, accumulate with '+=', or use nl.sequential_range)""")

    def test_masked_writes_that_overlap(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((1, 8), dtype=lnl.float32, buffer=lnl.shared_hbm)
            i_f = lnl.arange(8)[None, :]
            for i in lnl.affine_range(2):
                lnl.store(out[0, i_f], lnl.load(a[i, i_f]), mask=(i_f < 4 + i))
            return out

        self.assertExpectedInline(report(k, f32(2, 8)), """\
err_unexpected_output_dependencies at def+5: lnl.store(out[0, i_f], lnl.load(a[i, i_f]), mask=(i_f < 4 + i))
Unexpected output dependencies: iteration 1 of the nl.affine_range loop at line 164 writes a shared_hbm tensor of shape (1, 8) where iteration 0 wrote it; affine_range iterations must be independent (index the tensor with the loop variable, accumulate with '+=', or use nl.sequential_range)""")

    def test_indirect_writes_to_the_same_rows(self):
        @lnki.jit
        def k(data, idx):
            out = lnl.ndarray((8, 16), dtype=lnl.float32, buffer=lnl.shared_hbm)
            i_p = lnl.arange(4)[:, None]
            i_f = lnl.arange(16)[None, :]
            rows = lnl.load(idx[i_p])
            for i in lnl.affine_range(2):
                lnl.store(out[rows[i_p, 0], i_f], lnl.load(data[i * 4 + i_p, i_f]))
            return out

        self.assertExpectedInline(report(k, f32(8, 16), np.array([6, 0, 3, 1], np.int32)), """\
err_unexpected_output_dependencies at def+7: lnl.store(out[rows[i_p, 0], i_f], lnl.load(data[i * 4 + i_p, i_f]))
Unexpected output dependencies: iteration 1 of the nl.affine_range loop at line 179 writes a shared_hbm tensor of shape (8, 16) where iteration 0 wrote it; affine_range iterations must be independent (index the tensor with the loop variable, accumulate with '+=', or use nl.sequential_range)""")

    def test_legal_twins_disjoint_masks_and_indirect_rows_psum_per_iteration(self):
        @lnki.jit
        def halves(a):
            out = lnl.ndarray((1, 8), dtype=lnl.float32, buffer=lnl.shared_hbm)
            i_f = lnl.arange(8)[None, :]
            for i in lnl.affine_range(2):
                lnl.store(out[0, i_f], lnl.load(a[i, i_f]), mask=(i_f >= 4 * i) & (i_f < 4 * i + 4))
            return out

        @lnki.jit
        def scatter(data, idx):
            out = lnl.ndarray((8, 16), dtype=lnl.float32, buffer=lnl.shared_hbm)
            i_p = lnl.arange(4)[:, None]
            i_f = lnl.arange(16)[None, :]
            for i in lnl.affine_range(2):
                rows = lnl.load(idx[i * 4 + i_p])
                lnl.store(out[rows[i_p, 0], i_f], lnl.load(data[i * 4 + i_p, i_f]))
            return out

        @lnki.jit
        def psum_per_iteration(a, b):
            out = lnl.ndarray((2, 128, 128), dtype=lnl.float32, buffer=lnl.shared_hbm)
            for i in lnl.affine_range(2):
                ps = lnl.ndarray((128, 128), dtype=lnl.float32, buffer=lnl.psum)
                ps[...] = lisa.nc_matmul(lnl.load(a[i]), lnl.load(b))
                lnl.store(out[i], lnl.copy(ps))
            return out

        a = f32(2, 8)
        np.testing.assert_array_equal(halves(a), np.concatenate([a[0, :4], a[1, 4:]])[None, :])
        data, idx = f32(8, 16), np.array([6, 0, 3, 1, 2, 4, 5, 7], np.int32)
        expected = np.empty_like(data)
        expected[idx] = data
        np.testing.assert_array_equal(scatter(data, idx), expected)
        x, w = f32(2, 128, 128), f32(128, 128)
        np.testing.assert_allclose(psum_per_iteration(x, w), np.stack([x[0].T @ w, x[1].T @ w]), rtol=1e-4,
                                   atol=1e-3)

    def test_loop_longer_than_65535_iterations(self):
        # 32-bit stamps: iteration 65536 reads what iteration 0 wrote.
        @lnki.jit
        def k(a):
            out = lnl.ndarray((1, 1), dtype=lnl.float32, buffer=lnl.shared_hbm)
            t = lnl.ndarray((1, 1), dtype=lnl.float32, buffer=lnl.sbuf)
            for i in lnl.affine_range(65537):
                if i == 0:
                    t[...] = lnl.load(a)
                elif i == 65536:
                    lnl.store(out, t)
            return out

        self.assertExpectedInline(report(k, f32(1, 1)), """\
err_unexpected_output_dependencies at def+8: lnl.store(out, t)
Unexpected output dependencies: iteration 65536 of the nl.affine_range loop at line 231 reads a sbuf tensor of shape (1, 1) where iteration 0 wrote it; affine_range iterations must be independent (index the tensor with the loop variable, accumulate with '+=', or use nl.sequential_range)""")

    def test_legal_twin_long_sequential_loop(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((1, 1), dtype=lnl.float32, buffer=lnl.shared_hbm)
            t = lnl.ndarray((1, 1), dtype=lnl.float32, buffer=lnl.sbuf)
            for i in lnl.sequential_range(65537):
                if i == 0:
                    t[...] = lnl.load(a)
                elif i == 65536:
                    lnl.store(out, t)
            return out

        a = f32(1, 1)
        np.testing.assert_array_equal(k(a), a)


# activation's scale/bias operands: (keyword, tile shape, dtype) -> the error AWS's compiler gives.
ACTIVATION_OPERAND_CASES = [
    pytest.param("scale", (1, 128), np.float32, """\
err_activation_scale_scalar_or_vector at def+5: lnl.store(out, lisa.activation(lnl.exp, t, **{keyword: operand}))
Scale parameter of activation must be either a scalar value or a 1D vector spanning the partition dimension (128, 1), got a tile of shape (1, 128)""", id="scale_not_a_partition_vector"),
    pytest.param("scale", (128, 1), np.float16, """\
err_activation_scale_invalid_type at def+5: lnl.store(out, lisa.activation(lnl.exp, t, **{keyword: operand}))
Scale parameter of activation must be a scalar or vector of type float32, got float16""", id="scale_not_float32"),
    pytest.param("bias", (128, 1), np.int8, """\
err_activation_bias_invalid_type at def+5: lnl.store(out, lisa.activation(lnl.exp, t, **{keyword: operand}))
Bias parameter of activation must be a vector of type float32, float16, or bfloat16, got int8""", id="bias_not_a_float_vector"),
]


@pytest.mark.parametrize("keyword, shape, dtype, expected", ACTIVATION_OPERAND_CASES)
def test_activation_operand_rules(keyword: str, shape: tuple, dtype: type, expected: str) -> None:
    @lnki.jit
    def k(a):
        out = lnl.ndarray((128, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
        t = lnl.load(a)
        operand = lnl.full(shape, 1, dtype=dtype, buffer=lnl.sbuf)
        lnl.store(out, lisa.activation(lnl.exp, t, **{keyword: operand}))
        return out

    assert report(k, f32(128, 64)) == expected


class TestInstructionRules(TestCase):
    def test_activation_legal_twin_scalar_and_vector_scale_bias(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((128, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            t = lnl.load(a)
            s = lnl.full((128, 1), 0.5, dtype=lnl.float32, buffer=lnl.sbuf)
            b = lnl.full((128, 1), 1.0, dtype=lnl.bfloat16, buffer=lnl.sbuf)
            y = lisa.activation(lnl.copy, t, scale=s, bias=b)
            lnl.store(out, lisa.activation(lnl.copy, y, scale=2.0))
            return out

        a = f32(128, 64)
        np.testing.assert_allclose(k(a), (a * 0.5 + 1.0) * 2.0, rtol=1e-6, atol=1e-6)

    def test_tensor_engine_transpose_keeps_the_dtype_and_writes_psum(self):
        import torchneuron_ext.nki as nki
        import torchneuron_ext.nki.isa as nisa
        import torchneuron_ext.nki.language as nl

        def kernel(dst_dtype, dst_buffer):
            @nki.jit
            def k(a):
                out = nl.ndarray((64, 128), dtype=a.dtype, buffer=nl.shared_hbm)
                t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=a)
                tp = nl.ndarray((64, 128), dtype=dst_dtype, buffer=dst_buffer)
                nisa.nc_transpose(dst=tp, data=t)
                r = nl.ndarray((64, 128), dtype=a.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=r, src=tp)
                nisa.dma_copy(dst=out, src=r)
                return out
            return k

        a = f32(128, 64).astype(np.float16)
        self.assertExpectedInline(report(kernel(nl.float32, nl.psum), a), """\
err_unsupported_dtype at def+6: nisa.nc_transpose(dst=tp, data=t)
'nc_transpose' writes the elements of 'data' unchanged: dst must have data's dtype float16, got float32 (copy with a cast afterwards)""")
        self.assertExpectedInline(report(kernel(nl.float16, nl.sbuf), a), """\
err_unsupported_memory at def+6: nisa.nc_transpose(dst=tp, data=t)
Expected operand 'dst' of 'nc_transpose' to be in address space 'psum', but got a tile in 'sbuf' instead: the Tensor engine writes its transpose to PSUM""")
        np.testing.assert_array_equal(kernel(nl.float16, nl.psum)(a), a.T)


class TestFrontEndRules(TestCase):
    def test_tensor_used_outside_the_block_that_created_it(self):
        @lnki.jit
        def k(a, b):
            out = lnl.ndarray((128, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            for i in range(2):
                if i < 1:
                    tmp = lnl.load(a)
                else:
                    tmp = lnl.load(b)
                lnl.store(out, tmp)
            return out

        self.assertExpectedInline(report(k, f32(128, 64), f32(128, 64)), """\
err_local_variable_used_out_of_scope at def+8: lnl.store(out, tmp)
Local variable 'tmp' is referenced outside of its parent scope: it is created inside a control block (line 336) and tensors are local to the block that creates them; create it before the block and assign with 'tmp[...] ='""")

    def test_legal_twin_creates_the_tensor_before_the_block(self):
        @lnki.jit
        def k(a, b):
            out = lnl.ndarray((128, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            for i in range(2):
                tmp = lnl.ndarray((128, 64), dtype=lnl.float32, buffer=lnl.sbuf)
                if i < 1:
                    tmp[...] = lnl.load(a)
                else:
                    tmp[...] = lnl.load(b)
                lnl.store(out, tmp)
            return out

        a, b = f32(128, 64), f32(128, 64) + 1
        np.testing.assert_array_equal(k(a, b), b)

    def test_legal_twin_branches_decided_while_tracing_share_the_scope(self):
        # AWS's flash attention creates a tensor in both branches of an `if` on Python values and uses it
        # after them: the front end evaluates such a condition while tracing.
        @lnki.jit
        def k(a, b):
            out = lnl.ndarray((128, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            scale = a.shape[0] // 64
            if scale > 1 and lisa.get_nc_version() >= lisa.nc_version.gen2:
                tmp = lnl.load(a)
            else:
                tmp = lnl.load(b)
            lnl.store(out, tmp)
            return out

        a, b = f32(128, 64), f32(128, 64) + 1
        np.testing.assert_array_equal(k(a, b), a)

    def test_a_condition_computed_from_a_loop_variable_is_a_block(self):
        @lnki.jit
        def k(a, b):
            out = lnl.ndarray((128, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            for i in range(2):
                first = i == 0
                if first:
                    tmp = lnl.load(a)
                lnl.store(out, tmp)
            return out

        self.assertExpectedInline(report(k, f32(128, 64), f32(128, 64)), """\
err_local_variable_used_out_of_scope at def+7: lnl.store(out, tmp)
Local variable 'tmp' is referenced outside of its parent scope: it is created inside a control block (line 386) and tensors are local to the block that creates them; create it before the block and assign with 'tmp[...] ='""")

    def test_parameters_are_immutable(self):
        @lnki.jit
        def k(in_tensor):
            x = lnl.load(in_tensor)
            y = x + 1
            lnl.store(in_tensor, value=y)
            return in_tensor

        self.assertExpectedInline(report(k, f32(128, 64)), """\
err_cannot_update_immutable_parameter at def+4: lnl.store(in_tensor, value=y)
Cannot update immutable parameter 'in_tensor': parameters of a kernel are immutable unless annotated nt.mutable_tensor (or return a copy made with nisa.dma_copy into a new nl.shared_hbm tensor)""")

    def test_legal_twins_annotate_the_parameter_or_return_a_copy(self):
        import torchneuron_ext.nki.legacy.typing as nt

        @lnki.jit
        def mutable(in_tensor: nt.mutable_tensor):
            lnl.store(in_tensor, value=lnl.load(in_tensor) + 1)
            return in_tensor

        @lnki.jit
        def copied(in_tensor):
            out_tensor = lnl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=lnl.shared_hbm)
            lisa.dma_copy(dst=out_tensor, src=in_tensor)
            lnl.store(out_tensor, value=lnl.load(out_tensor) + 1)
            return out_tensor

        @lnki.jit
        def output_parameter(in_tensor, out_tensor):  # the older style: outputs passed in, nothing returned
            lnl.store(out_tensor, value=lnl.load(in_tensor) + 1)

        a = f32(128, 64)
        np.testing.assert_allclose(copied(a), a + 1)
        out = np.zeros_like(a)
        output_parameter(a, out)
        np.testing.assert_allclose(out, a + 1)
        b = a.copy()
        mutable(b)
        np.testing.assert_allclose(b, a + 1)

    def test_output_never_written(self):
        @lnki.jit
        def k(tensor_in):
            tensor_out = lnl.ndarray((128, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            M = 128
            N = M + 1
            for i in lnl.affine_range(M // N):  # no iteration: the store never runs
                lnl.store(tensor_out, value=lnl.load(tensor_in))
            return tensor_out

        self.assertExpectedInline(report(k, f32(128, 64)), """\
err_tensor_output_not_written_to at def+7: return tensor_out
output #0 of the kernel (shared_hbm tensor of shape (128, 64)) is returned but never written: check the range of the loop that stores it (a range of 0 iterations never runs), or store a default value first""")

    def test_legal_twin_rounds_the_trip_count_up(self):
        import math

        @lnki.jit
        def k(tensor_in):
            tensor_out = lnl.ndarray((128, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            M = 128
            N = M + 1
            for i in lnl.affine_range(math.ceil(M / N)):
                lnl.store(tensor_out, value=lnl.load(tensor_in))
            return tensor_out

        a = f32(128, 64)
        np.testing.assert_array_equal(k(a), a)


def _hbm() -> tuple:
    return (3, 128, 64), lnl.shared_hbm


def _allocated_sbuf() -> tuple:
    import torchneuron_ext.nki.compiler as ncc
    return (3, lnl.par_dim(128), 512), ncc.sbuf.mod_alloc(base_addr=0)


# A tensor created with an init value where the compiler cannot initialise it: (shape, buffer) -> the error.
INIT_VALUE_CASES = [
    pytest.param(_hbm, """\
err_hbm_tensor_with_init_value_not_supported at def+3: t = lnl.full(shape, fill_value=1.0, dtype=lnl.float32, buffer=buffer)
Creating HBM tensor with init value is not supported: create it with nl.ndarray(..., buffer=nl.shared_hbm) and nl.store the value 1.0""",
                 id="hbm"),
    pytest.param(_allocated_sbuf, """\
err_tensor_creation_on_scratchpad_with_init_value_not_supported at def+3: t = lnl.full(shape, fill_value=1.0, dtype=lnl.float32, buffer=buffer)
Creating SBUF/PSUM tensor with init value is not supported in allocated NKI kernels (ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=())): create it with nl.ndarray and set it with nisa.memset""",
                 id="allocated_sbuf"),
]


@pytest.mark.parametrize("where, expected", INIT_VALUE_CASES)
def test_tensor_with_init_value(where, expected: str) -> None:
    @lnki.jit
    def k(a):
        shape, buffer = where()
        t = lnl.full(shape, fill_value=1.0, dtype=lnl.float32, buffer=buffer)
        return a

    assert report(k, f32(2, 2)) == expected


class TestCreationAndAllocationRules(TestCase):
    def test_legal_twin_stores_the_init_value(self):
        @lnki.jit
        def k(a):
            t = lnl.ndarray((3, 128, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            for i in range(3):
                lnl.store(t[i, :, :], value=lnl.full((128, 64), 1.0, dtype=lnl.float32))
            return t

        np.testing.assert_array_equal(k(f32(2, 2)), np.ones((3, 128, 64), np.float32))

    def test_new_dialect_has_no_block_dimensions(self):
        import torchneuron_ext.nki as nki
        import torchneuron_ext.nki.language as nl

        @nki.jit
        def k(a):
            t = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
            return a

        @nki.jit
        def twin(a):
            tiles = [nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf) for _ in range(4)]
            return a

        self.assertExpectedInline(report(k, f32(2, 2)), """\
err_leading_dimension_of_tensor_must_be_partition at def+2: t = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
The leading dimension of SBUF/PSUM tensors must be the partition dimension: shape (4, 128, 64) has par_dim at position 1. Block dimensions were removed in NKI 0.2: keep the blocks in a list of tiles, or make the partition dimension first""")
        twin(f32(2, 2))

    def _allocated(self, body):
        import torchneuron_ext.nki.compiler as ncc

        @lnki.jit
        def k(a):
            out = lnl.ndarray((128, 128), dtype=lnl.float32, buffer=lnl.shared_hbm)
            data = lnl.ndarray((lnl.par_dim(128), 128), dtype=lnl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
            data[...] = lnl.load(a)
            res = lnl.ndarray((lnl.par_dim(128), 128), dtype=lnl.float32,
                              buffer=ncc.sbuf.mod_alloc(base_addr=512))
            bias = lnl.ndarray((lnl.par_dim(128), 1), dtype=lnl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=1024))
            bias[...] = lisa.memset((128, 1), 0.0, dtype=lnl.float32)
            body(data, res, bias)
            lnl.store(out, res)
            return out
        return k

    def test_activation_in_an_allocated_kernel_needs_a_bias(self):
        def body(data, res, bias):
            res[...] = lisa.activation(np.exp, data=data[...])

        self.assertExpectedInline(report(self._allocated(body), f32(128, 128)), """\
err_bias_tensor_must_be_specified_in_allocation at def+16: res[...] = lisa.activation(np.exp, data=data[...])
Bias tensor of an activation op must be specified in allocated NKI kernels: pass bias= to 'activation' (a (P, 1) tile allocated like the others)""")

    def test_legal_twin_passes_an_allocated_bias(self):
        def body(data, res, bias):
            res[...] = lisa.activation(np.exp, data=data[...], bias=bias)

        a = f32(128, 128)
        np.testing.assert_allclose(self._allocated(body)(a), np.exp(a), rtol=1e-5)

    def test_tensor_engine_transpose_in_an_allocated_kernel(self):
        def body(data, res, bias):
            res[...] = lnl.copy(lisa.nc_transpose(data[...]))

        def matmul(data, res, bias):
            res[...] = lnl.copy(lnl.matmul(data, data))

        self.assertExpectedInline(report(self._allocated(body), f32(128, 128)), """\
err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel at def+31: res[...] = lnl.copy(lisa.nc_transpose(data[...]))
Unsupported transpose case in allocated NKI kernels: 'nc_transpose' transposes on the Tensor engine; use engine=nisa.vector_engine (up to 32x32), or nc_matmul against an identity matrix you allocate""")
        self.assertExpectedInline(report(self._allocated(matmul), f32(128, 128)), """\
err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel at def+34: res[...] = lnl.copy(lnl.matmul(data, data))
Unsupported transpose case in allocated NKI kernels: 'matmul' transposes on the Tensor engine; pass transpose_x=True with x already transposed""")

    def test_legal_twins_transpose_on_the_vector_engine_or_pass_transpose_x(self):
        def vector(data, res, bias):
            res[0:32, 0:32] = lnl.copy(lisa.nc_transpose(data[0:32, 0:32], engine=lisa.vector_engine))

        def transposed(data, res, bias):
            res[...] = lnl.copy(lnl.matmul(data, data, transpose_x=True))

        a = f32(128, 128)
        np.testing.assert_array_equal(self._allocated(vector)(a)[0:32, 0:32], a[0:32, 0:32].T)
        np.testing.assert_allclose(self._allocated(transposed)(a), a.T @ a, rtol=1e-4, atol=1e-3)


class TestIndexAndApiRules(TestCase):
    def test_control_flow_on_arange(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((1, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            i1 = lnl.arange(64)[None, :]
            if i1 > 32:
                lnl.store(out[0, i1], lnl.load(a[0, i1]))
            return out

        self.assertExpectedInline(report(k, f32(1, 64)), """\
err_control_flow_condition_depending_on_arange at def+4: if i1 > 32:
Control-flow depending on `nl.arange` or `nl.mgrid` is not supported: an NKI index expression or mask has no single truth value; combine masks with '&' and '|', not 'and'/'or', and pass them as mask=""")

    def test_legal_twin_uses_a_mask(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((1, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            i1 = lnl.arange(64)[None, :]
            lnl.store(out[0, i1], lnl.load(a[0, i1]))
            lnl.store(out[0, i1], lnl.multiply(lnl.load(a[0, i1]), 2.0), mask=(i1 > 32))
            return out

        a = f32(1, 64)
        np.testing.assert_allclose(k(a), np.where(np.arange(64) > 32, a * 2, a))

    def test_masks_joined_with_python_and(self):
        # AWS's 2.26 known issues: "Use & to combine masks. We do not support using and for masks." Python's
        # `a and b` asks `a` for a truth value; if that were True the mask would silently be `b` alone.
        @lnki.jit
        def k(a):
            out = lnl.ndarray((8, 16), dtype=lnl.float32, buffer=lnl.shared_hbm)
            ix, iy = lnl.mgrid[0:8, 0:16]
            t = lnl.load(a[ix, iy])
            lnl.store(out[ix, iy], lnl.multiply(t, 2.0, mask=(ix < 4 and iy < 8)))
            return out

        self.assertExpectedInline(report(k, f32(8, 16)), """\
err_control_flow_condition_depending_on_arange at def+5: lnl.store(out[ix, iy], lnl.multiply(t, 2.0, mask=(ix < 4 and iy < 8)))
Control-flow depending on `nl.arange` or `nl.mgrid` is not supported: an NKI index expression or mask has no single truth value; combine masks with '&' and '|', not 'and'/'or', and pass them as mask=""")

    def test_legal_twin_joins_masks_with_ampersand(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((8, 16), dtype=lnl.float32, buffer=lnl.shared_hbm)
            ix, iy = lnl.mgrid[0:8, 0:16]
            t = lnl.load(a[ix, iy])
            lnl.store(out[ix, iy], t)
            lnl.store(out[ix, iy], lnl.multiply(t, 2.0), mask=((ix < 4) & (iy < 8)))
            return out

        a = f32(8, 16)
        inside = (np.arange(8)[:, None] < 4) & (np.arange(16)[None, :] < 8)
        np.testing.assert_allclose(k(a), np.where(inside, 2 * a, a))

    def test_assignment_into_an_index(self):
        @lnki.jit
        def k(a):
            _, x = lnl.mgrid[0:1, 0:8]
            x[0, 5] = 1024
            return a

        self.assertExpectedInline(report(k, f32(1, 8)), """\
err_cannot_assign_to_index at def+3: x[0, 5] = 1024
An `index` or `mask` tensor does not support item assignment: make a tile of it first with nisa.iota(...) and assign into that""")

    def test_legal_twin_assigns_into_an_iota_tile(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((1, 8), dtype=lnl.uint32, buffer=lnl.shared_hbm)
            _, x = lnl.mgrid[0:1, 0:8]
            y = lisa.iota(x, dtype=lnl.uint32)
            y[0, 5] = 1024
            lnl.store(out, y)
            return out

        expected = np.arange(8, dtype=np.uint32)[None, :]
        expected[0, 5] = 1024
        np.testing.assert_array_equal(k(f32(1, 8)), expected)

    def test_nki_api_outside_of_a_kernel(self):
        with pytest.raises(RuntimeError) as info:  # a RuntimeError as before, and an NKIError with the code
            lnl.zeros((128, 4), dtype=lnl.float32)
        assert isinstance(info.value, NKIError)
        self.assertExpectedInline(f"{info.value.code}: {info.value.source_line.strip()}", """err_nki_api_outside_of_nki_kernel: lnl.zeros((128, 4), dtype=lnl.float32)""")

    def test_gpsimd_cannot_access_psum(self):
        import torchneuron_ext.nki as nki
        import torchneuron_ext.nki.isa as nisa
        import torchneuron_ext.nki.language as nl

        def kernel(engine):
            @nki.jit
            def k(a):
                out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
                t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=a)
                p = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
                nisa.tensor_copy(dst=p, src=t, engine=engine)
                r = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=r, src=p)
                nisa.dma_copy(dst=out, src=r)
                return out
            return k

        a = f32(128, 64)
        self.assertExpectedInline(report(kernel(nisa.gpsimd_engine), a), """\
err_unsupported_memory at def+6: nisa.tensor_copy(dst=p, src=t, engine=engine)
Expected operand 'dst' of 'tensor_copy' to be in address space 'sbuf', but got a tile in 'psum' instead: the GpSimd engine cannot access PSUM (choose the Vector or Scalar engine)""")
        np.testing.assert_array_equal(kernel(nisa.vector_engine)(a), a)


class TestIndirectAccessForms(TestCase):
    def test_transpose_of_an_indirect_access(self):
        @lnki.jit
        def k(data, idx):
            out = lnl.ndarray((64, 128), dtype=lnl.float32, buffer=lnl.shared_hbm)
            idx_tile = lnl.load(idx)
            i_p, i_f = lnl.arange(128)[:, None], lnl.arange(64)[None, :]
            lnl.store(out, lnl.load_transpose2d(data[idx_tile[i_p, 0], i_f]))
            return out

        self.assertExpectedInline(report(k, f32(256, 64), np.arange(128, dtype=np.int32)[:, None] * 2), """\
err_indirect_indices_are_not_supported_with_nki_api at def+5: lnl.store(out, lnl.load_transpose2d(data[idx_tile[i_p, 0], i_f]))
'dma_transpose' does not support tensors with indirect indices (a tile used as an index); gather with nl.load or nisa.dma_copy first, then transpose the tile""")

    def test_legal_twin_gathers_with_load_then_transposes(self):
        @lnki.jit
        def k(data, idx):
            out = lnl.ndarray((128, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            idx_tile = lnl.load(idx)
            i_p, i_f = lnl.arange(128)[:, None], lnl.arange(64)[None, :]
            lnl.store(out, lnl.load(data[idx_tile[i_p, 0], i_f]))
            return out

        data, idx = f32(256, 64), np.arange(128, dtype=np.int32)[:, None] * 2
        np.testing.assert_array_equal(k(data, idx), data[idx[:, 0]])

    def test_indirect_indices_on_a_free_dimension(self):
        @lnki.jit
        def k(data, idx):
            out = lnl.ndarray((128, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            idx_tile = lnl.load(idx)
            i_p, i_f = lnl.arange(128)[:, None], lnl.arange(64)[None, :]
            lnl.store(out, lnl.load(data[i_p, idx_tile[0, i_f]]))
            return out

        self.assertExpectedInline(report(k, f32(128, 256), np.arange(64, dtype=np.int32)[None, :] * 2), """\
err_indirect_indices_free_dim at def+5: lnl.store(out, lnl.load(data[i_p, idx_tile[0, i_f]]))
Dynamic indexing for 'load' only supports indirect indices on the partition or block dimension, but the index tile of axis 1 varies along a free dimension (shape (1, 64)); index with a (P, 1) column of indices, e.g. t[idx_tile[i_p, 0], i_f]""")

    def test_assignment_copy_through_dynamic_indices(self):
        def kernel(use_instruction):
            @lnki.jit
            def k(data, idx):
                out = lnl.ndarray((8, 4), dtype=lnl.float32, buffer=lnl.shared_hbm)
                data_tile = lnl.load(data)
                idx_tile = lnl.load(idx)
                out_sbuf = lnl.ndarray((8, 4), dtype=lnl.float32, buffer=lnl.sbuf)
                iy, iz = lnl.mgrid[0:8, 0:4]
                if use_instruction:
                    out_sbuf[iy, iz] = lisa.tensor_copy_dynamic_src(data_tile[idx_tile[iy, 0], iz])
                else:
                    out_sbuf[iy, iz] = data_tile[idx_tile[iy, 0], iz]
                lnl.store(out, out_sbuf)
                return out
            return k

        data, idx = f32(16, 4), (np.arange(8, dtype=np.int32)[:, None] * 2 + 1)
        self.assertExpectedInline(report(kernel(False), data, idx), """\
err_copy_dynamic_indirect_indices_not_natively_supported at def+10: out_sbuf[iy, iz] = data_tile[idx_tile[iy, 0], iz]
Copying indirect memory references with dynamic indices (a tile used as an index of an on-chip tensor) is not natively supported: use nisa.tensor_copy_dynamic_src(...)""")
        np.testing.assert_array_equal(kernel(True)(data, idx), data[idx[:, 0]])


class TestDynamicControlFlowAndMasks(TestCase):
    """Control flow on tile values, do-while loops, mask expressions and annotated shapes (legacy)."""

    def test_branch_on_a_tile_value(self):
        @lnki.jit
        def k(a, b):
            cnd = lnl.load(a)
            if cnd:
                lnl.store(b, cnd)
            return b

        self.assertExpectedInline(report(k, f32(1, 1), f32(1, 1)), """\
err_dynamic_control_flow_not_supported at def+3: if cnd:
Dynamic control-flow depending on tensor value is not supported: a tile has no truth value while the kernel is compiled ('if', 'not', 'and'/'or', conditional expressions); select with nl.where or mask= instead""")

    def test_truth_value_of_a_multi_element_tile(self):
        @lnki.jit
        def k(a):
            ix, iy = lnl.mgrid[0:128, 0:128]
            a_tile: nt.tensor[128, 128] = lnl.load(a[ix, iy])
            not_a_tile = not lnl.greater(a_tile, 0.0)
            return a

        self.assertExpectedInline(report(k, f32(128, 128)), """\
err_ambiguous_tensor_truth_value at def+4: not_a_tile = not lnl.greater(a_tile, 0.0)
Cannot evaluate truth value of a multi-element tensor: a tensor of shape (128, 128) has no truth value; use '~', '&', '|' instead of 'not', 'and', 'or', and 'is None' / 'is not None' to test an optional tensor""")

    def test_optional_tensor_parameter_tested_with_if(self):
        # The legacy error page's own example (`if b:` on an Optional tensor parameter), in the form of AWS's
        # tensor_scalar_cumulative example; the new dialect's tensors are objects there and `if t:` is true
        # (tests/nki/test_access_patterns.py::test_a_tensor_compares_with_none_as_an_object).
        @lnki.jit
        def k(a, imm=None):
            out = lnl.ndarray((128, 8), dtype=lnl.float32, buffer=lnl.shared_hbm)
            imm = lnl.load(imm[...]) if imm else None
            lnl.store(out, lnl.load(a))
            return out

        self.assertExpectedInline(report(k, f32(128, 8), f32(128, 1)), """\
err_ambiguous_tensor_truth_value at def+3: imm = lnl.load(imm[...]) if imm else None
Cannot evaluate truth value of a multi-element tensor: a tensor of shape (128, 1) has no truth value; use '~', '&', '|' instead of 'not', 'and', 'or', and 'is None' / 'is not None' to test an optional tensor""")

    def test_legal_twin_negates_elementwise_and_tests_for_none(self):
        @lnki.jit
        def k(a, b=None):
            out = lnl.ndarray((128, 128), dtype=lnl.float32, buffer=lnl.shared_hbm)
            ix, iy = lnl.mgrid[0:128, 0:128]
            a_tile: nt.tensor[128, 128] = lnl.load(a[ix, iy])
            if b is not None:
                a_tile = lnl.add(a_tile, lnl.load(b[ix, iy]))
            lnl.store(out[ix, iy], lnl.where(lnl.less_equal(a_tile, 0.0), a_tile, 0.0))  # elementwise, not `not`
            return out

        a, b = f32(128, 128), f32(128, 128) + 0.5
        np.testing.assert_allclose(k(a), np.where(a > 0, 0.0, a))
        np.testing.assert_allclose(k(a, b), np.where(a + b > 0, 0.0, a + b), rtol=1e-6)

    def test_while_loop_on_a_tile_value_needs_unconditional_entry(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((1, 1), dtype=lnl.float32, buffer=lnl.shared_hbm)
            a_tile = lnl.load(a[0:1, 0:1])
            while lnl.less(a_tile, 10.0):
                a_tile = lnl.add(a_tile, 1.0)
            lnl.store(out, a_tile)
            return out

        self.assertExpectedInline(report(k, np.full((1, 1), 3.5, np.float32)), """\
err_while_loop_requires_unconditional_entry at def+4: while lnl.less(a_tile, 10.0):
Traditional while loops are not supported - use do-while pattern instead: the condition depends on a tile and is checked before the first iteration; enter the loop unconditionally ('cond = True' before 'while cond:') and compute the condition at the end of the body""")

    def test_legal_twin_do_while_reads_the_condition_at_the_end_of_each_iteration(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((1, 1), dtype=lnl.float32, buffer=lnl.shared_hbm)
            a_tile = lnl.load(a[0:1, 0:1])
            cond = True  # unconditional entry
            while cond:
                a_tile = lnl.add(a_tile, 1.0)
                cond = lnl.less(a_tile, 10.0)
            lnl.store(out, a_tile)
            return out

        # The body runs once even when the condition is false from the start (do-while).
        for start, expected in ((3.5, 10.5), (20.0, 21.0)):
            np.testing.assert_allclose(k(np.full((1, 1), start, np.float32)), [[expected]])

    def test_mask_with_a_non_affine_expression_of_a_loop_index(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((8, 4), dtype=lnl.float32, buffer=lnl.shared_hbm)
            for i in range(8):
                lnl.store(out[i, 0:4], lnl.load(a[i, 0:4]), mask=(i % 4) < 2)
            return out

        self.assertExpectedInline(report(k, f32(8, 4)), """\
err_unsupported_expression_in_mask at def+4: lnl.store(out[i, 0:4], lnl.load(a[i, 0:4]), mask=(i % 4) < 2)
NKI mask expressions must be affine expressions of static loop indices: 'i % 4' is not an affine expression (only a*i + b*j + c compared with constants); compute such a selection with nl.where or an iota tile instead""")

    def test_mask_through_a_name_assigned_a_non_affine_index(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((1, 64), dtype=lnl.float32, buffer=lnl.shared_hbm)
            i1 = lnl.arange(64)[None, :]
            even = i1 % 2
            lnl.store(out[0, i1], lnl.load(a[0, i1]), mask=(even == 0))
            return out

        self.assertExpectedInline(report(k, f32(1, 64)), """\
err_unsupported_expression_in_mask at def+5: lnl.store(out[0, i1], lnl.load(a[0, i1]), mask=(even == 0))
NKI mask expressions must be affine expressions of static loop indices: 'even' is assigned a non-affine expression of loop indices (only a*i + b*j + c compared with constants); compute such a selection with nl.where or an iota tile instead""")

    def test_mask_that_is_a_tile(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((1, 8), dtype=lnl.float32, buffer=lnl.shared_hbm)
            t = lnl.load(a)
            lnl.store(out, t, mask=lnl.greater(t, 0.0))
            return out

        self.assertExpectedInline(report(k, f32(1, 8)), """\
err_unsupported_expression_in_mask at def+4: lnl.store(out, t, mask=lnl.greater(t, 0.0))
NKI mask expressions must be affine expressions of static loop indices: this mask is a tile of shape (1, 8) (a runtime value); select with nl.where instead""")

    def test_legal_twin_masks_are_affine_in_the_indices(self):
        @lnki.jit
        def k(a):
            out = lnl.ndarray((8, 8), dtype=lnl.float32, buffer=lnl.shared_hbm)
            i_f = lnl.arange(8)[None, :]
            for i in range(8):
                for j in range(2):
                    lnl.store(out[i, i_f], lnl.load(a[i, i_f]), mask=(2 * i + 3 * j + i_f + 1 < 12))
            return out

        a = f32(8, 8)
        i, f = np.mgrid[0:8, 0:8]
        got = k(a)
        keep = 2 * i + 3 * 1 + f + 1 < 12  # j = 1 writes a superset of j = 0
        np.testing.assert_allclose(got[keep], a[keep])

    def test_annotated_shape_mismatch(self):
        @lnki.jit
        def k(a):
            data: nt.tensor[128, 512] = lnl.zeros((lnl.par_dim(128), 128), dtype=np.float32)
            out = lnl.ndarray((128, 128), dtype=lnl.float32, buffer=lnl.shared_hbm)
            lnl.store(out, lnl.add(data, lnl.load(a)))
            return out

        self.assertExpectedInline(report(k, f32(128, 128)), """\
err_annotation_shape_mismatch at def+2: data: nt.tensor[128, 512] = lnl.zeros((lnl.par_dim(128), 128), dtype=np.float32)
Tensor shape and the annotated shape mismatch: shape of `data[128, 128]` does not match the expected shape of [128, 512] (annotated 'nt.tensor[128, 512]')""")

    def test_legal_twin_annotation_matches_the_shape(self):
        @lnki.jit
        def k(a):
            data: nt.tensor[a.shape[0], 128] = lnl.load(a)  # evaluated in the kernel's scope
            scaled: nt.tensor[[128, 128], lnl.float32] = lnl.multiply(data, 3.0)
            out = lnl.ndarray((128, 128), dtype=lnl.float32, buffer=lnl.shared_hbm)
            lnl.store(out, scaled)
            return out

        a = f32(128, 128)
        np.testing.assert_allclose(k(a), a * 3, rtol=1e-6)


class TestTransposeEngineSelection(TestCase):
    def test_transpose_without_engine_picks_the_vector_engine_for_a_block_it_can_write(self):
        # AWS: with no engine "Neuron Compiler will automatically select an engine based on the input shape";
        # only the Vector engine writes SBUF, up to 32x32. AWS's MLP TKG (mlp_tkg_gate_up_projection.py)
        # transposes (tiles, 32) blocks of dequantization scales into an SBUF access pattern this way.
        import torchneuron_ext.nki as nki
        import torchneuron_ext.nki.isa as nisa
        import torchneuron_ext.nki.language as nl

        def kernel(rows, cols, engine=None):
            @nki.jit
            def k(a):
                t = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=a)
                tp = nl.ndarray((cols, 2 * rows), dtype=a.dtype, buffer=nl.sbuf)
                nisa.memset(dst=tp, value=0.0)
                nisa.nc_transpose(dst=tp.ap(pattern=[[2 * rows, cols], [2, rows]], offset=1), data=t,
                                  **({} if engine is None else {"engine": engine}))
                out = nl.ndarray((cols, 2 * rows), dtype=a.dtype, buffer=nl.shared_hbm)
                nisa.dma_copy(dst=out, src=tp)
                return out
            return k

        a = f32(4, 32).astype(np.float16)
        expected = np.zeros((32, 8), np.float16)
        expected[:, 1::2] = a.T
        np.testing.assert_array_equal(kernel(4, 32)(a), expected)
        np.testing.assert_array_equal(kernel(4, 32, nisa.vector_engine)(a), expected)
        # The Tensor engine still writes only PSUM, whether named or chosen because the block exceeds 32x32.
        self.assertExpectedInline(report(kernel(4, 32, nisa.tensor_engine), a), """\
err_unsupported_memory at def+6: nisa.nc_transpose(dst=tp.ap(pattern=[[2 * rows, cols], [2, rows]], offset=1), data=t,
Expected operand 'dst' of 'nc_transpose' to be in address space 'psum', but got a tile in 'sbuf' instead: the Tensor engine writes its transpose to PSUM""")
        self.assertExpectedInline(report(kernel(4, 64), f32(4, 64).astype(np.float16)), """\
err_unsupported_memory at def+6: nisa.nc_transpose(dst=tp.ap(pattern=[[2 * rows, cols], [2, rows]], offset=1), data=t,
Expected operand 'dst' of 'nc_transpose' to be in address space 'psum', but got a tile in 'sbuf' instead: the Tensor engine writes its transpose to PSUM""")
