"""Constants shared by both dialects' ``nki.isa``."""
from __future__ import annotations

import enum
from typing import Any, Callable


class engine(enum.Enum):
    unknown = 0
    tensor = 1
    vector = 2
    scalar = 3
    gpsimd = 4
    activation = 3
    sync = 5


unknown_engine, tensor_engine, vector_engine = engine.unknown, engine.tensor, engine.vector
scalar_engine, gpsimd_engine, activation_engine = engine.scalar, engine.gpsimd, engine.scalar


class reduce_cmd(enum.Enum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.Enum):
    unknown = 0
    none = 1
    swdge = 2
    hwdge = 3


class oob_mode(enum.Enum):
    error = 0
    skip = 1


class nc_version(enum.IntEnum):  # ordered: kernels test get_nc_version() >= nc_version.gen3
    gen2 = 2
    gen3 = 3
    gen4 = 4


def get_nc_version() -> nc_version:
    """The NeuronCore version of the running launch's target, so that a kernel launched with
    ``nki.jit(platform_target="trn3")`` branches as it would on trn3; outside a launch, the configured one."""
    from . import memory, runtime
    launch = runtime.current_or_none()
    return nc_version((launch.target if launch is not None else memory.default_target()).generation)


def check_dge_mode(mode: Any) -> None:
    """``dge_mode`` picks how DMA descriptors are generated (hardware or software): a performance choice
    with no effect on the data moved, so any valid mode is accepted."""
    if mode is not None and not isinstance(mode, dge_mode):
        raise ValueError(f"dge_mode must be one of nisa.dge_mode.{', nisa.dge_mode.'.join(m.name for m in dge_mode)}, "
                         f"got {mode!r}")


def engine_name(e: object, default: str = "vector") -> str:
    if e is None or e is engine.unknown:
        return default
    if isinstance(e, engine):
        return {1: "tensor", 2: "vector", 3: "scalar", 4: "gpsimd", 5: "vector"}[e.value]
    return str(e)


# AWS's nki.isa instructions (Neuron 2.26 for the legacy dialect, up to 2.33 for NKI 0.2+) that a dialect
# of the simulator does not run: they exist, so feature detection (hasattr) sees AWS's surface, and calling
# one says it is not modelled. Any other name is an AttributeError.
AWS_INSTRUCTIONS = frozenset({
    "nc_matmul", "nc_matmul_mx", "nc_transpose", "activation", "activate2", "activation_reduce", "tensor_reduce",
    "tensor_partition_reduce", "tensor_tensor", "tensor_tensor_scan", "scalar_tensor_tensor", "tensor_scalar",
    "tensor_scalar_reduce", "tensor_scalar_cumulative", "tensor_copy", "tensor_copy_dynamic_src",
    "tensor_copy_dynamic_dst", "tensor_copy_predicated", "exponential", "reciprocal", "quantize_mx", "iota",
    "dropout", "affine_select", "range_select", "select_reduce", "sequence_bounds", "memset", "bn_stats",
    "bn_aggr", "local_gather", "nc_n_gather", "dma_copy", "dma_transpose", "dma_compute", "max8",
    "nc_find_index8", "nc_match_replace8", "nc_stream_shuffle", "register_alloc", "register_load",
    "register_move", "register_store", "core_barrier", "sendrecv", "rng", "rand2", "rand_set_state",
    "rand_get_state", "set_rng_seed", "nonzero_with_count",
})


def unmodelled_instructions(module: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of an isa module (called only for names it does not define)."""
    def __getattr__(name: str) -> Any:
        if name not in AWS_INSTRUCTIONS:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")

        def unmodelled(*args: Any, **kwargs: Any) -> Any:
            from .errors import NKIUnsupportedError
            raise NKIUnsupportedError(
                f"nki.isa.{name} is not modelled by the torchneuron_ext NKI simulator; see docs/nki.md for the "
                f"instructions it runs")
        unmodelled.__name__ = unmodelled.__qualname__ = name
        return unmodelled
    return __getattr__
