"""The Python half of csrc/instrumentation: what every layer uses to record device work and read it back.

- activity.py: `DeviceActivity`, the one way Python code times device work (compiled graphs, generated
  kernels, NKI launches) into the counters and the trace (`_C._record_kernel`).
- trace_schema.py: the trace's vocabulary (event names, lanes, metadata keys, tiers) for its readers.
- op_tracking.py: which operators ran on the device and by which path (`torchneuron_ext.ops`).
- numerics.py: the TORCHNEURON_EXT_NUMERICS mode the kernels run in (`torchneuron_ext.numerics`).

Nothing here imports another folder of the package: every layer may import it.
"""
