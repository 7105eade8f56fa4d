"""Built-in per-op timing: host time (dispatch entry to exit) and device time (the kernel's
execution) per operator, with bytes moved and FLOPs of matmul-like ops, without torch.profiler.
Beside each measured device time stands the cost model's projection for a Trainium target
(torchneuron_ext.costmodel; NEURON_EMU_TARGET).

Off by default (then it costs one flag check per op). Turn it on with `enable_timing()`, the
`timing()` context manager, or TORCHNEURON_EXT_TIMING=1.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator, Optional, Sequence, Union

from .. import _C, _env
from ..trainium.projection import project, resolve_target
from ..trainium.targets import Target
from ._format import format_bytes, format_us
from .projection import project_stats


@dataclasses.dataclass(frozen=True)
class OpStat:
    """Aggregates for one operator in one execution tier."""

    name: str
    tier: str  # one of torchneuron_ext.instrumentation.trace_schema.TIERS (the tier enumerator)
    calls: int  # every call since the last reset (timing on or off)
    calls_timed: int  # calls made while timing was on
    host_total_us: float
    device_total_us: float
    bytes_read: int
    bytes_written: int
    flops: int
    elements: int = 0  # the largest tensor's elements, summed over timed calls
    dtype: str = ""  # the last timed call's first tensor dtype (c10 name, e.g. "Float")
    projected_total_us: float = 0.0  # the cost model's projection on the target (a model, not a measurement)
    # Ran inside a compiled graph's launch: a part of that graph's row, which already counts its time.
    nested: bool = False
    # Copies (aten::_copy_from): the timed calls between host and device and their bytes; the rest
    # of the row is device to device (projected over PCIe and HBM respectively).
    host_transfer_calls: int = 0
    host_transfer_read: int = 0
    host_transfer_written: int = 0

    @property
    def projected_mean_us(self) -> float:
        return self.projected_total_us / self.calls_timed if self.calls_timed else 0.0

    @property
    def host_mean_us(self) -> float:
        return self.host_total_us / self.calls_timed if self.calls_timed else 0.0

    @property
    def device_mean_us(self) -> float:
        return self.device_total_us / self.calls_timed if self.calls_timed else 0.0


def enable_timing() -> None:
    """Start accumulating host and device time per operator."""
    _C._set_timing(True)


def disable_timing() -> None:
    """Stop accumulating (counts of calls continue)."""
    _C._set_timing(False)


def timing_enabled() -> bool:
    return bool(_C._timing_enabled())


@contextlib.contextmanager
def timing(reset: bool = True) -> Iterator[None]:
    """Time the ops run inside the block: `with torchneuron_ext.profiler.timing(): ...`."""
    was_on = timing_enabled()
    if reset:
        reset_timing()
    enable_timing()
    try:
        yield
    finally:
        if not was_on:
            disable_timing()


def reset_timing() -> None:
    """Zero the timing aggregates (not the call counts used by get_executed_ops)."""
    _C._reset_op_timings()


def op_stats(sort_by: str = "device_total_us", target: Optional[Union[str, Target]] = None,
             nested: bool = False) -> list[OpStat]:
    """Per-op aggregates, largest first by `sort_by` (any OpStat field or property).

    `projected_total_us` is the cost model's time on `target` (default: NEURON_EMU_TARGET, trn2),
    projected from each op's mean call. A compiled graph's launch is one row (one device kernel,
    as on Trainium); `nested=True` adds rows (`OpStat.nested`) for what ran inside compiled graphs,
    whose time their graph's row already holds, so summing rows never counts a region twice.
    """
    stats = [
        OpStat(
            name=d["name"], tier=d["tier"], calls=d["calls"], calls_timed=d["calls_timed"],
            host_total_us=d["host_ns"] / 1e3, device_total_us=d["device_ns"] / 1e3,
            bytes_read=d["bytes_read"], bytes_written=d["bytes_written"], flops=d["flops"],
            elements=d.get("elements", 0), dtype=d.get("dtype", ""), nested=bool(d.get("nested", False)),
            host_transfer_calls=d.get("host_transfer_calls", 0), host_transfer_read=d.get("host_transfer_read", 0),
            host_transfer_written=d.get("host_transfer_written", 0),
        )
        for d in _C._op_timings() if nested or not d.get("nested", False)
    ]
    t = resolve_target(target)
    for s in stats:
        # Rows made just above and held by nobody else: set the projection in place (as a frozen
        # dataclass's __init__ does) instead of dataclasses.replace, which was most of op_stats' cost.
        object.__setattr__(s, "projected_total_us", _projected_us(s, t))
    if stats and not hasattr(stats[0], sort_by):
        raise ValueError(f"cannot sort by {sort_by!r}; use a field of OpStat such as 'host_total_us'")
    return sorted(stats, key=lambda s: (getattr(s, sort_by), s.name), reverse=True)


def _projected_us(s: OpStat, target: Target) -> float:
    if not s.calls_timed:
        return 0.0
    n = s.calls_timed
    if s.nested:  # part of its graph's one launch: the work only
        p = project(s.name, s.tier, s.bytes_read // n, s.bytes_written // n, s.flops // n,
                              s.elements // n, s.dtype, target, launch=False)
        return p.duration_s * n * 1e6
    return project_stats([s], target).get((s.name, s.tier), 0.0) * 1e6


def timing_table(sort_by: str = "device_total_us", limit: Optional[int] = 20,
                 target: Optional[Union[str, Target]] = None) -> str:
    """The aggregates as a table a person can read, with the projected device time on `target`."""
    t = resolve_target(target)
    rows = [s for s in op_stats(sort_by, t, nested=True) if s.calls_timed > 0]
    stats = [s for s in rows if not s.nested]
    inside = [s for s in rows if s.nested]
    if limit is not None:
        stats, inside = stats[:limit], inside[:limit]
    return format_timing_table(stats, t, inside)


def format_timing_table(stats: list[OpStat], target: Target, inside: Sequence[OpStat] = ()) -> str:
    """The table of `timing_table` for given rows (tests pin it on rows made by hand); `inside`: the
    rows of what ran inside compiled graphs, listed apart because their graphs' rows count them."""
    header = (f"{'Operator':<42}{'Tier':<9}{'Calls':>7}{'Host total':>12}{'Host mean':>11}"
              f"{'Device total':>14}{'Device mean':>13}{'Projected':>11}{'Proj mean':>11}{'Bytes':>10}{'GFLOP/s':>9}")
    lines = [header, "-" * len(header)]

    def row(s: OpStat) -> str:
        gflops = f"{s.flops / (s.device_total_us * 1e3):.1f}" if s.flops and s.device_total_us else "-"
        return (f"{s.name[:41]:<42}{s.tier:<9}{s.calls_timed:>7}{format_us(s.host_total_us):>12}"
                f"{format_us(s.host_mean_us):>11}{format_us(s.device_total_us):>14}{format_us(s.device_mean_us):>13}"
                f"{format_us(s.projected_total_us):>11}{format_us(s.projected_mean_us):>11}"
                f"{format_bytes(s.bytes_read + s.bytes_written):>10}{gflops:>9}")

    lines.extend(row(s) for s in stats)
    if inside:
        lines.append("inside compiled graphs (parts of their graph's launch, counted in its row):")
        lines.extend(row(s) for s in inside)
    if not stats:
        lines.append("(no timed operators: run some neuron ops inside torchneuron_ext.profiler.timing())")
    else:
        lines.append(f"Host and Device: measured on this machine. Projected: cost model for {target.label} "
                     "(docs/cost_model.md), not a measurement.")
    return "\n".join(lines)


def _requested_by_environment() -> bool:
    # Read while `import torch` runs (the backend's autoload): a value it does not understand warns and
    # leaves timing off rather than making torch unimportable.
    return _env.flag("TORCHNEURON_EXT_TIMING", False, on_error="warn")


if _requested_by_environment():
    enable_timing()
