"""NKI 0.2+'s direct allocation ``nl.ndarray(..., address=(partition, byte))`` and the dataclass form of
``nl.NKIObject`` that AWS's library kernels use for their configuration objects."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.compiler as ncc
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki import NKIError

from .kernel_io import load, store


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_the_same_address_is_the_same_memory() -> None:
    @nki.jit
    def k(a, b):
        x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, address=(0, 1024))
        nisa.dma_copy(dst=x, src=a)
        other = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, address=(0, 1024 + a.shape[1] * 4))
        nisa.dma_copy(dst=other, src=b)
        alias = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, address=(0, 1024))  # x's bytes
        out = nl.ndarray((2,) + a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[0], src=alias)
        nisa.dma_copy(dst=out[1], src=other)
        return out

    a, b = f32(8, 16), f32(8, 16, seed=1)
    out = k(a, b)
    np.testing.assert_array_equal(out[0], a)
    np.testing.assert_array_equal(out[1], b)


def test_addresses_computed_in_a_loop_are_each_their_own() -> None:
    # A double buffer picked by the loop index: unlike an allocation function, the address is evaluated on
    # every call.
    @nki.jit
    def k(a):
        tiles = []
        for i in range(4):
            t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, address=(0, (i % 2) * 4096))
            nisa.memset(dst=t, value=float(i))
            tiles.append(t)
        out = nl.ndarray((2,) + a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for j in range(2):
            nisa.dma_copy(dst=out[j], src=tiles[j])
        return out

    out = k(f32(4, 8))
    np.testing.assert_array_equal(out[0], np.full((4, 8), 2.0))  # tile 0 shares its bytes with tile 2
    np.testing.assert_array_equal(out[1], np.full((4, 8), 3.0))


def test_psum_tensors_at_one_address_share_memory_not_accumulation() -> None:
    # attention_cte places transposes and matmuls in the same PSUM bank: the data is shared, but a tensor's
    # first matmul overwrites whatever another tensor left there, as the compiler infers per tensor.
    @nki.jit
    def k(a, b):
        ta, tb = load(a), load(b)
        shape = (a.shape[1], b.shape[1])
        x = nl.ndarray(shape, dtype=nl.float32, buffer=nl.psum, address=(0, 2048))
        y = nl.ndarray(shape, dtype=nl.float32, buffer=nl.psum, address=(0, 2048))
        nisa.nc_matmul(x, ta, tb)
        nisa.nc_matmul(y, ta, tb)  # overwrites: y's first write
        nisa.nc_matmul(y, ta, tb)  # accumulates
        out = nl.ndarray((2,) + shape, dtype=nl.float32, buffer=nl.shared_hbm)
        for i, t in enumerate((x, y)):
            s = nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=s, src=t)
            nisa.dma_copy(dst=out[i], src=s)
        return out

    a, b = f32(16, 8), f32(16, 4, seed=1)
    out = k(a, b)
    np.testing.assert_allclose(out[0], 2 * (a.T @ b), rtol=1e-5)  # x is y's memory
    np.testing.assert_allclose(out[1], 2 * (a.T @ b), rtol=1e-5)


def test_address_errors() -> None:
    def kernel(shape: tuple, buffer: Any, address: Any) -> Any:
        @nki.jit
        def k(a):
            nl.ndarray(shape, dtype=nl.float32, buffer=buffer, address=address)
            return a
        return k

    a = f32(2, 2)
    with pytest.raises(NKIError) as info:
        kernel((128, 512), nl.psum, (0, 1024))(a)  # 2 KiB from the middle of bank 0 straddles bank 1
    assert info.value.code == "err_size_of_dimension_exceed_arch_limit"
    with pytest.raises(NKIError) as info:
        kernel((128, 1024), nl.sbuf, (0, 10 ** 6))(a)
    assert info.value.code == "err_sbuf_capacity_exceeded"
    with pytest.raises(NKIError) as info:
        kernel((64, 4), nl.sbuf, (32, 0))(a)
    assert info.value.code == "err_invalid_start_partition"
    with pytest.raises(TypeError, match="address= places SBUF and PSUM tensors"):
        kernel((4, 4), nl.shared_hbm, (0, 0))(a)
    with pytest.raises(TypeError, match=r"address= is \(partition_offset, byte_offset\)"):
        kernel((4, 4), nl.sbuf, (0,))(a)


def test_force_auto_alloc_ignores_addresses() -> None:
    @ncc.force_auto_alloc
    @nki.jit
    def k(a, b):
        x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, address=(0, 0))
        y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, address=(0, 0))
        nisa.dma_copy(dst=x, src=a)
        nisa.dma_copy(dst=y, src=b)
        return store(x)

    a = f32(4, 4)
    np.testing.assert_array_equal(k(a, f32(4, 4, seed=1)), a)


def test_nkiobject_dataclasses_take_their_class_attributes_as_fields() -> None:
    @dataclass
    class Section(nl.NKIObject):
        index = None
        offset = 0
        shared = [1, 2]  # a mutable value stays a class attribute (a dataclass refuses it as a default)

        def end(self, length: int) -> int:
            return self.offset + length

    @dataclass
    class Sized(nl.NKIObject):
        rows: int
        cols: int = 1
        scale = 1.0

    s = Section(index=2, offset=128)
    assert (s.index, s.offset, s.end(64), s.shared) == (2, 128, 192, [1, 2])
    assert Section().index is None
    assert Sized(4) == Sized(rows=4, cols=1, scale=1.0)
    with pytest.raises(TypeError):
        Section(shared=[3])
    assert nl.NKIObject(a=1).a == 1


def test_nkiobject_dataclass_fields_may_be_left_unset() -> None:
    # AWS's NKI Library builds MLPTKGConstantsDimensionSizes without its remainderIFused field (AWS's
    # NKIObject takes **kwargs); the field is then absent, not a default value.
    @dataclass
    class Dims(nl.NKIObject):
        T: int
        fused: int
        tile: int = 128

    d = Dims(T=4, tile=64)
    assert (d.T, d.tile, hasattr(d, "fused")) == (4, 64, False)
    with pytest.raises(AttributeError, match="Dims.fused was never set"):
        d.fused
    d.fused = 2
    assert d.fused == 2
    assert Dims(1, 2).tile == 128 and Dims(1, 2).fused == 2


def test_psum_tensors_placed_again_in_a_loop_start_fresh() -> None:
    # attention_cte and moe_tkg place their PSUM buffers in every iteration: each placement is a new tensor whose
    # first matmul overwrites, also when the simulator reuses a dropped tensor's flags (runtime._own_flags).
    @nki.jit
    def k(a, b):
        ta, tb = load(a), load(b)
        shape = (a.shape[1], b.shape[1])
        out = nl.ndarray((3,) + shape, dtype=nl.float32, buffer=nl.shared_hbm)
        for i in range(3):
            acc = nl.ndarray(shape, dtype=nl.float32, buffer=nl.psum, address=(0, 2048))
            for _ in range(i + 1):
                nisa.nc_matmul(acc, ta, tb)  # overwrite, then accumulate
            s = nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=s, src=acc)
            nisa.dma_copy(dst=out[i], src=s)
        return out

    a, b = f32(16, 8), f32(16, 4, seed=1)
    out = k(a, b)
    for i in range(3):
        np.testing.assert_allclose(out[i], (i + 1) * (a.T @ b), rtol=1e-5)
