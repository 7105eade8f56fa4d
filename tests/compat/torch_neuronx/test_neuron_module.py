"""``from torch_neuronx import neuron``: TorchNeuron's torch.neuron meanings over the emulator."""
from __future__ import annotations

from unittest import mock

import pytest
import torch

import torchneuron_ext.compat.torch_neuronx as tnx
from torchneuron_ext.compat.torch_neuronx import neuron


def test_set_device_hands_over_to_torch_neuronx():
    with mock.patch.object(tnx, "set_device") as set_device:
        neuron.set_device(torch.device("neuron:1"))
        set_device.assert_called_once_with(1)
    with mock.patch.object(tnx, "set_device") as set_device:
        neuron.set_device(None)
        set_device.assert_called_once_with(torch.neuron.current_device())
    neuron.set_device(1)
    assert torch.neuron.current_device() == 1
    with pytest.raises(ValueError, match="Invalid device id: 9"):
        neuron.set_device(9)


def test_get_device_name_is_torchneurons():
    assert neuron.get_device_name() == "neuron:0"
    assert neuron.get_device_name(1) == "neuron:1"
    assert neuron.get_device_name(torch.device("neuron:1")) == "neuron:1"
    with pytest.raises(ValueError, match="expected torch.device or int"):
        neuron.get_device_name("invalid")
    # torch.neuron keeps torch.cuda's meaning (the hardware's name).
    assert torch.neuron.get_device_name() == torch.neuron.get_device_properties().name


def test_same_state_as_torch_neuron():
    assert neuron.device_count() == torch.neuron.device_count()
    assert neuron.is_available() and neuron.is_initialized()
    assert neuron.current_stream() == torch.neuron.current_stream()
    assert neuron.default_stream() == torch.neuron.default_stream()
    assert neuron.get_device_properties(torch.device("neuron:1")) == torch.neuron.get_device_properties(1)
    assert neuron.get_amp_supported_dtype() == [torch.float32, torch.float16, torch.bfloat16]
    assert neuron.is_bf16_supported() and not neuron._is_in_bad_fork()
    neuron.manual_seed(3)  # random-number functions are torch.neuron's
    a = torch.randn(4, device="neuron")
    torch.neuron.manual_seed(3)
    assert torch.equal(a, torch.randn(4, device="neuron"))
    assert neuron.amp is torch.neuron.amp
    assert set(neuron.memory_stats()) == set(tnx.memory_stats())
    assert neuron.memory_allocated() == torch.neuron.memory_allocated()
    neuron._sleep(10)
    s = neuron.Stream()
    with neuron.stream(s):
        e = neuron.record_event()
        neuron.wait_event(e)
        neuron.wait_stream(neuron.default_stream())
        assert neuron.query()
    with neuron.device(1):
        assert neuron.current_device() == 1
    neuron.synchronize()
    assert neuron.Event(enable_timing=True) is not None
