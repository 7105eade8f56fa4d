"""nisa.topk (GpSimd): one top-K per group of 16 partitions, read from and written in the 16-partition
"snake" layout (position s at partition s % 16, column s // 16), in ascending order, as AWS's reference and
its NKI Library gpsimd_topk kernel (which de-snakes the output) describe. Checked against a numpy
reference written from that description, with the documented constraints' errors."""
from __future__ import annotations

from typing import Any, Callable

import expecttest
import ml_dtypes
import numpy as np
import pytest

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki import NKIError

GROUP = 16
SENTINEL_VAL = -7.0  # what val_dst holds where topk must not write
SENTINEL_IDX = 99999


def bf16(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(ml_dtypes.bfloat16)


@nki.jit
def topk_kernel(a, k: int, n: int, val_dtype: Any = nl.bfloat16, idx_dtype: Any = nl.uint32):
    src = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=a)
    val = nl.ndarray((a.shape[0], k), dtype=val_dtype, buffer=nl.sbuf)
    idx = nl.ndarray((a.shape[0], k), dtype=idx_dtype, buffer=nl.sbuf)
    nisa.memset(dst=val, value=SENTINEL_VAL)
    nisa.memset(dst=idx, value=SENTINEL_IDX)
    nisa.topk(val_dst=val, idx_dst=idx, src=src, n=n)
    out_val = nl.ndarray(val.shape, dtype=val.dtype, buffer=nl.shared_hbm)
    out_idx = nl.ndarray(idx.shape, dtype=idx.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out_val, src=val)
    nisa.dma_copy(dst=out_idx, src=idx)
    return out_val, out_idx


def reference(a: np.ndarray, k: int, n: int) -> "tuple[np.ndarray, np.ndarray]":
    """Written from the description, element by element: group g's snake, its K largest (ties: the lower
    snake position first), ascending, rank j at [16g + j % 16, j // 16]; everything else untouched."""
    p = a.shape[0]
    val = np.full((p, k), SENTINEL_VAL, np.float32)
    idx = np.full((p, k), SENTINEL_IDX, np.uint32)
    for g in range(p // GROUP):
        snake = [(float(a[g * GROUP + s % GROUP, s // GROUP]), s) for s in range(n)]
        best = sorted(snake, key=lambda vs: (-vs[0], vs[1]))[:k]
        for j, (v, s) in enumerate(reversed(best)):
            val[g * GROUP + j % GROUP, j // GROUP] = v
            idx[g * GROUP + j % GROUP, j // GROUP] = s
    return val, idx


@pytest.mark.parametrize("p, cols, k, n", [(16, 3, 8, 42), (32, 3, 8, 42), (128, 4, 40, 64), (16, 70, 100, 1111)])
def test_each_group_of_16_partitions_ranks_its_snake(p: int, cols: int, k: int, n: int) -> None:
    a = bf16(p, cols, seed=p + k)
    val, idx = topk_kernel(a, k, n)
    want_val, want_idx = reference(a, k, n)
    np.testing.assert_array_equal(val.astype(np.float32), want_val)
    np.testing.assert_array_equal(idx, want_idx)


def test_the_example_of_aws_reference_runs() -> None:
    # AWS's example: n = 42 elements in a (par_dim, 3) snake, k = 8.
    a = bf16(128, 3, seed=3)
    val, idx = topk_kernel(a, 8, 42)
    group0 = a[:16].T.reshape(-1)[:42].astype(np.float32)
    assert sorted(val[:8, 0].astype(np.float32).tolist()) == val[:8, 0].astype(np.float32).tolist()  # ascending
    np.testing.assert_array_equal(np.sort(group0)[-8:], val[:8, 0].astype(np.float32))
    np.testing.assert_array_equal(group0[idx[:8, 0].astype(np.int64)], val[:8, 0].astype(np.float32))


def test_elements_past_n_are_not_ranked_and_ties_keep_the_lower_position() -> None:
    a = np.zeros((16, 2), ml_dtypes.bfloat16)
    a[3, 1] = 100.0          # snake position 19 >= n = 16: outside the snake
    a[5, 0] = a[9, 0] = 2.0  # positions 5 and 9 tie for the top place
    val, idx = topk_kernel(a, 8, 16)
    assert 19 not in idx[:8, 0].tolist()
    assert idx[7, 0] == 5 and idx[6, 0] == 9  # ascending: the kept tie-winner last
    # With K = 1 the tie goes to the lower snake position.
    val1, idx1 = topk_kernel(a, 1, 16)
    assert (float(val1[0, 0]), int(idx1[0, 0])) == (2.0, 5)


def test_cost_is_4n_plus_k_gpsimd_cycles() -> None:
    a = bf16(16, 64)
    topk_kernel(a, 8, 1000)
    small = topk_kernel.last_result.costs
    topk_kernel(a, 8, 1016)
    large = topk_kernel.last_result.costs
    assert small.instructions["topk"] == 1
    clock = small.hw.gpsimd_clock_hz
    assert large.busy_s["gpsimd"] - small.busy_s["gpsimd"] == pytest.approx(4 * 16 / clock)


def message(kernel: Callable, *args: Any) -> str:
    with pytest.raises(NKIError) as info:
        kernel(*args)
    return info.value.msg


def test_documented_constraints_raise_with_their_codes() -> None:
    a = bf16(32, 4)
    expecttest.assert_expected_inline(message(topk_kernel, a, 8, 7), """'topk': n must be an integer with 8 <= n < 65536, got 7 [err_invalid_argument]""")
    expecttest.assert_expected_inline(message(topk_kernel, a, 8, 65), """'topk': src (32, 4) holds 4 columns, but a snake of 65 elements needs ceil(n / 16) = 5 [err_shape_mismatch]""")
    expecttest.assert_expected_inline(message(topk_kernel, a, 9, 8), """'topk': K (val_dst's free size) must satisfy 1 <= K < 32768 and K <= n (8), got 9 [err_invalid_argument]""")
    expecttest.assert_expected_inline(message(topk_kernel, a.astype(np.float32), 8, 64), """'topk': src must be bfloat16, got float32 [err_unsupported_dtype]""")
    expecttest.assert_expected_inline(message(topk_kernel, a, 8, 64, nl.bfloat16, nl.int32), """'topk': idx_dst must be uint32, got int32 [err_unsupported_dtype]""")
    expecttest.assert_expected_inline(message(topk_kernel, a, 8, 64, nl.float32), """'topk': val_dst must be bfloat16, got float32 [err_unsupported_dtype]""")
    expecttest.assert_expected_inline(message(topk_kernel, bf16(24, 4), 8, 64), """'topk': the partition dimension must be a multiple of 16 (one snake per 16 partitions), got 24 [err_num_partition_mismatch]""")


def test_operands_must_be_in_sbuf() -> None:
    @nki.jit
    def k(a):
        src = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=a)
        val = nl.ndarray((16, 8), dtype=nl.bfloat16, buffer=nl.psum)
        idx = nl.ndarray((16, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.topk(val_dst=val, idx_dst=idx, src=src, n=32)
        return a

    assert "'sbuf'" in message(k, bf16(16, 2)) and "err_unsupported_memory" in message(k, bf16(16, 2))
