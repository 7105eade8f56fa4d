"""A dry-run program projected as one compiled NEFF, with the fusion a whole-graph compiler does.

`torch_neuronx.trace` (and a training step under PyTorch/XLA) hands the whole program to neuronx-cc, which
emits one NEFF: one launch, and elementwise work fused with its producer and consumers so that an
intermediate result stays in SBUF instead of making a round trip through HBM (the compiler's operator
fusion: XLA's producer-consumer fusion, which neuronx-cc's HLO front end inherits; Inductor does the same
for `torch.compile`, compiler/kernel_bytes.py). docs/cost_model.md, "Compiled programs: fusion", gives the
rule and its sources; the dry run's records carry the data flow it needs (BUFFERS_READ_ARG,
BUFFERS_WRITTEN_ARG, LIVE_AT_END_KEY in profiler/dry_run.py).

The rule, over the program's kernels in order:
- a **region** is a kernel that can start one (any ATen kernel but an in-place indexed write: a matmul,
  convolution or attention kernel, a row gather, an elementwise kernel), followed by every next kernel that
  is elementwise ("vector": pointwise ops, normalizations, reductions, `trainium.projection.kernel_class`)
  and reads something written inside the region: the compiler's epilogue (an activation applied as PSUM is
  evicted) and pointwise chains. A device-to-device copy (a cast, a clone) is an elementwise instruction there;
  host transfers, collectives, NKI and custom kernels are regions of their own;
- a value written inside a region and read only inside it, and not alive when the program ends (a result,
  a parameter), never reaches HBM: its writer does not write it and its readers do not read it;
- each kernel keeps its engine work (its Vector, Scalar or Tensor Engine passes) and pays the memory
  traffic that is left, without a launch; the program pays one launch.
A value read again in a later region (a residual, an activation saved for the backward pass) is written
and read as before. Nothing here depends on the target beyond the projection of each kernel.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Union

from ..instrumentation import trace_schema as S
from ..trainium.projection import CONV_GROUPS_ARG, CONV_WEIGHT_ARG, Projection, kernel_class, project, resolve_target
from ..trainium.targets import Target
from .dry_run import BUFFERS_READ_ARG, BUFFERS_WRITTEN_ARG, LIVE_AT_END_KEY, DryRunResult

_ATEN_TIERS = ("native", "generic")
_COPY_DIRECTIONS = {S.COPY_NAMES[0]: "HtoD", S.COPY_NAMES[1]: "DtoH", S.COPY_NAMES[2]: "DtoD"}


@dataclasses.dataclass(frozen=True)
class FusedKernel:
    """One kernel of the compiled program: its region, the bytes fusion kept on chip, its projection."""

    name: str
    region: int
    bytes_kept_on_chip: int      # of its recorded reads and writes
    projection: Projection       # without a launch, on what is left of its memory traffic


@dataclasses.dataclass(frozen=True)
class CompiledProgram:
    """A dry run's program as one NEFF (compiled_program)."""

    target: Target
    kernels: list[FusedKernel]
    regions: int
    unfused_work_s: float        # the same kernels back to back with every value through HBM

    @property
    def launch_s(self) -> float:
        return self.target.launch_s

    @property
    def work_s(self) -> float:
        return sum(k.projection.work_s for k in self.kernels)

    @property
    def duration_s(self) -> float:
        """One launch plus the kernels' work back to back."""
        return self.launch_s + self.work_s

    @property
    def bytes_kept_on_chip(self) -> int:
        return sum(k.bytes_kept_on_chip for k in self.kernels)


class _Value:
    """One version of a storage: written by one kernel, read by later ones until it is written again."""

    __slots__ = ("region", "writer_can_fuse", "read_regions", "last")

    def __init__(self, region: int, writer_can_fuse: bool) -> None:
        self.region, self.writer_can_fuse = region, writer_can_fuse
        self.read_regions: set[int] = set()
        self.last = True  # no later write to the same storage

    def on_chip(self, live_at_end: bool) -> bool:
        return (self.writer_can_fuse and self.read_regions <= {self.region}
                and not (self.last and live_at_end))


def _device_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    events = [e for e in trace.get("traceEvents") or [] if e.get("ph") == "X" and e.get("pid") == S.NEURON_PID
              and e.get("cat") in (S.CAT_KERNEL, S.CAT_MEMCPY)]
    return sorted(events, key=lambda e: e.get("ts", 0.0))


def compiled_program(result: Union[DryRunResult, dict[str, Any]], target: Optional[Union[Target, str]] = None,
                     fuse: bool = True) -> CompiledProgram:
    """Project a dry run's program (its result or trace) as one NEFF on `target`: one launch, its kernels back
    to back, and with `fuse` the values a compiler keeps on chip taken out of their kernels' memory traffic
    (the module's rule). Raises ValueError for a trace that is not a dry run's (a real run's records have no
    data flow)."""
    t = resolve_target(target)
    trace = result.trace if isinstance(result, DryRunResult) else result
    meta = ((trace.get("neuron") or {}).get("dry_run") or {})
    if LIVE_AT_END_KEY not in meta:
        raise ValueError("compiled_program needs a dry run's trace (costmodel.dry_run): this trace has no data "
                         "flow (a real run's, or a dry run's from before the buffers were recorded); dry-run the "
                         "program again")
    live = set(meta[LIVE_AT_END_KEY])
    events = _device_events(trace)

    current: dict[int, _Value] = {}
    records: list[tuple[dict[str, Any], str, int, list, list]] = []  # event, kind, region, reads, writes
    region, open_region = -1, False
    for e in events:
        args = e.get("args") or {}
        tier = args.get(S.TIER, "native")
        kind = _kind(e, tier, fuse)
        reads = [(current.get(s), int(n)) for s, n in args.get(BUFFERS_READ_ARG, ()) if s]
        joins = (fuse and open_region and kind == "vector"
                 and any(v is not None and v.region == region for v, _ in reads))
        if not joins:
            region += 1
            open_region = kind in ("tensor", "gather", "vector")
        for v, _ in reads:
            if v is not None:
                v.read_regions.add(region)
        writes = []
        for s, n in args.get(BUFFERS_WRITTEN_ARG, ()):
            if not s:
                continue
            old = current.get(s)
            if old is not None:
                old.last = False
            v = current[s] = _Value(region, open_region)
            writes.append((s, v, int(n)))
        records.append((e, kind, region, reads, writes))

    kernels: list[FusedKernel] = []
    unfused = 0.0
    for e, kind, r, reads, writes in records:
        args = e.get("args") or {}
        read, written = int(args.get(S.BYTES_READ, 0)), int(args.get(S.BYTES_WRITTEN, 0))
        kept_read = sum(n for v, n in reads if v is not None and v.on_chip(False))
        kept_written = sum(n for s, v, n in writes if v.on_chip(s in live))
        if not fuse:
            kept_read = kept_written = 0
        unfused += _project(e, _kind(e, args.get(S.TIER, "native"), False), read, written, t).work_s
        p = _project(e, kind, read, written, t, kept_read + kept_written)
        kernels.append(FusedKernel(e["name"], r, kept_read + kept_written, p))
    return CompiledProgram(t, kernels, region + 1, unfused)


def _kind(e: dict[str, Any], tier: str, fuse: bool) -> str:
    """The kernel's class for the fusion rule: kernel_class of an ATen kernel; a transfer is "copy", except a
    device-to-device one (a cast, a clone) in a fused program, which is an elementwise instruction of the
    NEFF ("vector"); NKI, custom and collective kernels are their tier."""
    if e.get("cat") == S.CAT_MEMCPY:
        return "vector" if fuse and _COPY_DIRECTIONS.get(e["name"], "DtoD") == "DtoD" else "copy"
    return kernel_class(e["name"]) if tier in _ATEN_TIERS else tier


def _project(e: dict[str, Any], kind: str, read: int, written: int, t: Target, on_chip: int = 0) -> Projection:
    args = e.get("args") or {}
    if kind == "vector" and e.get("cat") == S.CAT_MEMCPY:  # a cast or clone: one elementwise pass
        return project("aten::_to_copy", "native", read, written, 0, int(args.get(S.ELEMENTS, 0) or 0),
                       args.get(S.DTYPE, ""), t, launch=False, on_chip_bytes=on_chip)
    conv = args.get(CONV_WEIGHT_ARG)
    return project(e["name"], args.get(S.TIER, "native"), read, written, int(args.get(S.FLOPS, 0) or 0),
                   int(args.get(S.ELEMENTS, 0) or 0), args.get(S.DTYPE, ""), t,
                   group_size=int(args.get(S.GROUP_SIZE, 1) or 1), launch=False,
                   copy_direction=_COPY_DIRECTIONS.get(e["name"], "DtoD") if kind == "copy" else "",
                   input_dims=args.get(S.INPUT_DIMS), conv_weight=tuple(conv) if conv else None,
                   conv_groups=int(args.get(CONV_GROUPS_ARG, 1) or 1), on_chip_bytes=on_chip)
