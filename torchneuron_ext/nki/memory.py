"""The NeuronCore memories a kernel sees, the targets' capacities and the tile-size constants."""
from __future__ import annotations

import os
from dataclasses import dataclass


class Buffer:
    """A memory kind. Kernels pass these as ``buffer=`` (``nl.sbuf``, ``nl.psum``, ``nl.shared_hbm``...)."""

    __slots__ = ("name", "on_chip")

    def __init__(self, name: str, on_chip: bool) -> None:
        self.name, self.on_chip = name, on_chip

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    @property
    def is_hbm(self) -> bool:
        return not self.on_chip


sbuf = Buffer("sbuf", True)
psum = Buffer("psum", True)
shared_hbm = Buffer("shared_hbm", False)
private_hbm = Buffer("private_hbm", False)
hbm = private_hbm  # nl.hbm is per-instance scratch, an alias of private_hbm


@dataclass(frozen=True)
class Target:
    """Per-NeuronCore limits of one Trainium generation."""
    name: str
    sbuf_partition_bytes: int
    psum_partition_bytes: int = 16 * 1024
    psum_bank_bytes: int = 2 * 1024
    num_partitions: int = 128
    gemm_moving_fmax: int = 512
    psum_bf16: bool = False


TARGETS = {
    "trn1": Target("trn1", 192 * 1024),
    "inf2": Target("inf2", 192 * 1024),
    "trn2": Target("trn2", 224 * 1024),
    "trn3": Target("trn3", 256 * 1024, gemm_moving_fmax=4096, psum_bf16=True),
}


def default_target() -> Target:
    """NKI_TARGET (trn1, inf2, trn2 or trn3) chooses the generation; trn2 when unset."""
    name = os.environ.get("NKI_TARGET", os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")).lower()
    if name not in TARGETS:
        raise ValueError(f"unknown NKI target {name!r}: set NKI_TARGET to one of {sorted(TARGETS)}")
    return TARGETS[name]


class _TileSize:
    """``nl.tile_size``: the hardware's tile limits, for the current target."""
    pmax = 128
    psum_fmax = 512
    psum_bank_fmax = 512
    psum_num_banks = 8
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_min_align = 4
    sbuf_min_align = 1

    @property
    def total_available_sbuf_size(self) -> int:
        return default_target().sbuf_partition_bytes

    sbuf_size_bytes = total_available_sbuf_size
    sbuf_fmax_bytes = total_available_sbuf_size

    @property
    def sbuf_fmax(self) -> int:
        return default_target().sbuf_partition_bytes // 4

    def __repr__(self) -> str:
        return "nl.tile_size"


tile_size = _TileSize()
