"""torch.autocast("neuron"): bfloat16 by default, float16 on request, CUDA's op policies."""
import pytest
import torch


def test_default_dtype_is_bfloat16():
    assert torch.get_autocast_dtype("neuron") == torch.bfloat16
    a = torch.randn(4, 4, device="neuron")
    with torch.autocast("neuron"):
        assert torch.is_autocast_enabled("neuron")
        y = a @ a
        assert y.dtype == torch.bfloat16
        assert torch.softmax(y, -1).dtype == torch.float32  # fp32 policy
        assert torch.nn.functional.linear(a, a).dtype == torch.bfloat16
    assert (a @ a).dtype == torch.float32


def test_float16_and_matches_cpu_autocast():
    a = torch.randn(8, 8)
    with torch.autocast("neuron", dtype=torch.float16):
        n = (a.neuron() @ a.neuron())
    with torch.autocast("cpu", dtype=torch.float16):
        c = a @ a
    assert n.dtype == torch.float16
    torch.testing.assert_close(n.cpu(), c)
    with torch.neuron.amp.autocast():
        assert (a.neuron() @ a.neuron()).dtype == torch.bfloat16


def test_unsupported_dtype_warns_and_disables():
    with pytest.warns(UserWarning):
        with torch.autocast("neuron", dtype=torch.float64):
            pass


def test_banned_binary_cross_entropy():
    x = torch.rand(4, device="neuron")
    with torch.autocast("neuron"):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            torch.nn.functional.binary_cross_entropy(x, x)
