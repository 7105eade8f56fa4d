"""``nki.compiler`` (``neuronxcc.nki.compiler``): direct allocation and the compiler directives.

Direct allocation places each logical tile of an SBUF or PSUM tensor at an address the kernel chooses
(``ncc.sbuf.mod_alloc(base_addr=..., num_free_tiles=(2,))``, ``ncc.psum.mod_alloc(base_bank=...)``,
``ncc.sbuf.alloc(func)``). The simulator gives every kernel instance one SBUF and one PSUM byte arena
(runtime.py) and makes each tile a view of its bytes there, so the semantics are the hardware's: blocks
that a modulo allocation maps to one physical tile share memory, two tensors placed on overlapping
addresses alias, and an address outside the memory is an error (the capacity check of direct
allocation). The directives (``skip_middle_end_transformations``, ``enable_stack_allocator``,
``multi_buffer``, ``no_reorder``...) steer the compiler's scheduling and allocation, which an
interpreter running instructions in program order does not have: they are accepted and change nothing,
except ``force_auto_alloc``, which makes the kernel's direct allocations automatic ones.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Optional, Sequence

from .memory import Buffer
from .memory import psum as _psum_buffer
from .memory import sbuf as _sbuf_buffer

__all__ = ["sbuf", "psum", "DirectAllocation", "skip_middle_end_transformations", "enable_stack_allocator",
           "force_auto_alloc", "multi_buffer", "no_reorder", "allocation_scope"]


class DirectAllocation:
    """A ``buffer=`` value placing each logical block of a tensor: ``locate(idx=, pdim_size=, fdim_size=)``
    gives ``(start_partition, byte_addr)`` in SBUF or ``(bank, start_partition, byte_addr)`` in PSUM."""

    def __init__(self, memory: Buffer, locate: Callable, description: str) -> None:
        if not callable(locate):
            raise TypeError(f"{description}: the allocation function must be callable, got {type(locate).__name__}")
        self.memory, self.locate, self.description = memory, locate, description

    def __repr__(self) -> str:
        return self.description


def _linearize(shape: Sequence[int], idx: Sequence[int]) -> int:
    return sum(i * math.prod(shape[d + 1:]) for d, i in enumerate(idx))


def _modulo(base: int, tiles: Sequence[int], scale: int, idx: tuple, what: str) -> int:
    """The toolchain's modulo allocation: block ``idx`` takes physical tile ``idx % tiles`` (row-major), with
    the formula of its direct-allocation guide, which pairs indices and counts up to the shorter of the two
    (so ``num_free_tiles=(1,)`` on a tensor without block dimensions is its one tile)."""
    tiles = tuple(int(t) for t in tiles) or (1,) * len(idx)
    if any(t < 1 for t in tiles):
        raise ValueError(f"{what}={tiles}: tile counts must be positive")
    return int(base) + _linearize(tiles, tuple(i % t for i, t in zip(idx, tiles))) * scale


class _Memory(Buffer):
    """``ncc.sbuf`` / ``ncc.psum``: usable as ``buffer=`` (automatic allocation) and the allocators."""

    __slots__ = ("_target",)

    def __init__(self, target: Buffer) -> None:
        super().__init__(target.name, True)
        self._target = target

    def auto_alloc(self) -> Buffer:
        """Automatic allocation, the same as ``buffer=nl.sbuf`` (or ``nl.psum``)."""
        return self._target

    def __repr__(self) -> str:
        return f"ncc.{self.name}"


class _Sbuf(_Memory):
    def alloc(self, func: Callable) -> DirectAllocation:
        """Each logical block ``idx`` at ``func(idx, pdim_size, fdim_bytes) -> (start_partition, byte_addr)``."""
        return DirectAllocation(_sbuf_buffer, func, f"ncc.sbuf.alloc({getattr(func, '__name__', func)!r})")

    def mod_alloc(self, *, base_addr: int, base_partition: int = 0, num_par_tiles: Sequence[int] = (),
                  num_free_tiles: Sequence[int] = ()) -> DirectAllocation:
        """Block ``idx`` at ``base_addr + linear(idx % num_free_tiles) * fdim_bytes`` (and likewise for
        partitions): ``num_free_tiles=(2,)`` double-buffers a tensor of any number of blocks."""
        def locate(idx: tuple, pdim_size: int, fdim_size: int) -> tuple:
            return (_modulo(base_partition, num_par_tiles, pdim_size, idx, "num_par_tiles"),
                    _modulo(base_addr, num_free_tiles, fdim_size, idx, "num_free_tiles"))
        return DirectAllocation(_sbuf_buffer, locate, f"ncc.sbuf.mod_alloc(base_addr={base_addr}, "
                                                      f"num_free_tiles={tuple(num_free_tiles)})")


class _Psum(_Memory):
    def alloc(self, func: Callable) -> DirectAllocation:
        """Each logical block at ``func(idx, pdim_size, fdim_bytes) -> (bank, start_partition, byte_addr)``."""
        return DirectAllocation(_psum_buffer, func, f"ncc.psum.alloc({getattr(func, '__name__', func)!r})")

    def mod_alloc(self, *, base_bank: int, base_addr: int = 0, base_partition: int = 0,
                  num_bank_tiles: Sequence[int] = (), num_par_tiles: Sequence[int] = (),
                  num_free_tiles: Sequence[int] = ()) -> DirectAllocation:
        """Block ``idx`` in bank ``base_bank + linear(idx % num_bank_tiles)``."""
        def locate(idx: tuple, pdim_size: int, fdim_size: int) -> tuple:
            return (_modulo(base_bank, num_bank_tiles, 1, idx, "num_bank_tiles"),
                    _modulo(base_partition, num_par_tiles, pdim_size, idx, "num_par_tiles"),
                    _modulo(base_addr, num_free_tiles, fdim_size, idx, "num_free_tiles"))
        return DirectAllocation(_psum_buffer, locate, f"ncc.psum.mod_alloc(base_bank={base_bank}, "
                                                      f"num_bank_tiles={tuple(num_bank_tiles)})")


# A package's attribute, so that ``nki.compiler.frontend`` (an import alias of nki/frontend.py, see
# compat/aliases.py) imports as this module's submodule.
__path__: list = []

sbuf = _Sbuf(_sbuf_buffer)
psum = _Psum(_psum_buffer)


def at_address(memory: Buffer, address: Sequence[int], bank_bytes: int, blocks: Sequence[int] = ()) -> DirectAllocation:
    """``nl.ndarray(..., address=(partition_offset, byte_offset))``, NKI 0.2+'s direct allocation: the tensor
    starts at that partition and byte of each partition, its blocks (block dimensions ``blocks``) one after
    another. PSUM's byte offset runs across its banks of ``bank_bytes``; a tile may not straddle two."""
    if memory not in (_sbuf_buffer, _psum_buffer):
        raise TypeError(f"address= places SBUF and PSUM tensors; {memory.name} tensors have no such address")
    if (not isinstance(address, (tuple, list)) or len(address) != 2
            or any(isinstance(a, bool) or not isinstance(a, numbers.Integral) for a in address)):
        raise TypeError(f"address= is (partition_offset, byte_offset), two integers, got {address!r}")
    start_p, offset = (int(v) for v in address)
    blocks = tuple(int(b) for b in blocks)

    def locate(idx: tuple, pdim_size: int, fdim_size: int) -> tuple:
        start = offset + _linearize(blocks, idx) * fdim_size
        if memory is _psum_buffer:
            return start // bank_bytes, start_p, start % bank_bytes
        return start_p, start
    return DirectAllocation(memory, locate, f"address=({start_p}, {offset})")


def buffer_of(value: Any) -> Any:
    """``ncc.sbuf`` / ``ncc.psum`` given as ``buffer=`` are the automatic memories."""
    return value._target if isinstance(value, _Memory) else value


# -- directives ------------------------------------------------------------------------------------------

def _decorator(func: Optional[Callable], apply: Callable[[Callable], Callable]) -> Any:
    """Usable as ``@d``, ``@d()`` and ``@d(option=...)`` over a function or an ``@nki.jit`` kernel."""
    return apply if func is None else apply(func)


def skip_middle_end_transformations(func: Optional[Callable] = None) -> Any:
    """The compiler keeps the kernel's instructions as written; the simulator always does."""
    return _decorator(func, lambda f: f)


def enable_stack_allocator(func: Optional[Callable] = None, log_level: int = 50) -> Any:
    """The compiler allocates tiles with a stack allocator; the simulator's lifetimes are Python's."""
    return _decorator(func, lambda f: f)


def force_auto_alloc(func: Optional[Callable] = None) -> Any:
    """Direct allocations in this kernel become automatic ones (the toolchain's meaning)."""
    def apply(f: Callable) -> Callable:
        target = getattr(f, "func", f)  # an @nki.jit Kernel, or the function itself
        target._nki_force_auto_alloc = True
        return f
    return _decorator(func, apply)


class _Directive:
    """A loop directive (``nl.affine_range(n, directives=...)``): scheduling advice, nothing to simulate."""

    def __init__(self, name: str, **options: Any) -> None:
        self.name, self.options = name, options

    def __repr__(self) -> str:
        return f"ncc.{self.name}({', '.join(f'{k}={v!r}' for k, v in self.options.items())})"

    def __enter__(self) -> "_Directive":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def multi_buffer(factor: int = 2) -> _Directive:
    return _Directive("multi_buffer", factor=factor)


def no_reorder() -> _Directive:
    return _Directive("no_reorder")


def allocation_scope() -> _Directive:
    return _Directive("allocation_scope")
