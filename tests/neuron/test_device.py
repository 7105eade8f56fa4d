"""torch.neuron device selection, properties and the NEURON_RT_* environment."""
import threading

import pytest
import torch
from expecttest import TestCase

from tests.conftest import run_python


def test_defaults():
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == 2
    assert torch.neuron.current_device() == 0
    torch.neuron.init()  # idempotent: the session's earlier ops may have initialised the runtime
    assert torch.neuron.is_initialized()


def test_initialisation_is_lazy():
    r = run_python("""
        import torch
        before = torch.neuron.is_initialized()
        torch.neuron.is_available(), torch.neuron.device_count()  # queries that do not start the runtime
        queried = torch.neuron.is_initialized()
        torch.neuron.init()
        print(before, queried, torch.neuron.is_initialized())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False", "True"]


def test_set_device_and_context_manager():
    torch.neuron.set_device(1)
    assert torch.neuron.current_device() == 1
    assert torch.empty(1, device="neuron").device == torch.device("neuron:1")
    torch.neuron.set_device("neuron:0")
    with torch.neuron.device(1):
        assert torch.neuron.current_device() == 1
        with torch.neuron.device("neuron:0"):
            assert torch.neuron.current_device() == 0
        assert torch.neuron.current_device() == 1
    assert torch.neuron.current_device() == 0
    with pytest.raises(ZeroDivisionError):
        with torch.neuron.device(1):
            1 / 0
    assert torch.neuron.current_device() == 0
    x = torch.ones(1, device="neuron:1")
    with torch.neuron.device_of(x):
        assert torch.neuron.current_device() == 1


def test_device_index_is_per_thread():
    seen = {}

    def worker(i):
        torch.neuron.set_device(i)
        barrier.wait()
        seen[i] = (torch.neuron.current_device(), torch.empty(1, device="neuron").device.index)

    barrier = threading.Barrier(4)
    threads = [threading.Thread(target=worker, args=(i % 2,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {0: (0, 0), 1: (1, 1)}
    assert torch.neuron.current_device() == 0


def test_properties():
    p = torch.neuron.get_device_properties(1)
    assert p.name == "trn2.48xlarge"
    assert p.total_memory == 24 * 2**30
    assert p.physical_core_id == 1
    assert torch.neuron.get_device_name() == "trn2.48xlarge"
    assert torch.neuron.get_device_capability() == (3, 0)
    assert torch.neuron.is_bf16_supported()
    torch.neuron.synchronize()
    torch.neuron.synchronize(1)


class TestDeviceErrors(TestCase):
    def test_out_of_range_index(self):
        # torch.AcceleratorError, a RuntimeError, as CUDA raises for an invalid device ordinal
        with self.assertRaises(torch.AcceleratorError) as cm:
            torch.empty(2, device="neuron:5")
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """Device index 5 is out of range. Valid range is 0 to 1 for this process (2 NeuronCores are visible; set NEURON_RT_NUM_CORES or NEURON_RT_VISIBLE_CORES to see more).""")
        with self.assertRaises(torch.AcceleratorError):
            torch.neuron.set_device(2)
        with self.assertRaises(torch.AcceleratorError):
            torch.neuron.get_device_properties(-3)
        self.assertEqual(torch.ones(1, device="neuron").device.index, 0)

    def test_wrong_device_type(self):
        with self.assertRaises(ValueError) as cm:
            torch.neuron.set_device("cpu")
        self.assertExpectedInline(str(cm.exception), """Expected a neuron device, but got: cpu""")


@pytest.mark.parametrize(
    "env,expected",
    [
        ({"NEURON_RT_NUM_CORES": "4"}, "4 [0, 1, 2, 3]"),
        ({"NEURON_RT_VISIBLE_CORES": "0-3"}, "4 [0, 1, 2, 3]"),
        ({"NEURON_RT_VISIBLE_CORES": "1,3"}, "2 [1, 3]"),
        ({"NEURON_RT_VISIBLE_CORES": "5"}, "1 [5]"),
    ],
)
def test_core_visibility(env, expected):
    r = run_python("""
        import torch
        print(torch.neuron.device_count(), [torch.neuron.get_device_properties(i).physical_core_id
                                            for i in range(torch.neuron.device_count())])
    """, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == expected


@pytest.mark.parametrize(
    "env,message",
    [
        ({"NEURON_RT_NUM_CORES": "zero"}, "NEURON_RT_NUM_CORES='zero' is invalid: expected a whole number from 1 to 64."),
        ({"NEURON_RT_VISIBLE_CORES": "3-1"}, "NEURON_RT_VISIBLE_CORES='3-1' is invalid: '3-1' is not a core id or an ascending range"),
        ({"NEURON_RT_VISIBLE_CORES": "1,1"}, "core 1 is listed twice"),
    ],
)
def test_bad_core_configuration_is_a_clear_error(env, message):
    r = run_python("""
        import torch
        print("available", torch.neuron.is_available(), torch.neuron.device_count())
        try:
            torch.ones(1, device="neuron")
        except Exception as e:
            print(type(e).__name__, e)
        print(torch.ones(2).sum().item())
    """, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "available False 0"
    assert message in lines[1]
    assert lines[2] == "2.0"
