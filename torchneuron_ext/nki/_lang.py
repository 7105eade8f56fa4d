"""The implementation behind ``nki.language`` of both dialects (the legacy one adds arange, mgrid, mask=)."""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np

from . import dtypes as _dt
from . import float_bits as _float_bits
from . import engines as _eng
from . import runtime as _rt
from .compiler import DirectAllocation, at_address, buffer_of
from .errors import NKIUnsupportedError, fail
from .indexing import DynSlice, as_mask, ds
from .isa.registers import VirtualRegister
from .memory import hbm, private_hbm, psum, sbuf, shared_hbm
from .runtime import tile_size
from .rules import allocation as _alloc_rules
from .rules import dependencies as _deps
from .tensor import NKITensor

bool_, int8, int16, int32 = _dt.bool_, _dt.int8, _dt.int16, _dt.int32
uint8, uint16, uint32 = _dt.uint8, _dt.uint16, _dt.uint32
float16, float32, bfloat16, tfloat32 = _dt.float16, _dt.float32, _dt.bfloat16, _dt.tfloat32
float8_e4m3, float8_e4m3fn, float8_e5m2 = _dt.float8_e4m3, _dt.float8_e4m3fn, _dt.float8_e5m2
# MX: the packed x4 data dtypes and the E8M0 shared-scale dtype (nki.isa.quantize_mx / nc_matmul_mx).
float8_e8m0fnu, float8_e4m3fn_x4, float8_e5m2_x4 = _dt.float8_e8m0fnu, _dt.float8_e4m3fn_x4, _dt.float8_e5m2_x4
float4_e2m1fn_x4 = _dt.float4_e2m1fn_x4
fp32, fp16, bf16, tf32, fp8_e4m3, fp8_e5m2 = _dt.fp32, _dt.fp16, _dt.bf16, _dt.tf32, _dt.fp8_e4m3, _dt.fp8_e5m2
finfo, iinfo = _dt.finfo, _dt.iinfo

tile = NKITensor
Tensor = NKITensor  # the type name kernels annotate tiles with


class _Unset:
    """The default of an NKIObject field declared without one: AWS's NKI Library constructs such dataclasses
    without every field (``MLPTKGConstantsDimensionSizes`` never passes its ``remainderIFused``), as AWS's
    ``NKIObject(**kwargs)`` allows. Reading a field that was never set is an AttributeError, as in Python."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        raise AttributeError(f"{type(obj).__name__}.{self.name} was never set")

    def __repr__(self) -> str:
        return "<not set>"


class NKIObject:
    """``nl.NKIObject``: the base class of the dataclasses and configuration objects kernels pass around. The
    simulator runs kernels as Python, so it is a plain base; ``NKIObject(**fields)`` sets the fields, and a
    dataclass subclass may be constructed without some of its fields (see _Unset)."""

    def __init__(self, **kwargs: Any) -> None:
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __post_init__(self) -> None:
        for key, value in list(vars(self).items()):
            if isinstance(value, _Unset):
                delattr(self, key)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # AWS's kernels declare @dataclass NKIObjects with plain class attributes (``section_idx = None``) and
        # construct them by keyword; a plain dataclass would see no fields there. Such attributes become
        # fields with their value as default (immutable values only: a dataclass refuses a list default).
        super().__init_subclass__(**kwargs)
        annotations = cls.__dict__.get("__annotations__")
        if annotations is None:
            annotations = {}
            cls.__annotations__ = annotations
        for name, value in list(cls.__dict__.items()):
            if name.startswith("_") or name in annotations or callable(value) \
                    or isinstance(value, (property, classmethod, staticmethod, list, dict, set)):
                continue
            annotations[name] = Any
        for name, annotation in annotations.items():
            if name not in cls.__dict__ and "ClassVar" not in str(annotation) and "InitVar" not in str(annotation):
                unset = _Unset()
                unset.__set_name__(cls, name)
                setattr(cls, name, unset)


class par_dim:
    """``nl.par_dim(n)`` marks the partition dimension in a shape with block dimensions before it."""
    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = int(size)

    def __index__(self) -> int:
        return self.size

    def __int__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"par_dim({self.size})"


def _parse_shape(shape: Any) -> tuple:
    if isinstance(shape, (int, np.integer, par_dim)):
        shape = (shape,)
    par_axis = 0
    out = []
    for i, s in enumerate(shape):
        if isinstance(s, par_dim):
            par_axis = i
            out.append(s.size)
        else:
            out.append(int(s))
    return tuple(out), par_axis


def _buffer(buffer: Any):
    if buffer is None:
        return sbuf
    buffer = buffer_of(buffer)
    if buffer in (sbuf, psum, hbm, private_hbm, shared_hbm) or isinstance(buffer, DirectAllocation):
        return buffer
    raise TypeError(f"buffer= must be one of nl.sbuf, nl.psum, nl.hbm, nl.private_hbm, nl.shared_hbm or an "
                    f"nki.compiler allocation (ncc.sbuf.mod_alloc(...)), got {buffer!r}")


def _allocate(shp: tuple, dtype: Any, buffer: Any, name: str, par_axis: int, fill: Any = "uninit") -> Any:
    b = _buffer(buffer)
    launch = _rt.current()
    _alloc_rules.check_creation(shp, par_axis, b, fill, launch.dialect)
    if isinstance(b, DirectAllocation):
        return launch.allocate_direct(shp, _dt.as_dtype(dtype), b, name, par_axis, fill=fill)
    return launch.allocate(shp, _dt.as_dtype(dtype), b, name, par_axis, fill=fill)


def ndarray(shape: Any, dtype: Any, buffer: Any = None, name: str = "", address: Optional[Sequence[int]] = None,
            *, lazy_initialization: bool = False) -> NKITensor:
    """A new, uninitialised tensor (NaN-filled, as AWS's simulator does, so reads of it show); ``address=
    (partition, byte)`` places an SBUF or PSUM tensor there (nki.compiler.at_address)."""
    shp, par_axis = _parse_shape(shape)
    if address is not None:
        launch = _rt.current()
        alloc = at_address(_buffer(buffer), address, launch.target.psum_bank_bytes, shp[:par_axis])
        storage = launch.allocate_at(shp, _dt.as_dtype(dtype), alloc, name, par_axis)
        return NKITensor(storage, storage.array, None, storage.par_axis)
    storage = _allocate(shp, dtype, buffer, name, par_axis)
    return NKITensor(storage, storage.array, None, storage.par_axis)


def _filled(shape: Any, value: Any, dtype: Any, buffer: Any, name: str) -> NKITensor:
    shp, par_axis = _parse_shape(shape)
    storage = _allocate(shp, dtype, buffer, name, par_axis, fill=value)
    par_axis = storage.par_axis
    if storage.buffer.on_chip:
        # The elements per partition: with block dimensions before nl.par_dim, those are free too.
        per_partition = math.prod(shp) // (int(shp[par_axis]) or 1) if len(shp) > 1 else 1
        costs = _rt.current().costs
        costs.compute("vector", "memset", per_partition)
        costs.scheduler.fill(storage, value)  # the memset's output
    return NKITensor(storage, storage.array, None, par_axis)


def zeros(shape: Any, dtype: Any, buffer: Any = None, *, name: str = "",
        lazy_initialization: bool = False) -> NKITensor:
    return _filled(shape, 0, dtype, buffer, name)


def ones(shape: Any, dtype: Any, buffer: Any = None, *, name: str = "",
        lazy_initialization: bool = False) -> NKITensor:
    return _filled(shape, 1, dtype, buffer, name)


def full(shape: Any, fill_value: Any, dtype: Any, buffer: Any = None, *, name: str = "",
        lazy_initialization: bool = False) -> NKITensor:
    return _filled(shape, fill_value, dtype, buffer, name)


def zeros_like(a: NKITensor, dtype: Any = None, *, buffer: Any = None, name: str = "",
        lazy_initialization: bool = False) -> NKITensor:
    return zeros(a.shape, dtype if dtype is not None else a.dtype, buffer=buffer or a.buffer, name=name)


def ones_like(a: NKITensor, dtype: Any = None, *, buffer: Any = None, name: str = "",
        lazy_initialization: bool = False) -> NKITensor:
    return ones(a.shape, dtype if dtype is not None else a.dtype, buffer=buffer or a.buffer, name=name)


def empty_like(a: NKITensor, dtype: Any = None, *, buffer: Any = None, name: str = "",
        lazy_initialization: bool = False) -> NKITensor:
    return ndarray(a.shape, dtype if dtype is not None else a.dtype, buffer=buffer or a.buffer, name=name)


def rand(shape: Any, dtype: Any = float32, *, buffer: Any = None, name: str = "") -> NKITensor:
    t = ndarray(shape, dtype, buffer=buffer, name=name)
    t.write(_dt.cast(_rng().random(t.shape, dtype=np.float32), t.dtype))
    return t


def _rng() -> np.random.Generator:
    return _rt.current().random()


def random_seed(seed: Any, *, mask: Any = None) -> None:
    """Seed the on-device random number generator (nl.rand, nl.dropout, nisa.dropout draw from it)."""
    if mask is not None:
        if as_mask(mask) is not None:
            raise NKIUnsupportedError("nl.random_seed with a mask that is not always true is not modelled")
    _eng.random_seed(seed)


def loop_reduce(x: NKITensor, op: Any, loop_indices: Any, *, dtype: Any = None, mask: Any = None,
                name: str = "") -> NKITensor:
    """``dst[...] = nl.loop_reduce(x, np.add, loop_indices=[i])``: dst accumulates x over the loop."""
    return _eng.loop_reduce(x, op, loop_indices, dtype=dtype, mask=mask)


def shared_constant(constant: Any, dtype: Any = None) -> NKITensor:
    """A shared-HBM tensor holding ``constant``: an array, or the path of a ``.npy`` file (AWS's documented
    forms). The compiler embeds it in the binary, so unlike a shared_hbm output it may be made in a loop."""
    if isinstance(constant, (str, os.PathLike)):
        path = os.fspath(constant)
        if not path.endswith(".npy"):
            raise ValueError(f"shared_constant reads a numpy .npy file, got {path!r}")
        constant = np.load(path, allow_pickle=False)
    arr = np.asarray(constant)
    storage = _rt.current().allocate(arr.shape, _dt.as_dtype(dtype if dtype is not None else arr.dtype),
                                     shared_hbm, constant=True)
    t = NKITensor(storage, storage.array, None, storage.par_axis)
    t.write(_dt.cast(arr, t.dtype))
    return t


def shared_identity_matrix(n: int, dtype: Any = uint8) -> NKITensor:
    """The legacy dialect's identity: a shared-HBM constant (NKI 0.2+ has it in SBUF, _sbuf_identity_matrix)."""
    return shared_constant(np.eye(n), dtype)


def _sbuf_identity_matrix(n: int, dtype: Any = uint8, dst: Optional[NKITensor] = None) -> NKITensor:
    """NKI 0.2+'s ``nl.shared_identity_matrix``: an ``n`` x ``n`` identity matrix in SBUF (AWS documents SBUF:
    the compiler keeps one per dtype there and hands it out), written into ``dst`` when given. The compiler
    loads it from the binary: one DMA."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
        raise TypeError(f"nl.shared_identity_matrix: n must be a positive integer, got {n!r}")
    if dst is None:
        dst = ndarray((int(n), int(n)), dtype, buffer=sbuf, name="shared_identity_matrix")
    elif not isinstance(dst, NKITensor):
        raise TypeError(f"nl.shared_identity_matrix: dst= must be a tensor, got {type(dst).__name__}")
    elif dst.buffer is not sbuf or tuple(dst.shape) != (n, n):
        raise TypeError(f"nl.shared_identity_matrix: dst= must be an ({n}, {n}) SBUF tensor, got "
                        f"{tuple(dst.shape)} in {dst.buffer.name}")
    dst.write(_dt.cast(np.eye(int(n)), dst.dtype))
    _rt.current().costs.dma("shared_identity_matrix", n * n * np.dtype(dst.dtype).itemsize, to_hbm=False,
                            from_hbm=True)
    return dst


def static_cast(arr: np.ndarray, dtype: Any) -> np.ndarray:
    """Host helper: cast a numpy array to an NKI dtype (e.g. bfloat16) with round-to-nearest."""
    return _float_bits.from_float32(np.asarray(arr), _dt.as_dtype(dtype))  # astype, vectorised


# -- loops and SPMD ------------------------------------------------------------------------------------

# Loops are Python ranges. `directives=` (nki.compiler.multi_buffer, no_reorder) and `precise_schedule`
# steer the compiler's scheduling, which the simulator does not have; `lazy_initialization` on the creation
# functions likewise only moves where the toolchain initialises a tensor, never its values.

def affine_range(*args: int, directives: Any = None, precise_schedule: bool = False) -> Any:
    return _deps.affine_range(range(*args), getattr(_rt.current_or_none(), "dialect", None))


def sequential_range(*args: int, directives: Any = None, precise_schedule: bool = False) -> range:
    return range(*args)


def static_range(*args: int, directives: Any = None, precise_schedule: bool = False) -> range:
    return range(*args)


# Dynamic loops run on the device: the NeuronCore's sequencer loops over one copy of the body, with bounds and
# conditions held in registers (nisa.register_*). The simulator runs the body as Python once per iteration,
# reading the registers when the loop starts (bounds) or before each iteration (conditions), and hands the
# body its induction value as a register, which is what the body sees on the device.

def _loop_bound(x: Any, api: str, arg: str) -> int:
    if isinstance(x, VirtualRegister):
        return x.read_register(f"nl.{api}({arg}=...)")
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"nl.{api}: {arg} must be an int or a VirtualRegister, got {type(x).__name__}")
    return int(x)


def _loop_step(step: Any, api: str) -> int:
    if isinstance(step, VirtualRegister):
        fail("err_dynamic_loop_step", f"nl.{api}: the step must be a compile-time positive integer (the hardware "
                                      f"loop instruction encodes it as an immediate), got a VirtualRegister")
    if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)) or step <= 0:
        fail("err_dynamic_loop_step", f"nl.{api}: the step must be a compile-time positive integer, got {step!r}")
    return int(step)


def dynamic_range(start: Any, stop: Any = None, step: int = 1) -> Iterator[VirtualRegister]:
    """A loop the device runs with runtime bounds (ints or registers, read when the loop starts); each
    iteration's value is a register (usable as ``scalar_offset=``, not as a Python int)."""
    if stop is None:
        start, stop = 0, start
    lo, hi = _loop_bound(start, "dynamic_range", "start"), _loop_bound(stop, "dynamic_range", "stop")
    return (VirtualRegister(i, frozen=True) for i in range(lo, hi, _loop_step(step, "dynamic_range")))


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[VirtualRegister], Any], step: int = 1) -> None:
    """``for i in range(lower, upper, step): body_fun(i)`` on the device, ``i`` a register passed by value."""
    if not callable(body_fun):
        raise TypeError(f"nl.fori_loop: body_fun must be a function (i) -> None, got {type(body_fun).__name__}")
    for i in dynamic_range(_loop_bound(lower, "fori_loop", "lower"), _loop_bound(upper, "fori_loop", "upper"),
                           _loop_step(step, "fori_loop")):
        body_fun(i)


def while_loop(init: VirtualRegister, body_fun: Callable[[VirtualRegister], VirtualRegister]) -> None:
    """``r = init; while r != 0: r = body_fun(r)`` on the device: the condition is checked before each
    iteration, and the register the body returns is the next condition."""
    if not isinstance(init, VirtualRegister):
        raise TypeError(f"nl.while_loop: init must be a VirtualRegister (nisa.register_alloc), got "
                        f"{type(init).__name__}")
    if not callable(body_fun):
        raise TypeError(f"nl.while_loop: body_fun must be a function (r) -> VirtualRegister, got "
                        f"{type(body_fun).__name__}")
    cond = init.read_register("nl.while_loop(init=...)")
    while cond != 0:
        nxt = body_fun(VirtualRegister(cond))
        if not isinstance(nxt, VirtualRegister):
            raise TypeError(f"nl.while_loop: body_fun must return the next condition as a VirtualRegister, got "
                            f"{type(nxt).__name__}")
        cond = nxt.read_register("nl.while_loop's condition")


def program_id(axis: int = 0) -> int:
    pid = _rt.current().program_id
    if axis >= len(pid):
        if axis == 0 and not pid:
            return 0
        raise IndexError(f"nl.program_id({axis}): the launch grid has {len(pid)} dimensions")
    return int(pid[axis])


def num_programs(axes: Any = None) -> int:
    grid = _rt.current().grid or (1,)
    if axes is None:
        return int(math.prod(grid))
    if isinstance(axes, (tuple, list)):
        return int(math.prod(grid[a] for a in axes))
    return int(grid[axes]) if axes < len(grid) else 1


def program_ndim() -> int:
    return len(_rt.current().grid)


def nc(n: int) -> int:
    return int(n)


def spmd_dim(*args: Any) -> int:
    return int(math.prod(int(a) for a in args))


def device_print(prefix: str, x: Any) -> None:
    print(prefix, np.asarray(x.read()) if isinstance(x, NKITensor) else x)


# -- data movement ---------------------------------------------------------------------------------------

def load(src: NKITensor, *, mask: Any = None, dtype: Any = None) -> NKITensor:
    return _eng.load(src, mask=mask, dtype=dtype)


def store(dst: NKITensor, value: Any, *, mask: Any = None) -> None:
    _eng.store(dst, value, mask=mask)


def load_transpose2d(src: NKITensor, *, mask: Any = None, dtype: Any = None) -> NKITensor:
    """A (F, P) HBM tensor loaded transposed, by the DMA engine: its axis 1 lands on the partitions."""
    if not isinstance(src, NKITensor) or not src.buffer.is_hbm:
        fail("err_unsupported_memory", "Expected operand 'src' of 'load_transpose2d' to be in address space 'hbm'")
    if src.ndim != 2:
        fail("err_exceed_max_supported_dimension", f"'load_transpose2d' takes a 2-D tensor, got {src.shape}")
    return _eng.dma_transpose(src, dtype=dtype, mask=mask)


def atomic_rmw(dst: NKITensor, value: Any, op: Any, *, mask: Any = None) -> None:
    """``dst = op(dst, value)`` in HBM, one element at a time, so that repeated indirect indices
    (``dst[idx_tile, i_f]``) all take effect, as the DMA engine's atomic read-modify-write does."""
    _eng.atomic_rmw(dst, value, op, mask=mask)


def copy(src: NKITensor, *, dtype: Any = None, mask: Any = None) -> NKITensor:
    return _eng.copy(src, dtype=dtype, mask=mask)


copy._nki_op = "copy"  # also the Scalar engine's identity: nisa.activation(op=nl.copy, ...) is a common idiom


def broadcast_to(src: NKITensor, *, shape: Sequence[int]) -> NKITensor:
    return _eng.broadcast_to(src, tuple(shape))


def expand_dims(data: NKITensor, axis: int) -> NKITensor:
    return _eng.expand_dims(data, axis)


def where(condition: Any, x: Any, y: Any, *, dtype: Any = None, mask: Any = None) -> NKITensor:
    return _eng.where(condition, x, y, dtype=dtype, mask=mask)


# -- elementwise -----------------------------------------------------------------------------------------

def _unary(name: str) -> Callable:
    def op(x: Any, *, dtype: Any = None, mask: Any = None) -> NKITensor:
        return _eng.elementwise(name, (x,), dtype=dtype, mask=mask, api=name)
    op.__name__ = op.__qualname__ = name
    op._nki_op = name
    op.__doc__ = f"``nl.{name}(x)`` elementwise on the engines, computed in fp32."
    return op


def _binary(name: str) -> Callable:
    def op(x: Any, y: Any, *, dtype: Any = None, mask: Any = None) -> NKITensor:
        return _eng.elementwise(name, (x, y), dtype=dtype, mask=mask, api=name)
    op.__name__ = op.__qualname__ = name
    op._nki_op = name
    op.__doc__ = f"``nl.{name}(x, y)`` elementwise with numpy broadcasting; tiles or scalars on either side."
    return op


exp, log, sqrt, rsqrt, reciprocal = (_unary(n) for n in ("exp", "log", "sqrt", "rsqrt", "reciprocal"))
tanh, sigmoid, relu, gelu = (_unary(n) for n in ("tanh", "sigmoid", "relu", "gelu"))
gelu_apprx_tanh, gelu_apprx_sigmoid, gelu_dx = (_unary(n) for n in ("gelu_apprx_tanh", "gelu_apprx_sigmoid",
                                                                     "gelu_dx"))
gelu_apprx_sigmoid_dx = _unary("gelu_apprx_sigmoid_dx")
silu, silu_dx, softplus, mish, erf, erf_dx = (_unary(n) for n in ("silu", "silu_dx", "softplus", "mish", "erf",
                                                                  "erf_dx"))
sin, cos, tan, arctan, sign, abs = (_unary(n) for n in ("sin", "cos", "tan", "arctan", "sign", "abs"))
square, negative, ceil, floor, trunc = (_unary(n) for n in ("square", "negative", "ceil", "floor", "trunc"))
logical_not, invert = _unary("logical_not"), _unary("invert")
bitwise_not = invert

add, subtract, multiply, divide = (_binary(n) for n in ("add", "subtract", "multiply", "divide"))
maximum, minimum, power, fmod, mod = (_binary(n) for n in ("maximum", "minimum", "power", "fmod", "mod"))
equal, not_equal, less, less_equal = (_binary(n) for n in ("equal", "not_equal", "less", "less_equal"))
greater, greater_equal = _binary("greater"), _binary("greater_equal")
logical_and, logical_or, logical_xor = (_binary(n) for n in ("logical_and", "logical_or", "logical_xor"))
bitwise_and, bitwise_or, bitwise_xor = (_binary(n) for n in ("bitwise_and", "bitwise_or", "bitwise_xor"))
left_shift, right_shift = _binary("left_shift"), _binary("right_shift")
abs_max, abs_min = _binary("abs_max"), _binary("abs_min")


def _isa_operator(name: str, doc: str) -> Any:
    """An operator AWS defines only as an argument of ISA instructions (not callable on tiles)."""
    def op(*args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"nl.{name} is an operator for nki.isa instructions (e.g. activate2's op0/op1 or op), "
                        f"not a function to call")
    op.__name__ = op.__qualname__ = name
    op._nki_op = name
    op.__doc__ = doc
    return op


bypass = _isa_operator("bypass", "No operation: skips a stage of a tensor-scalar pipeline (nisa.activate2).")
prelu = _isa_operator("prelu", "Parametric ReLU for nisa.activate2: x if x >= 0 else relu_param * x.")


# -- reductions ------------------------------------------------------------------------------------------

def _reduction(name: str, engine_op: str) -> Callable:
    def op(x: NKITensor, axis: Any, *, dtype: Any = None, mask: Any = None, keepdims: bool = False) -> NKITensor:
        return _eng.reduce(engine_op, x, axis, dtype=dtype, mask=mask, keepdims=keepdims, api=name)
    op.__name__ = op.__qualname__ = name
    op._nki_op = engine_op
    op.__doc__ = (f"``nl.{name}(x, axis)`` over free axes; the partition dimension stays, so a 2-D tile gives "
                  f"(P, 1).")
    return op


sum = _reduction("sum", "add")
max = _reduction("max", "maximum")
min = _reduction("min", "minimum")
mean = _reduction("mean", "mean")
prod = _reduction("prod", "multiply")
all = _reduction("all", "logical_and")
var = _reduction("var", "var")


# -- fused helpers ---------------------------------------------------------------------------------------

def softmax(x: NKITensor, axis: Any, *, dtype: Any = None, mask: Any = None) -> NKITensor:
    m = max(x, axis=axis, keepdims=True, mask=mask)
    e = exp(subtract(x, m, mask=mask), mask=mask)
    s = sum(e, axis=axis, keepdims=True, mask=mask)
    return divide(e, s, dtype=dtype, mask=mask)


def rms_norm(x: NKITensor, w: Any, axis: Any, n: int, epsilon: float = 1e-6, *, dtype: Any = None,
             mask: Any = None) -> NKITensor:
    ss = sum(square(x, mask=mask), axis=axis, keepdims=True, mask=mask)
    inv = rsqrt(add(divide(ss, float(n)), float(epsilon)))
    return multiply(multiply(x, inv, mask=mask), w, dtype=dtype, mask=mask)


def dropout(x: NKITensor, rate: Any, *, dtype: Any = None, mask: Any = None) -> NKITensor:
    """Zero each element with probability ``rate`` (a scalar or a one-element tile)."""
    p = float(rate) if not isinstance(rate, NKITensor) else float(np.asarray(rate.read()).reshape(-1)[0])
    return _eng.dropout(x, p, dtype=dtype, mask=mask)


# -- matmul and transpose --------------------------------------------------------------------------------

def matmul(x: NKITensor, y: NKITensor, *, transpose_x: bool = False, mask: Any = None) -> NKITensor:
    """x @ y (or x.T @ y with transpose_x) into a new fp32 PSUM tile."""
    if not transpose_x:
        _eng.check_tile(x, "matmul", "x")
        _alloc_rules.check_allocated_transpose(_rt.current(), "tensor", "matmul")
        pe = _rt.current().target.pe_array
        if x.ndim == 2 and (x.shape[0] > pe or x.shape[1] > pe):
            fail("err_size_of_dimension_exceed_arch_limit",
                 f"'matmul' without transpose_x transposes x on the Tensor engine: x must be at most {pe}x{pe}, "
                 f"got {x.shape}")
        x = transpose(x)
    return _eng.matmul(x, y, api="matmul", allow_psum_operands=True, mask=mask)


def transpose(x: NKITensor, *, dtype: Any = None, mask: Any = None) -> NKITensor:
    """nl.transpose: a 2-D tile's transpose as an SBUF tile of its dtype (nc_transpose's is fp32 in PSUM)."""
    _eng.check_tile(x, "transpose", "data")
    if x.ndim > 2:
        fail("err_exceed_max_supported_dimension", f"'transpose' takes a 2-D tile, got {x.shape}")
    return _eng.transpose(x, api="transpose", dtype=dtype, mask=mask, psum_result=False)


def gather_flattened(data: NKITensor, indices: NKITensor, axis: int = 0, *, mask: Any = None,
                     dtype: Any = None) -> NKITensor:
    """nl.gather_flattened: per partition, out[p, ...] = data[p, free axes flattened][indices[p, ...]], a tile
    of indices' shape (uint32 indices; AWS: 2- to 4-D). Out-of-bounds indices are an error here, where the
    device returns garbage. ``axis`` (NKI 0.2+) is the partition axis the gathers run in parallel over; only
    0 is documented by example."""
    api = "gather_flattened"
    _eng.check_tile(data, api, "data")
    _eng.check_tile(indices, api, "indices")
    if axis != 0:
        raise NKIUnsupportedError(f"nl.gather_flattened(axis={axis!r}): only axis=0 (one gather per partition, "
                                  "as AWS's example) is modelled")
    for name, t in (("data", data), ("indices", indices)):
        if not 2 <= t.ndim <= 4:
            fail("err_exceed_max_supported_dimension", f"'{api}': {name} must be 2- to 4-D, got {t.shape}")
    gathered = _eng.new_tile(tuple(indices.shape), data.dtype)
    _eng.n_gather(data, indices, dst=gathered, api=api)
    if dtype is None and mask is None:
        return gathered
    return _eng.copy(gathered, dtype=dtype, mask=mask)


def _unsupported(name: str, hint: str) -> Callable:
    def op(*args: Any, **kwargs: Any) -> Any:
        raise NKIUnsupportedError(f"nl.{name} is not modelled by the torchneuron_ext NKI simulator: {hint}")
    op.__name__ = name
    op._nki_unmodelled = True
    return op


all_reduce = _unsupported("all_reduce", "collectives across cores are not simulated; use torch.distributed")


# Names of the language the simulator knows but does not model: reading them raises NKIUnsupportedError
# naming them (through the language modules' __getattr__), not an AttributeError that looks like a typo.
UNMODELLED: "dict[str, str]" = {}


def unmodelled(module: str, name: str) -> Any:
    """Module ``__getattr__`` of the language modules."""
    hint = UNMODELLED.get(name)
    if hint is not None:
        raise NKIUnsupportedError(f"nl.{name} is not modelled by the torchneuron_ext NKI simulator: {hint}")
    raise AttributeError(f"module {module!r} has no attribute {name!r}")
