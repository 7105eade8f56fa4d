"""Constants shared by both dialects' ``nki.isa``."""
from __future__ import annotations

import enum
from typing import Any


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


def unsupported_instruction(name: str) -> Any:
    """Module ``__getattr__`` of both isa modules: an instruction the simulator does not model."""
    if name.startswith("__"):
        raise AttributeError(name)
    from .errors import NKIUnsupportedError
    raise NKIUnsupportedError(
        f"nki.isa.{name} is not modelled by the torchneuron_ext NKI simulator; see docs/nki.md for the "
        f"instructions it runs")
