import contextlib
from typing import Any, Iterator

import pytest
from torch.profiler import ProfilerActivity, profile

from torchneuron_ext.profiler import NeuronConfig, NeuronProfiler


@pytest.fixture(autouse=True)
def _default_projection_target(monkeypatch):
    """Reports pin the cost model's projections on its default target (trn2, LNC=2): a developer's
    NEURON_EMU_TARGET, NKI_TARGET or NEURON_PLATFORM_TARGET_OVERRIDE must not change them."""
    for var in ("NEURON_EMU_TARGET", "NKI_TARGET", "NEURON_PLATFORM_TARGET_OVERRIDE"):
        monkeypatch.delenv(var, raising=False)


@contextlib.contextmanager
def neuron_profile(out_dir: Any, **profile_kwargs: Any) -> Iterator[NeuronProfiler]:
    """The block under torch.profiler (CPU and neuron activities), exported by a NeuronProfiler into out_dir:
    once the block has ended, the yielded exporter's last_export_dir is the trace's folder."""
    cfg = NeuronConfig(profile_output_dir=str(out_dir))
    exporter = NeuronProfiler(cfg)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                 on_trace_ready=exporter.export_trace, **profile_kwargs):
        yield exporter
