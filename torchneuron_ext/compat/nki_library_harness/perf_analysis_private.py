"""Stand-in for AWS's ``test/utils/perf_analysis_private.py`` (not public): analysis of device profiles.

The harness calls ``analyze_trace`` only with ``--enable-perf-analysis`` on hardware runs, on the perf
simulator's trace and a device profile; neither exists under the NKI simulator, so the call says so.
"""
from __future__ import annotations

from typing import Any

from . import HardwarePathUnavailable

__all__ = ["analyze_trace"]


def analyze_trace(*, input_file: Any, profiled_file: Any, subgraph: str, base_dir: Any, output_filename: str,
                  target_instance_family: str) -> None:
    """AWS's analysis of a compiled kernel's trace against its device profile: not available here."""
    raise HardwarePathUnavailable(
        f"perf analysis of {input_file} needs the Neuron compiler's trace and a device profile from a Trainium "
        f"host; AWS's perf_analysis_private is not in the public NKI Library and the simulator records neither "
        f"(use nki.benchmark for the simulator's cost-model estimate)")
