"""The runner and pytest plugin for TorchNeuron's own test suite, on a small suite shaped like it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

FILES = {
    "conftest.py": "",
    # A TorchNeuron source tree beside the tests must not be imported (it needs Trainium's _C).
    "torch_neuronx/__init__.py": "raise RuntimeError('the real torch_neuronx was imported')\n",
    "tests/__init__.py": "",
    "tests/fake/__init__.py": "",
    "tests/fake/test_surface.py": """
        import os
        import torch
        import torch_neuronx
        from torch_neuronx.utils import is_sync_mode_enabled

        def test_single_core_and_mapped_environment():
            assert torch_neuronx.device_count() == 1
            assert os.environ["NEURON_LAUNCH_BLOCKING"] == "1"
            assert os.environ["TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS"] == "0"
            assert is_sync_mode_enabled()
            # Random ops draw the CPU's stream, as TorchNeuron's CPU-fallback ones do.
            torch.manual_seed(0)
            x = torch.randn(3)
            g = torch.randn_like(x.to("neuron"))
            torch.manual_seed(0)
            torch.randn(3)
            assert torch.equal(g.cpu(), torch.randn(3))

        def test_is_the_emulator():
            assert torch_neuronx.__name__ == "torchneuron_ext.compat.torch_neuronx"
            assert (torch.ones(2, device="neuron") + 1).sum().item() == 4

        def test_reaches_internals():
            torch_neuronx._C._vnc_count()

        def test_from_imports_an_internal():
            from torch_neuronx.distributed.utils import _calculate_chunking_params  # noqa: F401

        def test_imports_jax():
            import jax  # noqa: F401

        def test_a_real_failure():
            assert torch_neuronx.current_device() == 1
    """,
    "tests/fake/test_lowering.py": """
        from torch_neuronx.python_ops.jax.kernel import JaxKernel  # noqa: F401

        def test_never_runs():
            pass
    """,
    "tests/fake/test_multi_device.py": """
        import pytest
        import torch_neuronx

        @pytest.mark.multi_device
        def test_sees_every_core():
            assert torch_neuronx.device_count() == 2
    """,
}


def test_runner_and_plugin(tmp_path):
    for name, text in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NEURON_RT_", "NEURON_EMU_", "TORCH_NEURONX_", "TORCHNEURON_EXT_", "PYTEST_"))}
    out_json = tmp_path / "counts.json"
    r = subprocess.run([sys.executable, "-m", "torchneuron_ext.compat.testing.run_suite", str(tmp_path), "fake",
                        "--json", str(out_json), "--timeout", "120"],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 1, r.stdout + r.stderr  # test_a_real_failure
    assert "torch_neuronx (TorchNeuron's sources) is ignored" in r.stderr
    (result,) = json.loads(out_json.read_text())
    files = result["files"]
    assert files["tests/fake/test_surface.py"] == {"imported": 1, "passed": 2, "skipped_out_of_scope": 3,
                                                   "failed": 1}, result["output_tail"]
    assert files["tests/fake/test_lowering.py"] == {"import_out_of_scope": 1}
    assert files["tests/fake/test_multi_device.py"] == {"imported": 1, "passed": 1}  # its own session, 2 cores
    assert result["totals"] == {"files": 3, "imported": 2, "passed": 3, "skipped_out_of_scope": 3, "failed": 1}
    table = r.stdout.splitlines()
    assert table[0].split() == ["folder", "files", "import", "pass", "fail", "error", "oos", "skip", "secs"]
    assert table[2].split()[:8] == ["fake", "3", "2", "3", "1", "0", "3", "0"]


def test_out_of_scope_list():
    from torchneuron_ext.compat.testing.out_of_scope import OUT_OF_SCOPE, reason_for

    assert "neuronx-cc" in reason_for("tests/streams/test_error_handler.py::TestErrorHandler::test_x")
    assert reason_for("tests/streams/test_stream_creation.py::TestStreamCreation::test_basic") is None
    assert all(reason for _, reason in OUT_OF_SCOPE)


def test_own_process_files(tmp_path):
    from torchneuron_ext.compat.testing.run_suite import _own_process_files

    for name, text in {"a/test_x.py": "", "a/test_y_all_cores.py": "", "a/sub/test_z.py": "@pytest.mark.multi_device",
                       "distributed/test_d.py": "@pytest.mark.multi_device"}.items():
        path = tmp_path / "tests" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert _own_process_files(str(tmp_path), "a") == ["tests/a/sub/test_z.py", "tests/a/test_y_all_cores.py"]
    assert _own_process_files(str(tmp_path), "distributed") == []
