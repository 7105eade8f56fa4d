"""torch.autograd.profiler.profile(use_device="neuron") without Kineto (the legacy path, its default)
times operators through neuron's PrivateUse1 profiler stubs; it agrees with the Kineto path
(issue 17 item 4)."""
import time

import torch
from torch.autograd.profiler import profile

import torchneuron_ext  # noqa: F401


def _work():
    x = torch.randn(256, 256, device="neuron")
    for _ in range(3):
        x = (x @ x).tanh()
    return x.sum().item()


def _rows(prof):
    return {e.key: e for e in prof.key_averages()}


def _fastest_mm_us(prof) -> float:
    times = sorted(e.device_time_total for e in prof.function_events if e.name == "aten::mm")
    assert len(times) == 3 and times[0] > 0, times
    return times[0]


def test_legacy_path_times_neuron_ops():
    _work()
    t0 = time.perf_counter()
    with profile(use_device="neuron") as prof:
        _work()
    wall_us = (time.perf_counter() - t0) * 1e6
    rows = _rows(prof)
    mm = rows["aten::mm"]
    assert mm.count == 3
    assert 0 < mm.device_time_total <= wall_us
    assert 0 < mm.cpu_time_total <= wall_us
    for e in prof.key_averages():
        assert e.device_time_total >= 0 and e.cpu_time_total >= 0, (e.key, e.device_time_total)
    assert "NEURON total" in prof.key_averages().table(sort_by="device_time_total")


def test_legacy_and_kineto_paths_agree():
    _work()
    with profile(use_device="neuron") as legacy:
        _work()
    with profile(use_device="neuron", use_kineto=True) as kineto:
        _work()
    lr, kr = _rows(legacy), _rows(kineto)
    for op in ("aten::mm", "aten::tanh"):
        assert lr[op].count == kr[op].count == 3, op
    for op in ("aten::mm", "aten::tanh", "aten::sum"):
        assert lr[op].device_time_total > 0 and kr[op].device_time_total > 0, op
    # The same work measured twice on a shared machine: the same order of magnitude. Each path's fastest
    # call, not its total or median: being descheduled under load only ever adds time (a 256^3 mm of
    # ~100 us took 20 ms), and on a loaded host two of three calls can be (the median failed so).
    ratio = _fastest_mm_us(legacy) / _fastest_mm_us(kineto)
    assert 0.1 < ratio < 10, ratio


def test_legacy_overhead_is_that_of_cpu_profiling():
    """Timing a device op costs two timestamps, not an exception (it cost ~2000x before)."""
    x = torch.ones(4, device="neuron")

    def small():
        y = x
        for _ in range(50):
            y = y + 1
        return y

    small()
    t0 = time.perf_counter()
    with profile():
        small()
    cpu_only = time.perf_counter() - t0
    t0 = time.perf_counter()
    with profile(use_device="neuron") as prof:
        small()
    with_device = time.perf_counter() - t0
    assert with_device < 5 * cpu_only + 0.5, (with_device, cpu_only)
    assert _rows(prof)["aten::add"].count == 50
