"""TorchNeuron's environment variables (the not-applicable notice, once) and the torch_neuronx import name."""
from __future__ import annotations

import warnings

import pytest

from tests.conftest import run_python
from torchneuron_ext.compat.torch_neuronx import _scope, env


@pytest.fixture
def fresh_env():
    env._reset_reported()
    yield
    env._reset_reported()


def test_every_variable_has_a_meaning_and_a_status():
    assert len(env.VARIABLES) >= 40
    for var in env.VARIABLES.values():
        assert var.meaning and var.emulator
        assert var.status in (env.HONOURED, env.IMPLIED, env.NOT_APPLICABLE)
        assert (var.status == env.IMPLIED) == bool(var.implied_values)


def test_status():
    assert env.status("NEURON_RT_NUM_CORES", "4") == env.HONOURED
    assert env.status("NEURON_LAUNCH_BLOCKING", "1") == env.IMPLIED
    assert env.status("NEURON_LAUNCH_BLOCKING", "0") == env.NOT_APPLICABLE
    assert env.status("TORCH_NEURONX_ENABLE_ASYNC_NRT", "0") == env.IMPLIED
    assert env.status("TORCH_NEURONX_NEFF_CACHE_DIR", "/tmp/x") == env.NOT_APPLICABLE
    assert env.status("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", "0") == env.HONOURED
    assert env.status("SOMETHING_ELSE", "1") is None


def test_notice_once_per_variable(fresh_env):
    environ = {"NEURON_CC_FLAGS": "-O3", "NEURON_LAUNCH_BLOCKING": "0", "NEURON_RT_NUM_CORES": "1",
               "TORCH_NEURONX_ENABLE_ASYNC_NRT": "0", "UNRELATED": "1"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert env.check_environment(environ) == ["NEURON_LAUNCH_BLOCKING", "NEURON_CC_FLAGS"]
        assert env.check_environment(environ) == []  # once
        environ["TORCH_NEURONX_LOG_LEVEL"] = "3"
        assert env.check_environment(environ) == ["TORCH_NEURONX_LOG_LEVEL"]
    messages = [str(w.message) for w in caught]
    assert all(issubclass(w.category, env.NotApplicableEnvWarning) for w in caught)
    assert len(messages) == 3
    assert messages[0].startswith("NEURON_LAUNCH_BLOCKING='0' is not applicable on the emulated neuron device and "
                                  "is ignored: on Trainium it sets 1: every op waits")
    assert "execution is always synchronous" in messages[0]
    assert "neuronx-cc" in messages[1]


def test_acknowledged_variables_get_no_notice(fresh_env):
    environ = {"NEURON_CC_FLAGS": "-O3", "TORCH_NEURONX_MLIR_ATEN_OPS": "1",
               env.ACKNOWLEDGED_VAR: "TORCH_NEURONX_MLIR_ATEN_OPS,OTHER"}
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert env.check_environment(environ) == ["NEURON_CC_FLAGS"]


_CHILD = """
import json, warnings
warnings.simplefilter("always")
import torch, torch_neuronx, torch_neuronx.utils, torch_neuronx.distributed.utils
import torchneuron_ext.torch_neuronx.env as env
env.check_environment()  # a second check: no second notice
from torch_neuronx import neuron, nki_op, wrap_nki
from torch_neuronx.utils import is_sync_mode_enabled, get_neuron_registered_ops, map_external_dtype_to_torch
from torch_neuronx.distributed.backend import ProcessGroupNeuron
import torch_neuronx.profiling, torch_neuronx.nki_hop, torch_neuronx.xla_impl.custom_op
import torchneuron_ext.torch_neuronx as ours, torchneuron_ext.profiling, torchneuron_ext.custom_op
same = [torch_neuronx is ours, torch_neuronx.utils is ours.utils, neuron is ours.neuron,
        torch_neuronx.profiling is torchneuron_ext.profiling,
        torch_neuronx.xla_impl.custom_op is torchneuron_ext.custom_op,
        torch_neuronx.device_count() == torch.neuron.device_count()]
errors = []
for stmt in ("import torch_neuronx.python_ops.jax.kernel", "import torch_neuronx._C",
             "from torch_neuronx.neuron_dynamo_backend import set_model_name",
             "import torch_neuronx.no_such_module", "torch_neuronx._C._vnc_count",
             "torch_neuronx.metrics", "torch_neuronx.no_such_name"):
    try:
        exec(stmt)
    except (ImportError, AttributeError) as e:
        errors.append(f"{type(e).__name__} | {e}")
print(json.dumps({"same": same, "errors": errors}))
"""


@pytest.fixture(scope="module")
def child():
    import json

    r = run_python(_CHILD, env={"TORCHNEURON_EXT_NKI_COMPAT": "1", "TORCH_NEURONX_NEFF_CACHE_DIR": "/tmp/neff",
                                "NEURON_LAUNCH_BLOCKING": "1"})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_import_reports_once_in_a_fresh_process(child):
    _, stderr = child
    assert stderr.count("NotApplicableEnvWarning") == 1
    assert "TORCH_NEURONX_NEFF_CACHE_DIR='/tmp/neff' is not applicable" in stderr
    assert "NEURON_LAUNCH_BLOCKING" not in stderr  # 1 is what the emulator does


def test_torch_neuronx_name_resolves_to_one_module_per_submodule(child):
    assert child[0]["same"] == [True] * 6


def test_out_of_scope_names_say_so(child):
    lines = child[0]["errors"]
    assert len(lines) == 7
    assert lines[0].startswith("ModuleNotFoundError | No module named 'torch_neuronx.python_ops' (TorchNeuron's "
                               "per-op lowerings (torch-mlir, JAX and XLA-builder kernels to StableHLO/NEFF)): "
                               "not part of the emulated neuron device (torchneuron_ext runs ATen's host kernels")
    assert lines[1].startswith("ModuleNotFoundError | No module named 'torch_neuronx._C' (TorchNeuron's C++")
    assert "TorchNeuron's torch.compile lowering" in lines[2]
    assert lines[3].startswith("ModuleNotFoundError | No module named 'torch_neuronx.no_such_module': "
                               "torchneuron_ext's torch_neuronx has no such module")
    assert lines[4].startswith("AttributeError | module 'torch_neuronx' has no attribute '_C' (TorchNeuron's C++ "
                               "extension")
    assert "runtime counters" in lines[5]
    assert lines[6].startswith("AttributeError | module 'torch_neuronx' has no attribute 'no_such_name' "
                               "(torchneuron_ext's stand-in)")
    assert all(_scope.MARKER in line for line in lines[:3] + lines[4:6])
