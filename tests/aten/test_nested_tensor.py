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
    # .cpu() of a non-contiguous nested tensor raises (as from CUDA): compare contiguous copies
    ua, ub = a.contiguous().cpu().unbind(), b.contiguous().cpu().unbind()
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


# ---- coverage: every operator with a NestedTensorCPU kernel -------------------------------------


def test_every_nested_cpu_operator_has_a_neuron_kernel():
    # The backend fallback alone loses to an operator's CompositeImplicitAutograd kernel (linear, matmul,
    # chunk, narrow, ...), which cannot handle nested sizes: each needs its own NestedTensorPrivateUse1 entry.
    missing = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        table = torch._C._dispatch_dump_table(name)
        has = {line.split(":")[0] for line in table.splitlines() if "[kernel]" in line or "[default backend" in line}
        if "NestedTensorCPU" in has and "NestedTensorPrivateUse1" not in has:
            missing.append(name)
    assert not missing


def _outcome(fn, *args):
    try:
        out = fn(*args)
    except Exception as e:  # noqa: BLE001 - compared with the CPU's outcome
        return ("raised", type(e).__name__, str(e).splitlines()[0])
    return ("returned", out)


def _same(neuron, cpu, where):
    if isinstance(cpu, (tuple, list)):
        assert len(neuron) == len(cpu), where
        for a, b in zip(neuron, cpu):
            _same(a, b, where)
    elif isinstance(cpu, torch.Tensor):
        assert neuron.device.type == "neuron" and neuron.is_nested == cpu.is_nested, where
        if cpu.is_nested:
            assert_nested_close(neuron, cpu, rtol=1e-5, atol=1e-5)
        else:
            torch.testing.assert_close(neuron.cpu(), cpu, rtol=1e-5, atol=1e-5)
    else:
        assert neuron == cpu, where


F = torch.nn.functional
W = torch.randn(6, 8, generator=torch.Generator().manual_seed(3))
B = torch.randn(6, generator=torch.Generator().manual_seed(4))
# (name, fn(nested, dense weight, dense bias)): what users call on nested tensors, through the operators that
# have NestedTensorCPU kernels; CPU raising is fine as long as neuron raises the same error.
CALLS = [
    ("linear", lambda t, w, b: F.linear(t, w, b)),
    ("matmul_nested", lambda t, w, b: torch.matmul(t, t.transpose(1, 2))),
    ("matmul_dense", lambda t, w, b: torch.matmul(t, w.t())),
    ("bmm", lambda t, w, b: torch.bmm(t, t.transpose(1, 2))),
    ("chunk_last", lambda t, w, b: t.chunk(2, -1)),
    ("split_with_sizes", lambda t, w, b: t.split_with_sizes([3, 5], -1)),
    ("narrow_batch", lambda t, w, b: t.narrow(0, 0, 1)),
    ("narrow_last", lambda t, w, b: t.narrow(-1, 0, 2)),
    ("select", lambda t, w, b: t.select(0, 1)),
    ("unbind", lambda t, w, b: t.unbind()),
    ("transpose", lambda t, w, b: t.transpose(1, 2).contiguous()),
    ("view", lambda t, w, b: t.view(2, -1, 2, 4)),
    ("reshape", lambda t, w, b: t.reshape(2, -1, 4, 2)),
    ("unsqueeze", lambda t, w, b: t.unsqueeze(-1)),
    ("squeeze", lambda t, w, b: t.unsqueeze(-1).squeeze(-1)),
    ("softmax", lambda t, w, b: t.softmax(-1)),
    ("log_softmax", lambda t, w, b: F.log_softmax(t, -1)),
    ("layer_norm", lambda t, w, b: F.layer_norm(t, (8,))),
    ("add", lambda t, w, b: t + t),
    ("mul_scalar", lambda t, w, b: t * 3),
    ("add_dense_vector", lambda t, w, b: t + w[0]),
    ("where", lambda t, w, b: torch.where(t > 0, t, t * 2)),
    ("masked_fill", lambda t, w, b: t.masked_fill(t > 0, 0.5)),
    ("relu", lambda t, w, b: F.relu(t)),
    ("gelu", lambda t, w, b: F.gelu(t)),
    ("silu", lambda t, w, b: F.silu(t)),
    ("tanh", lambda t, w, b: torch.tanh(t)),
    ("abs", lambda t, w, b: t.abs()),
    ("sum_dim", lambda t, w, b: t.sum(-1)),
    ("mean_dim", lambda t, w, b: t.mean(-1, keepdim=True)),
    ("to_padded_tensor", lambda t, w, b: torch.nested.to_padded_tensor(t, 0.0)),
    ("to_padded_tensor_sized", lambda t, w, b: torch.nested.to_padded_tensor(t, -1.0, (2, 6, 8))),
    ("dropout_eval", lambda t, w, b: F.dropout(t, 0.5, training=False)),
    ("clone", lambda t, w, b: t.clone()),
    ("copy_", lambda t, w, b: t.clone().copy_(t * 2)),
    ("zero_", lambda t, w, b: t.clone().zero_()),
    ("fill_", lambda t, w, b: t.clone().fill_(2.0)),
    ("ones_like", lambda t, w, b: torch.ones_like(t)),
    ("eq", lambda t, w, b: t == t),
    ("size", lambda t, w, b: (t.size(0), t.size(-1), t.dim())),
    ("nested_size", lambda t, w, b: t._nested_tensor_size()),
    ("bad_linear", lambda t, w, b: F.linear(t, w[:, :4])),
]


@pytest.mark.parametrize("name,fn", CALLS, ids=[c[0] for c in CALLS])
def test_nested_operators_as_on_cpu(name, fn):
    x = nested(3, 5)
    cpu = _outcome(fn, x, W, B)
    dev = _outcome(fn, x.to(DEV), W.to(DEV), B.to(DEV))
    assert dev[0] == cpu[0], f"{name}: neuron {dev} but CPU {cpu}"
    if cpu[0] == "raised":
        assert dev[1:] == cpu[1:], name
    else:
        _same(dev[1], cpu[1], name)


def test_nested_views_alias_the_device_tensor():
    x = nested(3, 5).to(DEV)
    x.chunk(2, -1)[0].unbind()[1].fill_(7.0)
    x.select(0, 0).narrow(-1, 0, 1).zero_()
    first, second = x.unbind()
    assert torch.equal(second[:, :4].cpu(), torch.full((5, 4), 7.0))
    assert torch.equal(first[:, 0].cpu(), torch.zeros(3))


JAGGED_CALLS = [
    ("sdpa", lambda t, w: F.scaled_dot_product_attention(t.transpose(1, 2), t.transpose(1, 2),
                                                         t.transpose(1, 2)).transpose(1, 2)),
    ("linear", lambda t, w: F.linear(t, w)),
    ("matmul", lambda t, w: torch.matmul(t, w)),
    ("chunk", lambda t, w: t.chunk(2, -1)[0]),
    ("narrow", lambda t, w: t.narrow(-1, 0, 2)),
    ("softmax", lambda t, w: t.softmax(-1)),
    ("layer_norm", lambda t, w: F.layer_norm(t, (8,))),
    ("sum_ragged", lambda t, w: t.sum(dim=1)),
]


@pytest.mark.parametrize("name,fn", JAGGED_CALLS, ids=[c[0] for c in JAGGED_CALLS])
def test_jagged_layout_as_on_cpu(name, fn):
    g = torch.Generator().manual_seed(0)
    x = torch.nested.nested_tensor([torch.randn(3, 2, 8, generator=g), torch.randn(5, 2, 8, generator=g)],
                                   layout=torch.jagged)
    w = torch.randn(8, 8, generator=g)
    cpu, dev = fn(x, w), fn(x.to(DEV), w.to(DEV))
    assert dev.device.type == "neuron"
    pad = lambda r: r.to_padded_tensor(0.0) if r.is_nested else r  # noqa: E731
    torch.testing.assert_close(pad(dev).cpu(), pad(cpu), rtol=1e-5, atol=1e-5)
