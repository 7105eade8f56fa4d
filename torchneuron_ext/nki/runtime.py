"""The state of one kernel launch: SPMD instances, allocations and their capacity, instruction counts.

A launch runs its grid's instances one after another, except a new-dialect launch with LNC=2, whose two
instances are the two physical cores of a logical core and run at the same time (``run_ranks``: one
thread and one ``Launch`` per core, meeting through nki/cores.py), so that the cross-core instructions
can wait for each other. A kernel can also run on several ranks at once (kernel.launch_ranks, for
nki.collectives): one Launch per rank with its own arguments and shared_hbm, every core of every rank on
its own thread. Each instance has private SBUF, PSUM and private HBM; the k-th ``shared_hbm`` tensor
an instance creates is the same buffer in every instance (of its rank).
On-chip capacity is accounted from the live tiles (Python's reference counting is their lifetime),
so a kernel that keeps more tiles alive than SBUF or PSUM can hold fails as it would on the device.
"""
from __future__ import annotations

import ast
import functools
import inspect
import math
import struct as _struct
import sys
import textwrap
import threading
import weakref
from typing import Any, Callable, Optional

import numpy as np

from . import cost_model, dtypes
from .cores import CoreGroup
from .data_address import data_address
from .errors import NKIOutsideKernelError, _is_internal, fail
from .memory import Buffer, Target, default_target, psum, sbuf, shared_hbm
from .rules.source import parse as _parse_source

_state = threading.local()

# SBUF bytes per partition that direct allocation may not use on NeuronCore-v2 (trn1, inf2): the toolchain
# keeps them for itself (its direct-allocation guide). For later cores no reserve is documented, and
# AWS's allocated kernels place tiles up to the last few KiB of trn2's 224 KiB.
SBUF_COMPILER_RESERVED = {"trn1": 16 * 1024, "inf2": 16 * 1024}


class Storage:
    """One allocation: the numpy array that holds it and the memory it lives in.

    ``blocks``: for a directly allocated tensor with block dimensions, the physical tile (a Storage) of each
    logical block index; ``array`` is then only a read-only stand-in carrying the shape and dtype.
    """
    __slots__ = ("array", "buffer", "name", "par_axis", "owner", "psum_started", "psum_defined", "flag_origin",
                 "flag_rows", "started_views", "written",
                 "blocks", "live", "sched", "__weakref__")

    def __init__(self, array: np.ndarray, buffer: Buffer, name: str = "", par_axis: int = 0,
                 owner: Any = None, flags: Optional[np.ndarray] = None, flag_origin: Optional[int] = None,
                 defined: Optional[np.ndarray] = None, started_views: Optional[set] = None) -> None:
        self.array, self.buffer, self.name, self.par_axis, self.owner = array, buffer, name, par_axis, owner
        self.written = False
        self.blocks: Optional[dict] = None
        self.live: Optional[list] = None  # the live-range record of an automatically allocated tile
        self.sched: Optional[dict] = None  # per core's schedule, its accesses in flight (nki/schedule.py)
        # New-dialect nc_matmul overwrites a PSUM location on its first write and accumulates after. The
        # flags are one byte per byte of memory, so any view of the array finds its flags at the same byte
        # offsets and strides (Storage.flags); directly allocated tiles share their arena's flags.
        # psum_defined: written at all since allocation. A legacy `psum += nc_matmul(...)` into positions
        # never written overwrites them (the toolchain starts the accumulation group there).
        if buffer is psum and flags is None:
            flags = np.zeros(array.nbytes, dtype=bool)
            defined = np.zeros(array.nbytes, dtype=bool)
            flag_origin = data_address(array)
        self.psum_started, self.psum_defined, self.flag_origin = flags, defined, flag_origin
        # Views (view_key) whose started flags were all found set, shared by every storage on the same flags
        # and emptied whenever any of them is cleared (clear_started): a matmul's later K tiles then skip the
        # strided pass over the flags (a fifth of an MoE launch's time).
        self.started_views: Optional[set] = (set() if started_views is None else started_views) \
            if flags is not None else None
        # (memory row bytes, flag row bytes) when the flags are packed rows of a tile whose partitions are
        # further apart in memory than its width (_own_flags); None: the flags mirror memory byte for byte.
        self.flag_rows: Optional[tuple] = None

    def flags(self, arr: np.ndarray, which: str = "started") -> np.ndarray:
        """The started- (or defined-) flags of the PSUM elements ``arr`` (a view of this storage) covers: one
        flag byte per memory byte, so the flags have the array's own byte offset and strides (mapped onto
        packed rows for a tile with flags of its own)."""
        flags = self.psum_started if which == "started" else self.psum_defined
        offset = data_address(arr) - self.flag_origin
        strides = arr.strides
        if self.flag_rows is not None:
            offset, strides = _packed_flag_layout(offset, arr.shape, strides, *self.flag_rows)
            # Bounds-checked, with no as_strided fallback: a view that maps outside the packed rows is a bug here.
            return np.ndarray(arr.shape, dtype=flags.dtype, buffer=flags, offset=offset, strides=strides)
        try:  # twice as fast as as_strided (no intermediate object), and bounds-checked; a matmul takes 2-3
            return np.ndarray(arr.shape, dtype=flags.dtype, buffer=flags, offset=offset, strides=strides)
        except (ValueError, TypeError):  # negative strides reaching before the view's first byte
            return np.lib.stride_tricks.as_strided(flags[offset:], shape=arr.shape, strides=strides)

    def clear_started(self, view: Any) -> None:
        """The PSUM elements ``view`` covers start a new accumulation: their next matmul overwrites."""
        self.started_flags(view)[...] = False
        self.started_views.clear()

    def started_flags(self, view: Any) -> Any:
        """The 'already written by a matmul' flags of the PSUM elements a tile ``view`` of this storage covers."""
        if view.index is not None:
            return _IndexedFlags(self.flags(view.arr), view)
        return self.flags(view.arr)


class _IndexedFlags:
    """PSUM started-flags addressed through advanced indexing (rare: legacy tiles indexed with arange)."""

    def __init__(self, flags: np.ndarray, view: Any) -> None:
        self.flags, self.view = flags, view

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.flags[self.view._checked_index(None)[0]]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.flags[self.view._checked_index(None)[0]] = value


class BlockLive:
    """The live ranges of a tensor with block dimensions: one record per block, since the allocator places
    each block as its own tile. An access stamps the blocks its view of the array covers."""
    __slots__ = ("records", "base", "block_bytes", "clock_owner")

    def __init__(self, records: list, array: np.ndarray) -> None:
        self.records, self.base = records, data_address(array)
        self.block_bytes = array.nbytes // max(len(records), 1)
        self.clock_owner = records[0][4]

    def stamp(self, arr: np.ndarray, clock: int) -> None:
        start = data_address(arr) - self.base
        span = sum((n - 1) * abs(s) for n, s in zip(arr.shape, arr.strides)) if arr.size else 0
        first = max(start, 0) // self.block_bytes
        last = min((start + span) // self.block_bytes, len(self.records) - 1)
        for rec in self.records[first:last + 1]:
            if rec[0] is None:
                rec[0] = clock
            rec[1] = clock


HbmAllocator = Callable[[tuple, np.dtype], "tuple[np.ndarray, Any]"]


def numpy_hbm(shape: tuple, dtype: np.dtype) -> "tuple[np.ndarray, Any]":
    arr = np.empty(shape, dtype=dtype)
    return arr, None


class Launch:
    """Everything one call of a kernel shares across its instances."""

    def __init__(self, kernel_name: str, func: Callable, grid: tuple, dialect: str, target: Target,
                 hbm_allocator: HbmAllocator = numpy_hbm) -> None:
        self.kernel_name, self.func, self.grid, self.dialect, self.target = \
            kernel_name, func, grid, dialect, target
        self.hbm_allocator = hbm_allocator
        self.shared: list[Storage] = []
        self.costs = cost_model.Costs(target)
        self.program_id: tuple = ()
        self._shared_seen = 0
        self._live = {sbuf: 0, psum: 0}
        self._held: dict = {}      # weak reference to a live on-chip tile -> (memory, bytes) (_account)
        self._nested_lines: Optional[set] = None
        self._records: list = []   # live ranges of this instance's on-chip tiles (see _account)
        self._suspect = False      # whether the reference bound went over capacity in this instance
        self.instance_index = 0
        self._arenas = {}
        self._direct_tiles = {}
        self._direct_sites = {}
        self._arena_flags_read = False
        self._spare_flags = {}
        self._rng: Optional[np.random.Generator] = None
        # A concurrent launch: the threads' group, this core's number in its rank and its rank (None, 0, 0
        # when instances run one at a time); ranks: how many ranks run this kernel together (run_ranks).
        self.cores: Optional[CoreGroup] = None
        self.core_index = 0
        self.rank, self.rank_count = 0, 1
        self._thread = 0
        self._shared_lock = threading.Lock()
        # Bumped by every write into this core's SBUF and every SBUF allocation (a fill, or memory a freed tile
        # had): while it stands, an SBUF view's values are what they were (operands.widened's cache).
        self.sbuf_epoch = 0
        self.widened: Any = None  # operands._Widened, made by the first matmul that widens an SBUF operand
        self.products: Any = None  # engines/products.Products: this core's queued matmul products

    # -- matmul products off the core's thread (engines/products.py) ----------
    def close_products(self) -> None:
        """Drain the queue and stop its thread: before a kernel instance's results are read, and when it
        fails (a product still queued writes memory the caller may reuse)."""
        products, self.products = self.products, None
        if products is not None:
            products.drain()

    # -- concurrent cores ----------------------------------------------------
    def concurrent(self) -> bool:
        """Whether this launch's instances are cores running at the same time: NKI 0.2+'s kernel[2]."""
        return self.dialect == "new" and self.grid == (2,)

    @property
    def core_count(self) -> int:
        """The physical cores that run this launch's rank at the same time (1 when instances run in turn)."""
        return self.grid[0] if self.cores is not None and self.grid else 1

    def thread_of(self, rank: int, core: int) -> int:
        """The group's thread number of ``core`` of ``rank``."""
        return rank * self.core_count + core

    def announce_next(self) -> None:
        """This core computes, until its next instruction starts, only on arrays no other core sees: the cores
        pacing holds back may take their turn meanwhile (CoreGroup.announce). Nothing without other cores."""
        if self.cores is not None:
            self.cores.announce(self._thread, self.costs.clock + 1)

    def run_cores(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """Run every core of a concurrent launch at the same time; core 0's result."""
        return run_ranks([self], [(args, kwargs)], func)[0]

    def _core(self, group: CoreGroup, rank: int, ranks: int, index: int, thread: int) -> "Launch":
        """The state of one core: private SBUF, PSUM, random state and costs; this rank's shared_hbm."""
        core = Launch(self.kernel_name, self.func, self.grid, self.dialect, self.target, self.hbm_allocator)
        core.shared, core._shared_lock = self.shared, self._shared_lock
        core.cores, core.core_index, core.rank, core.rank_count, core._thread = group, index, rank, ranks, thread
        core.costs.stop = group.stop
        core.costs.advance = functools.partial(group.advance, thread)
        core.costs.scheduler.core, core.costs.scheduler.group = index, group
        return core

    # -- instances -----------------------------------------------------------
    def begin_instance(self, program_id: tuple, index: int) -> None:
        self.program_id, self.instance_index, self._shared_seen = program_id, index, 0
        # SBUF and PSUM are private to an instance: direct allocations start over in fresh memory.
        self._arenas: dict = {}
        self._direct_tiles: dict = {}
        self._direct_sites: dict = {}
        self._arena_flags_read = False  # whether allocate_direct handed out a PSUM tile on the arena's flags
        self._spare_flags: dict = {}    # _own_flags' arrays for reuse, by size
        self._records, self._suspect = [], False

    # -- random numbers (nl.random_seed, nl.rand, dropout) --------------------
    def random(self) -> np.random.Generator:
        if self._rng is None:
            self._rng = np.random.default_rng(0)
        return self._rng

    def seed_random(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    # -- direct allocation (nki.compiler) ------------------------------------
    def _arena(self, buffer: Buffer) -> "tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray], set]":
        """The instance's SBUF or PSUM as bytes (partition x byte), with PSUM's started and defined flags (None
        for SBUF: only PSUM has them; SBUF's were 48 MiB zeroed per trn2 core, stamped by every write)."""
        if buffer not in self._arenas:
            nbytes = self.target.psum_partition_bytes if buffer is psum else self.target.sbuf_partition_bytes
            data = np.full((self.target.num_partitions, nbytes), 0xFF, dtype=np.uint8)  # NaN / -1: unwritten
            flags, defined = (np.zeros(data.size, dtype=bool), np.zeros(data.size, dtype=bool)) if buffer is psum \
                else (None, None)
            self._arenas[buffer] = (data, flags, defined, set())
        return self._arenas[buffer]

    def placed_partition(self, buffer: Buffer, array: np.ndarray) -> Optional[int]:
        """The partition of the instance's SBUF or PSUM that ``array`` starts on, if the kernel placed it
        there itself (direct allocation, ``address=``); None for memory the compiler places."""
        arena = self._arenas.get(buffer)
        if arena is None:
            return None
        lo, addr = data_address(arena[0]), data_address(array)
        return (addr - lo) // arena[0].strides[0] if lo <= addr < lo + arena[0].nbytes else None

    def allocate_direct(self, shape: tuple, dtype: np.dtype, alloc: Any, name: str = "", par_axis: int = 0,
                        fill: Any = "uninit") -> Storage:
        """A tensor whose logical tiles live where ``alloc`` (an nki.compiler DirectAllocation) places them."""
        if getattr(self.func, "_nki_force_auto_alloc", False):
            return self.allocate(shape, dtype, alloc.memory, name, par_axis, fill=fill)
        if alloc.memory is sbuf:
            self.sbuf_epoch += 1
        shape = tuple(int(s) for s in shape)
        # The toolchain traces a loop body once, so a direct allocation inside a loop is one allocation at
        # the address its first evaluation gave, however the Python around it (a `cur_addr += size` in the
        # body) goes on counting. The same call stack in the kernel is the same allocation here too.
        site = (_user_stack(), shape, np.dtype(dtype), par_axis)
        known = self._direct_sites.get(site)
        if known is not None:
            for tile in ({id(t): t for t in known.blocks.values()}.values() if known.blocks else (known,)):
                _fill(tile.array, fill if fill != "uninit" else None)
                _reset_psum_flags(tile, fill)
            return known
        storage = self._allocate_direct(shape, dtype, alloc, name, par_axis, fill)
        if alloc.memory is psum and storage.blocks is not None \
                and len({id(t) for t in storage.blocks.values()}) < len(storage.blocks):
            # Blocks a modulo allocation maps onto one physical tile share its bytes, but each block is a tile
            # of its own to the compiler, which starts a `block += nc_matmul(...)` accumulation group with an
            # overwrite (AWS's architecture guide: the group's first matmul overwrites the bank), so the
            # accumulation of one block does not continue the previous block's (attention tutorial v9).
            storage.blocks = {idx: _own_flags(t, fill, self._spare_flags) for idx, t in storage.blocks.items()}
        self._direct_sites[site] = storage
        if alloc.memory is psum:
            self._arena_flags_read = True
        return storage

    def allocate_at(self, shape: tuple, dtype: np.dtype, alloc: Any, name: str = "", par_axis: int = 0,
                    fill: Any = "uninit") -> Storage:
        """A tensor at an address the kernel states (``nl.ndarray(address=...)``): unlike an allocation
        function, the address is evaluated on every call, so the same address is the same memory and another
        address other memory, wherever the call is made."""
        if getattr(self.func, "_nki_force_auto_alloc", False):
            return self.allocate(shape, dtype, alloc.memory, name, par_axis, fill=fill)
        if alloc.memory is sbuf:
            self.sbuf_epoch += 1
        # The tiles returned here carry flags of their own (below): the arena's, which only allocate_direct's
        # tiles read, need resetting once such a tile exists (two strided passes per allocation otherwise,
        # a third of an attention kernel's launch).
        storage = self._allocate_direct(tuple(int(s) for s in shape), dtype, alloc, name, par_axis, fill,
                                        reset_flags=self._arena_flags_read)
        if alloc.memory is not psum:
            return storage
        # The compiler infers nc_matmul's overwrite-or-accumulate per tensor, not per memory location: a PSUM
        # tensor placed where another was written still starts its accumulation with an overwrite. Its data
        # is the arena's; its flags are its own.
        if storage.blocks is None:
            return _own_flags(storage, fill, self._spare_flags)
        storage.blocks = {idx: _own_flags(t, fill, self._spare_flags) for idx, t in storage.blocks.items()}
        return storage

    def _allocate_direct(self, shape: tuple, dtype: np.dtype, alloc: Any, name: str, par_axis: int,
                         fill: Any, reset_flags: bool = True) -> Storage:
        buffer = alloc.memory
        if len(shape) - par_axis < 2:
            fail("err_insufficient_rank",
                 f"Insufficient rank: a tile in {buffer.name} needs a partition dimension and at least one free "
                 f"dimension, got shape {shape}")
        p, free = shape[par_axis], shape[par_axis + 1:]
        if p > self.target.num_partitions:
            fail("err_num_partition_exceed_arch_limit",
                 f"Size of partition dimension {p} exceeds architecture limitation of {self.target.num_partitions}.")
        fbytes = math.prod(free) * np.dtype(dtype).itemsize
        tiles = {}
        for idx in np.ndindex(*shape[:par_axis]):
            idx = tuple(int(i) for i in idx)
            tiles[idx] = self._direct_tile(buffer, alloc, idx, p, free, fbytes, np.dtype(dtype), name)
        for tile in {id(t): t for t in tiles.values()}.values():
            _fill(tile.array, fill if fill != "uninit" else None)
            if reset_flags:
                _reset_psum_flags(tile, fill)
        if par_axis == 0:
            return tiles[()]
        stand_in = dtypes.as_strided(np.zeros(1, dtype=dtype), shape=shape, strides=(0,) * len(shape),
                                     writeable=False)
        storage = Storage(stand_in, buffer, name, par_axis)
        storage.blocks = tiles
        return storage

    def _direct_tile(self, buffer: Buffer, alloc: Any, idx: tuple, p: int, free: tuple, fbytes: int,
                     dtype: np.dtype, name: str) -> Storage:
        where = f"block {idx} of {name or 'a tensor'} allocated with {alloc}"
        try:
            # By keyword, as the toolchain calls them: kernels bind extra leading parameters with
            # functools.partial(func, bank_map=...).
            loc = tuple(int(v) for v in alloc.locate(idx=idx, pdim_size=p, fdim_size=fbytes))
        except (TypeError, ValueError) as e:
            raise TypeError(f"{where}: the allocation function failed: {e}") from None
        if buffer is psum:
            if len(loc) != 3:
                raise TypeError(f"{where}: a PSUM allocation function returns (bank, start_partition, byte_addr), "
                                f"got {loc}")
            bank, start_p, addr = loc
            banks = self.target.psum_partition_bytes // self.target.psum_bank_bytes
            if not 0 <= bank < banks:
                fail("err_psum_capacity_exceeded", f"{where}: PSUM bank {bank} does not exist (banks 0..{banks - 1})")
            if addr < 0 or addr + fbytes > self.target.psum_bank_bytes:
                fail("err_size_of_dimension_exceed_arch_limit",
                     f"{where}: {fbytes} bytes per partition at byte {addr} do not fit one PSUM bank of "
                     f"{self.target.psum_bank_bytes} bytes (a physical PSUM tile cannot span banks)")
            start = bank * self.target.psum_bank_bytes + addr
        else:
            if len(loc) != 2:
                raise TypeError(f"{where}: an SBUF allocation function returns (start_partition, byte_addr), "
                                f"got {loc}")
            start_p, start = loc
            reserved = SBUF_COMPILER_RESERVED.get(self.target.name, 0)
            usable = self.target.sbuf_partition_bytes - reserved
            if start < 0 or start + fbytes > usable:
                fail("err_sbuf_capacity_exceeded",
                     f"{where}: bytes [{start}, {start + fbytes}) of each partition are outside the "
                     f"{usable} bytes of {self.target.name} SBUF a kernel can allocate"
                     + (f" (the last {reserved // 1024} KiB are the compiler's)" if reserved else ""))
        return self._place(buffer, start_p, start, p, free, fbytes, dtype, name, where)

    def _place(self, buffer: Buffer, start_p: int, start: int, p: int, free: tuple, fbytes: int,
               dtype: np.dtype, name: str, where: str) -> Storage:
        """The tile of ``p`` partitions from ``start_p``, ``fbytes`` bytes per partition from byte ``start`` of
        the instance's SBUF or PSUM: every tensor placed on those bytes shares them, as on the device."""
        allowed = (0,) if p > 64 else (0, 64) if p > 32 else (0, 32, 64, 96)
        if start_p not in allowed:
            fail("err_invalid_start_partition",
                 f"{where}: a tile of {p} partitions must start at partition {' or '.join(map(str, allowed))}, "
                 f"got {start_p}")
        key = (buffer, start_p, start, p, free, dtype)
        tile = self._direct_tiles.get(key)
        if tile is None:
            data, flags, defined, started_views = self._arena(buffer)
            array = data[start_p:start_p + p, start:start + fbytes].view(dtype).reshape((p,) + free)
            tile = Storage(array, buffer, name, 0, None, flags, None if flags is None else
                           data_address(data), defined, started_views)
            self._direct_tiles[key] = tile
        return tile

    # -- allocation ----------------------------------------------------------
    def allocate(self, shape: tuple, dtype: np.dtype, buffer: Buffer, name: str = "",
                 par_axis: int = 0, fill: Any = "uninit", adopt: Optional[np.ndarray] = None,
                 constant: bool = False) -> Storage:
        """A new tensor. ``adopt``: an on-chip tile's values, freshly computed and referenced nowhere else,
        become its memory as they are (no copy). ``constant``: a shared_hbm constant (nl.shared_constant),
        which the compiler embeds in the binary, so it may be made anywhere, loops included."""
        if buffer is sbuf:
            self.sbuf_epoch += 1
        shape = tuple(int(s) for s in shape)
        if shape and min(shape) < 0:
            fail("err_invalid_shape", f"negative dimension in shape {shape}")
        if buffer.on_chip:
            self._check_tile_shape(shape, dtype, buffer, par_axis)
        if buffer is shared_hbm:
            return self._shared_allocation(shape, dtype, name, fill, constant)
        if buffer.on_chip:
            array, owner = (np.empty(shape, dtype=dtype) if adopt is None else adopt), None
        else:
            array, owner = self.hbm_allocator(shape, dtype)
        storage = Storage(array, buffer, name, par_axis, owner)
        _fill(array, fill)
        initialised = adopt is not None or (fill is not None and fill != "uninit")
        if storage.psum_defined is not None and initialised:
            storage.psum_defined[...] = True
        if buffer.on_chip:
            self._account(storage, initialised=initialised)
        return storage

    def _shared_allocation(self, shape: tuple, dtype: np.dtype, name: str, fill: Any,
                           constant: bool = False) -> Storage:
        if not constant:
            self._check_kernel_level()
        # Concurrent cores create their shared tensors at the same time: whichever comes first allocates.
        with self._shared_lock:
            return self._shared_allocation_locked(shape, dtype, name, fill)

    def _shared_allocation_locked(self, shape: tuple, dtype: np.dtype, name: str, fill: Any) -> Storage:
        k = self._shared_seen
        self._shared_seen += 1
        if k < len(self.shared):
            storage = self.shared[k]
            if storage.array.shape != shape or storage.array.dtype != dtype:
                fail("err_shared_hbm_mismatch",
                     f"shared_hbm tensor #{k} is {shape} {dtypes.name(dtype)} in instance {self.program_id} "
                     f"but {storage.array.shape} {dtypes.name(storage.array.dtype)} in another: every "
                     f"instance of a grid must create the same shared_hbm tensors")
            return storage
        array, owner = self.hbm_allocator(shape, dtype)
        _fill(array, fill)
        storage = Storage(array, shared_hbm, name, 0, owner)
        self.shared.append(storage)
        return storage

    def _check_tile_shape(self, shape: tuple, dtype: np.dtype, buffer: Buffer, par_axis: int) -> None:
        if len(shape) < 2:
            fail("err_insufficient_rank",
                 f"Insufficient rank: a tile in {buffer.name} needs a partition dimension and at least one "
                 f"free dimension, got shape {shape}; use e.g. ({shape[0] if shape else 1}, 1)")
        p = shape[par_axis]
        if p > self.target.num_partitions:
            fail("err_num_partition_exceed_arch_limit",
                 f"Size of partition dimension {p} exceeds architecture limitation of "
                 f"{self.target.num_partitions}.")
        free = math.prod(shape[par_axis + 1:]) * np.dtype(dtype).itemsize
        # A tensor with block dimensions is that many separate tiles to the allocator (its blocks are
        # allocated by their own live ranges, see _account): only one block has to fit here.
        per_partition = free
        if buffer is psum:
            # NKI 0.2+: a PSUM tile may span banks (the Vector and Scalar engines read up to 4K fp32 of
            # PSUM per partition, NeuronCore-v4's nc_matmul writes up to all 8 banks, and AWS deprecated
            # psum_fmax as a tile limit); only one matmul's output is bank-sized (nc_matmul's own check).
            # NKI 0.1 kept a PSUM tile within one bank.
            if self.dialect == "legacy" and free > self.target.psum_bank_bytes:
                fail("err_size_of_dimension_exceed_arch_limit",
                     f"PSUM tile {shape} {dtypes.name(dtype)} needs {free} bytes per partition; a PSUM tile must "
                     f"fit one bank of {self.target.psum_bank_bytes} bytes (512 fp32)")
            if per_partition > self.target.psum_partition_bytes:
                fail("err_psum_capacity_exceeded",
                     f"PSUM tensor {shape} needs {per_partition} bytes per partition; PSUM has "
                     f"{self.target.psum_partition_bytes} (8 banks of 2 KiB)")
        elif per_partition > self.target.sbuf_partition_bytes:
            fail("err_sbuf_capacity_exceeded",
                 f"SBUF tile {shape} {dtypes.name(dtype)} needs {per_partition} bytes per partition; "
                 f"{self.target.name} SBUF has {self.target.sbuf_partition_bytes} per partition")

    def _account(self, storage: Storage, initialised: bool) -> None:
        """Count an on-chip tile against its memory, to estimate the compiler's spills.

        AWS: "If the total size of the live data being used by a NKI kernel overflows the capacity of any
        on-chip memory, the Neuron compiler will insert the necessary spills or refills between that memory
        and the next-tier memory" (memory hierarchy overview). So live tiles over capacity are not an error
        (only one tile larger than the memory is, _check_tile_shape); they cost spill traffic, which the
        cost model charges (Costs.spill). Live ranges are as the compiler's allocator sees them: a tile
        occupies memory from the instruction of its first access to that of its last one (Costs.clock
        counts instructions; NKITensor.read/write stamp the range), so a tile nothing reads again is dead
        even if a Python name still holds it. Python's references give a cheap upper bound (a tile nobody
        references cannot be accessed again): while that bound fits, nothing more is done; when it does
        not, the exact live ranges are replayed at the end of the instance (check_live_ranges).

        Memory is counted per partition, as the device has it: a tile of P partitions occupies its bytes in
        P partitions (rounded up to the start-partition granularity the ISA allows: 32, 64 or all), so
        two 64-partition tiles share the partitions of one 128-partition tile."""
        shape, pa = storage.array.shape, storage.par_axis
        blocks = math.prod(shape[:pa])
        nbytes = math.prod(shape[pa + 1:]) * storage.array.itemsize  # per partition, per block
        buffer = storage.buffer
        bank = self.target.psum_bank_bytes
        if buffer is psum and nbytes > bank:
            # A tile over a bank starts at a bank (a matmul into any bank-sized slice stays in one bank).
            nbytes = math.ceil(nbytes / bank) * bank
        parts = self.target.num_partitions
        p = shape[pa]
        span = min(parts, 32 if p <= 32 else 64 if p <= 64 else 128)
        area = nbytes * span  # bytes over all partitions
        capacity = (self.target.psum_partition_bytes if buffer is psum else self.target.sbuf_partition_bytes) * parts
        clock = self.costs.clock
        # [first access, last access, bytes (all partitions), memory, clock owner, unused, allocation]
        records = [[clock if initialised else None, clock, area, buffer, self.costs, None, clock]
                   for _ in range(blocks)]
        storage.live = records[0] if pa == 0 else BlockLive(records, storage.array)
        self._records.extend(records)
        self._live[buffer] += area * blocks
        # The bytes come back when the tile is dropped: a weak reference's callback, held here until then.
        # (weakref.finalize did the same at twice the CPU time, 1.9 against 1.0 us, more at release: its
        # registry and at-exit bookkeeping were 6% of the samples of AWS's shard_on_H MoE launch.)
        self._held[weakref.ref(storage, self._release)] = (buffer, area * blocks)
        if self._live[buffer] > capacity:
            if not self._suspect:
                self.costs.scheduler.watch_spills()  # the spills found at the end are placed from here on
            self._suspect = True

    def check_live_ranges(self) -> None:
        """End of an instance: if the reference bound ever went over capacity, replay the live ranges and
        charge the spills the compiler inserts where the live tiles exceed a memory (Costs.spill).

        Each time the live bytes rise above capacity, the rise beyond it must be saved to the next tier
        and reloaded before its next use (a lower bound on the spill traffic a compiler needs)."""
        if not self._suspect:
            return
        self._suspect = False
        records, self._records = self._records, []
        parts = self.target.num_partitions
        for buffer in (sbuf, psum):
            capacity = (self.target.psum_partition_bytes if buffer is psum else self.target.sbuf_partition_bytes) * parts
            events = []
            for r in records:
                if r[3] is buffer and r[0] is not None:
                    events.append((r[0], 1, r[2]))       # occupied from the instruction of its first access
                    events.append((r[1] + 1, 0, r[2]))   # through that of its last (frees sort first)
            events.sort(key=lambda e: (e[0], e[1]))
            live = 0
            spills: dict = {}  # clock -> bytes spilled where the live bytes rose above capacity
            for clock, kind, nbytes in events:
                if kind == 0:
                    live -= nbytes
                    continue
                live += nbytes
                if live > capacity:
                    spills[clock] = spills.get(clock, 0) + min(nbytes, live - capacity)
            for clock, spilled in spills.items():
                self.costs.spill(buffer.name, spilled, clock)

    def _release(self, ref: "weakref.ref[Storage]") -> None:
        held = self._held.pop(ref, None)
        if held is not None:
            self._live[held[0]] -= held[1]

    def _check_kernel_level(self) -> None:
        """shared_hbm outputs must be created in the kernel body, not in a loop."""
        frame = sys._getframe(3)
        while frame is not None and frame.f_code is not self.func.__code__:
            frame = frame.f_back
        if frame is None:
            return
        if self._nested_lines is None:
            self._nested_lines = _nested_statement_lines(self.func)
        if frame.f_lineno in self._nested_lines:
            fail("err_shared_hbm_must_in_kernel_level",
                 "shared_hbm tensors must be created at the kernel's top level, not inside a loop")


def _own_flags(tile: Storage, fill: Any, spare: dict) -> Storage:
    """A view of ``tile``'s memory with PSUM flags of its own: one flag byte per byte of its partitions' rows,
    packed (a tile of 2 KiB per partition in a 16 KiB-per-partition PSUM spanned 2 MiB of flags per set,
    whose zeroing was most of an attention kernel's launch). Filled memory counts as written, as in
    _reset_psum_flags.

    ``spare`` (the launch's, by flag size): flag arrays of earlier such views, each with a weak reference to
    its storage. Those whose storage is gone (no tensor of the kernel refers to it) are cleared and reused:
    fresh 256 KiB arrays are an mmap, page faults and an munmap each, which on a loaded machine cost more
    wall time than their CPU time (a kernel placing 256 PSUM tiles: 3.2 s against 0.6 s)."""
    arr = tile.array
    width = math.prod(arr.shape[1:]) * arr.itemsize
    n = arr.shape[0] * width
    written = fill not in (None, "uninit")
    pool = spare.setdefault(n, [])
    for i, (ref, started, defined) in enumerate(pool):
        if ref() is None:
            started[...] = False
            defined[...] = written
            del pool[i]
            break
    else:
        started = np.zeros(n, dtype=bool)
        defined = np.ones(n, dtype=bool) if written else np.zeros(n, dtype=bool)
    own = Storage(arr, tile.buffer, tile.name, tile.par_axis, None, started, data_address(arr),
                  defined)
    if arr.shape[0] > 1 and arr.strides[0] != width:
        own.flag_rows = (arr.strides[0], width)
    pool.append((weakref.ref(own), started, defined))
    return own


def _packed_flag_layout(offset: int, shape: tuple, strides: tuple, row: int, width: int) -> "tuple[int, tuple]":
    """Byte offset and strides in packed flag rows of ``width`` bytes of a view at ``offset`` with ``strides``
    in memory whose rows are ``row`` bytes apart. A stride is whole rows plus a step within a row (the
    nearest row multiple: a view of a tile never steps further along a row than the tile is wide)."""
    r, c = divmod(offset, row)
    if 0 in shape:
        return r * width + c, strides
    packed = []
    lo = hi = c
    half = row // 2
    for n, s in zip(shape, strides):
        q, step = divmod(s + half, row)
        step -= half
        packed.append(q * width + step)
        lo, hi = (lo + (n - 1) * step, hi) if step < 0 else (lo, hi + (n - 1) * step)
    if lo < 0 or hi >= width:
        raise AssertionError(f"a PSUM view (offset {offset}, shape {shape}, strides {strides}) leaves its tile's "
                             f"{width}-byte rows: its flags cannot be located")
    return r * width + c, tuple(packed)


def _reset_psum_flags(tile: Storage, fill: Any) -> None:
    """A (re)allocated PSUM tile starts with no matmul accumulation and, unless filled, nothing written."""
    if tile.psum_started is None:
        return
    tile.flags(tile.array, "started")[...] = False
    tile.started_views.clear()
    tile.flags(tile.array, "defined")[...] = fill not in (None, "uninit")


def _user_stack() -> tuple:
    """The kernel's call stack at this point: (code, line) of every frame outside the package."""
    out = []
    f = sys._getframe(2)
    while f is not None:
        if not _is_internal(f.f_code.co_filename):
            out.append((f.f_code, f.f_lineno))
        f = f.f_back
    return tuple(out)


_NESTED_LINES: "weakref.WeakKeyDictionary[Any, frozenset]" = weakref.WeakKeyDictionary()


def _nested_statement_lines(func: Callable) -> frozenset:
    """Lines of ``func`` inside a loop; parsed once per code object (parsing costs
    milliseconds, a launch of a small kernel less)."""
    code = func.__code__
    lines = _NESTED_LINES.get(code)
    if lines is None:
        lines = _NESTED_LINES[code] = frozenset(_parse_nested_statement_lines(func))
    return lines


def _parse_nested_statement_lines(func: Callable) -> set:
    try:
        source = inspect.getsource(func)
        first = func.__code__.co_firstlineno
    except (OSError, TypeError):
        return set()
    tree = _parse_source(textwrap.dedent(source))
    lines: set = set()
    for node in ast.walk(tree):
        # Loops only: a trace-time Python `if` (e.g. `if config.training:` around an output) is resolved
        # before the kernel is compiled, so its body is at kernel level for the toolchain.
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
            for child in node.body + node.orelse:
                for sub in ast.walk(child):
                    if hasattr(sub, "lineno"):
                        lines.add(sub.lineno + first - 1)
    return lines


_UNINIT_INT = 4  # what AWS's simulator puts in fresh integer tensors


def _fill(array: np.ndarray, fill: Any) -> None:
    if fill is None:
        return
    if isinstance(fill, str):  # uninitialised memory: make reads of it visible
        if dtypes.is_float(array.dtype):
            _fill_value(array, np.nan)
        elif array.dtype != np.bool_:
            _fill_value(array, _UNINIT_INT)
        return
    _fill_value(array, fill)


_FILL_BITS = {1: np.uint8, 2: np.uint16}


def _fill_value(array: np.ndarray, value: Any) -> None:
    """``array.fill(value)``. numpy fills an ml_dtypes array (bfloat16, fp8) through the dtype's per-element
    setitem, 40-100x slower than filling an integer view with the same bits (a fresh (128, 2048) bf16 tile:
    250-650 us against 7); the bits are those ``fill`` itself makes of the value."""
    dtype = array.dtype
    bits = _FILL_BITS.get(dtype.itemsize)
    if bits is None or dtype.isbuiltin != 2 or dtype.names is not None:
        array.fill(value)
        return
    # The pattern of each (dtype, value) is made once: making it (a one-element fill) cost as much as filling
    # a (128, 512) tile. A float is keyed by its bits (-0.0 is not 0.0, NaN payloads differ); values of
    # other types are not kept.
    kind = type(value)
    key = (dtype, _struct.pack("<d", value)) if kind is float else (dtype, kind, value) if kind in (int, bool) \
        else None
    pattern = None if key is None else _FILL_PATTERNS.get(key)
    if pattern is None:
        one = np.empty(1, dtype=dtype)
        one.fill(value)
        pattern = one.view(bits)[0]
        if key is not None and len(_FILL_PATTERNS) < 256:
            _FILL_PATTERNS[key] = pattern
    array.view(bits).fill(pattern)


# (dtype, a float's bits) or (dtype, int or bool, value) -> the fill's bit pattern (_fill_value)
_FILL_PATTERNS: dict = {}


def run_ranks(launches: "list[Launch]", calls: "list[tuple[tuple, dict]]", func: Callable) -> list:
    """Run ``func`` on every core of every rank at the same time, one thread each: ``launches[r]`` is rank
    r's launch (its own shared_hbm and costs) and ``calls[r]`` its (args, kwargs). Core 0's result of each
    rank; each launch's costs become its cores' (run side by side)."""
    per_rank = launches[0].grid[0] if launches[0].concurrent() else 1
    ranks = len(launches)
    group = CoreGroup(ranks * per_rank, launches[0].kernel_name, per_rank if ranks > 1 else None)
    cores = [launches[r]._core(group, r, ranks, c, r * per_rank + c) for r in range(ranks) for c in range(per_rank)]

    def body(g: int) -> Any:
        core = cores[g]
        args, kwargs = calls[core.rank]
        with active(core), np.errstate(all="ignore"):  # numpy's error state is per thread
            core.begin_instance((core.core_index,) if core.grid else (), core.core_index)
            try:
                value = func(*args, **kwargs)
            finally:
                core.close_products()
            core.check_live_ranges()
            return value

    results = group.run(body)
    for r, launch in enumerate(launches):
        mine = cores[r * per_rank:(r + 1) * per_rank]
        launch.costs = cost_model.Costs.concurrent(launch.target, [c.costs for c in mine])
    return [results[r * per_rank] for r in range(ranks)]


def current() -> Launch:
    launch = getattr(_state, "launch", None)
    if launch is None:
        raise NKIOutsideKernelError(  # a RuntimeError too
            "err_nki_api_outside_of_nki_kernel",
            "Calling NKI API outside of NKI kernels is not supported: decorate the function with @nki.jit and "
            "call it (or use nki.simulate_kernel)", frame=sys._getframe(1))
    return launch


def current_or_none() -> Optional[Launch]:
    return getattr(_state, "launch", None)


class active:
    """Context manager making ``launch`` the current one on this thread (kernels may nest)."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch

    def __enter__(self) -> Launch:
        self.prev = getattr(_state, "launch", None)
        _state.launch = self.launch
        return self.launch

    def __exit__(self, *exc: Any) -> None:
        _state.launch = self.prev


def current_target() -> Target:
    """The running launch's target (nki.jit(platform_target=...) or NKI_TARGET), else NKI_TARGET's."""
    launch = current_or_none()
    return launch.target if launch is not None else default_target()


class _TileSize:
    """``nl.tile_size``: the hardware's tile limits, read from the current target (so it lives with the
    launch state rather than with memory.py's plain data)."""
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
