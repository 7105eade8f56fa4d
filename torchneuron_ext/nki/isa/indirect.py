"""Which ``nki.isa`` instructions take Tensor Indirection views (``t.indirect(index)``, NeuronCore-v4), on which
operands and engines, with the rules of AWS's ISA reference ("Tensor indirection" of each instruction).

``accepts_indirection(...)`` decorates an instruction: a call with no indirect view runs as before; a call
with one is checked against the instruction's documented rules and runs with the offsets resolved in its
engine's group (16 partitions for the Vector, Scalar and GpSimd engines, 32 for the Tensor engine). Any other
instruction, or operand, that meets such a view refuses it (nki/indirection.py).

The base-partition rules AWS states "when operands are manually allocated" are checked for tiles placed by
the kernel (nki.compiler allocations, ``nl.ndarray(address=...)``): the compiler places the others.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, NamedTuple, Optional, Sequence


from .. import dtypes, runtime
from .. import indirection as _ti
from .._isa_common import engine_name
from ..access_pattern import partition_elements
from ..data_address import data_address
from ..errors import NKIUnsupportedError, fail
from ..memory import psum

__all__ = ["accepts_indirection", "is_tensor_indirect"]

# nc_matmul: "The indirect operands must be a Tensor-Engine float dtype".
_TENSOR_ENGINE_DTYPES = ("float16", "bfloat16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn")
_QUADRANT = 32


class _Rule(NamedTuple):
    operands: tuple            # the operands that may be indirect views
    engines: tuple             # the engines that may run the instruction with one
    default_engine: str        # the engine when ``engine=`` is absent or unknown
    primary: Optional[str]     # the input the base-partition rules relate dst's index to
    group: int = _ti.ENGINE_GROUP
    check: Optional[Callable] = None  # the instruction's own rules: check(api, arguments, indirect)


def is_tensor_indirect(x: Any) -> bool:
    dyn = getattr(x, "_dyn", None)
    return dyn is not None and dyn[1] is not None and dyn[1].kind == "tensor"


def accepts_indirection(operands: Sequence[str], engines: Sequence[str], primary: Optional[str],
                        default_engine: Optional[str] = None, group: int = _ti.ENGINE_GROUP,
                        check: Optional[Callable] = None) -> Callable:
    """The decorator of an instruction whose ``operands`` may be indirect views, run on ``engines`` (the first
    when ``engine=`` leaves the choice to the compiler)."""
    rule = _Rule(tuple(operands), tuple(engines), default_engine or engines[0], primary, group, check)

    def wrap(func: Callable) -> Callable:
        signature = inspect.signature(func)
        api = func.__name__

        @functools.wraps(func)
        def instruction(*args: Any, **kwargs: Any) -> Any:
            if not any(is_tensor_indirect(a) for a in args) and \
                    not any(is_tensor_indirect(v) for v in kwargs.values()):
                return func(*args, **kwargs)
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            _check(api, rule, bound.arguments)
            with _ti.engine_group(rule.group):
                return func(*args, **kwargs)

        return instruction

    return wrap


def _check(api: str, rule: _Rule, arguments: dict) -> None:
    target = runtime.current().target
    if target.generation < 4:
        fail("err_unsupported_instruction", f"'{api}': tensor indirection needs NeuronCore-v4 or later; the target "
                                            f"is {target.name} (NeuronCore-v{target.generation})")
    indirect = {name: v for name, v in arguments.items() if is_tensor_indirect(v)}
    for name in indirect:
        if name not in rule.operands:
            fail("err_unsupported_tensor_indirection",
                 f"'{api}': {name} does not support tensor indirection (.indirect); only "
                 f"{' and '.join(rule.operands)} do")
    engine = rule.default_engine
    if "engine" in arguments:
        chosen = engine_name(arguments["engine"], "")
        if chosen and chosen not in rule.engines:
            fail("err_unsupported_engine", f"'{api}' with tensor indirection runs on the "
                                           f"{' or '.join(e.capitalize() for e in rule.engines)} engine, not "
                                           f"{chosen.capitalize()}")
        engine = chosen or engine
    dst = arguments.get("dst")
    if engine == "scalar" and "dst" in indirect and dst.buffer is psum:
        fail("err_unsupported_memory", f"'{api}': on the Scalar engine a scattered dst (.indirect) cannot be in PSUM")
    if rule.check is not None:
        rule.check(api, arguments, indirect)
    _check_partitions(api, rule, arguments, indirect)


def _check_tile_position(api: str, arguments: dict) -> None:
    position = arguments.get("tile_position")
    if position not in (None, ()) and tuple(int(v) for v in position) != (0, 0):
        fail("err_invalid_pe_tiling", f"'{api}': tensor indirection is incompatible with Tensor engine tiling; "
                                      f"tile_position must be (0, 0) or unset, got {tuple(position)}")


def check_matmul(api: str, arguments: dict, indirect: dict) -> None:
    """nc_matmul: no indirect moving in transpose mode, no PE tiling, Tensor-engine float inputs."""
    if arguments.get("is_transpose") and "moving" in indirect:
        fail("err_unsupported_tensor_indirection", f"'{api}': with is_transpose=True, moving cannot use tensor "
                                                   f"indirection")
    _check_tile_position(api, arguments)
    for name, view in indirect.items():
        if name != "dst" and dtypes.name(view.dtype) not in _TENSOR_ENGINE_DTYPES:
            fail("err_unsupported_dtype", f"'{api}': an indirect operand ({name}) must be "
                                          f"{', '.join(_TENSOR_ENGINE_DTYPES)}, got {dtypes.name(view.dtype)}")


def _index(view: Any) -> Any:
    return view._dyn[1].source.index


def _check_partitions(api: str, rule: _Rule, arguments: dict, indirect: dict) -> None:
    """AWS's base-partition rules, for operands the kernel placed itself."""
    for name, view in indirect.items():
        start = manual_start_partition(_index(view))
        if start is not None and start % _QUADRANT:
            fail("err_invalid_start_partition", f"'{api}': the index of {name}.indirect() starts on partition "
                                                f"{start}; it must start on a quadrant boundary (a multiple of 32)")
        if name != "dst":
            own = manual_start_partition(view)
            if own is not None and start is not None and own != start:
                fail("err_invalid_start_partition", f"'{api}': {name} starts on partition {own} but its index on "
                                                    f"{start}; an indirect {name} starts on its index's partition")
    if "dst" not in indirect or rule.primary is None:
        return
    dst_index = manual_start_partition(_index(indirect["dst"]))
    primary = arguments.get(rule.primary)
    if dst_index is None or not hasattr(primary, "buffer"):
        return
    if rule.group == _ti.TENSOR_GROUP or primary.buffer is not psum:
        other, what = manual_start_partition(primary), rule.primary
    elif is_tensor_indirect(primary):
        other, what = manual_start_partition(_index(primary)), f"{rule.primary}'s index"
    else:
        return
    if other is not None and other != dst_index:
        fail("err_invalid_start_partition", f"'{api}': dst's index starts on partition {dst_index}, {what} on "
                                            f"{other}; they must start on the same partition")


def manual_start_partition(view: Any) -> Optional[int]:
    """The SBUF/PSUM partition a view of a tile the kernel placed itself (direct allocation) starts on; None
    for a tile the compiler places."""
    storage = view.storage.array
    first = runtime.current().placed_partition(view.buffer, storage)
    if first is None:
        return None
    if is_tensor_indirect(view):
        per_partition = partition_elements(storage, True, view.dtype)
        return first + view._dyn[1].source.base.offset // per_partition
    if view.index is not None:
        return None
    return first + (data_address(view.arr) - data_address(storage)) \
        // storage.strides[0]


def check_matmul_mx(api: str, arguments: dict, indirect: dict) -> None:
    """nc_matmul_mx: data and scales form one MX tensor, so each (data, scale) pair is indirect through the same
    index or not at all; no PE tiling. An indirect data pair is AWS's but not modelled here (the scales'
    quadrant layout under a gather is not documented); an indirect dst is."""
    for data, scale in (("stationary", "stationary_scale"), ("moving", "moving_scale")):
        if (data in indirect) != (scale in indirect) or (
                data in indirect and _index(indirect[data]) is not _index(indirect[scale])):
            fail("err_unsupported_tensor_indirection",
                 f"'{api}': {data} and {scale} must both use .indirect() with the same index, or neither")
    _check_tile_position(api, arguments)
    for name in ("stationary", "moving"):
        if name in indirect:
            raise NKIUnsupportedError(f"nki.isa.{api} with {name}.indirect(...) is not modelled by the simulator "
                                      f"(only an indirect dst is)")
