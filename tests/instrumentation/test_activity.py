"""Device activities timed from Python (torchneuron_ext/_activity.py): the one recorder that compiled
graphs, generated kernels and NKI launches go through."""
import time

import pytest

from torchneuron_ext.instrumentation.activity import DeviceActivity
from torchneuron_ext.profiler import op_stats, timing


def _stat(name):
    return next((s for s in op_stats() if s.name == name), None)


pytestmark = pytest.mark.usefixtures("fresh_op_counters")


def test_a_completed_span_is_counted_and_timed_with_what_the_block_set():
    with timing():
        with DeviceActivity("compiled::activity_test", "compiled", 0) as act:
            time.sleep(0.002)
            act.stop()
            time.sleep(0.02)  # bookkeeping after stop() is not the activity's
            act.bytes_read, act.bytes_written, act.flops, act.elements, act.dtype = 400, 200, 50, 100, 6
    s = _stat("compiled::activity_test")
    assert (s.tier, s.calls, s.calls_timed) == ("compiled", 1, 1)
    assert (s.bytes_read, s.bytes_written, s.flops, s.elements, s.dtype) == (400, 200, 50, 100, "Float")
    assert 2000 <= s.device_total_us < 20000


def test_a_span_that_raises_is_not_recorded():
    with pytest.raises(ValueError), timing():
        with DeviceActivity("nki::activity_raises", "nki", 0):
            raise ValueError("the work failed")
    assert _stat("nki::activity_raises") is None


def test_work_that_is_not_the_devices_is_not_recorded():
    with timing():
        with DeviceActivity("nki::activity_numpy", "nki", 0, record=False) as act:
            assert not act.recording
    assert _stat("nki::activity_numpy") is None


def test_an_unknown_tier_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown tier 'gpu'"):
        with DeviceActivity("compiled::activity_bad", "gpu", 0):
            pass
