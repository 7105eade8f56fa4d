"""Constants shared by both dialects' ``nki.isa``."""
from __future__ import annotations

import enum
from typing import Any, Callable

from .errors import NkiValidationError  # noqa: F401  (nki.isa.NkiValidationError)


class engine(enum.Enum):
    """The NeuronCore's engines, with AWS's values (nki.isa.engine, Neuron 2.29+)."""
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6
    activation = 2  # the legacy dialect's name of the Scalar engine (nisa.activation_engine): an alias


unknown_engine, tensor_engine, vector_engine = engine.unknown, engine.tensor, engine.vector
scalar_engine, gpsimd_engine, activation_engine = engine.scalar, engine.gpsimd, engine.scalar


class reduce_cmd(enum.Enum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.Enum):
    """How a DMA's descriptors are generated (AWS's values)."""
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(enum.Enum):
    error = 0
    skip = 1


class matmul_perf_mode(enum.Enum):
    none = "none"
    double_row = "double_row"


class dma_engine(enum.Enum):
    """Which DMA queue moves a ``sendrecv``'s data: the shared DMA rings or GpSimd's own DMA (SBUF to SBUF)."""
    dma = 1
    gpsimd_dma = 2


class nc_version(enum.IntEnum):  # ordered: kernels test get_nc_version() >= nc_version.gen3
    gen2 = 2
    gen3 = 3
    gen4 = 4


class NkiInstruction:
    """The handle an instruction returns. ``depends_on`` orders this instruction after its producers on the
    device; the simulator runs every instruction in program order, so an edge to an instruction that already
    ran always holds and only the arguments are checked. (AWS derives it from nl.NKIObject; importing the
    language here would make nki.isa and nki.language import each other.)"""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def depends_on(self, *producers: "NkiInstruction") -> "NkiInstruction":
        for p in producers:
            if not isinstance(p, NkiInstruction):
                raise TypeError(f"NkiInstruction.depends_on takes the handles nki.isa instructions return, got "
                                f"{type(p).__name__}")
        return self

    def __repr__(self) -> str:
        return f"NkiInstruction({self.handle!r})"


def get_nc_sub_version() -> int:
    """The silicon revision within the target's NeuronCore generation: every target the simulator models is
    the first revision (0)."""
    return 0


def perf_mode_name(mode: Any) -> Any:
    """``nc_matmul``'s ``perf_mode`` as the Tensor engine names it: ``matmul_perf_mode.double_row`` is the
    fp8 (K, 2, M) contraction the engine calls "double_row_gen3"; ``none`` is the default."""
    if mode is matmul_perf_mode.none:
        return None
    if mode is matmul_perf_mode.double_row or mode == "double_row":
        return "double_row_gen3"
    return mode


def get_nc_version() -> nc_version:
    """The NeuronCore version of the running launch's target, so that a kernel launched with
    ``nki.jit(platform_target="trn3")`` branches as it would on trn3; outside a launch, the configured one."""
    from . import memory, runtime
    launch = runtime.current_or_none()
    return nc_version((launch.target if launch is not None else memory.default_target()).generation)


def check_dge_mode(mode: Any) -> Any:
    """``dge_mode`` picks how DMA descriptors are generated (hardware or software): a performance choice
    with no effect on the data moved, so any valid mode is accepted. Returns the member (None for the
    default). A plain integer that is a member's value names that member: NKI 0.2 took raw values, and
    AWS's NKI Library still passes them (``_DGE_MODE_NONE = 3`` in its norm, QKV and MLP TKG kernels)."""
    if mode is None or isinstance(mode, dge_mode):
        return mode
    if isinstance(mode, int) and not isinstance(mode, bool) and mode in {m.value for m in dge_mode}:
        return dge_mode(mode)
    raise ValueError(f"dge_mode must be one of nisa.dge_mode.{', nisa.dge_mode.'.join(m.name for m in dge_mode)} "
                     f"(or its value 0 to 3), got {mode!r}")


_COMPUTE_ENGINES = {engine.tensor: "tensor", engine.scalar: "scalar", engine.gpsimd: "gpsimd",
                    engine.vector: "vector"}


def engine_name(e: object, default: str = "vector") -> str:
    """The compute engine an instruction's ``engine=`` names. The DMA and Sync engines compute nothing: an
    instruction asked to run on one is refused."""
    if e is None or e is engine.unknown:
        return default
    if isinstance(e, engine):
        if e not in _COMPUTE_ENGINES:
            raise ValueError(f"engine=nisa.engine.{e.name} runs no compute instruction; use nisa.engine.vector, "
                             f".scalar, .gpsimd or .tensor")
        return _COMPUTE_ENGINES[e]
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
        unmodelled._nki_unmodelled = True  # AWS has it, the simulator does not run it
        return unmodelled
    return __getattr__
