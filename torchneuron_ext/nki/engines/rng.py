"""The engines' pseudo random number generators: XORWOW per compute lane (rng, rand2, set_rng_seed,
rand_set_state, rand_get_state).

AWS's ISA reference names the algorithm (XORWOW) and the state sizes a lane stores and loads: 6 uint32 words
on the GpSimd engine (one XORWOW: five xorshift words and the Weyl counter), 24 on the Vector engine. What it
does not give is how a seed becomes a state or how the Vector engine's 24 words are used, so here:

- the Vector engine's 24 words are four XORWOW generators per lane; element ``i`` of a partition (free axes
  flattened, row-major) takes the next number of generator ``i % 4``;
- ``set_rng_seed(seed)`` fills every lane's state from splitmix32 of (seed, lane, word), never all zero; a
  launch starts as if seeded with 0.

So numbers are reproducible here and a state read with ``rand_get_state`` and written back with
``rand_set_state`` replays the same numbers, but the bits are not the device's.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes, runtime
from ..errors import fail
from ..memory import psum
from ..tensor import NKITensor
from .operands import charge, check_tile, free_size, per_partition, require_generation, store_into

WORDS = {"gpsimd": 6, "vector": 24}   # uint32 state words per lane (AWS's ISA reference)


XORWOW_WORDS = 6                        # x0..x4 and the Weyl counter


_WEYL = np.uint32(362437)


def _splitmix32(x: np.ndarray) -> np.ndarray:
    z = (x.astype(np.uint64) + np.uint64(0x9E3779B9)) & np.uint64(0xFFFFFFFF)
    z = ((z ^ (z >> np.uint64(16))) * np.uint64(0x85EBCA6B)) & np.uint64(0xFFFFFFFF)
    z = ((z ^ (z >> np.uint64(13))) * np.uint64(0xC2B2AE35)) & np.uint64(0xFFFFFFFF)
    return (z ^ (z >> np.uint64(16))).astype(np.uint32)


def seeded_state(seed: int, engine: str, lanes: int) -> np.ndarray:
    """Every lane's state from one 32-bit seed: (lanes, WORDS[engine]) uint32 with no all-zero generator."""
    words = WORDS[engine]
    lane = np.arange(lanes, dtype=np.uint64)[:, None]
    word = np.arange(words, dtype=np.uint64)[None, :]
    mixed = (np.uint64(seed & 0xFFFFFFFF) * np.uint64(0x10001) + lane * np.uint64(words) + word) & np.uint64(0xFFFFFFFF)
    state = _splitmix32(_splitmix32(mixed))
    x = state.reshape(lanes, -1, XORWOW_WORDS)
    dead = ~x[..., :5].any(axis=-1)
    x[dead, 0] = 1
    return state


def _states(engine: str) -> "dict[str, np.ndarray]":
    launch = runtime.current()
    banks = getattr(launch, "_engine_rng", None)
    if banks is None:
        banks = launch._engine_rng = {}
    key = (engine, launch.instance_index)
    if key not in banks:
        banks[key] = seeded_state(0, engine, launch.target.num_partitions)
    return banks


def state(engine: str) -> np.ndarray:
    launch = runtime.current()
    return _states(engine)[(engine, launch.instance_index)]


def _set_state(engine: str, lanes: np.ndarray) -> None:
    launch = runtime.current()
    full = state(engine).copy()
    full[:lanes.shape[0]] = lanes
    _states(engine)[(engine, launch.instance_index)] = full


def draw(engine: str, partitions: int, count: int) -> np.ndarray:
    """``count`` 32-bit numbers for each of the first ``partitions`` lanes, advancing their generators."""
    s = state(engine)[:partitions].reshape(partitions, -1, XORWOW_WORDS).copy()
    g = s.shape[1]
    steps = -(-count // g) if count else 0
    out = np.empty((partitions, steps * g), dtype=np.uint32)
    x0, x1, x2, x3, x4, d = (s[..., i] for i in range(XORWOW_WORDS))
    for k in range(steps):
        t = x4
        x4, x3, x2, x1 = x3, x2, x1, x0
        t = t ^ (t >> np.uint32(2))
        t = t ^ (t << np.uint32(1))
        t = t ^ (x1 ^ (x1 << np.uint32(4)))
        x0 = t
        d = d + _WEYL
        out[:, k * g:(k + 1) * g] = t + d
    if steps:
        s = np.stack([x0, x1, x2, x3, x4, d], axis=-1).reshape(partitions, -1)
        _set_state(engine, s)
    return out[:, :count]


def _engine_for(api: str, engine: str, dst: NKITensor) -> None:
    if engine not in ("vector", "gpsimd"):
        fail("err_unsupported_engine", f"'{api}' runs on the Vector or GpSimd engine, got {engine}")
    if engine == "gpsimd" and dst.buffer is psum:
        fail("err_unsupported_memory", f"'{api}' on the GpSimd engine cannot access PSUM; use an SBUF tile")


_RNG_DTYPES = ("int8", "int16", "int32", "uint8", "uint16", "uint32")


def rng(dst: NKITensor, engine: str) -> None:
    """32 random bits per element of ``dst``, truncated to its integer dtype (the least significant bits)."""
    api = "rng"
    check_tile(dst, api, "dst")
    if dtypes.name(dst.dtype) not in _RNG_DTYPES:
        fail("err_unsupported_dtype", f"'{api}': dst must be an integer tile ({', '.join(_RNG_DTYPES)}), got "
                                      f"{dtypes.name(dst.dtype)}")
    _engine_for(api, engine, dst)
    if engine == "gpsimd":
        require_generation(api, 3, " on the GpSimd engine")
    bits = draw(engine, dst.shape[0], free_size(dst.shape))
    charge(engine, api, dst.shape)
    store_into(dst, bits.astype(dst.dtype).reshape(dst.shape), api)


# rand2's documented output dtypes.
_RAND2_DTYPES = ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32", "int8", "int16", "int32", "uint8",
                 "uint16", "uint32")


def rand2(dst: NKITensor, low: Any, high: Any) -> None:
    """Uniform fp32 numbers in [low, high] (scalars or one per partition) from the Vector engine's generators,
    cast to dst's dtype. NeuronCore-v4+."""
    api = "rand2"
    require_generation(api, 4)
    check_tile(dst, api, "dst")
    if dtypes.name(dst.dtype) not in _RAND2_DTYPES:
        fail("err_unsupported_dtype", f"'{api}': dst cannot be {dtypes.name(dst.dtype)}")
    lo = per_partition(low, dst, api, "min")
    hi = per_partition(high, dst, api, "max")
    if np.any(np.asarray(lo) >= np.asarray(hi)):
        fail("err_invalid_argument", f"'{api}' needs min < max, got min={low!r}, max={high!r}")
    p = dst.shape[0]
    bits = draw("vector", p, free_size(dst.shape)).reshape(dst.shape)
    unit = bits.astype(np.float64) / np.float64(0xFFFFFFFF)  # [0, 1], both ends reachable
    values = (lo + unit * (np.asarray(hi, np.float64) - lo)).astype(np.float32)
    charge("vector", api, dst.shape)
    store_into(dst, values, api)


def set_rng_seed(src_seeds: NKITensor) -> None:
    """Seed every lane of the Vector engine's generators from a (1, 1) 32-bit tile."""
    api = "set_rng_seed"
    check_tile(src_seeds, api, "src_seeds")
    if src_seeds.shape[0] != 1 or free_size(src_seeds.shape) != 1:
        fail("err_shape_mismatch", f"'{api}': src_seeds must be a [1, 1] tensor, got {src_seeds.shape}")
    if np.dtype(src_seeds.dtype).itemsize != 4:
        fail("err_unsupported_dtype", f"'{api}': the seed must be a 32-bit value, got {dtypes.name(src_seeds.dtype)}")
    seed = int(np.asarray(src_seeds.read()).reshape(-1)[:1].view(np.uint32)[0])
    launch = runtime.current()
    _states("vector")[("vector", launch.instance_index)] = seeded_state(seed, "vector", launch.target.num_partitions)
    charge("vector", api, src_seeds.shape)


def _state_engine(api: str, engine: str, tile: NKITensor, arg: str) -> None:
    require_generation(api, 3)
    if engine not in ("vector", "gpsimd"):
        fail("err_unsupported_engine", f"'{api}' runs on the GpSimd or Vector engine, got {engine}")
    if engine == "vector":
        require_generation(api, 4, " on the Vector engine")
    if tile.dtype != dtypes.uint32:
        fail("err_unsupported_dtype", f"'{api}': {arg} must be uint32, got {dtypes.name(tile.dtype)}")
    if free_size(tile.shape) != WORDS[engine]:
        fail("err_shape_mismatch", f"'{api}': the {engine} engine's XORWOW state is {WORDS[engine]} words per "
                                   f"lane, {arg} has {free_size(tile.shape)}")


def rand_set_state(src_seeds: NKITensor, engine: str) -> None:
    """Load each lane's generator state from the matching partition of ``src_seeds`` (SBUF, uint32)."""
    api = "rand_set_state"
    check_tile(src_seeds, api, "src_seeds", allow_psum=False)
    _state_engine(api, engine, src_seeds, "src_seeds")
    lanes = np.asarray(src_seeds.read()).reshape(src_seeds.shape[0], -1).astype(np.uint32)
    _set_state(engine, lanes)
    charge(engine, api, src_seeds.shape)


def rand_get_state(dst: NKITensor, engine: str) -> None:
    """Store each lane's generator state into the matching partition of ``dst`` (uint32)."""
    api = "rand_get_state"
    check_tile(dst, api, "dst")
    _state_engine(api, engine, dst, "dst")
    _engine_for(api, engine, dst)
    if dst.buffer is psum and runtime.current().target.generation < 4:
        fail("err_unsupported_memory", f"'{api}': dst must be in SBUF before NeuronCore-v4")
    charge(engine, api, dst.shape)
    store_into(dst, state(engine)[:dst.shape[0]].reshape(dst.shape).copy(), api)
