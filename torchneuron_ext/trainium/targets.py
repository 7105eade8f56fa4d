"""The Trainium generations the emulator models: one frozen record each, and the one reader of the environment.

Everything that depends on the generation reads a `Target`: the cost model's rates
(torchneuron_ext.costmodel), the NKI simulator's capacities and tile limits (nki/memory.py), its
instruction timing (nki/cost_model.py) and NeuronCore version (``nisa.get_nc_version``),
``torch.neuron.get_device_properties`` and ``torch_neuronx.utils.get_platform_target``. They used to
keep five tables and three environment readers that disagreed; one record per generation makes them
agree by construction, and adding a generation is one row of TARGETS.

The rows hold per *physical* NeuronCore figures (``lnc=1``). A logical core of LNC=2 is two physical
cores: `Target.at_lnc` scales what the pair shares. Sources of the figures: docs/cost_model.md,
"Constants", and the NKI architecture guides for the capacities.

Standard library only: the NKI core (numpy, no torch) and every layer above import this module.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

# The newest Neuron SDK release whose runtime changes the model knows (trainium/projection.py: RING_ONLY_BEFORE,
# COLLECTIVES_BARRIER).
NEWEST_RELEASE = (2, 32)


@dataclasses.dataclass(frozen=True)
class Target:
    """One Trainium generation at one logical-core size: identity, NKI limits, and rates."""

    # Identity. `name` is what users write (NKI_TARGET=inf2, nki.jit(platform_target="trn3")).
    name: str
    generation: int             # NeuronCore-v<generation>; nisa.nc_version.gen<generation>
    instance_type: str          # what torch.neuron.get_device_name reports
    lnc_sizes: tuple[int, ...]  # the logical-core sizes the generation offers
    default_lnc: int
    lnc: int                    # this record's logical-core size (the table's rows: 1)

    # What an NKI kernel may use, per physical core (the simulator refuses more, as the compiler does).
    sbuf_partition_bytes: int
    psum_partition_bytes: int
    psum_bank_bytes: int
    num_partitions: int
    gemm_moving_fmax: int
    gemm_stationary_fmax: int
    bn_stats_fmax: int
    pe_array: int               # rows and columns of the Tensor engine's PE array
    vector_transpose_max: int   # the Vector engine transposes blocks of this size
    psum_bf16: bool             # PSUM accumulates in bf16 too (NeuronCore-v4)

    # Rates, per physical core except where at_lnc scales them.
    tensor_clock_hz: float
    fp8_speedup: float          # Tensor Engine FP8 rate over BF16 (double_row / MX modes)
    fp32_slowdown: float        # Tensor Engine FP32 rate is BF16's divided by this
    vector_clock_hz: float
    vector_lanes_16bit: int     # elements per cycle, BF16/FP16 (performance mode)
    vector_lanes_other: int     # elements per cycle, FP32 and other dtypes
    scalar_clock_hz: float
    scalar_lanes_16bit: int
    scalar_lanes_other: int
    gpsimd_clock_hz: float
    gpsimd_cores: int
    gpsimd_simd_bits: int
    hbm_bytes_per_s: float      # the core's share of the chip's HBM bandwidth
    hbm_capacity_bytes: int     # the core's share of the chip's HBM (a logical core: hbm_bytes_per_core)
    dma_engines: int
    dma_bytes_per_s_per_engine: float
    dma_fixed_s: float          # descriptor setup + semaphore to start, per transfer
    host_bytes_per_s: float     # host DRAM <-> device (PCIe class)
    launch_s: float             # one NEFF execution in eager mode, on top of its work
    link_hop_s: float           # per step inside an instance
    cores_per_instance: int     # ranks beyond this cross EFA
    efa_bytes_per_s: float      # per core
    efa_hop_s: float
    nki_min_ii_cycles: int      # engine initiation interval of a short instruction
    gpsimd_start_cycles: int
    # Collectives (docs/cost_model.md, "Collectives: algorithms and latency floor").
    link_port_bytes_per_s: float  # one NeuronLink port, one direction: what a rank's ring step moves at
    collective_floor_s: float     # one collective's fixed cost (CC-core setup, handshakes), from nccom-test
    # The Neuron SDK release whose runtime runs the collectives (major, minor): which algorithms and latencies
    # it has (trainium/projection.py: RING_ONLY_BEFORE, COLLECTIVES_BARRIER). Default: the newest the model knows.
    runtime_release: tuple[int, int] = NEWEST_RELEASE

    @property
    def core_type(self) -> str:
        return f"NeuronCore-v{self.generation}"

    @property
    def capability(self) -> tuple[int, int]:
        """torch.neuron.get_device_capability: the NeuronCore version as (major, minor)."""
        return (self.generation, 0)

    @property
    def pe_rows(self) -> int:
        return self.pe_array

    @property
    def pe_cols(self) -> int:
        return self.pe_array

    @property
    def psum_bank_fmax(self) -> int:
        return self.psum_bank_bytes // 4

    @property
    def psum_num_banks(self) -> int:
        return self.psum_partition_bytes // self.psum_bank_bytes

    @property
    def tensor_peak_flops(self) -> float:
        """BF16/FP16/TF32 dense peak: 128 x 128 PEs, one multiply-add (2 FLOPs) per PE per cycle."""
        return self.pe_rows * self.pe_cols * 2 * self.tensor_clock_hz * self.lnc

    @property
    def memory_bytes_per_s(self) -> float:
        """What a kernel streaming HBM can move: the lower of HBM's share and the core's DMA engines."""
        return min(self.hbm_bytes_per_s, self.dma_engines * self.dma_bytes_per_s_per_engine) * self.lnc

    @property
    def hbm_bytes_per_core(self) -> int:
        """HBM a logical core holds: its physical cores' shares (what the dry run's fits verdict uses)."""
        return self.hbm_capacity_bytes * self.lnc

    @property
    def label(self) -> str:
        """How reports name the target: "trn1", "trn2 LNC=2"; the LNC only where there is a choice, the
        runtime release only when it is not the newest ("trn1 Neuron 2.10")."""
        label = self.name if len(self.lnc_sizes) == 1 else f"{self.name} LNC={self.lnc}"
        if self.runtime_release != NEWEST_RELEASE:
            label += " Neuron {}.{}".format(*self.runtime_release)
        return label

    def at_lnc(self, lnc: Optional[int] = None) -> "Target":
        """This generation at logical-core size `lnc` (default: the generation's).

        Two physical cores per logical core: twice the EFA share and half the logical cores per instance
        (one rank per logical core); the engine and HBM figures stay per physical core and the formulas
        multiply them by `lnc`. A NeuronLink port's rate and the collective floor stay too: a rank's
        collective step uses one port whatever the LNC.
        """
        lnc = self.default_lnc if lnc is None else lnc
        if lnc not in self.lnc_sizes:
            raise ValueError(f"LNC={lnc} is not a logical-core size of {self.name}: use "
                             f"{' or '.join(map(str, self.lnc_sizes))}")
        if lnc == self.lnc:
            return self
        physical = self.physical_core()
        return dataclasses.replace(physical, lnc=lnc, efa_bytes_per_s=physical.efa_bytes_per_s * lnc,
                                   cores_per_instance=physical.cores_per_instance // lnc)

    def at_release(self, release: str | tuple[int, int]) -> "Target":
        """This target with the collectives of Neuron SDK release `release` ("2.10" or (2, 10))."""
        return dataclasses.replace(self, runtime_release=parse_release(release))

    def physical_core(self) -> "Target":
        """One physical NeuronCore of this generation: what an NKI kernel runs on."""
        if self.lnc == 1:
            return self
        return dataclasses.replace(self, lnc=1, efa_bytes_per_s=self.efa_bytes_per_s / self.lnc,
                                   cores_per_instance=self.cores_per_instance * self.lnc)


# Limits every generation shares; a row states only where it differs.
_CORE = dict(psum_partition_bytes=16 * 1024, psum_bank_bytes=2 * 1024, num_partitions=128, gemm_moving_fmax=512,
             gemm_stationary_fmax=128, bn_stats_fmax=512, pe_array=128, vector_transpose_max=32, psum_bf16=False,
             lnc=1, fp32_slowdown=4.0, gpsimd_cores=8, gpsimd_simd_bits=512, dma_engines=16, dma_fixed_s=1.3e-6,
             host_bytes_per_s=16e9, launch_s=12e-6, link_hop_s=1.5e-6, efa_hop_s=15e-6, nki_min_ii_cycles=64,
             gpsimd_start_cycles=150)

_TRN1 = Target(
    name="trn1", generation=2, instance_type="trn1.32xlarge", lnc_sizes=(1,), default_lnc=1,
    sbuf_partition_bytes=192 * 1024,
    tensor_clock_hz=2.8e9, fp8_speedup=1.0,
    vector_clock_hz=1.12e9, vector_lanes_16bit=128, vector_lanes_other=128,
    scalar_clock_hz=1.4e9, scalar_lanes_16bit=128, scalar_lanes_other=128, gpsimd_clock_hz=1.4e9,
    hbm_bytes_per_s=820e9 / 2, hbm_capacity_bytes=32 * 2**30 // 2, dma_bytes_per_s_per_engine=17e9,
    cores_per_instance=32, efa_bytes_per_s=800e9 / 8 / 32,
    link_port_bytes_per_s=384e9 / 8, collective_floor_s=56.5e-6, **_CORE,
)

TARGETS: dict[str, Target] = {
    "trn1": _TRN1,
    # Inferentia2 has Trn1's NeuronCore-v2, so Trn1's limits and rates.
    "inf2": dataclasses.replace(_TRN1, name="inf2", instance_type="inf2.48xlarge"),
    "trn2": Target(
        name="trn2", generation=3, instance_type="trn2.48xlarge", lnc_sizes=(1, 2), default_lnc=2,
        sbuf_partition_bytes=224 * 1024,
        tensor_clock_hz=2.4e9, fp8_speedup=2.0,
        vector_clock_hz=0.96e9, vector_lanes_16bit=512, vector_lanes_other=128,
        scalar_clock_hz=1.2e9, scalar_lanes_16bit=128, scalar_lanes_other=128, gpsimd_clock_hz=1.2e9,
        hbm_bytes_per_s=2.9e12 / 8, hbm_capacity_bytes=96 * 2**30 // 8, dma_bytes_per_s_per_engine=23e9,
        cores_per_instance=128, efa_bytes_per_s=3.2e12 / 8 / 128,
        link_port_bytes_per_s=1.024e12 / 8, collective_floor_s=99.6e-6, **_CORE,
    ),
    # AWS sells Trn3 as UltraServers and publishes no single-instance name.
    "trn3": Target(
        name="trn3", generation=4, instance_type="Trn3 UltraServer", lnc_sizes=(1, 2), default_lnc=2,
        sbuf_partition_bytes=256 * 1024,
        tensor_clock_hz=2.4e9, fp8_speedup=1.0,
        vector_clock_hz=1.2e9, vector_lanes_16bit=512, vector_lanes_other=256,
        scalar_clock_hz=1.2e9, scalar_lanes_16bit=256, scalar_lanes_other=128, gpsimd_clock_hz=1.2e9,
        hbm_bytes_per_s=4.9e12 / 8, hbm_capacity_bytes=144 * 2**30 // 8, dma_bytes_per_s_per_engine=33e9,
        cores_per_instance=128, efa_bytes_per_s=12.8e12 / 8 / (64 * 8),
        link_port_bytes_per_s=256e9 / 2, collective_floor_s=99.6e-6,
        **dict(_CORE, gemm_moving_fmax=4096, psum_bf16=True),
    ),
}
"""The generations by name, per physical core. A test may register a made-up generation here
(`simulated`) to check that the NKI simulator's limits follow the target."""

# The generations with public figures of their own; inf2 is projected as the trn1 it shares a core with.
GENERATIONS = ("trn1", "trn2", "trn3")
PROJECTED_AS = {"inf2": "trn1"}
DEFAULT = "trn2"

# One precedence, most specific first: the emulator's own switch, then the NKI toolchain's, then AWS's
# simulator's per-launch NeuronCore version (its harness sets NKI_NC_VERSION just before each launch, to
# the test's generation), then the Neuron SDK's machine-wide override (NKI_TARGET before the override, as
# the NKI compiler reads them). The first one set decides everything; the cost model and the NKI simulator
# can no longer disagree.
ENVIRONMENT = ("NEURON_EMU_TARGET", "NKI_TARGET", "NKI_NC_VERSION", "NEURON_PLATFORM_TARGET_OVERRIDE")

# AWS names generations by NeuronCore version too: NEURON_PLATFORM_TARGET_OVERRIDE takes trn1|inf2|gen2,
# trn2|gen3, trn3|gen4 (nki.jit's documentation) and NKI_NC_VERSION is nisa.nc_version's name (gen2..gen4)
# or its number. gen2 is Trn1's core (Inferentia2 has the same one and is named by its instance only).
GENERATION_NAMES = {"gen2": "trn1", "gen3": "trn2", "gen4": "trn3"}


def parse_release(release: str | tuple[int, int]) -> tuple[int, int]:
    """A Neuron SDK release as (major, minor): "2.10", "2.24.0" and (2, 10) all work."""
    if isinstance(release, tuple):
        parts = list(release)
    else:
        parts = str(release).strip().lstrip("v").split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, TypeError, ValueError):
        raise ValueError(f"Neuron SDK release {release!r} is not major.minor: use e.g. '2.24'") from None
    if major < 2 or minor < 0:
        raise ValueError(f"Neuron SDK release {release!r}: the model covers Neuron 2.x releases (e.g. '2.24')")
    return (major, minor)


def unknown_target(name: str) -> ValueError:
    """The one error for a name that is no target."""
    return ValueError(f"unknown Neuron platform target {name!r}: use one of {', '.join(TARGETS)}")


def by_name(name: str = DEFAULT, lnc: Optional[int] = None) -> Target:
    """The record of `name` (trn1, inf2, trn2, trn3, a registered one, or a NeuronCore version: gen2..gen4,
    2..4) at logical-core size `lnc`."""
    key = name.strip().lower()
    if key.isdigit():
        key = f"gen{key}"  # NKI_NC_VERSION=3
    record = TARGETS.get(GENERATION_NAMES.get(key, key))
    if record is None:
        raise unknown_target(name)
    return record.at_lnc(lnc)


def from_spec(spec: str) -> Target:
    """``trn2``, ``trn2:lnc=1``, ``trn3:lnc=2`` (also ``trn2:1``, ``gen3``, ``3``), optionally with the Neuron
    SDK release whose runtime runs the collectives: ``trn1:release=2.10``, ``trn2:lnc=1:release=2.24``."""
    name, *options = spec.split(":")
    lnc: Optional[int] = None
    release: Optional[tuple[int, int]] = None
    for option in options:
        key, eq, value = option.partition("=")
        key, value = key.strip().lower(), value.strip()
        if eq and key == "release":
            release = parse_release(value)
            continue
        if eq and key != "lnc":
            raise ValueError(f"NEURON_EMU_TARGET={spec!r}: unknown option {key!r}; "
                             "use lnc=<1|2> and release=<2.x>, e.g. trn2:lnc=1:release=2.24")
        try:
            lnc = int(value if eq else key)
        except ValueError:
            raise ValueError(f"NEURON_EMU_TARGET={spec!r}: {option!r} is not a logical-core size; "
                             "use e.g. trn2:lnc=1") from None
    target = by_name(name, lnc)
    return target if release is None else target.at_release(release)


def target_from_environment() -> Target:
    """The configured target: the first of ENVIRONMENT that is set, else trn2 at its default LNC."""
    for var in ENVIRONMENT:
        spec = os.environ.get(var, "").strip()
        if spec:
            try:
                return from_spec(spec)
            except ValueError as e:
                raise ValueError(f"{var}={spec!r}: {e}") from None
    return by_name(DEFAULT)


def simulated(name: str, sbuf_partition_bytes: int, **limits: Any) -> Target:
    """A made-up generation for the NKI simulator: trn2's record with other limits (and trn2's rates,
    which is how nki.benchmark times it)."""
    return dataclasses.replace(TARGETS[DEFAULT], name=name, sbuf_partition_bytes=sbuf_partition_bytes, **limits)
