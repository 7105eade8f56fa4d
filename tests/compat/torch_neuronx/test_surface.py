"""torch_neuronx's top-level device, stream, memory and op-tracking helpers against torch.neuron."""
from __future__ import annotations

import pytest
import torch

import torchneuron_ext.compat.torch_neuronx as tnx
from torchneuron_ext.neuron.device import InvalidDeviceError


def test_device_helpers_match_torch_neuron():
    assert tnx.device_count() == torch.neuron.device_count() == 2
    assert tnx.current_device() == torch.neuron.current_device() == 0
    tnx.set_device(1)
    assert torch.neuron.current_device() == 1
    tnx.set_device("neuron:0")
    assert tnx.current_device() == 0
    tnx.set_device(torch.device("neuron", 1))
    assert tnx.current_device() == 1


@pytest.mark.parametrize("bad", [2, -1, 4294967296, "neuron:7"])
def test_invalid_device_raises_value_error(bad):
    with pytest.raises(ValueError, match="Invalid device id"):
        tnx.set_device(bad)
    with pytest.raises(ValueError, match="Invalid device id"):
        tnx.get_device_properties(bad)
    if bad != -1:  # torch_neuronx.device(-1) leaves the device alone
        with pytest.raises(ValueError, match="Invalid device id"):
            tnx.device(bad)


def test_non_neuron_device_is_refused():
    with pytest.raises(ValueError, match="Expected neuron device, got cpu"):
        tnx.set_device("cpu")
    with pytest.raises(ValueError, match="Invalid device specification"):
        tnx.synchronize(1.5)


def test_torch_neuron_device_index_error_is_also_value_error():
    # TorchNeuron raises ValueError, torch.cuda an AcceleratorError: the emulator's error is both.
    with pytest.raises(ValueError) as info:
        torch.neuron.device(5).__enter__()
    assert isinstance(info.value, torch.AcceleratorError) and isinstance(info.value, InvalidDeviceError)


def test_get_device_properties():
    props = tnx.get_device_properties(0)
    assert props == torch.neuron.get_device_properties(0)
    assert isinstance(props.name, str) and props.total_memory > 0
    assert tnx.get_device_properties("neuron:1").physical_core_id == 1
    assert tnx.get_device_properties() == torch.neuron.get_device_properties()


def test_device_context_manager():
    with tnx.device(1):
        assert tnx.current_device() == 1
    assert tnx.current_device() == 0
    with tnx.device(-1):  # TorchNeuron: a negative index leaves the device alone
        assert tnx.current_device() == 0


def test_streams_match_torch_neuron():
    assert tnx.current_stream() == torch.neuron.current_stream()
    assert tnx.default_stream(1) == torch.neuron.default_stream(1)
    assert tnx.default_stream().stream_id == 0
    s = tnx.Stream()
    assert isinstance(s, tnx.Stream) and isinstance(s, torch.Stream)
    with tnx.stream(s):
        assert tnx.current_stream() == s
        x = torch.ones(4, device="neuron") * 2
    assert tnx.current_stream() == tnx.default_stream()
    tnx.set_stream(s)
    assert torch.neuron.current_stream() == s
    tnx.set_stream(tnx.default_stream())
    e = tnx.Event(enable_timing=True)
    e.record(s)
    e.synchronize()
    tnx.synchronize()
    tnx.synchronize("neuron:1")
    assert x.sum().item() == 8
    recreated = tnx.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert recreated == s


def test_memory_stats_layout():
    tnx.empty_cache()
    tnx.reset_peak_memory_stats()
    before = tnx.memory_stats()
    x = torch.empty(1024, device="neuron")
    stats = tnx.memory_stats()
    assert set(stats) == {"allocated_bytes", "reserved_bytes", "active_bytes", "num_alloc_retries", "num_ooms",
                          "num_tensor_frees", "allocation_requests"}
    for key in ("allocated_bytes", "reserved_bytes", "active_bytes"):
        assert set(stats[key]) == {"current", "peak", "allocated", "freed"}
    assert stats["allocated_bytes"]["current"] == torch.neuron.memory_allocated() == tnx.memory_allocated()
    assert stats["allocated_bytes"]["current"] >= before["allocated_bytes"]["current"] + 4096
    assert stats["allocation_requests"] == before["allocation_requests"] + 1
    assert tnx.max_memory_allocated() >= tnx.memory_allocated()
    assert tnx.memory_reserved() == torch.neuron.memory_reserved()
    assert tnx.max_memory_reserved() >= tnx.memory_reserved()
    assert isinstance(tnx.memory_summary(), str)
    del x
    tnx.reset_accumulated_memory_stats()
    assert tnx.memory_stats()["allocated_bytes"]["allocated"] == 0


def test_op_tracking():
    tnx.clear_op_tracking()
    x = torch.ones(3, device="neuron")
    (x + x).sum()
    executed = tnx.get_executed_ops()
    assert "aten::add.Tensor" in executed and executed == sorted(executed)
    torch.nn.functional.softplus(x)  # the generic path: on device memory, so not a fallback in TorchNeuron's sense
    import torchneuron_ext

    assert "aten::softplus" in torchneuron_ext.get_fallback_ops()
    assert "aten::softplus" in tnx.get_executed_ops() and tnx.get_fallback_ops() == []
    tnx.utils.log_executed_op("nki_my_kernel")
    tnx.utils.log_offloaded_op("aten::my_op")
    assert "nki_my_kernel" in tnx.get_executed_ops()
    assert "aten::my_op" in tnx.get_fallback_ops()
    tnx.clear_op_tracking()
    assert tnx.get_executed_ops() == [] and tnx.get_fallback_ops() == []


LINALG_FALLBACKS = {
    "aten::linalg_qr": lambda a: torch.linalg.qr(a),
    "aten::_linalg_svd": lambda a: torch.linalg.svd(a),
    "aten::_linalg_eigh": lambda a: torch.linalg.eigh(a @ a.mT),
    "aten::linalg_cholesky_ex": lambda a: torch.linalg.cholesky(a @ a.mT + torch.eye(4, device=a.device)),
    "aten::linalg_inv_ex": lambda a: torch.linalg.inv(a),
    "aten::linalg_lu_factor_ex": lambda a: torch.linalg.lu_factor(a),
    "aten::linalg_ldl_factor_ex": lambda a: torch.linalg.ldl_factor(a + a.mT),
    "aten::_linalg_det": lambda a: torch.linalg.det(a),
    "aten::_linalg_slogdet": lambda a: torch.linalg.slogdet(a),
    "aten::cholesky_inverse": lambda a: torch.cholesky_inverse(torch.linalg.cholesky(a @ a.mT + torch.eye(4, device=a.device))),
    "aten::triangular_solve": lambda a: torch.triangular_solve(a, a.triu() + 4 * torch.eye(4, device=a.device)),
}


@pytest.mark.parametrize("op", sorted(LINALG_FALLBACKS))
def test_torchneuron_cpu_fallbacks_are_reported_as_fallbacks(op):
    """The linalg ops TorchNeuron registers as CPU fallbacks are reported as fallbacks, not as executed (the
    emulator's own op tracking keeps them as generic-path kernels); their results and strides are the CPU's."""
    assert op in tnx.CPU_FALLBACK_OPS
    torch.manual_seed(0)
    a = torch.randn(4, 4)
    tnx.clear_op_tracking()
    got = LINALG_FALLBACKS[op](a.to("neuron"))
    assert op in tnx.get_fallback_ops() and op not in tnx.get_executed_ops()
    import torchneuron_ext

    assert op in torchneuron_ext.get_executed_ops()
    expected = LINALG_FALLBACKS[op](a)
    if isinstance(got, torch.Tensor):
        got, expected = (got,), (expected,)
    for g, e in zip(got, expected):
        assert g.device.type == "neuron" and g.stride() == e.stride()
        torch.testing.assert_close(g.cpu(), e)


def test_runtime_state_and_misc():
    tnx._lazy_init()
    assert tnx.is_neuron_runtime_initialized() is True
    assert tnx._is_in_bad_fork is False
    assert tnx._get_device_index(None, optional=True) is None
    assert tnx._get_device_index(None) == 0
    assert tnx._get_device_index("neuron:1") == 1
    assert tnx.__version__
    assert tnx.get_dynamo_metrics() == [] or isinstance(tnx.get_dynamo_metrics(), list)
    tnx.reset_dynamo_metrics()
    assert tnx.get_dynamo_metrics() == []
    compiled = torch.compile(torch.nn.Linear(3, 3).to("neuron"), backend="neuron")
    compiled(torch.randn(2, 3, device="neuron"))
    assert len(torch.neuron.get_dynamo_metrics()) == 1 == len(tnx.get_dynamo_metrics())  # one store, two names
    torch.neuron.reset_dynamo_metrics()
    assert tnx.get_dynamo_metrics() == []


def test_nki_and_profiling_names():
    from torchneuron_ext.nki import torch_ops
    from torchneuron_ext.compat.torch_neuronx.profiling import NeuronProfiler

    assert tnx.nki_op is torch_ops.nki_op and tnx.wrap_nki is torch_ops.wrap_nki
    assert tnx.nki_hop.nki_op is torch_ops.nki_op
    assert tnx.NeuronProfiler is NeuronProfiler
    assert tnx.profiling.NeuronConfig is not None
    import torchneuron_ext.nki

    assert tnx.nki is torchneuron_ext.nki


_RENUMBERED = """
import json, torch
import torchneuron_ext.compat.torch_neuronx as tnx
out = {"count": tnx.device_count(), "current": tnx.current_device()}
for name, call in [("set_device", lambda i: tnx.set_device(i)), ("device", lambda i: tnx.device(i)),
                   ("synchronize", lambda i: tnx.synchronize(i)), ("current_stream", lambda i: tnx.current_stream(i)),
                   ("_get_device_index", lambda i: tnx._get_device_index(i)),
                   ("get_device_properties", lambda i: tnx.get_device_properties(i).physical_core_id),
                   ("torch.neuron.set_device", lambda i: torch.neuron.set_device(i))]:
    for index in (0, 1, 2, "neuron:0"):
        try:
            result = call(index)
            out[f"{name}({index!r})"] = "ok" if name != "get_device_properties" else result
        except ValueError as e:
            out[f"{name}({index!r})"] = str(e)
print(json.dumps(out))
"""


def test_refuses_what_the_runtime_refuses_in_a_distributed_job():
    """Latent bug 5: in a job that owns only neuron:LOCAL_RANK, torch_neuronx checked 0..device_count()-1, so it
    accepted other ranks' cores (and said so in its message) where the runtime refuses them."""
    import json

    from tests.conftest import run_python

    r = run_python(_RENUMBERED, env={"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out.pop("count") == 2 and out.pop("current") == 1
    # Properties describe the node's other cores, as TorchNeuron and torch.neuron do.
    assert out.pop("get_device_properties(0)") == -1 and out.pop("get_device_properties(1)") == 1
    assert out.pop("get_device_properties('neuron:0')") == -1
    runtime_refusal = out.pop("torch.neuron.set_device(2)")
    assert runtime_refusal.startswith("Device index 2 is out of range. Valid range is 1 to 1 for this process")
    for key, text in out.items():
        name, index = key.split("(", 1)
        if index.startswith("1"):
            assert text == "ok", (key, text)
        elif index.startswith("2"):
            # TorchNeuron's ValueError and the start of its message, then the runtime's reason.
            assert text == f"Invalid device id: 2. {runtime_refusal}", (key, text)
        elif name == "torch.neuron.set_device":
            assert text.startswith("Attempted to access device that doesn't attach to this process"), (key, text)
        else:
            assert text.startswith("Invalid device id: 0. Attempted to access device that doesn't attach to this "
                                   "process"), (key, text)
