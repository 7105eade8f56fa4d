"""The NeuronCore memories a kernel sees, the targets' capacities and the tile-size constants."""
from __future__ import annotations

from ..trainium import targets as _targets


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


# The generations are trainium/targets.py's records, one per generation for the whole package.
# `Target(name, sbuf_partition_bytes, **limits)` makes a simulator-only generation (trn2 with other
# limits) that a test registers in TARGETS to check that every limit follows the target.
Target = _targets.simulated
TARGETS = _targets.TARGETS


def default_target() -> _targets.Target:
    """The configured target (trainium.targets.target_from_environment: NEURON_EMU_TARGET, else
    NKI_TARGET, else NEURON_PLATFORM_TARGET_OVERRIDE, else trn2)."""
    return _targets.target_from_environment()


def current_target() -> Target:
    """The running launch's target (nki.jit(platform_target=...) or NKI_TARGET), else NKI_TARGET's."""
    from . import runtime
    launch = runtime.current_or_none()
    return launch.target if launch is not None else default_target()


class _TileSize:
    """``nl.tile_size``: the hardware's tile limits, read from the current target."""
    psum_min_align = 4
    sbuf_min_align = 1

    pmax = property(lambda self: current_target().num_partitions)
    psum_fmax = property(lambda self: current_target().psum_bank_fmax)
    psum_bank_fmax = psum_fmax
    psum_num_banks = property(lambda self: current_target().psum_num_banks)
    gemm_stationary_fmax = property(lambda self: current_target().gemm_stationary_fmax)
    gemm_moving_fmax = property(lambda self: current_target().gemm_moving_fmax)
    bn_stats_fmax = property(lambda self: current_target().bn_stats_fmax)
    total_available_sbuf_size = property(lambda self: current_target().sbuf_partition_bytes)
    sbuf_size_bytes = total_available_sbuf_size
    sbuf_fmax_bytes = total_available_sbuf_size
    sbuf_fmax = property(lambda self: current_target().sbuf_partition_bytes // 4)

    def __repr__(self) -> str:
        return "nl.tile_size"


tile_size = _TileSize()
