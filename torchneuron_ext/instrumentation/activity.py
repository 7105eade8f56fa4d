"""Device activities timed from Python: the one way Python code records device work.

Work that does not run through an ATen kernel (a compiled graph's launch, a generated kernel, an NKI
kernel's launch) is timed here and handed to the instrumentation layer's one recording function
(`_C._record_kernel`, csrc/instrumentation/activity.*), which counts it under its name and tier and,
while timing or tracing is on, adds its times, bytes and FLOPs to the counters and the trace.

    with DeviceActivity("nki::matmul", "nki", device) as act:
        ...                      # the work
        act.stop()               # optional: end the span before the bookkeeping below
        act.bytes_read = ...     # what the cost model projects from, known once the work is done

A span that raises is not recorded (the work did not complete). Every completed span is counted;
its times go to the counters too, and to the trace while tracing. The per-call hot paths (a compiled
graph, a generated kernel) check `_C._timing_mode()` before they build an activity at all.
"""
from __future__ import annotations

from types import TracebackType
from typing import Optional

from .. import _C

_now_ns = _C._now_ns
_record_kernel = _C._record_kernel


class DeviceActivity:
    """A span of device work timed from Python, recorded when the ``with`` block completes.

    Args:
        name: the counter's and the trace event's name, e.g. ``"compiled::graph_0"``.
        tier: an execution tier's name (``_trace_schema.TIERS``), e.g. ``"compiled"`` or ``"nki"``.
        device: the NeuronCore's index.
        record: False for work that is not the device's (an NKI kernel simulated on numpy arrays):
            the block runs untimed and nothing is recorded (``recording`` tells the block).

    The attributes ``bytes_read``, ``bytes_written``, ``flops``, ``elements``, ``dtype`` (a
    c10::ScalarType number, -1 unknown) and ``model_ns`` (an instruction-level estimate of the
    device time, 0 none) may be set inside the block.
    """

    __slots__ = ("name", "tier", "device", "recording", "bytes_read", "bytes_written", "flops", "elements",
                 "dtype", "model_ns", "_start", "_end")

    def __init__(self, name: str, tier: str, device: int, record: bool = True) -> None:
        self.name, self.tier, self.device = name, tier, device
        self.recording = record
        self.bytes_read = self.bytes_written = self.flops = self.elements = self.model_ns = 0
        self.dtype = -1
        self._start = self._end = 0

    def __enter__(self) -> "DeviceActivity":
        if self.recording:
            self._start = _now_ns()
        return self

    @property
    def start_ns(self) -> int:
        """The span's start on ``_C._now_ns()``'s clock, its trace event's start (0 before the block or when
        not recording)."""
        return self._start

    def stop(self) -> None:
        """Ends the span now, before work that is bookkeeping rather than the activity's."""
        if self.recording and not self._end:
            self._end = _now_ns()

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if not self.recording or exc_type is not None:
            return
        end = self._end or _now_ns()
        _record_kernel(self.name, self.tier, self.device, self._start, end, self.bytes_read, self.bytes_written,
                       self.flops, self.elements, self.dtype, model_ns=self.model_ns)
