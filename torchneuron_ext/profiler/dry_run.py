"""The dry run: a program executed on fake tensors on the neuron device, projected on a Trainium target.

Nothing is allocated and nothing is computed: PyTorch's FakeTensorMode gives every tensor its shape,
dtype and device and no data, so a full-size model's forward, training step or decode step runs in
seconds on any host. A TorchDispatchMode above the fake mode sees every operator the program calls
and decides, from the dispatcher's own table for the PrivateUse1 key, what a real run on the
emulated device records for it:

- the device's kernels (the native tier, and the generic tier: the backend fallback and the ops
  host_kernel_routing.cpp sends there) are recorded as one kernel each, with the bytes, element
  count, FLOPs and dtype the kernel wrapper records (csrc/aten/kernel_wrapper.cpp, csrc/instrumentation/flops.cpp);
- composites (PyTorch's CompositeExplicitAutograd kernels and tracked_composites.cpp's) run their
  decomposition, whose operators are seen again, as the real device runs them;
- copies become transfers with their direction; views, allocations and metadata (minimal.cpp) are free.

The records become a Chrome trace shaped like the profiler's (runtime spans, kernels, transfers, HBM
counters), so the projection (profiler/projection.py), the report (profiler/report.py) and the HTML
viewer read it unchanged. Its kernels last their projected time and follow one another: a dry run has
no host time, so its projection is the device's side of a real run's (docs/cost_model.md, "Dry run").

HBM is accounted from the fake tensors' storages (alive while a tensor of the program holds them) and
classified at the peak as parameters, gradients, optimizer state or activations and other tensors.

A world of N ranks is torch.distributed's fake process group ("fake" backend): collectives return at
once, recorded with their group's size, so one rank of a sharded program (DTensor tensor parallel,
FSDP2) is projected with its collectives.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import runpy
import sys
import time
import weakref
from typing import Any, Callable, Iterator, Optional, Sequence, Union

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ..instrumentation import trace_schema as S
from ..trainium.projection import CONV_GROUPS_ARG, CONV_WEIGHT_ARG, matmul_products, project, resolve_target
from ..trainium.targets import Target

aten = torch.ops.aten

# What a real run records for an operator, by where its PrivateUse1 kernel is registered.
NATIVE, GENERIC, COMPOSITE, FREE, COPY = "native", "generic", "composite", "free", "copy"
COLLECTIVE = "collective"
CATEGORIES = ("parameters", "gradients", "optimizer state", "activations and other")
# Kineto lanes (tids) of core 0 as the plugin lays them out: hardware, runtime stream 0, transfers.
_KERNEL_TID, _RUNTIME_TID, _COPY_TID = 0, 1, 63
_COPY_OPS = (aten.copy_.default, aten._copy_from.default, aten._copy_from_and_resize.default)
# c10 ScalarType names, as the kernel wrapper's records spell dtypes.
_DTYPE_NAMES = {
    torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
    torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
    torch.bool: "Bool", torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble",
    torch.float8_e4m3fn: "Float8_e4m3fn", torch.float8_e5m2: "Float8_e5m2",
}
# Views the schema does not mark as views (their composite builds the alias in C++, on the fake tensor's
# meta storage: run through the fake mode instead).
_ALIASES = {aten._unsafe_view.default, aten.lift_fresh.default}
_MATMUL = {"aten::mm", "aten::bmm", "aten::mv", "aten::dot"}
_MATMUL_BIAS = {"aten::addmm", "aten::addmm_", "aten::baddbmm", "aten::baddbmm_", "aten::addbmm", "aten::addmv",
                "aten::addmv_"}
_ATTENTION_FWD = {"aten::_scaled_dot_product_flash_attention_for_cpu",
                  "aten::_scaled_dot_product_fused_attention_overrideable"}
_ATTENTION_BWD = {n + "_backward" for n in _ATTENTION_FWD}
# Trace args of a dry run's kernel: which device storages it reads and writes, as [serial, bytes] per tensor
# argument and result (one entry per tensor: a view counts its own bytes), and, in the trace's
# neuron.dry_run metadata, the storages still alive when the program ends (its results, parameters,
# state). They give the program's data flow, which the compiled-program projection (profiler/fusion.py)
# reads to find what a compiler keeps on chip. A real run's records do not have them.
BUFFERS_READ_ARG = "buffers read"
BUFFERS_WRITTEN_ARG = "buffers written"
LIVE_AT_END_KEY = "buffers live at end"


class DryRunError(RuntimeError):
    """The program did something a dry run cannot: it has shapes, not values."""


_DATA_MESSAGE = (
    "{what} reads a tensor's values, and a dry run has none: its tensors are fake (shapes, dtypes and "
    "devices only). Keep value reads (.item(), .tolist(), print(tensor), `if tensor:`, data-dependent "
    "shapes such as nonzero or boolean masks) out of the program you dry-run, or skip them when "
    "torchneuron_ext.costmodel.is_dry_run() is true.")


def _dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype, str(dtype).replace("torch.", ""))


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def estimate_flops(name: str, tensors: Sequence[torch.Tensor]) -> int:
    """FLOPs of one call, as csrc/instrumentation/flops.cpp's estimate_flops counts them (the kernel's
    tensor arguments in order)."""
    bias = name in _MATMUL_BIAS
    if name in _MATMUL or bias:
        if len(tensors) < (3 if bias else 2):
            return 0
        a, b = tensors[1 if bias else 0], tensors[2 if bias else 1]
        if a.dim() == 0 or a.is_nested or b.is_nested:
            return 0
        k = a.shape[-1]
        n_cols = b.shape[-1] if b.dim() >= 2 else 1
        return 2 * (a.numel() // max(k, 1)) * n_cols * k
    fwd, bwd = name in _ATTENTION_FWD, name in _ATTENTION_BWD
    if (fwd or bwd) and len(tensors) >= (3 if bwd else 2):
        q, k = tensors[1 if bwd else 0], tensors[2 if bwd else 1]
        if q.dim() != 4 or k.dim() != 4:
            return 0
        return (8 if bwd else 4) * q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2] * q.shape[3]
    return 0


def _convolution_flops(larger_side: torch.Tensor, weight: torch.Tensor) -> int:
    if weight.dim() < 2:
        return 0
    per_element = 1
    for size in weight.shape[1:]:
        per_element *= size
    return 2 * larger_side.numel() * per_element


def convolution_flops(name: str, args: tuple, outputs: Sequence[torch.Tensor]) -> int:
    """FLOPs of the device's convolution kernels, as csrc/aten/native_special.cpp sets them: the forward's
    multiply-adds from the output (a transposed convolution's input); the backward's once per gradient
    of input and weight it computes."""
    if name == "aten::convolution_overrideable" and outputs:
        x, w, transposed = args[0], args[1], bool(args[6])
        return _convolution_flops(x if transposed else outputs[0], w)
    if name == "aten::convolution_backward_overrideable":
        g, x, w, transposed, mask = args[0], args[1], args[2], bool(args[6]), args[9]
        return _convolution_flops(x if transposed else g, w) * (int(bool(mask[0])) + int(bool(mask[1])))
    return 0


def convolution_shape(name: str, args: tuple) -> Optional[tuple[tuple[int, ...], int]]:
    """A forward (not transposed) convolution's weight shape and groups, which the cost model's convolution
    lowering needs (trainium/projection.py, convolution_geometry); None for anything else."""
    if name != "aten::convolution_overrideable" or len(args) < 9 or bool(args[6]):
        return None
    w = args[1]
    if not isinstance(w, torch.Tensor) or w.dim() < 3:
        return None
    return tuple(int(d) for d in w.shape), int(args[8])


_KIND_CACHE: dict[Any, str] = {}


def op_kind(func: torch._ops.OpOverload) -> str:
    """What a real run on neuron records for `func`: NATIVE or GENERIC (one kernel), COMPOSITE (its
    decomposition's kernels), FREE (nothing: views, allocation, metadata) or COPY (a transfer).

    Read from the dispatcher's table for PrivateUse1, so it follows the kernels registered in this
    process (which file registered the kernel says which of csrc/aten's paths runs it)."""
    kind = _KIND_CACHE.get(func)
    if kind is not None:
        return kind
    if func in _COPY_OPS:
        kind = COPY
    elif func.namespace in ("c10d", "_c10d_functional") and _collective_name(func):
        kind = COLLECTIVE
    elif func.namespace != "aten":
        # prim::device and the like are metadata; c10d's collectives are recorded by their own path.
        kind = FREE
    elif func.is_view or func in _ALIASES:
        kind = FREE
    else:
        line = next((ln for ln in torch._C._dispatch_dump_table(func.name()).splitlines()
                     if ln.startswith("PrivateUse1:")), "")
        if "minimal.cpp" in line:
            kind = FREE
        elif "tracked_composites.cpp" in line or "default backend kernel" in line or "math kernel" in line:
            kind = COMPOSITE
        elif "host_kernel_routing.cpp" in line or "fallback" in line or not line:
            kind = GENERIC
        else:
            kind = NATIVE
    _KIND_CACHE[func] = kind
    return kind


# The process group's names of its collectives (csrc/distributed/process_group_neuron.cpp's launch(op)):
# what a real run records as c10d::<name>, by the dispatcher's operator (c10d's, and the functional
# collectives DTensor and FSDP2 call, which reach the same process group).
_COLLECTIVE_NAMES = {
    "allreduce_": "allreduce", "allreduce_coalesced_": "allreduce_coalesced", "allgather_": "allgather",
    "_allgather_base_": "allgather_into_tensor", "allgather_into_tensor_coalesced_": "allgather_into_tensor_coalesced",
    "reduce_scatter_": "reduce_scatter", "_reduce_scatter_base_": "reduce_scatter_tensor",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter_tensor_coalesced", "alltoall_": "alltoall",
    "alltoall_base_": "alltoall_base", "broadcast_": "broadcast", "reduce_": "reduce", "gather_": "gather",
    "scatter_": "scatter", "send": "send", "recv_": "recv", "barrier": "barrier",
    # _c10d_functional
    "all_reduce": "allreduce", "all_reduce_": "allreduce", "all_reduce_coalesced": "allreduce_coalesced",
    "all_gather_into_tensor": "allgather_into_tensor", "all_gather_into_tensor_out": "allgather_into_tensor",
    "all_gather_into_tensor_coalesced": "allgather_into_tensor_coalesced",
    "reduce_scatter_tensor": "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced": "reduce_scatter_tensor_coalesced",
    "all_to_all_single": "alltoall_base", "broadcast": "broadcast",
}


def _collective_name(func: torch._ops.OpOverload) -> Optional[str]:
    return _COLLECTIVE_NAMES.get(func._schema.name.split("::", 1)[-1])


def _plain(t: torch.Tensor) -> bool:
    return isinstance(t, torch._subclasses.fake_tensor.FakeTensor) or type(t) in (torch.Tensor, torch.nn.Parameter)


def _group_size(args: tuple, kwargs: dict) -> int:
    """The size of the collective's own process group: a c10d op's ProcessGroup argument, or a functional
    collective's group name; else the world."""
    import torch.distributed as dist

    for a in list(args) + list(kwargs.values()):
        size = getattr(a, "size", None)
        if isinstance(a, torch._C.ScriptObject) or (callable(size) and not isinstance(a, torch.Tensor)):
            try:
                return int(a.size())
            except Exception:  # noqa: BLE001 (not a process group after all)
                pass
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, str):
            try:
                from torch.distributed.distributed_c10d import _resolve_process_group

                return _resolve_process_group(a).size()
            except Exception:  # noqa: BLE001 (not a group name)
                pass
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _decompose(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> Any:
    """Run the composite PyTorch would run for the device, so its operators are dispatched (and seen) again."""
    for key in (torch._C.DispatchKey.CompositeExplicitAutograd,
                torch._C.DispatchKey.CompositeExplicitAutogradNonFunctional):
        if func.has_kernel_for_dispatch_key(key):
            return func._op_dk(key, *args, **kwargs)
    if func.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd):
        return func.decompose(*args, **kwargs)
    return NotImplemented


@dataclasses.dataclass
class _Block:
    """One fake storage on the device: its bytes and what it holds (set when the peak is classified)."""
    nbytes: int
    category: str = CATEGORIES[3]
    holders: int = 0
    # The storage's identity in the trace (BUFFERS_READ_ARG / BUFFERS_WRITTEN_ARG): a storage's address
    # is reused once it is freed, this number is not.
    serial: int = 0


@dataclasses.dataclass
class MemoryReport:
    """Peak HBM of the dry-run rank's core against the target's capacity, and what made the peak."""
    target: Target
    peak_bytes: int
    by_category: dict[str, int]
    capacity_bytes: int

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.capacity_bytes

    @property
    def dominant(self) -> str:
        return max(self.by_category, key=lambda c: self.by_category[c]) if self.peak_bytes else CATEGORIES[3]

    def verdict(self) -> str:
        gib = 2**30
        head = (f"peak HBM {self.peak_bytes / gib:.2f} GiB of {self.capacity_bytes / gib:.0f} GiB per core "
                f"({self.target.label}): {'fits' if self.fits else 'does not fit'}"
                + ("" if self.fits else f" ({self.peak_bytes / self.capacity_bytes:.1f}x the capacity)"))
        parts = [f"  {c:<22} {self.by_category[c] / gib:9.2f} GiB" for c in CATEGORIES]
        return "\n".join([head, f"dominated by {self.dominant}:"] + parts)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target.label, "peak_bytes": self.peak_bytes, "capacity_bytes": self.capacity_bytes,
                "fits": self.fits, "dominant": self.dominant, "by_category": dict(self.by_category)}


_HOLD = "_torchneuron_dry_run_hold"


class _Hold:
    """Kept in a fake tensor's __dict__: freed with the tensor's Python object, which PyTorch keeps as long
    as anything (autograd's saved tensors included) holds the tensor. Not a weak reference to the tensor:
    Module.to() swaps a fake parameter's contents (torch.utils.swap_tensors), which weak references forbid,
    and the swap carries __dict__, so the hold follows the storage it counts."""

    __slots__ = ("memory", "key")

    def __init__(self, memory: "_Memory", key: int) -> None:
        self.memory, self.key = memory, key

    def __del__(self) -> None:
        self.memory.release(self.key)

    def __copy__(self) -> None:  # a copied tensor holds its own storage, counted when it is made
        return None

    def __deepcopy__(self, memo: dict) -> None:
        return None


class _Memory:
    """Live device storages of the fake tensors, and their peak."""

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.current = 0
        self.peak = 0
        self.peak_blocks: list[_Block] = []
        self.peak_pending = False  # a new peak whose blocks are not classified yet
        self.timeline: list[tuple[float, int]] = []
        self.classify: Callable[[], None] = lambda: None
        self.serials = 0

    def serial(self, t: torch.Tensor) -> int:
        """The trace's identity of `t`'s device storage (0 when the dry run does not hold it)."""
        block = self.blocks.get(t.untyped_storage()._cdata) if t.device.type == "neuron" else None
        return 0 if block is None else block.serial

    def hold(self, t: torch.Tensor, now: float) -> None:
        if t.device.type != "neuron" or getattr(t, _HOLD, None) is not None:
            return
        storage = t.untyped_storage()
        key = storage._cdata
        block = self.blocks.get(key)
        if block is None:
            self.serials += 1
            block = self.blocks[key] = _Block(storage.nbytes(), serial=self.serials)
            self.current += block.nbytes
            self.timeline.append((now, self.current))
            if self.current > self.peak:
                self.peak = self.current
                self.peak_pending = True
        block.holders += 1
        setattr(t, _HOLD, _Hold(self, key))

    def release(self, key: int) -> None:
        block = self.blocks.get(key)
        if block is None:
            return
        block.holders -= 1
        if block.holders <= 0:
            if self.peak_pending:  # memory falls from a new peak: that peak is final, classify it
                self.settle()
            del self.blocks[key]
            self.current -= block.nbytes
            self.timeline.append((self.timeline[-1][0] if self.timeline else 0.0, self.current))

    def restart_peak(self) -> None:
        self.peak = self.current
        self.peak_pending = True

    def settle(self) -> None:
        if self.peak_pending:
            self.peak_pending = False
            self.classify()
            self.peak_blocks = list(self.blocks.values())


class _Recorder(TorchDispatchMode):
    """Records what a real run on neuron would record, for every operator the program calls."""

    def __init__(self, target: Target) -> None:
        super().__init__()
        self.target = target
        self.events: list[dict[str, Any]] = []
        self.clock = 0.0  # microseconds: the device's projected time so far
        self.memory = _Memory()
        self.recording = True
        self.fake_mode: Any = None
        self.paused = 0  # inside the framework's own metadata work (_sharding_metadata_unrecorded)
        self.kernels = 0
        self._ext = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        if self.paused:
            return func(*args, **kwargs)
        leaves = pytree.tree_leaves((args, kwargs))
        if any(isinstance(t, torch.Tensor) and not _plain(t) for t in leaves):
            # A tensor subclass (DTensor, FSDP2's parameters) runs the op on its local tensors, which come
            # back through this mode: those are the kernels, this is not one. NotImplemented hands the op
            # to the subclass with this mode still active.
            return NotImplemented
        kind = op_kind(func)
        if kind == COLLECTIVE:
            out = func(*args, **kwargs)
            self._collective(func, args, kwargs, out)
            self._hold(out)
            return out
        if kind == COMPOSITE and self._on_neuron(args, kwargs):
            with self:
                out = _decompose(func, args, kwargs)
            if out is not NotImplemented and any(isinstance(t, torch.Tensor) and t.device.type == "meta"
                                                 for t in pytree.tree_leaves(out)):
                # A composite that builds its result in C++ gets the fake tensor's meta storage: the fake
                # mode makes it instead (what the decomposition recorded stays: it ran).
                out = func(*args, **kwargs)
                self._hold(out)
                return out
            if out is not NotImplemented:
                self._hold(out)
                return out
            kind = NATIVE
        try:
            out = func(*args, **kwargs)
        except (torch._subclasses.fake_tensor.DataDependentOutputException,
                torch._subclasses.fake_tensor.DynamicOutputShapeException) as e:
            raise DryRunError(_DATA_MESSAGE.format(what=f"{func.name()}")) from e
        if kind == FREE:
            self._hold(out)
            return out
        if kind == COPY:
            dst, src = (args[0], args[1]) if func is aten.copy_.default else (args[1], args[0])
            if isinstance(src, torch.Tensor) and "neuron" in (dst.device.type, src.device.type):
                self._copy(src, dst)
            self._hold(out)
            return out
        tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        neuron = [t for t in tensors if t.device.type == "neuron"]
        outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        record = None
        if neuron or any(t.device.type == "neuron" for t in outs):
            record = self._kernel(func, kind, neuron, outs, args)
        self._hold(out)
        if record is not None:  # the results' storages exist now (an in-place result: its input's)
            record[BUFFERS_WRITTEN_ARG] = [[self.memory.serial(t), _nbytes(t)] for t in outs]
        return out

    @staticmethod
    def _on_neuron(args: tuple, kwargs: dict) -> bool:
        for t in pytree.tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor) and t.device.type == "neuron":
                return True
            if isinstance(t, torch.device) and t.type == "neuron":
                return True
            if isinstance(t, str) and t.startswith("neuron"):
                return True
        return False

    def _hold(self, out: Any) -> None:
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.memory.hold(t, self.clock)

    def _emit(self, name: str, cat: str, tid: int, tier: str, op: str, args: dict[str, Any], duration_us: float,
              device: int) -> None:
        if not self.recording:
            return
        self._ext += 1
        args.update({"External id": self._ext, S.TIER: tier, S.STREAM: 0, S.DEVICE: device})
        ts = self.clock
        # A dispatch a nanosecond long, then the kernel: the projection's clock then runs the kernels
        # back to back (no host time between them).
        self.events.append({"ph": "X", "cat": S.CAT_RUNTIME, "name": S.RUNTIME_KERNEL, "pid": S.NEURON_PID,
                            "tid": _RUNTIME_TID, "ts": ts, "dur": duration_us + 0.001,
                            "args": {"External id": self._ext, S.STREAM: 0, S.TIER: tier, S.OP: op}})
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": S.NEURON_PID, "tid": tid,
                            "ts": ts + 0.001, "dur": duration_us, "args": args})
        self.clock = ts + duration_us + 0.001
        self.kernels += 1

    def _kernel(self, func: torch._ops.OpOverload, tier: str, inputs: list[torch.Tensor],
                outputs: list[torch.Tensor], call_args: tuple = ()) -> dict[str, Any]:
        """Record one kernel; returns its trace args (the caller adds the storages it wrote)."""
        name = func.name()
        schema_name = func._schema.name
        written = sum(_nbytes(t) for t in outputs)
        out_numel = sum(t.numel() for t in outputs)
        read = sum(_nbytes(t) for t in inputs)
        elements = max([out_numel] + [t.numel() for t in inputs])
        dtype = _dtype_name(inputs[0].dtype) if inputs else ""
        flops = estimate_flops(schema_name, inputs) or convolution_flops(schema_name, call_args, outputs)
        overload = func._overloadname
        op = name if overload == "default" else f"{schema_name}.{overload}"
        # A matmul-family or attention kernel's operand shapes (torch's "Input Dims"): its Tensor Engine
        # instructions.
        dims = None
        if flops:
            shapes = [list(a.shape) if isinstance(a, torch.Tensor) else [] for a in call_args]
            if matmul_products(op, shapes):
                dims = shapes
        conv = convolution_shape(schema_name, call_args)
        p = project(op, tier, read, written, flops, elements, dtype, self.target, input_dims=dims,
                    conv_weight=conv[0] if conv else None, conv_groups=conv[1] if conv else 1)
        args: dict[str, Any] = {S.ELEMENTS: elements, S.BYTES_WRITTEN: written, S.BYTES: read + written,
                                S.DTYPE: dtype, S.BYTES_READ: read}
        if flops:
            args[S.FLOPS] = flops
        if dims is not None:
            args[S.INPUT_DIMS] = dims
        if conv:
            args[CONV_WEIGHT_ARG], args[CONV_GROUPS_ARG] = list(conv[0]), conv[1]
        args[BUFFERS_READ_ARG] = [[self.memory.serial(t), _nbytes(t)] for t in inputs]
        device = next((t.device.index or 0 for t in inputs + outputs if t.device.type == "neuron"), 0)
        self._emit(S.KERNEL_PREFIX + op.split("::", 1)[-1], S.CAT_KERNEL, _KERNEL_TID, tier, op, args,
                   p.duration_s * 1e6, device)
        return args

    def _collective(self, func: torch._ops.OpOverload, args: tuple, kwargs: dict, out: Any) -> None:
        """One collective on the CC cores' queue, as the neuron process group records it: the inputs' bytes
        read, the outputs' written (an in-place collective reads and writes its tensors), its group's size."""
        name = "c10d::" + (_collective_name(func) or func._schema.name.split("::", 1)[-1])
        schema = func._schema
        inputs: list[torch.Tensor] = []
        outputs: list[torch.Tensor] = []
        for arg, value in zip(schema.arguments, args):
            tensors = [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]
            if not tensors:
                continue
            if "out" in arg.name or "output" in arg.name:
                outputs.extend(tensors)
            else:
                inputs.extend(tensors)
                if arg.alias_info is not None and arg.alias_info.is_write:
                    outputs.extend(tensors)
        if func.namespace == "_c10d_functional":  # functional: the result is the output
            outputs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)] or outputs
        if not any(t.device.type == "neuron" for t in inputs + outputs):
            return
        read, written = sum(_nbytes(t) for t in inputs), sum(_nbytes(t) for t in outputs)
        ranks = _group_size(args, kwargs)
        p = project(name, COLLECTIVE, read, written, 0, 0, "", self.target, group_size=ranks)
        dtype = _dtype_name((inputs or outputs)[0].dtype)
        args_ = {S.ELEMENTS: 0, S.BYTES_WRITTEN: written, S.BYTES: read + written, S.DTYPE: dtype,
                 S.BYTES_READ: read, S.GROUP_SIZE: ranks}
        args_[BUFFERS_READ_ARG] = [[self.memory.serial(t), _nbytes(t)] for t in inputs]
        args_[BUFFERS_WRITTEN_ARG] = [[self.memory.serial(t), _nbytes(t)] for t in outputs]
        device = next((t.device.index or 0 for t in inputs + outputs if t.device.type == "neuron"), 0)
        self._emit(S.KERNEL_PREFIX + name.split("::", 1)[-1], S.CAT_KERNEL, _KERNEL_TID, COLLECTIVE, name, args_,
                   p.duration_s * 1e6, device)

    def _copy(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        if src.device.type == "neuron" and dst.device.type == "neuron":
            direction, name = "DtoD", S.COPY_NAMES[2]
        elif dst.device.type == "neuron":
            direction, name = "HtoD", S.COPY_NAMES[0]
        else:
            direction, name = "DtoH", S.COPY_NAMES[1]
        read, written = _nbytes(src), _nbytes(dst)
        p = project("aten::_copy_from", "native", read, written, 0, max(src.numel(), dst.numel()),
                    _dtype_name(dst.dtype), self.target, copy_direction=direction)
        args = {S.ELEMENTS: max(src.numel(), dst.numel()), S.BYTES_WRITTEN: written, S.BYTES: read + written,
                S.DTYPE: _dtype_name(dst.dtype), S.BYTES_READ: read}
        args[BUFFERS_READ_ARG] = [[self.memory.serial(src), read]]
        args[BUFFERS_WRITTEN_ARG] = [[self.memory.serial(dst), written]]
        device = (dst if dst.device.type == "neuron" else src).device.index or 0
        self._emit(name, S.CAT_MEMCPY, _COPY_TID, "native", "aten::_copy_from", args, p.duration_s * 1e6, device)


# ---------------------------------------------------------------------------------------------------------
# Classification of the peak: which storages are parameters, gradients, optimizer state.

class _Owners:
    """The program's modules and optimizers, found through PyTorch's global hooks while the dry run lasts."""

    def __init__(self) -> None:
        self.modules: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()
        self.optimizers: "weakref.WeakSet[torch.optim.Optimizer]" = weakref.WeakSet()
        self.in_step = False

    @contextlib.contextmanager
    def hooks(self) -> Iterator[None]:
        from torch.nn.modules import module as module_hooks
        from torch.optim import optimizer as optimizer_hooks

        def forward_pre(module: torch.nn.Module, _args: Any) -> None:
            self.modules.add(module)

        def param_registered(module: torch.nn.Module, _name: str, _param: Any) -> None:
            self.modules.add(module)

        def step_pre(opt: torch.optim.Optimizer, _args: Any, _kwargs: Any) -> None:
            self.optimizers.add(opt)

        handles = [module_hooks.register_module_forward_pre_hook(forward_pre),
                   module_hooks.register_module_parameter_registration_hook(param_registered),
                   optimizer_hooks.register_optimizer_step_pre_hook(step_pre)]
        try:
            yield
        finally:
            for h in handles:
                h.remove()

    def classify(self, blocks: dict[int, _Block]) -> None:
        """Label the live blocks: a block keeps the first label it is given (a parameter's storage stays a
        parameter's even when an optimizer state aliases it)."""
        def label(t: Any, category: str) -> None:
            # A DTensor (tensor parallel, FSDP2) holds its rank's shard in a local tensor: that is the storage.
            t = getattr(t, "_local_tensor", t)
            if isinstance(t, torch.Tensor) and t.device.type == "neuron":
                b = blocks.get(t.untyped_storage()._cdata)
                if b is not None and b.category == CATEGORIES[3]:
                    b.category = category

        params = []
        for m in list(self.modules):
            params.extend(m._parameters.values())
        for opt in list(self.optimizers):
            for g in opt.param_groups:
                params.extend(g["params"])
        for p in params:
            label(p, CATEGORIES[0])
        for p in params:
            if p is not None:
                label(p.grad, CATEGORIES[1])
        for opt in list(self.optimizers):
            for state in opt.state.values():
                for v in state.values():
                    label(v, CATEGORIES[2])


# ---------------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class DryRunResult:
    """A dry run's trace (shaped like the profiler's), its projection and its HBM verdict."""
    trace: dict[str, Any]
    memory: MemoryReport
    kernels: int
    seconds: float        # the dry run's own host time
    world_size: int
    value: Any = None     # what the program returned (fake tensors)

    @property
    def projection(self) -> Any:
        from .projection import project_trace

        return project_trace(self.trace, self.memory.target)

    def summary(self) -> Any:
        from .report import summarize_trace

        return summarize_trace(self.trace, self.memory.target)

    def report(self, top: int = 15) -> str:
        """The memory verdict, then the profiler's report of the projected trace."""
        from .report import format_report

        head = (f"dry run on {self.memory.target.label}, world size {self.world_size} (one rank projected; "
                f"fake tensors: no data, no host time)\n")
        return head + self.memory.verdict() + "\n\n" + format_report(self.summary(), top=top)

    def write(self, out_dir: Union[str, os.PathLike], title: str = "dry run") -> str:
        """Write trace.json, summary.txt and report.html (the viewer) under `out_dir`; returns it."""
        from .html import write_html_report
        from .projection import add_projected_lanes

        os.makedirs(out_dir, exist_ok=True)
        trace = json.loads(json.dumps(self.trace))
        add_projected_lanes(trace, self.memory.target)
        path = os.path.join(out_dir, "trace.json")
        with open(path, "w") as f:
            json.dump(trace, f)
        with open(os.path.join(out_dir, "summary.txt"), "w") as f:
            f.write(self.report())
        write_html_report([trace], os.path.join(out_dir, "report.html"), title=title)
        return str(out_dir)


_ACTIVE: list[_Recorder] = []


def is_dry_run() -> bool:
    """True while a dry run executes: a program can skip what reads tensor values."""
    return bool(_ACTIVE)


@contextlib.contextmanager
def _no_printing_of_fakes() -> Iterator[None]:
    """print(tensor) of a fake tensor would print no values: say so instead of printing a placeholder."""
    import torch._tensor_str as tensor_str

    original = tensor_str._str

    def _str(self: torch.Tensor, *, tensor_contents: Optional[str] = None) -> str:
        if isinstance(self, torch._subclasses.fake_tensor.FakeTensor) and tensor_contents is None:
            raise DryRunError(_DATA_MESSAGE.format(what="printing a tensor"))
        return original(self, tensor_contents=tensor_contents)

    tensor_str._str = _str
    try:
        yield
    finally:
        tensor_str._str = original


@contextlib.contextmanager
def _optimizers_as_on_device() -> Iterator[None]:
    """Optimizers pick their foreach or fused implementation only for plain tensors and parameters
    (torch.optim.optimizer._default_to_fused_or_foreach); fake ones count as what they stand for, so a
    dry run's optimizer runs the kernels the real run's does."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.optim import optimizer as optim

    supported = getattr(optim, "_foreach_supported_types", None)
    added = isinstance(supported, list) and FakeTensor not in supported
    if added:
        supported.append(FakeTensor)
    try:
        yield
    finally:
        if added:
            supported.remove(FakeTensor)


@contextlib.contextmanager
def _modules_move_fake_parameters() -> Iterator[None]:
    """``model.to("neuron")`` (or ``.half()``) on a model built in the dry run: Module._apply swaps a fake
    parameter's contents with torch.utils.swap_tensors, which refuses tensors with weak references, and
    FakeTensorMode keeps one to each fake tensor it made. Converted fake parameters become new Parameter
    objects instead (what ``torch.__future__.set_overwrite_module_params_on_conversion(True)`` does); an
    optimizer made before the move would keep the old ones, as it would with that switch."""
    from torch._subclasses.fake_tensor import FakeTensor

    original = torch.nn.Module._apply

    def _apply(self: torch.nn.Module, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        fake = {k: p for k, p in self._parameters.items() if isinstance(p, FakeTensor)}
        if not fake:
            return original(self, fn, recurse)
        converted = {}
        with torch.no_grad():
            for key, param in fake.items():
                moved = torch.nn.Parameter(fn(param), requires_grad=param.requires_grad)
                if param.grad is not None:
                    moved.grad = fn(param.grad)
                converted[key] = moved
        every = self._parameters
        self._parameters = {k: p for k, p in every.items() if k not in fake}
        try:
            return original(self, fn, recurse)
        finally:
            every.update(self._parameters)
            every.update(converted)
            self._parameters = every

    torch.nn.Module._apply = _apply  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module._apply = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _real_device_meshes() -> Iterator[None]:
    """A DeviceMesh keeps its ranks in a CPU tensor and reads them (tolist): it is bookkeeping, not the
    program's data, so it is built with real tensors. A mesh tensor made under the dry run (as
    init_device_mesh makes one: arange over the world) has no values: it becomes arange of its shape,
    which gives every mesh dimension the groups' sizes the program asked for (all the projection of one
    rank needs; which ranks share a group is not modelled)."""
    try:
        from torch.distributed.device_mesh import DeviceMesh
    except ImportError:
        yield
        return
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    original = DeviceMesh.__init__

    def real(x: Any) -> Any:
        if not isinstance(x, torch._subclasses.fake_tensor.FakeTensor):
            return x
        shape = tuple(x.shape)
        return torch.arange(int(torch.Size(shape).numel()), dtype=x.dtype).view(shape)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        with unset_fake_temporarily():
            original(self, *[real(a) for a in args], **{k: real(v) for k, v in kwargs.items()})

    DeviceMesh.__init__ = __init__  # type: ignore[method-assign]
    try:
        yield
    finally:
        DeviceMesh.__init__ = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _sharding_metadata_unrecorded(recorder: _Recorder) -> Iterator[None]:
    """DTensor derives an op's output metadata by running it on global-shaped fake tensors of the current
    fake mode (ours): that is not the program's work, so nothing it runs is recorded or held."""
    try:
        from torch.distributed.tensor._sharding_prop import ShardingPropagator
    except ImportError:
        yield
        return
    name = "_propagate_tensor_meta_non_cached"
    original = getattr(ShardingPropagator, name, None)
    if original is None:
        yield
        return

    def paused(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder.paused += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            recorder.paused -= 1

    setattr(ShardingPropagator, name, paused)
    try:
        yield
    finally:
        setattr(ShardingPropagator, name, original)


@contextlib.contextmanager
def _fake_world(world_size: int, rank: int = 0) -> Iterator[None]:
    """A fake process group of `world_size` ranks as the default group, when none is initialized."""
    import torch.distributed as dist

    created = False
    if world_size > 1 and dist.is_available() and not dist.is_initialized():
        from torch.testing._internal.distributed.fake_pg import FakeStore

        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
        created = True
    try:
        yield
    finally:
        if created:
            dist.destroy_process_group()


def _to_fake(mode: Any, x: Any) -> Any:
    return mode.from_tensor(x) if isinstance(x, torch.Tensor) and not isinstance(
        x, torch._subclasses.fake_tensor.FakeTensor) else x


@contextlib.contextmanager
def dry_run_session(target: Optional[Union[Target, str]] = None, world_size: int = 1) -> Iterator[_Recorder]:
    """The modes of a dry run: fake tensors, the recorder above them, a fake world, the program's owners."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    t = resolve_target(target)
    owners = _Owners()
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    # What the process held before the dry run (torch, transformers, the caller's objects) is frozen out of the
    # garbage collector while it runs, so that the collections during the run and the one at its end scan only
    # the run's own objects (a full collection of the ~400k objects torch and transformers leave in a process
    # costs ~0.3 s of CPU here, paid at the end of every dry run). Not when the caller froze objects already:
    # unfreezing would release theirs.
    froze = gc.get_freeze_count() == 0
    if froze:
        gc.freeze()
    try:
        with _dry_run_world(t, world_size, owners, fake) as recorder:
            yield recorder
    finally:
        if froze:
            gc.unfreeze()


@contextlib.contextmanager
def _dry_run_world(t: Target, world_size: int, owners: "_Owners", fake: Any) -> Iterator[_Recorder]:
    with _fake_world(world_size):
        recorder = _Recorder(t)
        recorder.memory.classify = lambda: owners.classify(recorder.memory.blocks)
        recorder.fake_mode = fake
        _ACTIVE.append(recorder)
        try:
            with owners.hooks(), _no_printing_of_fakes(), _optimizers_as_on_device(), _real_device_meshes(), \
                    _modules_move_fake_parameters(), _sharding_metadata_unrecorded(recorder), fake, recorder:
                yield recorder
        finally:
            _ACTIVE.remove(recorder)
            recorder.memory.settle()
            # A program's fake tensors sit in reference cycles (autograd graphs, modules, tracebacks of a
            # DryRunError): collect them now, not in a later collection that would pause whatever the
            # process times next.
            gc.collect()


def _result(recorder: _Recorder, seconds: float, world_size: int, value: Any = None) -> DryRunResult:
    m = recorder.memory
    by = {c: 0 for c in CATEGORIES}
    for b in m.peak_blocks:
        by[b.category] += b.nbytes
    t = recorder.target
    memory = MemoryReport(t, m.peak, by, t.hbm_bytes_per_core)
    events = list(recorder.events)
    events.append({"ph": "M", "name": "process_name", "pid": S.NEURON_PID, "tid": 0,
                   "args": {"name": "Neuron (dry run: fake tensors)"}})
    for ts, current in m.timeline:
        mb = round(current / 2**20, 3)
        events.append({"ph": "C", "name": S.hbm_counter_name(0), "pid": S.NEURON_PID, "tid": 0, "ts": ts,
                       "args": {S.HBM_ALLOCATED_MB: mb, S.HBM_RESERVED_MB: mb}})
    trace = {"traceEvents": events, "displayTimeUnit": "ms", "distributedInfo": {"rank": 0, "world_size": world_size},
             "neuron": {"numerics": "host", "dry_run": {"memory": memory.to_dict(), "kernels": recorder.kernels,
                                                        "seconds": seconds,
                                                        LIVE_AT_END_KEY: sorted(b.serial for b in m.blocks.values())}}}
    return DryRunResult(trace, memory, recorder.kernels, seconds, world_size, value)


def dry_run(fn: Callable[..., Any], *args: Any, target: Optional[Union[Target, str]] = None, world_size: int = 1,
            setup: Optional[Callable[[], Any]] = None, **kwargs: Any) -> DryRunResult:
    """Run `fn(*args, **kwargs)` on fake tensors and project it on `target` as one rank of `world_size`.

    Tensors among the arguments become fake ones (same shape, dtype, device). `setup()`, when given, runs
    first under the same fake tensors without recording kernels (build the model and optimizer there:
    the tensors it leaves count towards HBM, its initialisation and its transient peak not towards the
    projection); what it returns
    is passed to `fn` before `args`. Raises DryRunError when the program reads tensor values.
    """
    start = time.perf_counter()
    with dry_run_session(target, world_size) as recorder:
        fake = recorder.fake_mode
        args = tuple(_to_fake(fake, a) for a in args)
        kwargs = {k: _to_fake(fake, v) for k, v in kwargs.items()}
        if setup is not None:
            recorder.recording = False
            built = setup()
            recorder.recording = True
            # The peak is the program's: setup's transients (a model built whole, then sharded) are not
            # part of the step; what setup leaves alive is.
            recorder.memory.restart_peak()
            args = (built,) + args
        value = fn(*args, **kwargs)
    return _result(recorder, time.perf_counter() - start, world_size, value)


def dry_run_script(argv: Sequence[str], target: Optional[Union[Target, str]] = None,
                   world_size: int = 1) -> tuple[DryRunResult, int]:
    """Dry-run a script (`script.py ARGS` or `-m module ARGS`) as `torchneuron-ext project` does; returns the
    result and the script's exit status."""
    command = list(argv)
    status = 0

    def run() -> None:
        nonlocal status
        saved = sys.argv
        try:
            if command[0] == "-m":
                sys.argv = command[1:]
                runpy.run_module(command[1], run_name="__main__", alter_sys=True)
            else:
                sys.argv = command
                sys.path.insert(0, os.path.dirname(os.path.abspath(command[0])))
                runpy.run_path(command[0], run_name="__main__")
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            sys.argv = saved

    start = time.perf_counter()
    env = {"WORLD_SIZE": str(world_size), "RANK": "0", "LOCAL_RANK": "0"}
    saved_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with dry_run_session(target, world_size) as recorder:
            run()
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return _result(recorder, time.perf_counter() - start, world_size), status
