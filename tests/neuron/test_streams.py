"""Streams and events: identities, current stream per thread, recording, timing."""
import threading
import time

import pytest
import torch
from expecttest import TestCase


def test_stream_construction_and_identity():
    s = torch.neuron.Stream()
    assert isinstance(s, torch.neuron.Stream) and isinstance(s, torch.Stream)
    assert s.device == torch.device("neuron:0")
    assert s != torch.neuron.default_stream()
    assert torch.neuron.Stream(device=1).device_index == 1
    g = torch.Stream(device="neuron:1")
    assert g.device_type == s.device_type and g.device_index == 1
    assert repr(torch.neuron.default_stream(1)) == "torch.Stream device_type=neuron, device_index=1, stream_id=0"
    assert not isinstance(torch.Stream(device="cpu"), torch.neuron.Stream) if hasattr(torch, "Stream") else True


def test_stream_priority_pools_are_distinct():
    hi = {torch.neuron.Stream(priority=-1).stream_id for _ in range(32)}
    lo = {torch.neuron.Stream(priority=0).stream_id for _ in range(32)}
    assert len(hi) == 32 and len(lo) == 32 and not hi & lo and 0 not in hi | lo


def test_current_stream_context_and_threads():
    s = torch.neuron.Stream()
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        assert torch.accelerator.current_stream() == s
        seen = []
        t = threading.Thread(target=lambda: seen.append(torch.neuron.current_stream()))
        t.start(); t.join()
        assert seen == [torch.neuron.default_stream()]  # the current stream is per thread
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    s1 = torch.neuron.Stream(device=1)
    with torch.neuron.stream(s1):
        assert torch.neuron.current_device() == 1 and torch.neuron.current_stream() == s1
    assert torch.neuron.current_device() == 0
    with s:  # torch.Stream is a context manager too
        assert torch.neuron.current_stream() == s
    torch.neuron.set_stream(s)
    assert torch.neuron.current_stream() == s
    torch.neuron.set_stream(torch.neuron.default_stream())


def test_wait_record_query_synchronize():
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    with torch.neuron.stream(s1):
        x = torch.ones(100, device="neuron") * 2
    e = s1.record_event()
    assert isinstance(e, torch.neuron.Event)
    s2.wait_event(e)
    s2.wait_stream(s1)
    with torch.neuron.stream(s2):
        y = x + 1
    s2.synchronize()
    assert s1.query() and s2.query() and e.query()
    assert torch.equal(y.cpu(), torch.full((100,), 3.0))
    x.record_stream(s2)


def test_module_level_stream_helpers_act_on_the_current_stream():
    # TorchNeuron's torch.neuron.wait_stream / wait_event / record_event / query.
    s = torch.neuron.Stream()
    with torch.neuron.stream(s):
        x = torch.ones(8, device="neuron") * 2
        e = torch.neuron.record_event()
        assert isinstance(e, torch.Event) and e.query()
        assert torch.neuron.query()
    torch.neuron.wait_event(e)
    torch.neuron.wait_stream(s)
    assert torch.neuron.record_event(torch.neuron.Event()).device.type == "neuron"
    assert x.sum().item() == 16
    with pytest.raises(TypeError, match=r"torch.neuron.wait_stream\(\) takes a stream, e.g. torch.neuron.Stream\(\); got str"):
        torch.neuron.wait_stream("not a stream")


def test_event_timing():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    assert start.query()  # never recorded: complete, as CUDA says
    start.record()
    time.sleep(0.02)
    end.record()
    end.synchronize()
    assert 15 <= start.elapsed_time(end) < 2000
    g1, g2 = torch.Event("neuron", enable_timing=True), torch.Event("neuron", enable_timing=True)
    g1.record(torch.neuron.Stream())
    g2.record()
    assert g1.elapsed_time(g2) >= 0
    e = torch.neuron.Event()
    e.wait()
    e.record()
    e.record()  # events can be reused


class TestEventErrors(TestCase):
    def test_timing_needs_enable_timing_and_record(self):
        a, b = torch.neuron.Event(), torch.neuron.Event()
        a.record(); b.record()
        with self.assertRaises(ValueError) as cm:
            a.elapsed_time(b)
        self.assertExpectedInline(str(cm.exception), """Both events must be created with argument 'enable_timing=True'.""")
        c, d = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
        c.record()
        with self.assertRaises(ValueError) as cm:
            c.elapsed_time(d)
        self.assertExpectedInline(str(cm.exception), """Both events must be recorded before calculating elapsed time.""")

    def test_interprocess_is_refused(self):
        with self.assertRaises(NotImplementedError):
            torch.neuron.Event(interprocess=True)


class TestDeviceWithoutIndex(TestCase):
    """A device without an index means the current device (issue 17 item 3)."""

    def test_stream_without_index_uses_current_device(self):
        s = torch.Stream(device="neuron")
        assert s.device == torch.device("neuron:0") and s.stream_id != 0
        torch.neuron.set_device(1)
        try:
            s1 = torch.Stream(device="neuron")
            assert s1.device_index == 1
            e = torch.Event(device="neuron", enable_timing=True)
            e.record(s1)
            e.synchronize()
            with torch.neuron.device("neuron"):
                assert torch.neuron.current_device() == 1
        finally:
            torch.neuron.set_device(0)
        assert torch.Stream(device=torch.device("neuron")).device_index == 0

    def test_bad_index_raises_a_runtime_error(self):
        with self.assertRaises(RuntimeError) as cm:
            torch.Stream(device="neuron:7")
        assert isinstance(cm.exception, torch.AcceleratorError)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """Device index 7 is out of range. Valid range is 0 to 1 for this process (2 NeuronCores are visible; set NEURON_RT_NUM_CORES or NEURON_RT_VISIBLE_CORES to see more).""")
