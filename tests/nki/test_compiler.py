"""nki.compiler: direct allocation (tiles placed at chosen SBUF/PSUM addresses, checked against the
target's capacity, aliasing as on the device) and the compiler directives kernels carry."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import torchneuron_ext.nki.compiler as ncc
import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.isa as nisa
import torchneuron_ext.nki.legacy.language as nl
from torchneuron_ext.nki import NKIError
from torchneuron_ext.nki.legacy.language import par_dim


def f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def raises(code: str, kernel, *args) -> NKIError:
    with pytest.raises(NKIError) as info:
        kernel(*args)
    assert info.value.code == code, str(info.value)
    return info.value


@nki.compiler.skip_middle_end_transformations
@nki.jit
def double_buffered_exp(x):
    # Four blocks over two physical tiles (num_free_tiles=(2,)), each reused every other iteration.
    n, p, f = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((n, par_dim(p), f), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    res = nl.ndarray((par_dim(p), f), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=2 * f * 4))
    for i in nl.affine_range(n, directives=ncc.multi_buffer(2)):
        buf[i] = nl.load(x[i])
        res[...] = nl.exp(buf[i])
        nl.store(out[i], res)
    return out


def test_modulo_allocation_computes() -> None:
    x = f32(4, 128, 32)
    np.testing.assert_allclose(double_buffered_exp(x), np.exp(x), rtol=1e-6)


def test_blocks_sharing_a_physical_tile_alias() -> None:
    # num_free_tiles=(2,): blocks 0 and 2 are one tile, so writing block 2 overwrites block 0.
    @nki.jit
    def k(x):
        out = nl.ndarray((2, 128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((3, par_dim(128), 8), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        t[0] = nl.load(x[0])
        t[1] = nl.load(x[1])
        t[2] = nl.load(x[2])
        nl.store(out[0], t[0])
        nl.store(out[1], t[1])
        return out

    x = f32(3, 128, 8)
    out = k(x)
    np.testing.assert_array_equal(out[0], x[2])
    np.testing.assert_array_equal(out[1], x[1])


def test_overlapping_tensors_alias() -> None:
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray((par_dim(128), 16), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        b = nl.ndarray((par_dim(128), 8), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=32))  # a[:, 8:]
        a[...] = nl.load(x)
        b[...] = nl.zeros((128, 8), dtype=x.dtype)
        nl.store(out, a)
        return out

    x = f32(128, 16)
    expected = x.copy()
    expected[:, 8:] = 0
    np.testing.assert_array_equal(k(x), expected)


def test_psum_allocation_with_a_function() -> None:
    def bank_of(idx, pdim_size, fdim_size, bank_map):
        return bank_map[idx], 0, 0

    @nki.jit
    def k(a, b):
        out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((2, par_dim(128), 64), dtype=nl.float32,
                         buffer=ncc.psum.alloc(functools.partial(bank_of, bank_map={(0,): 3, (1,): 6})))
        at, bt = nl.load(a), nl.load(b)
        for i in nl.affine_range(2):
            acc[i] = nisa.nc_matmul(at, bt)
            nl.store(out[i], nl.multiply(acc[i], float(i + 1)))
        return out

    a, b = f32(128, 128), f32(128, 64)
    out = k(a, b)
    np.testing.assert_allclose(out[0], a.T @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out[1], 2 * (a.T @ b), rtol=1e-4, atol=1e-4)


def test_psum_modulo_banks() -> None:
    @nki.jit
    def k(a, b):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((4, par_dim(128), 64), dtype=nl.float32,
                         buffer=ncc.psum.mod_alloc(base_bank=0, num_bank_tiles=(2,)))
        at, bt = nl.load(a), nl.load(b)
        for i in nl.affine_range(4):
            acc[i] = nisa.nc_matmul(at, bt)
            nl.store(out[i], acc[i])
        return out

    a, b = f32(128, 128), f32(128, 64)
    np.testing.assert_allclose(k(a, b), np.broadcast_to(a.T @ b, (4, 128, 64)), rtol=1e-4, atol=1e-4)


def test_blocks_sharing_a_psum_bank_each_start_their_accumulation() -> None:
    # The attention tutorial's v9: every query tile accumulates `acc[i] += nc_matmul(...)` in one bank
    # (num_bank_tiles=(1,)). Each block is a tile of its own, whose accumulation group starts with an
    # overwrite; it does not continue the previous block's sum left in the bank.
    @nki.jit
    def k(a, b):
        out = nl.ndarray((3, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((3, par_dim(128), 64), dtype=nl.float32,
                         buffer=ncc.psum.mod_alloc(base_bank=7, num_bank_tiles=(1,)))
        for i in nl.sequential_range(3):
            for j in nl.affine_range(2):
                acc[i] += nisa.nc_matmul(nl.load(a[i, j]), nl.load(b[j]))
            nl.store(out[i], nl.copy(acc[i]))
        return out

    a, b = f32(3, 2, 128, 128), f32(2, 128, 64)
    want = np.einsum("ijkm,jkn->imn", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(k(a, b), want, rtol=1e-4, atol=1e-3)


def test_allocation_beyond_sbuf_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    @nki.jit
    def k(x, base):
        t = nl.ndarray((par_dim(128), 1024), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=base))
        return x

    monkeypatch.setenv("NKI_TARGET", "trn2")
    k(f32(4, 4), 220 * 1024)  # the last 4 KiB of trn2's 224 KiB partitions
    err = raises("err_sbuf_capacity_exceeded", k, f32(4, 4), 221 * 1024)
    assert "bytes [226304, 230400) of each partition are outside the 229376 bytes of trn2 SBUF" in str(err)
    monkeypatch.setenv("NKI_TARGET", "trn1")  # NeuronCore-v2: 192 KiB, of which the toolchain keeps 16
    k(f32(4, 4), 172 * 1024)  # ends exactly at 176 KiB
    err = raises("err_sbuf_capacity_exceeded", k, f32(4, 4), 173 * 1024)
    assert "outside the 180224 bytes of trn1 SBUF a kernel can allocate (the last 16 KiB" in str(err)


def test_modulo_tiles_beyond_sbuf_are_an_error() -> None:
    # Each block is 64 KiB per partition: four physical tiles do not fit.
    @nki.jit
    def k(x):
        t = nl.ndarray((4, par_dim(128), 16384), dtype=nl.float32,
                       buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(4,)))
        return x

    raises("err_sbuf_capacity_exceeded", k, f32(4, 4))


def test_psum_bank_out_of_range_and_tile_over_a_bank() -> None:
    @nki.jit
    def bank9(x):
        t = nl.ndarray((par_dim(128), 512), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=8))
        return x

    @nki.jit
    def too_wide(x):
        t = nl.ndarray((par_dim(128), 1024), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=0))
        return x

    raises("err_psum_capacity_exceeded", bank9, f32(4, 4))
    raises("err_size_of_dimension_exceed_arch_limit", too_wide, f32(4, 4))


def test_start_partition_rule() -> None:
    @nki.jit
    def k(x):
        t = nl.ndarray((par_dim(64), 8), dtype=nl.float32, buffer=ncc.sbuf.alloc(lambda idx, pdim_size, fdim_size: (32, 0)))
        return x

    raises("err_invalid_start_partition", k, f32(4, 4))


def test_block_selected_by_a_slice_is_unsupported() -> None:
    @nki.jit
    def k(x):
        t = nl.ndarray((2, par_dim(128), 8), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        return nl.exp(t[0:1])

    with pytest.raises(nki.NKIUnsupportedError, match="by integer indices"):
        k(f32(4, 4))


def test_force_auto_alloc_ignores_the_addresses() -> None:
    # Without force_auto_alloc these two tensors would alias (both at address 0).
    @ncc.force_auto_alloc
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray((par_dim(128), 8), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        b = nl.ndarray((par_dim(128), 8), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        a[...] = nl.load(x)
        b[...] = nl.zeros((128, 8), dtype=x.dtype)
        nl.store(out, a)
        return out

    x = f32(128, 8)
    np.testing.assert_array_equal(k(x), x)


def test_directives_and_decorators_are_accepted() -> None:
    @ncc.enable_stack_allocator(log_level=20)
    @ncc.skip_middle_end_transformations
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=ncc.sbuf.auto_alloc() and nl.shared_hbm)
        with ncc.allocation_scope():
            for i in nl.sequential_range(1, directives=ncc.no_reorder()):
                nl.store(out, nl.load(x))
        return out

    x = f32(8, 8)
    np.testing.assert_array_equal(k(x), x)
    assert ncc.sbuf.auto_alloc() is nl.sbuf and ncc.psum.auto_alloc() is nl.psum


def test_allocation_in_a_loop_is_one_allocation() -> None:
    # AWS's allocated kernels bump an address counter in the loop body: the toolchain traces the body
    # once, so each allocation keeps its first address however far the counter runs on.
    @nki.jit
    def k(x):
        n, p, f = x.shape
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        cur_addr = 0
        for i in nl.affine_range(n):
            t = nl.ndarray((par_dim(p), f), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=cur_addr))
            cur_addr += 200 * 1024  # after two iterations this is past the end of SBUF
            t[...] = nl.load(x[i])
            nl.store(out[i], nl.exp(t))
        return out

    x = f32(4, 128, 16)
    np.testing.assert_allclose(k(x), np.exp(x), rtol=1e-6)
