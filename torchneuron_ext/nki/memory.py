"""The NeuronCore memories a kernel sees and the targets' capacities: plain data (nl.tile_size, which reads
the running launch's target, is runtime.py's)."""
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
