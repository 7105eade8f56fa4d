"""Rows of the cost model's validation table (docs/cost_model.md, "Validation").

Each module of this package is one family of public hardware measurements and exports ``ROWS``, a list of
:class:`Row`. A row's projection calls only the cost model's public API that existed before the model's
revision (``costmodel.eager_kernel``, ``collective``, ``copy``, ``dry_run``, ``nki.benchmark``, a profiled
run), so the same rows can be projected by an older checkout of the package: that is the table's
"before" column (``bench/costmodel_validation.py --json`` on the old package, ``--before`` on the new).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

# What a measurement's time includes, so a row is compared with the part of the model that covers it.
DEVICE = "device"            # the device's execution only (a profile, nki.benchmark's device latency)
HOST = "host+device"         # one execution seen from the host (neuron-bench latency, a timed call)
SDK = "end-to-end"           # a framework's timing around the SDK (PyTorch/XLA, vLLM, a training loop)


@dataclass
class Row:
    group: str                 # the family, e.g. "collectives"; --only picks by it
    kernel: str                # what was measured
    shape: str
    dtype: str
    target: str                # the hardware it was measured on (the projection's target)
    measured_s: float
    includes: str              # DEVICE, HOST or SDK
    source: str                # where the number is published, with its confidence (H / M / L)
    project: Callable[[], float] = field(repr=False)
    reason: str = ""           # why the model does not explain the row, when it does not
    former_key: str = ""       # the key an earlier table listed the row under (a corrected description)

    @property
    def key(self) -> str:
        return f"{self.group} | {self.kernel} | {self.shape} | {self.dtype} | {self.target}"


def all_rows() -> list[Row]:
    rows: list[Row] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        rows.extend(importlib.import_module(f"{__name__}.{info.name}").ROWS)
    return rows
