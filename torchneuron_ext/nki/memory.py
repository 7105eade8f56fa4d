"""The NeuronCore memories a kernel sees and the targets' capacities: plain data (nl.tile_size, which reads
the running launch's target, is runtime.py's)."""
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
    gemm_stationary_fmax: int = 128
    bn_stats_fmax: int = 512
    pe_array: int = 128             # rows and columns of the Tensor engine's PE array
    vector_transpose_max: int = 32  # the Vector engine transposes 32x32 blocks
    psum_bf16: bool = False

    @property
    def psum_bank_fmax(self) -> int:
        return self.psum_bank_bytes // 4

    @property
    def psum_num_banks(self) -> int:
        return self.psum_partition_bytes // self.psum_bank_bytes


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
