"""Nested tensors on neuron (issue 19): moving them to and from the device, nested operators run on
nested host views, and TransformerEncoderLayer's fast path (_transformer_encoder_layer_fwd on a nested
input in eval / no_grad) matching the CPU."""
import json

import pytest
import torch
from torch import nn

import torchneuron_ext  # noqa: F401
from torchneuron_ext import ops
from torchneuron_ext.profiler import op_stats, reset_timing, timing
from tests.conftest import run_python

pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")

DEV = "neuron"


def nested(*lengths, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.nested.nested_tensor([torch.randn(n, d, generator=g) for n in lengths])


def assert_nested_close(a, b, **tol):
    assert a.is_nested and b.is_nested
    ua, ub = a.cpu().unbind(), b.cpu().unbind()
    assert len(ua) == len(ub)
    for x, y in zip(ua, ub):
        torch.testing.assert_close(x, y, **tol)


def test_round_trip():
    x = nested(3, 5)
    xd = x.to(DEV)
    assert xd.is_nested and xd.device.type == "neuron"
    assert_nested_close(xd, x, rtol=0, atol=0)
    assert_nested_close(xd.clone(), x, rtol=0, atol=0)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_layer_fast_path_matches_cpu(batch_first, norm_first, activation):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=batch_first, norm_first=norm_first,
                                       activation=activation).eval()
    x = nested(3, 5, 1)
    with torch.no_grad():
        ref = layer(x) if batch_first else None
        dev_layer = layer.to(DEV)
        if not batch_first:  # nested inputs are batch-first only; the CPU refuses them the same way
            with pytest.raises(Exception) as cpu_err:
                layer.cpu()(x)
            with pytest.raises(type(cpu_err.value)):
                dev_layer.to(DEV)(x.to(DEV))
            return
        ops.clear_op_tracking()
        out = dev_layer(x.to(DEV))
    assert out.is_nested and out.device.type == "neuron"
    assert "aten::_transformer_encoder_layer_fwd" in torchneuron_ext.get_executed_ops()
    assert_nested_close(out, ref, rtol=1e-5, atol=1e-5)


def test_transformer_encoder_layer_with_padding_mask_matches_cpu():
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    x = torch.randn(2, 4, 8)
    mask = torch.tensor([[False, False, True, True], [False, False, False, False]])
    with torch.no_grad():
        ref = layer(x, src_key_padding_mask=mask)
        out = layer.to(DEV)(x.to(DEV), src_key_padding_mask=mask.to(DEV))
    # the fast path turns the padded batch into a nested tensor and pads the result back
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)


def test_nested_ops_match_cpu():
    x = nested(2, 4, seed=3)
    xd = x.to(DEV)
    assert_nested_close(xd * 2 + 1, x * 2 + 1)
    torch.testing.assert_close(torch.nested.to_padded_tensor(xd, 0.0).cpu(), torch.nested.to_padded_tensor(x, 0.0))
    for a, b in zip(xd.unbind(), x.unbind()):
        assert a.device.type == "neuron"
        torch.testing.assert_close(a.cpu(), b)


def test_in_place_nested_op_writes_the_device_tensor():
    x = nested(2, 3, seed=4)
    xd = x.to(DEV)
    r = xd.mul_(3)
    assert r is xd
    assert_nested_close(xd, x * 3)


def test_mixed_devices_are_refused():
    xd = nested(2, 3).to(DEV)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        xd + nested(2, 3)


# Nested operators run through the kernel wrapper like every device kernel (they had a wrapper of their own,
# which recorded no timing or trace, narrowed nothing and drew random numbers from the CPU's generator).

def test_nested_ops_are_timed_in_the_generic_tier():
    x = nested(2, 4, seed=5)
    xd = x.to(DEV)
    reset_timing()
    with timing():
        out = xd * 2
    assert_nested_close(out, x * 2, rtol=0, atol=0)
    stat = next(s for s in op_stats() if s.name == "aten::mul.Tensor" and s.tier == "generic")
    assert stat.calls_timed == 1 and stat.device_total_us > 0
    assert stat.bytes_read == stat.bytes_written == 6 * 8 * 4 and stat.dtype == "Float"


def test_nested_ops_are_traced_with_their_tier(tmp_path):
    from torch.profiler import ProfilerActivity, profile
    xd = nested(2, 4, seed=6).to(DEV)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        xd * 3
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    kernels = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel"]
    assert [(e["name"], e["args"]["tier"]) for e in kernels] == [("neuron::mul.Tensor", "generic")]


def test_nested_random_ops_draw_from_the_device_generator():
    def dropout_masks(cpu_draws):
        torch.neuron.manual_seed(7)
        torch.randn(cpu_draws)  # moves the CPU's default generator only
        x = torch.nested.nested_tensor([torch.ones(3, 50), torch.ones(2, 50)]).to(DEV)
        return [t.cpu() for t in nn.functional.dropout(x, 0.5, training=True).unbind()]

    for a, b in zip(dropout_masks(1), dropout_masks(1000)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_nested_ops_are_narrowed_in_trainium_numerics():
    r = run_python("""
        import warnings, torch, torchneuron_ext
        x = torch.nested.nested_tensor([torch.full((2, 3), 1 + 2.0**-40, dtype=torch.float64),
                                        torch.ones(1, 3, dtype=torch.float64)])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = (x.to("neuron") * 1.0).cpu()
        print(out.dtype, out.unbind()[0][0, 0].item() == 1.0)
        print(any("aten::mul.Tensor ran its float64 work in float32" in str(w.message) for w in caught))
    """, env={"TORCHNEURON_EXT_NUMERICS": "trainium"}, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["torch.float64", "True", "True"]
