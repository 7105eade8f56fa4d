"""Every hardware and language rule the simulator enforces: each raises NKIError with the toolchain's code,
the legacy wording where the toolchain has one, and the kernel line that broke it."""
from __future__ import annotations

import numpy as np
import pytest
from expecttest import TestCase

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.isa as lisa
import torchneuron_ext.nki.legacy.language as lnl
from torchneuron_ext.nki import NKIError


def f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def raises(code: str, kernel, *args, **kwargs) -> NKIError:
    with pytest.raises(NKIError) as info:
        kernel(*args, **kwargs)
    assert info.value.code == code, str(info.value)
    return info.value


# -- partitions, rank, block dimensions ------------------------------------------------------------------

def test_partition_limit_on_allocation_points_at_the_line():
    @lnki.jit
    def k(a):
        t = lnl.ndarray((256, 4), dtype=lnl.float32, buffer=lnl.sbuf)
        return a

    err = raises("err_num_partition_exceed_arch_limit", k, f32(4, 4))
    assert "Size of partition dimension 256 exceeds architecture limitation of 128." in str(err)
    assert err.filename == __file__
    assert err.source_line.strip() == "t = lnl.ndarray((256, 4), dtype=lnl.float32, buffer=lnl.sbuf)"
    # The error is all three of the toolchains' exception types.
    assert isinstance(err, SyntaxError) and isinstance(err, AssertionError) and isinstance(err, ValueError)


def test_partition_limit_on_load():
    @nki.jit
    def k(a):
        t = nl.load(a[0:256, :])
        return a

    raises("err_num_partition_exceed_arch_limit", k, f32(256, 8))


def test_partition_limit_on_compute_operand_with_block_dims_is_per_tile():
    @lnki.jit
    def k(a):
        blocks = lnl.ndarray((2, lnl.par_dim(128), 8), dtype=lnl.float32, buffer=lnl.sbuf)
        ok = lnl.exp(blocks[1])  # a block is a tile
        lnl.exp(blocks)  # the whole tensor is not
        return a

    err = raises("err_failed_to_infer_tile_from_local_tensor", k, f32(4, 4))
    assert err.source_line.strip() == "lnl.exp(blocks)  # the whole tensor is not"


def test_tiles_need_rank_two():
    @nki.jit
    def k(a):
        t = nl.ndarray((128,), dtype=nl.float32, buffer=nl.sbuf)
        return a

    err = raises("err_insufficient_rank", k, f32(4, 4))
    assert "Insufficient rank" in str(err)


def test_par_dim_over_128_in_block_tensor():
    @lnki.jit
    def k(a):
        t = lnl.ndarray((2, lnl.par_dim(129), 4), dtype=lnl.float32, buffer=lnl.sbuf)
        return a

    raises("err_num_partition_exceed_arch_limit", k, f32(4, 4))


# -- SBUF and PSUM capacity ------------------------------------------------------------------------------

def _sbuf_kernel(free: int, count: int):
    @lnki.jit
    def k(a):
        keep = [lnl.zeros((128, free), dtype=lnl.float32, buffer=lnl.sbuf) for _ in range(count)]
        for t in keep:  # every tile is read after all were created: they are live together
            lnl.exp(t[:, 0:1])
        return a
    return k


@pytest.mark.parametrize("target,fits", [("trn1", False), ("trn2", True), ("trn3", True)])
def test_sbuf_partition_capacity_depends_on_target(monkeypatch, target, fits):
    monkeypatch.setenv("NKI_TARGET", target)
    k = _sbuf_kernel(50_000, 1)  # 200,000 bytes per partition: over trn1's 192 KiB, under trn2's 224 KiB
    if fits:
        k(f32(2, 2))
    else:
        err = raises("err_sbuf_capacity_exceeded", k, f32(2, 2))
        assert "196608" in str(err)


def _spilled(kernel, memory: str) -> int:
    return kernel.last_result.costs.spill_bytes[memory]


def test_sbuf_counts_live_tiles_and_frees_dead_ones(monkeypatch):
    # Live tiles over capacity are not an error: AWS's compiler spills them to HBM and reloads them (memory
    # hierarchy overview); the cost model charges the overflow.
    monkeypatch.setenv("NKI_TARGET", "trn2")
    k = _sbuf_kernel(20_000, 3)
    k(f32(2, 2))  # 3 x 80 KB live > 224 KiB: the third tile overflows by 240,000 - 229,376 bytes,
    # and the first exp's (128, 1) fp32 result, made while all three are still to be read, by 4 more
    assert _spilled(k, "sbuf") == (3 * 80_000 - 229_376 + 4) * 128

    @lnki.jit
    def reuse(a):
        for _ in range(10):
            # 160 KB each: the previous iteration's tile dies when the name is rebound, so one is live
            t = lnl.ndarray((128, 40_000), dtype=lnl.float32, buffer=lnl.sbuf)
            lnl.exp(t[:, 0:1])
        return a

    reuse(f32(2, 2))
    assert _spilled(reuse, "sbuf") == 0


def _held_tiles_kernel(read_again: bool):
    @lnki.jit
    def k(a):
        names = []
        for _ in range(4):
            t = lnl.zeros((128, 20_000), dtype=lnl.float32, buffer=lnl.sbuf)  # 80 KB per partition
            lnl.exp(t[:, 0:1])
            names.append(t)  # 320 KB held by Python names...
        if read_again:       # ...but live only if a later instruction reads them
            for t in names:
                lnl.exp(t[:, 0:1])
        return a
    return k


def test_capacity_is_judged_by_live_range_not_by_python_names(monkeypatch):
    monkeypatch.setenv("NKI_TARGET", "trn2")
    held = _held_tiles_kernel(read_again=False)
    held(f32(2, 2))
    assert _spilled(held, "sbuf") == 0
    read = _held_tiles_kernel(read_again=True)
    read(f32(2, 2))
    # the tiles over 224 KiB, and five (128, 1) fp32 exp results made while the memory was over
    assert _spilled(read, "sbuf") == (4 * 80_000 - 229_376 + 5 * 4) * 128


def test_psum_tile_larger_than_psum_is_an_error():
    # A tile may span banks (NKI 0.2+), but not exceed PSUM's 16 KiB per partition: nothing can spill it.
    @nki.jit
    def k(a, n):
        p = nl.ndarray((128, n), dtype=nl.float32, buffer=nl.psum)
        return a

    k(f32(2, 2), 4096)
    err = raises("err_psum_capacity_exceeded", k, f32(2, 2), 4097)
    assert "16384" in str(err)


def test_legacy_psum_tile_fits_one_bank():
    @lnki.jit
    def k(a):
        p = lnl.ndarray((128, 513), dtype=lnl.float32, buffer=lnl.psum)
        return a

    err = raises("err_size_of_dimension_exceed_arch_limit", k, f32(2, 2))
    assert "2048" in str(err)


def test_psum_has_eight_banks():
    @nki.jit
    def k(a, n):
        banks = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(n)]
        for b in banks:  # all of them in use together
            nisa.memset(b, 0.0)
        total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        for b in banks:
            nisa.tensor_copy(total, b[:, 0:1])
        return a

    k(f32(2, 2), 8)
    assert _spilled(k, "psum") == 0
    k(f32(2, 2), 9)  # a ninth bank live: the compiler spills one bank's worth to SBUF
    assert _spilled(k, "psum") == 2048 * 128


# -- matmul operand limits -------------------------------------------------------------------------------

def _matmul_kernel(k_dim: int, m: int, n: int, k2: int | None = None, dt=np.float32, dt2=np.float32):
    @nki.jit
    def k(a):
        s = nl.zeros((k_dim, m), dtype=dt, buffer=nl.sbuf)
        mv = nl.zeros((k2 or k_dim, n), dtype=dt2, buffer=nl.sbuf)
        out = nl.ndarray((min(m, 128), n), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(out, s, mv)
        return a
    return k


def test_matmul_limits(monkeypatch):
    monkeypatch.setenv("NKI_TARGET", "trn2")
    _matmul_kernel(128, 128, 512)(f32(2, 2))
    err = raises("err_size_of_dimension_exceed_arch_limit", _matmul_kernel(128, 129, 512), f32(2, 2))
    assert "stationary free size 129" in str(err)
    err = raises("err_num_partition_mismatch", _matmul_kernel(64, 32, 32, k2=32), f32(2, 2))
    assert "mismatch in parameters (stationary[64, 32], moving[32, 32])" in str(err)
    raises("err_unsupported_dtype_combination", _matmul_kernel(32, 32, 32, dt2=nl.bfloat16), f32(2, 2))


def test_matmul_moving_free_limit_is_512_except_trn3(monkeypatch):
    @lnki.jit
    def k(a):
        s = lnl.zeros((128, 128), dtype=lnl.bfloat16, buffer=lnl.sbuf)
        mv = lnl.zeros((128, 1024), dtype=lnl.bfloat16, buffer=lnl.sbuf)
        r = lisa.nc_matmul(s, mv)
        return a

    monkeypatch.setenv("NKI_TARGET", "trn2")
    err = raises("err_size_of_dimension_exceed_arch_limit", k, f32(2, 2))
    assert "moving free size 1024" in str(err)
    monkeypatch.setenv("NKI_TARGET", "trn3")  # trn3 takes up to 4096 moving columns, but PSUM tiles still 2 KiB
    raises("err_size_of_dimension_exceed_arch_limit", k, f32(2, 2))


# -- buffer kinds per API ----------------------------------------------------------------------------------

def test_load_needs_hbm_source():
    @lnki.jit
    def k(a):
        t = lnl.load(a)
        u = lnl.load(t)
        return a

    err = raises("err_unsupported_memory", k, f32(4, 4))
    assert "Expected operand 'src' of 'load' to be in address space 'hbm', but got a tile in 'sbuf' instead" in str(err)


def test_store_needs_hbm_destination_and_compute_needs_tiles():
    @lnki.jit
    def store_to_sbuf(a):
        t = lnl.load(a)
        lnl.store(t, value=t)
        return a

    @lnki.jit
    def exp_on_hbm(a):
        return lnl.exp(a)

    raises("err_unsupported_memory", store_to_sbuf, f32(4, 4))
    err = raises("err_unsupported_memory", exp_on_hbm, f32(4, 4))
    assert "'exp'" in str(err)


def test_matmul_reads_sbuf_and_writes_psum():
    @nki.jit
    def psum_operand(a):
        s = nl.zeros((32, 32), dtype=nl.float32, buffer=nl.psum)
        m = nl.zeros((32, 32), dtype=nl.float32, buffer=nl.sbuf)
        out = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(out, s, m)
        return a

    @nki.jit
    def sbuf_dst(a):
        s = nl.zeros((32, 32), dtype=nl.float32, buffer=nl.sbuf)
        out = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_matmul(out, s, s)
        return a

    raises("err_unsupported_memory", psum_operand, f32(2, 2))
    err = raises("err_unsupported_memory", sbuf_dst, f32(2, 2))
    assert "writes only to PSUM" in str(err)


def test_new_dialect_dma_cannot_read_psum_and_gpsimd_cannot_touch_psum():
    @nki.jit
    def dma_from_psum(a):
        p = nl.zeros((4, 4), dtype=nl.float32, buffer=nl.psum)
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=p)
        return out

    @nki.jit
    def power_on_psum(a):
        p = nl.zeros((4, 4), dtype=nl.float32, buffer=nl.psum)
        s = nl.zeros((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        d = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(d, p, s, nl.power)
        return a

    @nki.jit
    def both_psum(a):
        p = nl.zeros((4, 4), dtype=nl.float32, buffer=nl.psum)
        d = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(d, p, p, nl.add)
        return a

    raises("err_unsupported_memory", dma_from_psum, f32(2, 2))
    assert "GpSimd" in str(raises("err_unsupported_memory", power_on_psum, f32(2, 2)))
    raises("err_unsupported_memory", both_psum, f32(2, 2))


def test_nisa_operands_need_equal_partitions():
    @lnki.jit
    def k(a):
        x = lnl.zeros((128, 512), dtype=lnl.float32)
        y = lnl.zeros((1, 512), dtype=lnl.float32)
        return lisa.tensor_tensor(x, y, lnl.add)

    err = raises("err_num_partition_mismatch", k, f32(2, 2))
    assert ("number of partitions (dimension 0 size of a tile) mismatch in parameters "
            "(data1[128, 512], data2[1, 512]) of 'tensor_tensor'") in str(err)


def test_operators_do_not_broadcast_partitions_but_nl_functions_do():
    @lnki.jit
    def op(a):
        x = lnl.zeros((128, 8), dtype=lnl.float32)
        y = lnl.ones((1, 8), dtype=lnl.float32)
        return x + y

    @lnki.jit
    def fn(a):
        x = lnl.zeros((128, 8), dtype=lnl.float32)
        y = lnl.ones((1, 8), dtype=lnl.float32)
        out = lnl.ndarray((128, 8), dtype=lnl.float32, buffer=lnl.shared_hbm)
        lnl.store(out, lnl.add(x, y))
        return out

    raises("err_num_partition_mismatch", op, f32(2, 2))
    np.testing.assert_array_equal(fn(f32(2, 2)), np.ones((128, 8), np.float32))


# -- indexing --------------------------------------------------------------------------------------------

def test_one_dimensional_arange_and_mixed_indexing():
    @lnki.jit
    def one_d(a):
        return lnl.load(a[lnl.arange(4), lnl.arange(4)[None, :]])

    @lnki.jit
    def mixed(a):
        return lnl.load(a[lnl.arange(4)[:, None], 0:4])

    raises("err_1d_arange_not_supported", one_d, f32(4, 4))
    raises("err_unsupported_mixing_basic_advanced_tensor_indexing", mixed, f32(4, 4))


def test_out_of_bounds_is_an_error_unless_masked():
    @lnki.jit
    def k(a, masked):
        i_p = lnl.arange(128)[:, None]
        i_f = lnl.arange(4)[None, :]
        out = lnl.ndarray((128, 4), dtype=lnl.float32, buffer=lnl.shared_hbm)
        t = lnl.load(a[i_p, i_f], mask=(i_p < a.shape[0]) if masked else None)
        lnl.store(out[i_p, i_f], value=t)
        return out

    a = f32(100, 4)
    err = raises("err_tensor_access_out_of_bound", k, a, False)
    assert "index range [0, 127] exceed dimension size of 100" in str(err)
    out = k(a, True)
    np.testing.assert_array_equal(out[:100], a)
    assert np.isnan(out[100:]).all()  # masked-out lanes are never loaded


def test_slices_out_of_bounds_are_errors_not_clipped():
    @nki.jit
    def k(a):
        return nl.load(a[0:8, 0:4])

    err = raises("err_tensor_access_out_of_bound", k, f32(6, 4))
    assert "index range [0, 7] exceed dimension size of 6" in str(err)


def test_assignment_destination_cannot_be_smaller():
    @lnki.jit
    def k(a):
        small = lnl.ndarray((4, 2), dtype=lnl.float32)
        big = lnl.zeros((4, 8), dtype=lnl.float32)
        small[...] = big
        return a

    raises("err_store_dst_shape_smaller_than_other_shape", k, f32(2, 2))


def test_transpose_limits():
    @lnki.jit
    def wide(a):
        return lnl.transpose(lnl.zeros((128, 512), dtype=lnl.float32))

    @lnki.jit
    def three_d(a):
        return lnl.transpose(lnl.zeros((4, 4, 4), dtype=lnl.float32))

    raises("err_size_of_dimension_exceed_arch_limit", wide, f32(2, 2))
    raises("err_exceed_max_supported_dimension", three_d, f32(2, 2))


def test_reductions_cannot_reduce_partitions():
    @lnki.jit
    def k(a):
        return lnl.sum(lnl.load(a), axis=0)

    raises("err_unsupported_reduce_axis", k, f32(4, 4))


# -- kernel structure ------------------------------------------------------------------------------------

def test_shared_hbm_only_at_kernel_level():
    @lnki.jit
    def k(a):
        for i in lnl.affine_range(2):
            out = lnl.ndarray((4, 4), dtype=lnl.float32, buffer=lnl.shared_hbm)
        return out

    raises("err_shared_hbm_must_in_kernel_level", k, f32(2, 2))


def test_nested_kernel_with_grid():
    @lnki.jit
    def inner(a):
        return a

    @lnki.jit
    def outer(a):
        return inner[2](a)

    raises("err_nested_kernel_with_spmd_grid", outer, f32(2, 2))


def test_mutable_parameter_must_be_returned():
    @lnki.jit
    def k(a, b: lnki.typing.mutable_tensor):
        lnl.store(b, value=lnl.load(a))
        out = lnl.ndarray(a.shape, dtype=a.dtype, buffer=lnl.shared_hbm)
        return out

    raises("err_mutable_parameter_not_returned", k, f32(4, 4), f32(4, 4))


def test_new_dialect_grid_is_the_lnc_degree():
    @nki.jit
    def k(a):
        return a

    k[2](f32(2, 2))
    with pytest.raises(ValueError, match="logical NeuronCore degree"):
        k[4]
    with pytest.raises(AttributeError, match="legacy NKI dialect"):
        nl.arange(4)


def test_process_stays_usable_after_an_error():
    @lnki.jit
    def bad(a):
        t = lnl.ndarray((256, 4), dtype=lnl.float32)
        return a

    @lnki.jit
    def good(a):
        out = lnl.ndarray(a.shape, dtype=a.dtype, buffer=lnl.shared_hbm)
        lnl.store(out, value=lnl.exp(lnl.load(a)))
        return out

    for _ in range(3):
        with pytest.raises(NKIError):
            bad(f32(4, 4))
    a = f32(4, 4)
    np.testing.assert_allclose(good(a), np.exp(a), rtol=1e-6)


class TestMessages(TestCase):
    """The full text an author reads (the location line depends on this file's path, so it is cut)."""

    def test_partition_message(self):
        @lnki.jit
        def k(a):
            t = lnl.ndarray((200, 4), dtype=lnl.float32)
            return a

        with self.assertRaises(NKIError) as ctx:
            k(f32(2, 2))
        self.assertExpectedInline(str(ctx.exception).splitlines()[0], """\
Size of partition dimension 200 exceeds architecture limitation of 128. [err_num_partition_exceed_arch_limit]""")

    def test_out_of_bounds_message(self):
        @lnki.jit
        def k(a):
            i_p = lnl.arange(128)[:, None]
            return lnl.load(a[i_p, lnl.arange(4)[None, :]])

        with self.assertRaises(NKIError) as ctx:
            k(f32(100, 4))
        self.assertExpectedInline(str(ctx.exception).splitlines()[0], """\
index range [0, 127] exceed dimension size of 100; if only part of the tile is in bounds, pass mask= (for example mask=(i * 128 + i_p < 100)) [err_tensor_access_out_of_bound]""")


def test_a_smaller_value_that_does_not_broadcast_is_a_shape_mismatch():
    @lnki.jit
    def k(a):
        big = lnl.ndarray((4, 8), dtype=lnl.float32)
        big[...] = lnl.zeros((4, 3), dtype=lnl.float32)
        return a

    raises("err_shape_mismatch", k, f32(2, 2))


def test_limits_come_from_the_selected_target(monkeypatch):
    # A made-up generation with half the partitions, a narrower PE array and smaller banks: every limit
    # the engine checks, and nl.tile_size inside the kernel, follow it.
    from torchneuron_ext.nki import memory
    tiny = memory.Target("tiny", 8192, psum_partition_bytes=4096, psum_bank_bytes=1024, num_partitions=64,
                         gemm_moving_fmax=256, gemm_stationary_fmax=64, bn_stats_fmax=128, pe_array=64)
    monkeypatch.setitem(memory.TARGETS, "tiny", tiny)

    def kernel(shape, op):
        @lnki.jit(platform_target="tiny")
        def k(a):
            assert (lnl.tile_size.pmax, lnl.tile_size.psum_fmax, lnl.tile_size.gemm_moving_fmax) == (64, 256, 256)
            t = lnl.zeros(shape, dtype=lnl.float32, buffer=lnl.sbuf)
            op(t)
            return a
        return k

    kernel((64, 8), lambda t: lnl.exp(t))(f32(2, 2))
    err = raises("err_num_partition_exceed_arch_limit", kernel((96, 8), lambda t: lnl.exp(t)), f32(2, 2))
    assert "limitation of 64" in str(err)
    raises("err_size_of_dimension_exceed_arch_limit", kernel((64, 65), lambda t: lisa.nc_matmul(t, t)), f32(2, 2))
    raises("err_size_of_dimension_exceed_arch_limit", kernel((64, 200), lambda t: lisa.bn_stats(t)), f32(2, 2))
    raises("err_size_of_dimension_exceed_arch_limit", kernel((64, 300), lambda t: lnl.zeros((64, 300), dtype=lnl.float32,
                                                                                             buffer=lnl.psum)), f32(2, 2))
    raises("err_sbuf_capacity_exceeded", kernel((64, 4096), lambda t: None), f32(2, 2))


def _psum_blocks_kernel(all_at_once: bool):
    @lnki.jit
    def k(a):
        t = lnl.load(a)
        acc = lnl.ndarray((16, lnl.par_dim(128), 512), dtype=lnl.float32, buffer=lnl.psum)  # 16 banks of blocks
        out = lnl.ndarray((128, 1), dtype=lnl.float32, buffer=lnl.sbuf)
        for b in lnl.sequential_range(16):  # `out` is rewritten in every iteration: not an affine loop
            acc[b] = lisa.nc_matmul(t[:, 0:128], t)
            if not all_at_once:
                out[...] = lnl.copy(acc[b][:, 0:1])  # each block read right away: one bank at a time
        if all_at_once:
            for b in lnl.sequential_range(16):             # all sixteen blocks wanted together: > 8 banks
                out[...] = lnl.copy(acc[b][:, 0:1])
        return a
    return k


def test_blocks_are_allocated_by_their_own_live_ranges():
    # The allocator places each block of a block-dimension tensor as its own tile (AWS's attention
    # tutorial declares a (32, 8, 128, 512) PSUM tensor and uses a few blocks at a time).
    one = _psum_blocks_kernel(all_at_once=False)
    one(np.ones((128, 512), np.float32))
    assert _spilled(one, "psum") == 0
    every = _psum_blocks_kernel(all_at_once=True)
    every(np.ones((128, 512), np.float32))
    assert _spilled(every, "psum") == 8 * 2048 * 128  # sixteen banks live: eight spilled


def test_an_instruction_result_assigned_to_a_tile_takes_no_memory_of_its_own():
    # `qk[b] = nisa.nc_matmul(...)` for all 8 PSUM banks of a block tensor (AWS's attention tutorial): the
    # matmul writes into qk[b] directly, so the 8 blocks fit; a ninth bank really live does not.
    @lnki.jit
    def k(a, extra):
        t = lnl.load(a)
        qk = lnl.ndarray((8, lnl.par_dim(128), 512), dtype=lnl.float32, buffer=lnl.psum)
        for b in lnl.affine_range(8):
            qk[b] = lisa.nc_matmul(t[:, 0:128], t)
        keep = lisa.nc_matmul(t[:, 0:128], t) if extra else None
        out = lnl.ndarray((128, 1), dtype=lnl.float32, buffer=lnl.sbuf)
        for b in lnl.sequential_range(8):  # `out` is rewritten in every iteration: not an affine loop
            out[...] = lnl.copy(qk[b][:, 0:1])
        if extra:
            out[...] = lnl.copy(keep[:, 0:1])
        return a

    k(np.ones((128, 512), np.float32), False)
    assert _spilled(k, "psum") == 0
    k(np.ones((128, 512), np.float32), True)
    assert _spilled(k, "psum") == 2048 * 128
